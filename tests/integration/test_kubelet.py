# SPDX-License-Identifier: MIT
"""rdmad-kubelet (kubelet/), the kubelet's device plugin for profiles,
against a test kubelet (tests/kubelet/testkubelet.py) that behaves as
the kubelet's device manager does, on soft-RoCE: registration; health
that follows a device's removal and return, and a reload that removes a
profile (its resource empties and its endpoint closes), one update per
change; registration again after the kubelet restarts; every share
Unhealthy while rdmad is down and Healthy again after it restarts; the
NUMA node of each device (Device.topology), off with --no-topology; one
profile whose socket cannot be made left out alone while the others stay
Healthy; Allocate's answer (the CDI name alone; --no-cdi: the device
nodes, mounts and environment) read by the Go client (grpc-go) too, its
CDI names resolved by the CDI project's library as a runtime does, and
given to podman as the kubelet gives it to a runtime: the unmodified
client in the container attaches and moves data; the same answer
replayed from the kubelet's checkpoint after a reload moved the profile
to the other device reaches the profile's device of now.
Registration, recovery, names and the wire without a device:
tests/kubelet/test_plugin.py, on the host."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

import podman
from conftest import BUILD, ROOT, TOKEN, free_port

sys.path.insert(0, str(ROOT / "tests" / "kubelet"))
from testkubelet import Kubelet  # noqa: E402

# RDMAD_KUBELET_BIN: another rdmad-kubelet (an installed one).
PLUGIN = Path(os.environ.get("RDMAD_KUBELET_BIN",
                             ROOT / "kubelet" / "rdmad-kubelet")).resolve()
ATTACH = BUILD / "examples" / "attach"
PATTERN_WRITER = BUILD / "tests" / "pattern_writer"
GOCLIENT = BUILD / "tests" / "kubelet" / "goclient"
CDIRESOLVE = BUILD / "tests" / "kubelet" / "cdiresolve"
DATAPATH = ROOT / "examples" / "datapath.py"
TIMEOUT = 60  # TCG is slow
H, U = "Healthy", "Unhealthy"

PROFILES = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; },
            { name = "d1"; match = { ibdev = "rxe1"; }; },
            { name = "absent"; match = { ibdev = "rxe9"; }; } );
profiles = (
  { name = "p0"; device = "d0";
    memory = ( { name = "m"; size = "64K"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m";
             access = [ "local_write", "remote_write", "remote_read" ]; } );
    cq = ( { name = "c"; cqe = 16; } );
    qp = ( { name = "ext"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "init";
             access = [ "remote_write", "remote_read" ]; } ); },
  { name = "p1"; device = "d1"; pd = ( { name = "b"; } ); },
  { name = "waits"; device = "absent"; pd = ( { name = "c"; } ); }
);
"""

# p1 and waits removed.
RELOADED = PROFILES.split("  { name = \"p1\"")[0].rstrip().rstrip(",") + \
    "\n);\n"


def daemon_section(tmp, port, cdi):
    token = tmp / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    cdi_line = f'cdi_spec = "{cdi}";' if cdi else ""
    return (f'daemon = {{ runtime_dir = "{tmp}"; {cdi_line} '
            f'http = {{ listen = [ "127.0.0.1:{port}" ]; '
            f'token_file = "{token}"; }}; }};\n')


def start_rdmad(rdmad, tmp, text=PROFILES, cdi="cdi/rdmad.json"):
    """rdmad on text, its CDI specification under tmp (cdi=None: the
    default, /run/cdi, where podman looks)."""
    d = rdmad(daemon_section(tmp, free_port(), cdi and tmp / cdi) + text)
    d.token = TOKEN
    d.sock = str(tmp / "rdmad.sock")
    return d


class Plugin:
    def __init__(self, sock, plugin_dir, log, *args):
        self.log_path = log
        self._log = open(log, "w")
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", str(PLUGIN), "--socket", str(sock),
             "--plugin-dir", str(plugin_dir), "--verbose", *args],
            stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT)

    def log(self):
        if not self._log.closed:
            self._log.flush()
        return Path(self.log_path).read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(TIMEOUT)
        finally:
            self._log.close()


@pytest.fixture
def kubelet(tmp_path):
    k = Kubelet(tmp_path / "device-plugins").start()
    yield k
    k.stop()
    k.check()


@pytest.fixture
def plugin(tmp_path, kubelet):
    started = []

    def start(d, *args):
        p = Plugin(d.sock, kubelet.dir, tmp_path / "plugin.log", *args)
        started.append(p)
        return p
    yield start
    for p in started:
        rc = p.stop()
        log = p.log()
        assert rc == 0, log
        assert "Traceback" not in log, log


def wait_health(k, p, resource, want, what=None):
    try:
        k.wait(lambda: k.health(resource) == want,
               what or f"{resource} to be {want}", TIMEOUT)
    except AssertionError as e:
        raise AssertionError(f"{e}\nplugin:\n{p.log()}") from None


def all_(ids, health):
    return {i: health for i in ids}


def quiet(k, resource, n, seconds=2):
    """No update for resource beyond its n-th within seconds."""
    time.sleep(seconds)
    assert k.n_updates(resource) == n, k.updates[resource]


def rdma(*args):
    return subprocess.run(["rdma", *args], capture_output=True, text=True,
                          timeout=TIMEOUT)


def spec_edits(path, profile):
    import json
    spec = json.loads(Path(path).read_text())
    (dev,) = [x for x in spec["devices"] if x["name"] == profile]
    return spec["kind"], dev["containerEdits"]


def check_cdi_only(c, kind, profile):
    """ContainerAllocateResponse c names the profile's CDI device and
    no device path (the kubelet's checkpoint replays it as it is)."""
    assert [x.name for x in c.cdi_devices] == [f"{kind}={profile}"]
    assert not c.devices and not c.mounts and not c.envs, c


def check_allocation(c, kind, edits, profile):
    """ContainerAllocateResponse c (--no-cdi) says what the CDI device
    says, and names no CDI device."""
    assert not c.cdi_devices
    assert dict(c.envs) == dict(e.split("=", 1) for e in edits["env"])
    assert [(x.host_path, x.container_path, x.permissions)
            for x in c.devices] == [
        (n.get("hostPath", n["path"]), n["path"], "rw")
        for n in edits["deviceNodes"]]
    assert [(x.host_path, x.container_path, x.read_only)
            for x in c.mounts] == [
        (m["hostPath"], m["containerPath"], "ro" in m["options"])
        for m in edits["mounts"]]


# ---- the test kubelet

def test_plugin_and_test_kubelet_speak_one_proto():
    """kubelet/api.proto and tests/kubelet/api.proto: one upstream file."""
    assert (ROOT / "kubelet" / "api.proto").read_bytes() == \
        (ROOT / "tests" / "kubelet" / "api.proto").read_bytes()


# ---- the plugin

def test_register_health_reload(rdmad, tmp_path, kubelet, plugin):
    d = start_rdmad(rdmad, tmp_path)
    p = plugin(d, "--shares", "2", "--shares", "waits=1",
               "--resource", "p1=example.com/fast")
    p0 = ["p0-0", "p0-1"]
    p1 = ["p1-0", "p1-1"]
    wait_health(kubelet, p, "rdmad.io/p0", all_(p0, H))
    wait_health(kubelet, p, "example.com/fast", all_(p1, H))
    wait_health(kubelet, p, "rdmad.io/waits", {"waits-0": U})
    assert sorted(kubelet.registrations) == [
        "example.com/fast", "rdmad.io/p0", "rdmad.io/waits"]
    # Soft-RoCE's devices have no parent device: no NUMA node, no
    # topology (the kernel's sysfs, not the plugin, says so).
    numa = Path("/sys/class/infiniband/rxe0/device/numa_node")
    assert not numa.exists() or int(numa.read_text()) < 0
    assert kubelet.topology["rdmad.io/p0"] == {"p0-0": None, "p0-1": None}
    # The options the kubelet keeps (GetDevicePluginOptions' answer): no
    # GetPreferredAllocation, every share being the same.
    assert not kubelet.listed("rdmad.io/p0").options \
        .get_preferred_allocation_available
    n_p0 = kubelet.n_updates("rdmad.io/p0")
    n_p1 = kubelet.n_updates("example.com/fast")
    assert (n_p0, n_p1) == (1, 1), kubelet.updates

    # Allocate: the CDI device's name, nothing else; one container per
    # call, as the kubelet asks.
    kind, _ = spec_edits(tmp_path / "cdi" / "rdmad.json", "p0")
    check_cdi_only(kubelet.admit("rdmad.io/p0", 1, pod="a"), kind, "p0")
    check_cdi_only(kubelet.admit("rdmad.io/p0", 1, pod="b"), kind, "p0")
    with pytest.raises(AssertionError, match="unavailable"):
        kubelet.admit("rdmad.io/p0", 1, pod="c")  # both shares are held
    with pytest.raises(grpc.RpcError) as e:
        kubelet.allocate("rdmad.io/waits", ["waits-0"])
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as e:
        kubelet.allocate("rdmad.io/p0", ["p0-7"])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    # rxe1 goes: p1's shares are Unhealthy, in one update; it comes
    # back: Healthy, in one more.
    try:
        r = rdma("link", "delete", "rxe1")
        assert r.returncode == 0, r.stderr
        wait_health(kubelet, p, "example.com/fast", all_(p1, U))
        quiet(kubelet, "example.com/fast", n_p1 + 1)
        with pytest.raises(grpc.RpcError) as e:
            kubelet.allocate("example.com/fast", ["p1-0"])
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        r = rdma("link", "add", "rxe1", "type", "rxe", "netdev", "veth1")
    assert r.returncode == 0, r.stderr
    wait_health(kubelet, p, "example.com/fast", all_(p1, H))
    quiet(kubelet, "example.com/fast", n_p1 + 2)

    fast = kubelet.listed("example.com/fast")
    # A reload removes p1 and waits: their resources empty, their
    # streams end, their endpoints close; p0 sees no update at all.
    d.conf.write_text(daemon_section(tmp_path, d.port,
                                     tmp_path / "cdi" / "rdmad.json")
                      + RELOADED)
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    wait_health(kubelet, p, "example.com/fast", {})
    wait_health(kubelet, p, "rdmad.io/waits", {})
    kubelet.wait(lambda: fast.ended, "p1's stream to end")
    deadline = time.monotonic() + TIMEOUT
    gone = [Path(kubelet.dir) / f"rdmad-{x}.sock" for x in ("p1", "waits")]
    while any(g.exists() for g in gone) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(g.exists() for g in gone), p.log()
    assert (Path(kubelet.dir) / "rdmad-p0.sock").exists()
    assert kubelet.health("rdmad.io/p0") == all_(p0, H)
    quiet(kubelet, "rdmad.io/p0", n_p0)


def test_kubelet_restart(rdmad, tmp_path, kubelet, plugin):
    d = start_rdmad(rdmad, tmp_path)
    p = plugin(d, "--shares", "3", "--profile", "p0")
    ids = ["p0-0", "p0-1", "p0-2"]
    wait_health(kubelet, p, "rdmad.io/p0", all_(ids, H))
    assert kubelet.registrations == ["rdmad.io/p0"]
    st = (Path(kubelet.dir) / "rdmad-p0.sock").stat()
    old = (st.st_ino, st.st_ctime_ns)

    # The kubelet restarts: it removes the sockets in its directory and
    # listens anew; the plugin serves again and registers again.
    kubelet.restart()
    wait_health(kubelet, p, "rdmad.io/p0", all_(ids, H),
                "registration again after the kubelet's restart")
    assert kubelet.registrations == ["rdmad.io/p0"] * 2
    st = (Path(kubelet.dir) / "rdmad-p0.sock").stat()
    assert (st.st_ino, st.st_ctime_ns) != old
    assert "registered with the kubelet" in p.log()


def test_rdmad_restart(rdmad, tmp_path, kubelet, plugin):
    d = start_rdmad(rdmad, tmp_path)
    p = plugin(d, "--shares", "1")
    wait_health(kubelet, p, "rdmad.io/p0", {"p0-0": H})
    wait_health(kubelet, p, "rdmad.io/p1", {"p1-0": H})
    n = kubelet.n_updates("rdmad.io/p0")

    # rdmad stops: no share can attach, none is Healthy.
    assert d.stop() == 0
    wait_health(kubelet, p, "rdmad.io/p0", {"p0-0": U})
    wait_health(kubelet, p, "rdmad.io/p1", {"p1-0": U})
    assert kubelet.n_updates("rdmad.io/p0") == n + 1

    # It starts again: the plugin connects again, lists again.
    start_rdmad(rdmad, tmp_path)
    wait_health(kubelet, p, "rdmad.io/p0", {"p0-0": H})
    wait_health(kubelet, p, "rdmad.io/p1", {"p1-0": H})
    quiet(kubelet, "rdmad.io/p0", n + 2)
    assert kubelet.registrations.count("rdmad.io/p0") == 1


def runtime_args(c):
    """What a runtime is given for ContainerAllocateResponse c, as podman
    options: the CDI devices, and the device nodes, mounts and
    environment (a kubelet gives a CRI runtime all of them)."""
    args = []
    for x in c.cdi_devices:
        args += ["--device", x.name]
    for x in c.devices:
        args += ["--device",
                 f"{x.host_path}:{x.container_path}:{x.permissions}"]
    for x in c.mounts:
        args += ["-v", f"{x.host_path}:{x.container_path}:"
                 f"{'ro' if x.read_only else 'rw'}"]
    for k, v in sorted(c.envs.items()):
        args += ["-e", f"{k}={v}"]
    return args


def uverbs_of(ibdev):
    """The uverbs node of ibdev, as the kernel's sysfs says."""
    for u in Path("/sys/class/infiniband_verbs").iterdir():
        f = u / "ibdev"
        if f.exists() and f.read_text().strip() == ibdev:
            return f"/dev/infiniband/{u.name}"
    raise AssertionError(f"no uverbs device for {ibdev}")


def go_client(endpoint, *ids):
    r = subprocess.run([str(GOCLIENT), str(endpoint), *ids],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def cdi_resolve(spec_dir, *names):
    """names resolved by the CDI project's library (0.5.2), as a
    runtime of its age resolves them."""
    r = subprocess.run([str(CDIRESOLVE), str(spec_dir), *names],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_topology_isolation_wire_and_cdi(rdmad, tmp_path, kubelet, plugin):
    """Device.topology from the devices' sysfs (a sysfs tree of the
    test's: soft-RoCE has no parent device, no NUMA node), gone with
    --no-topology; p1's socket cannot be made: p1 alone is left out, the
    others stay Healthy, unflapping; the Go client reads the same lists
    and Allocate answers; the CDI names of two profiles, resolved by
    the CDI library, give both profiles' device nodes and variables,
    from a spec of the oldest version that can say it."""
    sysfs = tmp_path / "sys"
    for ibdev, node in (("rxe0", "1"), ("rxe1", "-1")):
        f = sysfs / "class" / "infiniband" / ibdev / "device" / "numa_node"
        f.parent.mkdir(parents=True)
        f.write_text(node + "\n")
    text = PROFILES.replace(
        '  { name = "waits";',
        '  { name = "9lives"; device = "d1"; pd = ( { name = "n"; } ); },\n'
        '  { name = "waits";')
    d = start_rdmad(rdmad, tmp_path, text)
    (Path(kubelet.dir) / "rdmad-p1.sock").mkdir()
    p = plugin(d, "--shares", "1", "--sysfs", str(sysfs))
    wait_health(kubelet, p, "rdmad.io/p0", {"p0-0": H})
    wait_health(kubelet, p, "rdmad.io/9lives", {"9lives-0": H})
    wait_health(kubelet, p, "rdmad.io/waits", {"waits-0": U})
    assert kubelet.topology["rdmad.io/p0"] == {"p0-0": [1]}
    assert kubelet.topology["rdmad.io/9lives"] == {"9lives-0": None}
    n = kubelet.n_updates("rdmad.io/p0")
    time.sleep(3)
    assert kubelet.n_updates("rdmad.io/p0") == n
    assert "rdmad.io/p1" not in kubelet.register_calls
    assert "rdmad.io/p1: cannot remove" in p.log(), p.log()
    assert "every share is Unhealthy" not in p.log(), p.log()

    # The Go client: the same list, and Allocate's answer.
    ep = kubelet.listed("rdmad.io/p0").endpoint
    out = go_client(ep, "p0-0")
    assert out["devices"] == [{"ID": "p0-0", "health": H, "numa": 1}]
    assert out["allocate"]["cdi_devices"] == ["rdmad.io/profile=p0"]
    assert out["allocate"]["devices"] == [] == out["allocate"]["mounts"]
    assert not out["allocate"]["envs"]

    # A container with both profiles: their nodes, and both variables.
    cdi_dir = tmp_path / "cdi"
    spec = json.loads((cdi_dir / "rdmad.json").read_text())
    # CDI's MinimumRequiredVersion: a device name beginning with a digit
    # is 0.5.0's; nothing else here is newer than 0.3.0.
    assert spec["cdiVersion"] == "0.5.0"
    res = cdi_resolve(cdi_dir, "rdmad.io/profile=p0",
                      "rdmad.io/profile=9lives")
    assert res["spec_errors"] == {} and res["unresolved"] == [], res
    assert not res.get("error"), res
    nodes = {n["path"] for n in res["device_nodes"]}
    assert {uverbs_of("rxe0"), uverbs_of("rxe1")} <= nodes, res
    # Each profile's own socket, never the main one (rdmad(8),
    # CONTAINERS): two directories bound, and both sockets named.
    own = {n: str(tmp_path / "profiles" / n) for n in ("p0", "9lives")}
    assert {"RDMAD_PROFILE_P0=p0", "RDMAD_PROFILE_9LIVES=9lives",
            f"RDMAD_SOCKET_P0={own['p0']}/rdmad.sock",
            f"RDMAD_SOCKET_9LIVES={own['9lives']}/rdmad.sock"} <= \
        set(res["env"]), res
    assert {(x["source"], x["destination"]) for x in res["mounts"]} == \
        {(o, o) for o in own.values()}, res
    for x in res["mounts"]:
        assert {"nosuid", "nodev", "ro"} <= set(x["options"])

    # --no-topology, and --no-cdi's answer: the CDI device's contents.
    assert p.stop() == 0
    p = plugin(d, "--shares", "1", "--sysfs", str(sysfs), "--no-topology",
               "--no-cdi", "--profile", "p0")
    kubelet.wait(lambda: kubelet.registrations.count("rdmad.io/p0") == 2,
                 "the second plugin's registration")
    kubelet.listed("rdmad.io/p0")
    kubelet.wait(lambda: kubelet.topology["rdmad.io/p0"] == {"p0-0": None},
                 "no topology")
    kind, edits = spec_edits(cdi_dir / "rdmad.json", "p0")
    check_allocation(kubelet.admit("rdmad.io/p0", 1), kind, edits, "p0")


@pytest.mark.container
def test_pod_attaches_and_a_replay_follows_the_profile(rdmad, kubelet,
                                                       plugin):
    podman.need_podman()
    tmp = podman.workdir()
    try:
        d = start_rdmad(rdmad, tmp, cdi=None)  # /run/cdi: podman's
        p = plugin(d, "--shares", "2", "--profile", "p0")
        wait_health(kubelet, p, "rdmad.io/p0", all_(["p0-0", "p0-1"], H))
        c = kubelet.admit("rdmad.io/p0", 1, pod="pod")
        kind, _ = spec_edits("/run/cdi/rdmad.json", "p0")
        check_cdi_only(c, kind, "p0")

        # A remote peer (another context on rxe0) RDMA-writes into p0's
        # MR; the pod's client reads it, then writes bytes of its own.
        env = dict(os.environ, RDMAD_URL=d.url,
                   RDMAD_TOKEN_FILE=str(tmp / "token"))
        r = subprocess.run(["/usr/bin/python3", str(DATAPATH), "write",
                            "p0", "ext", "r", "0", "hello from a peer"],
                           env=env, capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert r.returncode == 0, r.stdout + r.stderr
        # Quoted: a checkout's path may hold a space (CI's clone does).
        script = (f"{shlex.quote(str(ATTACH))} && "
                  f"{shlex.quote(str(PATTERN_WRITER))} \"$RDMAD_SOCKET\" "
                  f"\"$RDMAD_PROFILE\" r 0 "
                  f"{b'written in a pod'.hex()}")
        r = subprocess.run(
            podman.run_argv(tmp, ["--network", "none", *runtime_args(c)],
                            ["sh", "-c", script]),
            capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.startswith("profile p0: local mode, device rxe0"), \
            r.stdout
        assert '"hello from a pee"' in r.stdout, r.stdout
        assert "wrote 16" in r.stdout, r.stdout
        r = subprocess.run([str(ATTACH), "-s", d.sock, "p0"],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        assert '"written in a pod"' in r.stdout, r.stdout

        # A reload moves p0 onto rxe1. The container restarts: the
        # kubelet gives the runtime the answer its checkpoint holds,
        # asking no plugin; the container reaches p0's device of now,
        # and no other.
        d.conf.write_text(d.conf.read_text().replace(
            'name = "p0"; device = "d0"', 'name = "p0"; device = "d1"'))
        status, body = d.request("POST", "/v1/reload")
        assert status == 200, body
        want = uverbs_of("rxe1")
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            _, edits = spec_edits("/run/cdi/rdmad.json", "p0")
            if edits["deviceNodes"][0]["path"] == want:
                break
            time.sleep(0.1)
        wait_health(kubelet, p, "rdmad.io/p0", all_(["p0-0", "p0-1"], H))
        replayed = kubelet.replay("pod", "c", "rdmad.io/p0")
        assert replayed == c
        r = subprocess.run(
            podman.run_argv(tmp, ["--network", "none",
                                  *runtime_args(replayed)],
                            ["sh", "-c", "ls /dev/infiniband; exec "
                             + shlex.quote(str(ATTACH))]),
            capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        assert sorted(lines[:2]) == sorted(
            [os.path.basename(want), "rdma_cm"]), r.stdout
        assert lines[2].startswith("profile p0: local mode, device rxe1"), \
            r.stdout
        assert d.stop() == 0
    finally:
        podman.remove(tmp)
