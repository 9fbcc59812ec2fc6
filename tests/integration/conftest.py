# SPDX-License-Identifier: MIT
"""Fixtures for the integration suite: start the real rdmad on a real RDMA
device (rxe in the VM harness, or the host's own) and look at what it did
with independent tools (`rdma resource show`, pyverbs)."""

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
# RDMAD_BIN=build/rdmad-asan (or -tsan) runs the suite against a sanitized
# daemon.
RDMAD = Path(os.environ.get("RDMAD_BIN", BUILD / "rdmad")).resolve()
RDMACTL = BUILD / "rdmactl"


# Where the daemon hears of devices coming and going (daemon/verbs/
# devwatch.h): udev where systemd-udevd runs, else the kernel's own
# uevents (tests/vm/run --no-udev, a container). GET /v1/health says it.
UDEV_CONTROL = Path(os.environ.get("RDMAD_UDEV_CONTROL")
                    or "/run/udev/control")
DEVICE_EVENTS = "udev" if UDEV_CONTROL.exists() else "kernel"
HEALTH = {"status": "ok", "device_events": DEVICE_EVENTS}


def has_rdma_device():
    p = Path("/sys/class/infiniband")
    return p.is_dir() and any(p.iterdir())


# The device the shared-mode tests use: it imports (mlx5, or rxe with the
# test-only provider tests/vm/run --import loads), or they do not run.
SHARED_DEV = os.environ.get("RDMAD_SHARED_DEV", "rxe0")

_PROBE = """
import os, sys
from pyverbs.device import Context
ctx = Context(name=sys.argv[1])
Context(cmd_fd=os.dup(ctx.cmd_fd)).close()
"""


def import_capable(dev=SHARED_DEV):
    """Can a process import a context of dev (ibv_import_device)? Asked
    in a child, as a client would."""
    if not Path(f"/sys/class/infiniband/{dev}").exists():
        return False
    r = subprocess.run(["/usr/bin/python3", "-c", _PROBE, dev],
                       capture_output=True, timeout=60)
    return r.returncode == 0


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "container: runs podman containers whose root is this "
        "machine's own (tests/integration/podman.py); fails rather than "
        "skips under CI=true")
    config.addinivalue_line(
        "markers", "needs_import: needs a device that imports (shared mode); "
        "deselected, with a line saying so, where there is none")
    config.addinivalue_line(
        "markers", "both_providers: does not need import, yet says "
        "something different where the device imports; make check's "
        "shared-mode lane (-m 'needs_import or both_providers') runs it "
        "as well as the stock-rxe one")


def pytest_collection_modifyitems(config, items):
    shared = [i for i in items if i.get_closest_marker("needs_import")]
    capable = shared and has_rdma_device() and import_capable()
    if shared and os.environ.get("RDMAD_VM_IMPORT") == "1" and not capable:
        raise pytest.UsageError(
            f"tests/vm/run --import, yet {SHARED_DEV} cannot import: the "
            "test provider (tests/rxe-import) did not load")
    if shared and has_rdma_device() and not capable:
        # Not skipped: stock rxe cannot import, and make check runs these
        # on the import-capable provider (tests/vm/run --import).
        items[:] = [i for i in items if i not in shared]
        config.hook.pytest_deselected(items=shared)
        print(f"\n{len(shared)} shared-mode tests deselected: {SHARED_DEV} "
              "cannot import (stock rxe); make check runs them with "
              "tests/vm/run --import")
    if has_rdma_device():
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(
            "CI=true but there is no RDMA device: run the suite through "
            "tests/vm/run (make check does)")
    skip = pytest.mark.skip(reason="no RDMA device (use tests/vm/run)")
    for item in items:
        item.add_marker(skip)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_tasks = {}


def tasks(pid):
    """The thread ids of process pid, as far as seen: the kernel names
    the thread that created an object (rdmad's workers create them), and
    keeps that name after the process is gone."""
    seen = _tasks.setdefault(pid, {pid})
    try:
        seen.update(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        pass
    return seen


def raw_http(port, data, timeout=30):
    """Send data as it is to the REST port; (status, JSON body) of the
    reply, read to the end (HTTP/1.0)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def memfd(pid, name):
    """Process pid's memfd named name (a memory object of the daemon):
    (path to it under /proc, inode)."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if os.readlink(path) == f"/memfd:{name} (deleted)":
                return path, os.stat(path).st_ino
        except OSError:
            pass
    raise AssertionError(f"no memfd {name} in {pid}")


def kernel_mrs(lkey):
    """The kernel's MRs with this lkey, on any process's account; their
    keys as numbers (iproute2 prints them in hex)."""
    rows = rdma_res("mr")
    for r in rows:
        for k in ("lkey", "rkey"):
            if isinstance(r.get(k), str):
                r[k] = int(r[k], 16)
    return [r for r in rows if r.get("lkey") == lkey]


def rdma_res(kind, pid=None):
    """Objects of one kind the kernel holds, from RDMA netlink; with pid,
    those that process's threads created."""
    out = subprocess.run(["rdma", "-d", "-j", "resource", "show", kind],
                         check=True, capture_output=True, text=True).stdout
    rows = json.loads(out) if out.strip() else []
    if pid is not None:
        mine = tasks(pid)
        rows = [r for r in rows if r.get("pid") in mine]
    return rows


TOKEN = "rdmad-test-token-0123456789"


def daemon_fds(pid):
    """What a process's fds point to, sorted; REST connections (sockets
    that come and go), files of /proc (read and closed at once: an
    orphan scan reads /proc/PID/status of each owner) and uverbs device
    numbers left out."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if t.startswith("socket:") or t.startswith("/proc/"):
            continue
        out.append("uverbs" if "/dev/infiniband/uverbs" in t else
                   t.split(":")[0] if ":[" in t else t)
    return sorted(out)


def settle(pred, timeout=5):
    deadline = time.monotonic() + timeout
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.05)
    return pred()


class Daemon:
    def __init__(self, conf_path, port, tmp, token=None):
        self.conf = conf_path
        self.token = token
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        # The control socket: the default daemon section puts it in tmp
        # (runtime_dir); a test whose config says otherwise sets it.
        self.sock = str(tmp / "rdmad.sock")
        self.stderr_path = tmp / "rdmad.stderr"
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(
            [str(RDMAD), "-c", str(conf_path), "--log-level", "debug"],
            stdin=subprocess.DEVNULL, stdout=self._err,
            stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        # The worker threads start with the daemon, before any object.
        settle(lambda: len(tasks(self.pid)) > 1 or
               self.proc.poll() is not None, 5)

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"rdmad exited with {self.proc.returncode}:\n"
                    + self.log())
            try:
                status, _ = self.get("/v1/health")
                if status == 200:
                    return self.settle(deadline - time.monotonic())
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("rdmad did not answer in time:\n" + self.log())

    def settle(self, timeout=60):
        """Wait until no profile is being created (objects are made on
        worker threads after start and reload)."""
        deadline = time.monotonic() + timeout
        scan_deadline = time.monotonic() + 5
        while True:
            status, profiles = self.request("GET", "/v1/profiles",
                                            settle=False)
            # A ready profile's first orphan scan (RDMA netlink, on the
            # loop) adds "orphans" to its document a moment later; wait
            # for it, briefly, so that two readings compare equal.
            if status == 200 and not any(
                    p["state"] == "creating" or
                    ("ctxn" in p and "orphans" not in p and
                     time.monotonic() < scan_deadline)
                    for p in profiles):
                return self
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"profiles still creating: {profiles}\n" + self.log())
            time.sleep(0.05)

    def request(self, method, path, body=None, token=True, settle=True):
        """token=True: the daemon's own token; False: none; a string:
        that one. A reload's answer comes once what it creates is there
        (settle=False: at once)."""
        if settle and method == "POST" and path == "/v1/reload":
            result = self.request(method, path, body, token, settle=False)
            self.settle()
            return result
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, method=method,
                                     data=data)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        tok = self.token if token is True else token or None
        if tok:
            req.add_header("Authorization", f"Bearer {tok}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def get(self, path):
        return self.request("GET", path)

    def metrics(self):
        """/metrics as {'name{labels}': value}, comments left out."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            text = r.read().decode()
        return {k: float(v) for k, v in
                (line.rsplit(" ", 1) for line in text.splitlines()
                 if line and not line.startswith("#"))}

    def log(self):
        if not self._err.closed:
            self._err.flush()
        return self.stderr_path.read_text()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        finally:
            self._err.close()
        return rc


def root_everywhere(text):
    """text with daemon.admit_root = true, unless it says admit_root
    itself. The suite runs as root, and most of its tests attach as root
    to profiles whose allow lists do not name it: they test something
    else than who is admitted, as they did when uid 0 was admitted to
    every profile. Put on the daemon section's own line, so that the
    file:line of an error stays where the test expects it.
    test_tenants.py tests admission itself, with configurations as
    written."""
    if "admit_root" in text:
        return text
    return re.sub(r"^(\s*daemon\s*=\s*\{)", r"\1 admit_root = true;", text,
                  count=1, flags=re.M)


class RootEverywhereConf(type(Path())):
    """The configuration file of a daemon the rdmad fixture started:
    what a test writes there (a reload's new text) goes through
    root_everywhere() too."""

    def write_text(self, data, *args, **kwargs):
        return super().write_text(root_everywhere(data), *args, **kwargs)


def daemon_section(port, tmp):
    token = tmp / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    return (f'daemon = {{ admit_root = true; runtime_dir = "{tmp}"; '
            f'http = {{ listen = [ "127.0.0.1:{port}" ]; '
            f'token_file = "{token}"; }}; }};\n')


@pytest.fixture
def write_conf(tmp_path):
    """write_conf(text) -> path of a config file holding text."""
    n = [0]

    def write(text, name=None):
        n[0] += 1
        path = tmp_path / (name or f"rdmad{n[0]}.conf")
        path.write_text(text)
        return path
    return write


@pytest.fixture
def rdmad(tmp_path, write_conf):
    """rdmad(config_text) starts the daemon and waits until it answers.

    A config without a `daemon` section gets one listening on a free
    loopback port; the daemon is stopped (SIGTERM) at teardown."""
    started = []

    def start(text, wait=True):
        port = free_port()
        token = None
        if not re.search(r"^\s*daemon\s*=", text, re.M):
            text = daemon_section(port, tmp_path) + text
            token = TOKEN
        else:
            text = root_everywhere(text)
            m = re.search(r'"127\.0\.0\.1:(\d+)"', text)
            if m:
                port = int(m.group(1))
        d = Daemon(write_conf(text), port, tmp_path, token)
        d.conf = RootEverywhereConf(d.conf)
        started.append(d)
        return d.wait_ready() if wait else d

    yield start
    for d in started:
        rc = d.stop() if d.proc.poll() is None else d.proc.returncode
        log = d.log()
        # A sanitizer report (build/rdmad-asan) fails the test that
        # caused it, whatever the test looked at.
        assert "Sanitizer" not in log and "runtime error:" not in log, log
        if "san" in RDMAD.name:
            assert rc in (0, -9), f"{RDMAD.name} exited {rc}:\n{log}"


def rdmactl(d, *args):
    """Run build/rdmactl against daemon d, over its control socket (as
    root here, so changes are allowed)."""
    return subprocess.run([str(RDMACTL), "--socket", str(d.sock), *args],
                          capture_output=True, text=True, timeout=60)
