# SPDX-License-Identifier: MIT
"""rdmad itself in a container, as the Kubernetes DaemonSet runs it
(deploy/kubernetes/): podman, the host's network, no /run/udev (a
read-only root with its own /run), only /sys and /dev/infiniband of the
host, and the DaemonSet's capabilities (IPC_LOCK and CHOWN). The daemon
hears of devices from the kernel's own uevents (GET /v1/health says
"kernel", whether the host runs udevd or not), a client on the host
attaches through the control socket's directory, and a device deleted
and added again on the host (`rdma link delete/add rxe1`) is followed
inside: the profile goes pending and comes back, the CDI specification
(in the host's directory) with it.

Marked `container`; it does not skip under CI=true (podman.py)."""

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

import podman
from conftest import BUILD, RDMAD, TOKEN, Daemon, free_port

ATTACH = BUILD / "examples" / "attach"
TIMEOUT = 60  # TCG is slow
START_TIMEOUT = 300  # podman under TCG, slower still

PROFILES = """
devices = ( { name = "e"; match = { ibdev = "rxe0"; }; },
            { name = "f"; match = { ibdev = "rxe1"; }; } );
profiles = (
  { name = "keep"; device = "e"; pd = ( { name = "a"; } ); },
  { name = "p"; device = "f";
    memory = ( { name = "m"; size = "64K"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m"; } ); }
);
"""


class InContainer(Daemon):
    """A Daemon (conftest.py) whose process is `podman run` of rdmad."""

    def __init__(self, argv, port, sock, log):
        self.conf = None
        self.token = TOKEN
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.sock = str(sock)
        self.stderr_path = log
        self._err = open(log, "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=self._err,
                                     stderr=subprocess.STDOUT)
        self.pid = self.proc.pid


def wait_for(pred, what, d, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}\n{d.log()}")


def state(d, name):
    status, p = d.get(f"/v1/profiles/{name}")
    assert status == 200, p
    return p


def cdi_names(cdi):
    try:
        spec = json.loads(Path(cdi).read_text())
    except FileNotFoundError:
        return []
    return sorted(dev["name"] for dev in spec["devices"])


def rdma(*args):
    return subprocess.run(["rdma", *args], capture_output=True, text=True,
                          timeout=TIMEOUT)


def attach(sock):
    r = subprocess.run([str(ATTACH)], capture_output=True, text=True,
                       timeout=TIMEOUT,
                       env={"RDMAD_SOCKET": str(sock),
                            "RDMAD_PROFILE": "p", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("profile p: local mode, device rxe1"), \
        r.stdout


@pytest.mark.container
def test_daemon_in_a_container_without_udev():
    podman.need_podman()
    tmp = podman.workdir()
    d = None
    try:
        conf, run, cdi = tmp / "conf", tmp / "run", tmp / "cdi"
        for p in (conf, run, cdi):
            p.mkdir()
        token = conf / "token"
        token.write_text(TOKEN + "\n")
        token.chmod(0o600)
        port = free_port()
        (conf / "rdmad.conf").write_text(
            f'daemon = {{ admit_root = true; runtime_dir = "/run/rdmad"; '
            f'http = {{ listen = [ "127.0.0.1:{port}" ]; '
            f'token_file = "{token}"; }}; }};\n' + PROFILES)
        # The DaemonSet's container, as podman says it: the node's
        # network, a read-only root with a tmpfs on /run (no
        # /run/udev: the root here is the machine's own, bound with
        # what is mounted on it, the VM's /run among them, which podman
        # would copy into the tmpfs unless told not to), the node's /run/rdmad, /run/cdi and
        # /dev/infiniband, IPC_LOCK and CHOWN only. (No device cgroup
        # here, where the DaemonSet has its device plugin.) The host's
        # /sys, read-only: crun cannot mount a sysfs of its own in the
        # host's network namespace (EBUSY), and Kubernetes gives a
        # hostNetwork pod the node's.
        argv = podman.run_argv(tmp, [
            "--network", "host", "--read-only",
            # As Kubernetes' readOnlyRootFilesystem: no tmpfs of podman's
            # own on /tmp and /var/tmp, which hid a checkout under /tmp
            # (CI's clone), the daemon's binary with it, and had crun
            # copy what /tmp held into it until podman's creation timed
            # out.
            "--read-only-tmpfs=false",
            "--tmpfs", "/run:notmpcopyup",
            "--cap-drop", "all", "--cap-add", "IPC_LOCK",
            "--cap-add", "CHOWN",
            "-v", "/sys:/sys:ro",
            "-v", f"{conf}:{conf}:ro", "-v", f"{run}:/run/rdmad",
            "-v", f"{cdi}:/run/cdi",
            "-v", "/dev/infiniband:/dev/infiniband",
        ], [str(RDMAD), "-c", str(conf / "rdmad.conf"),
            "--log-level", "debug"])
        d = InContainer(argv, port, run / "rdmad.sock", tmp / "rdmad.log")
        d.wait_ready(START_TIMEOUT)

        status, health = d.get("/v1/health")
        assert (status, health) == (200, {"status": "ok",
                                          "device_events": "kernel"}), \
            d.log()
        assert "device events: kernel" in d.log()
        assert state(d, "p")["state"] == "ready", d.log()
        assert state(d, "keep")["state"] == "ready", d.log()
        devs = {x["name"]: x for x in d.get("/v1/devices")[1]}
        assert devs["rxe1"]["up"] and devs["rxe1"]["used"], devs
        wait_for(lambda: cdi_names(cdi / "rdmad.json") == ["keep", "p"],
                 "the CDI spec in the host's directory", d)
        attach(run / "rdmad.sock")

        try:
            r = rdma("link", "delete", "rxe1")
            assert r.returncode == 0, r.stderr
            wait_for(lambda: state(d, "p")["state"] == "pending",
                     "profile p to go pending", d)
            assert state(d, "p")["reason"] == "device rxe1 was removed"
            wait_for(lambda: cdi_names(cdi / "rdmad.json") == ["keep"],
                     "p's CDI device to go", d)
        finally:
            r = rdma("link", "add", "rxe1", "type", "rxe", "netdev", "veth1")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: state(d, "p")["state"] == "ready",
                 "profile p to come back", d)
        wait_for(lambda: cdi_names(cdi / "rdmad.json") == ["keep", "p"],
                 "p's CDI device to come back", d)
        attach(run / "rdmad.sock")
        assert "device rxe1 appeared" in d.log()

        # podman passes SIGTERM on to rdmad, whose status is podman's.
        d.proc.send_signal(signal.SIGTERM)
        assert d.proc.wait(TIMEOUT) == 0, d.log()
        assert not (cdi / "rdmad.json").exists()
        log = d.log()
        assert "Sanitizer" not in log and "runtime error:" not in log, log
    finally:
        if d and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait(TIMEOUT)
        if not Path("/sys/class/infiniband/rxe1").exists():
            rdma("link", "add", "rxe1", "type", "rxe", "netdev", "veth1")
        podman.remove(tmp)
