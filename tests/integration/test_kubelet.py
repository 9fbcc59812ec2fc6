# SPDX-License-Identifier: MIT
"""rdmad-kubelet (kubelet/), the kubelet's device plugin for profiles,
against a test kubelet (tests/kubelet/testkubelet.py) speaking the
upstream deviceplugin v1beta1 proto: registration; health that follows a
device's removal and return, and a reload that removes a profile (its
resource empties and its endpoint closes), one update per change;
registration again after the kubelet restarts; every share Unhealthy
while rdmad is down and Healthy again after it restarts; Allocate's
answer (CDI name, device nodes, mounts, environment: those of rdmad's
CDI specification) given to podman as the kubelet gives it to a runtime,
and the unmodified client in the container attaching and moving data.
The test kubelet refuses what the kubelet would (a bad resource name,
duplicate device IDs), and every test fails on such a message."""

import os
import shlex
import signal
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest

import podman
from conftest import BUILD, ROOT, TOKEN, free_port

sys.path.insert(0, str(ROOT / "tests" / "kubelet"))
from testkubelet import Kubelet, pb  # noqa: E402

PLUGIN = ROOT / "kubelet" / "rdmad-kubelet"
ATTACH = BUILD / "examples" / "attach"
PATTERN_WRITER = BUILD / "tests" / "pattern_writer"
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


def check_allocation(c, kind, edits, profile):
    """ContainerAllocateResponse c says what the CDI device says."""
    assert [x.name for x in c.cdi_devices] == [f"{kind}={profile}"]
    assert dict(c.envs) == dict(e.split("=", 1) for e in edits["env"])
    assert [(x.host_path, x.container_path, x.permissions)
            for x in c.devices] == [
        (n.get("hostPath", n["path"]), n["path"], "rw")
        for n in edits["deviceNodes"]]
    assert [(x.host_path, x.container_path, x.read_only)
            for x in c.mounts] == [
        (m["hostPath"], m["containerPath"], "ro" in m["options"])
        for m in edits["mounts"]]


# ---- the test kubelet itself: it refuses what the kubelet refuses

class FakePlugin:
    """A plugin that says what it is told to, for the test kubelet."""

    def __init__(self, path, devices):
        self.devices = devices
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", {
                "GetDevicePluginOptions": grpc.unary_unary_rpc_method_handler(
                    lambda r, c: pb.DevicePluginOptions(),
                    request_deserializer=pb.Empty.FromString,
                    response_serializer=(
                        pb.DevicePluginOptions.SerializeToString)),
                "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                    self._law, request_deserializer=pb.Empty.FromString,
                    response_serializer=(
                        pb.ListAndWatchResponse.SerializeToString))}),))
        self.server.add_insecure_port("unix:" + str(path))
        self.server.start()

    def _law(self, request, context):
        yield pb.ListAndWatchResponse(devices=[
            pb.Device(ID=i, health=h) for i, h in self.devices])
        while context.is_active():
            time.sleep(0.1)


def register(k, name, endpoint):
    with grpc.insecure_channel("unix:" + k.sock) as ch:
        ch.unary_unary("/v1beta1.Registration/Register",
                       request_serializer=pb.RegisterRequest.SerializeToString,
                       response_deserializer=pb.Empty.FromString)(
            pb.RegisterRequest(version="v1beta1", endpoint=endpoint,
                               resource_name=name), timeout=10)


def test_test_kubelet_refuses_what_the_kubelet_refuses(kubelet):
    fake = FakePlugin(Path(kubelet.dir) / "fake.sock",
                      [("a", H), ("a", U)])
    try:
        for bad in ("noslash", "kubernetes.io/x", "Ex.com/x",
                    "example.com/-x", "example.com/" + "x" * 64):
            with pytest.raises(grpc.RpcError) as e:
                register(kubelet, bad, "fake.sock")
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError):
            register(kubelet, "example.com/x", "../fake.sock")
        assert len(kubelet.errors) == 6
        kubelet.errors.clear()
        # Accepted, but its list repeats an ID: a failure of the test.
        register(kubelet, "example.com/x", "fake.sock")
        kubelet.wait(lambda: kubelet.errors, "the duplicate ID to be seen")
        with pytest.raises(AssertionError, match="duplicate device IDs"):
            kubelet.check()
        kubelet.errors.clear()
    finally:
        fake.server.stop(0)


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
    assert kubelet.plugins["rdmad.io/p0"].options \
        .get_preferred_allocation_available
    n_p0 = kubelet.n_updates("rdmad.io/p0")
    n_p1 = kubelet.n_updates("example.com/fast")
    assert (n_p0, n_p1) == (1, 1), kubelet.updates

    # GetPreferredAllocation: what must be, then the lowest numbered.
    assert kubelet.preferred("rdmad.io/p0", ["p0-1", "p0-0"], [], 1) == \
        ["p0-0"]
    assert kubelet.preferred("rdmad.io/p0", ["p0-1", "p0-0"], ["p0-1"],
                             1) == ["p0-1"]

    # Allocate: the CDI device and what it holds.
    kind, edits = spec_edits(tmp_path / "cdi" / "rdmad.json", "p0")
    resp = kubelet.allocate("rdmad.io/p0", ["p0-0"], ["p0-1"])
    for c in resp.container_responses:
        check_allocation(c, kind, edits, "p0")
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

    # A reload removes p1 and waits: their resources empty, their
    # streams end, their endpoints close; p0 sees no update at all.
    d.conf.write_text(daemon_section(tmp_path, d.port,
                                     tmp_path / "cdi" / "rdmad.json")
                      + RELOADED)
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    wait_health(kubelet, p, "example.com/fast", {})
    wait_health(kubelet, p, "rdmad.io/waits", {})
    kubelet.wait(lambda: kubelet.plugins["example.com/fast"].ended,
                 "p1's stream to end")
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


def test_names_the_kubelet_refuses_are_not_sent(rdmad, tmp_path, kubelet,
                                                plugin):
    """A resource name the kubelet would refuse is never registered: the
    plugin says so and goes on with the others; a bad --resource is an
    error at start."""
    r = subprocess.run(["/usr/bin/python3", str(PLUGIN), "--resource",
                        "p0=Example.com/x"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 2 and "is not a DNS subdomain" in r.stderr, \
        r.stderr
    d = start_rdmad(rdmad, tmp_path)
    p = plugin(d, "--prefix", "kubernetes.io", "--shares", "1",
               "--resource", "p0=example.com/p0")
    wait_health(kubelet, p, "example.com/p0", {"p0-0": H})
    deadline = time.monotonic() + TIMEOUT
    while "profile waits: resource name" not in p.log() and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    log = p.log()
    for name in ("p1", "waits"):
        assert f"profile {name}: resource name 'kubernetes.io/{name}' is " \
            "not one the kubelet accepts" in log, log
    assert kubelet.registrations == ["example.com/p0"]


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


@pytest.mark.container
def test_pod_attaches_with_what_allocate_returned(rdmad, kubelet, plugin):
    podman.need_podman()
    tmp = podman.workdir()
    try:
        d = start_rdmad(rdmad, tmp, cdi=None)  # /run/cdi: podman's
        p = plugin(d, "--shares", "2", "--profile", "p0")
        wait_health(kubelet, p, "rdmad.io/p0", all_(["p0-0", "p0-1"], H))
        (c,) = kubelet.allocate("rdmad.io/p0", ["p0-1"]).container_responses
        kind, edits = spec_edits("/run/cdi/rdmad.json", "p0")
        check_allocation(c, kind, edits, "p0")

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
        assert d.stop() == 0
    finally:
        podman.remove(tmp)
