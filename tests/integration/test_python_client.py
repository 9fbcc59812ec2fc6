# SPDX-License-Identifier: MIT
"""The Python client (client/python/rdmad): its protocol constants are
proto.h's; it attaches and hands out pyverbs objects; two Python
processes move data with pyverbs QPs over a profile's memory; a C client
writes what a Python client reads; refusals and a daemon that goes away
are exceptions with a code, and leave no fd behind. rxe cannot import:
shared mode is tested here up to the daemon's refusal, and in
tests/hw/test_python_shared_hw.py on mlx5."""

import array
import errno
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import BUILD, HEALTH, ROOT
from test_engine import big_conf, creating, run_dir, start  # noqa: F401
from test_sharing import OTHER, USER, as_user, shared  # noqa: F401
from pyclient_setup import rdmad
from rdmad import proto  # (the package is on the path now)

HERE = Path(__file__).resolve().parent

# The name of the package, where the fixture "rdmad" hides it.
client = rdmad

MIB = 1 << 20


def nfds(d=None):
    """This process's open fds; with d, not counting the daemon's log
    file (open here until d stops)."""
    fds = os.listdir("/proc/self/fd")
    if d is None:
        return len(fds)
    log = str(d.stderr_path)
    n = 0
    for fd in fds:
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") != log
        except FileNotFoundError:
            pass  # the directory's own fd, closed since
    return n


def proto_h_constants():
    """Every #define PROTO_* number and enum proto_type member of
    proto/proto.h, evaluated."""
    text = (ROOT / "proto" / "proto.h").read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = {}
    for name, value in re.findall(r"^#define (PROTO_\w+) (.+)$", text,
                                  re.M):
        expr = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1",
                      value.strip())
        if name in ("PROTO_MSG_INIT", "PROTO_RECV_BYTES"):
            continue
        expr = re.sub(r"\bPROTO_\w+\b", lambda m: str(out[m.group()]), expr)
        assert re.fullmatch(r"[\s\d()+*x0-9a-fA-F-]+", expr), (name, expr)
        out[name] = eval(expr)
    enum = re.search(r"enum proto_type \{(.*?)\};", text, re.S).group(1)
    for name, value in re.findall(r"(PROTO_\w+) = (\d+)", enum):
        out[name] = int(value)
    return out


def test_protocol_constants_are_proto_h_s():
    h = proto_h_constants()
    mine = {k: v for k, v in vars(proto).items()
            if k.startswith("PROTO_") and isinstance(v, int)}
    # Everything the package uses, and every message type, is in both.
    types = {k for k in h if re.fullmatch(r"PROTO_[A-Z]+", k) and
             k not in ("PROTO_MAGIC", "PROTO_VERSION")}
    assert types <= set(mine), types - set(mine)
    for k, v in mine.items():
        assert k in h, f"{k} is not in proto.h"
        assert h[k] == v, f"{k}: proto.h says {h[k]}, rdmad.proto {v}"
    assert proto.HEADER.size == h["PROTO_HDR_SIZE"]
    # The default socket is librdmad's.
    rdmad_h = (ROOT / "client" / "rdmad.h").read_text()
    assert f'#define RDMAD_DEFAULT_SOCKET "{rdmad.DEFAULT_SOCKET}"' in rdmad_h


@pytest.fixture
def pyshared(shared):  # noqa: F811
    """The sharing daemon, with the package where uid 1000 can read it."""
    shutil.copytree(ROOT / "client" / "python" / "rdmad",
                    shared.code / "rdmad",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for root, dirs, files in os.walk(shared.code / "rdmad"):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return shared


def test_attach_gives_pyverbs_objects(pyshared):
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD

    d = pyshared
    before = nfds()
    with rdmad.connect(d.sock) as conn:
        with conn.attach("ingest") as prof:
            # rxe cannot import: the daemon chose local mode.
            assert prof.mode == rdmad.MODE_LOCAL and prof.import_capable \
                is False
            assert (prof.ibdev, prof.port, prof.gid_index) == ("rxe0", 1, 1)
            assert isinstance(prof.context, Context)
            assert prof.context.name == "rxe0"
            assert isinstance(prof.pd("main"), PD)
            mr = prof.mr("ring")
            assert isinstance(mr, MR) and mr.length == 64 * MIB
            assert sorted(prof.mr_names) == ["ring", "side"]
            buf = prof.mr_map("ring")
            assert isinstance(buf, memoryview) and len(buf) == 64 * MIB
            # Local mode registers at IOVA == address (pyverbs' MR has no
            # iova); the daemon's own registration is zero-based.
            assert prof.mr_iova("ring") == prof.mr_addr("ring")
            assert prof.daemon_iova("ring") == 0
            status, rest = d.get("/v1/profiles/ingest/mr/ring")
            assert prof.daemon_rkey("ring") == rest["rkey"]
            buf[100:105] = b"hello"
            assert mr.read(5, 100) == b"hello"     # through the MR
            # The keys this process registered show in the session.
            status, sessions = d.get("/v1/sessions")
            att = sessions[0]["attachments"][0]
            assert att["profile"] == "ingest" and att["mode"] == "local"
            # Control requests: the same documents as REST.
            assert conn.request("GET", "/v1/profiles") == \
                d.get("/v1/profiles")[1]
            with pytest.raises(rdmad.Error) as e:
                prof.mr("nope")
            assert e.value.code == "not_found"
        assert prof.context is None
        with pytest.raises(ValueError):
            buf[0]                     # released by detach
        status, sessions = d.get("/v1/sessions")
        assert sessions[0]["attachments"] == []
        with pytest.raises(rdmad.Error) as e:
            conn.request("GET", "/v1/profiles/nope")
        assert e.value.code == "not_found" and e.value.status == 404
    assert nfds() == before


def test_default_socket_and_env(pyshared, monkeypatch):
    monkeypatch.setenv("RDMAD_SOCKET", pyshared.sock)
    monkeypatch.setenv("RDMAD_PROFILE", "ingest")
    with rdmad.connect() as conn:
        assert conn.path == pyshared.sock
        assert conn.request("GET", "/v1/health") == HEALTH
        # What CDI gives a container: the socket and the profile.
        with conn.attach() as prof:
            assert prof.name == "ingest"
        monkeypatch.delenv("RDMAD_PROFILE")
        with pytest.raises(ValueError):
            conn.attach()
    monkeypatch.delenv("RDMAD_SOCKET")
    with pytest.raises(rdmad.Error) as e:
        rdmad.connect(str(pyshared.code / "no.sock"))
    assert e.value.code == "daemon_gone" and "is rdmad running" in \
        e.value.message


def test_shared_mode_refused_on_rxe(pyshared):
    before = nfds()
    with rdmad.connect(pyshared.sock) as conn:
        with pytest.raises(rdmad.Error) as e:
            conn.attach("ingest", mode="shared")
        assert e.value.code == "not_supported"
        assert "local or auto" in e.value.message
    assert nfds() == before


# Run from the copy of the package in d.code (argv[7]: where
# pyclient_setup is).
PEER = r"""
import json, sys
sys.path.insert(0, sys.argv[7])
import rdmad
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR
from pyclient_setup import rc_to_rts

sock, role, src, dst, n = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])

def say(**kw):
    print(json.dumps(kw), flush=True)

with rdmad.connect(sock) as conn, conn.attach("ingest") as prof:
    mr = prof.mr("ring")
    buf = prof.mr_map("ring")
    cq = CQ(prof.context, 16)
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1,
                max_recv_sge=1)
    qp = QP(prof.pd("main"), QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq,
                                        rcq=cq, cap=cap))
    gid = prof.context.query_gid(prof.port, prof.gid_index)
    say(qpn=qp.qp_num, rkey=mr.rkey, iova=prof.mr_iova("ring"),
        mode=prof.mode, gid=str(gid))
    peer = json.loads(sys.stdin.readline())
    rc_to_rts(prof, qp, peer["qpn"], e.IBV_ACCESS_REMOTE_WRITE)
    say(connected=True)
    sys.stdin.readline()
    if role == "writer":
        data = bytes.fromhex(sys.argv[6])
        buf[src:src + n] = data
        wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(prof.mr_iova("ring") + src, n, mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        # Into the other process's MR, with its keys.
        wr.set_wr_rdma(peer["rkey"], peer["iova"] + dst)
        qp.post_send(wr)
        for _ in range(1000000):
            k, wcs = cq.poll()
            if k:
                break
        assert k and wcs[0].status == e.IBV_WC_SUCCESS, wcs
        say(done=True)
    else:
        say(bytes=bytes(buf[dst:dst + n]).hex())
    qp.close()
    cq.close()
"""


def test_two_python_processes_move_data_with_qps(pyshared):
    d = pyshared
    (d.code / "peer.py").write_text(PEER)
    src, dst, n = 1 * MIB, 40 * MIB, 4096
    data = secrets.token_bytes(n)
    procs = {}
    for role in ("writer", "reader"):
        procs[role] = subprocess.Popen(
            [sys.executable, str(d.code / "peer.py"), d.sock, role,
             str(src), str(dst), str(n), data.hex(), str(HERE)],
            cwd=str(d.code), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)

    def line(role):
        out = procs[role].stdout.readline()
        assert out, procs[role].stderr.read()
        return json.loads(out)

    def send(role, doc):
        procs[role].stdin.write(json.dumps(doc) + "\n")
        procs[role].stdin.flush()

    try:
        w, r = line("writer"), line("reader")
        assert w["mode"] == r["mode"] == "local"
        # Two processes, two registrations of the same bytes.
        assert w["rkey"] != r["rkey"]
        status, sessions = d.get("/v1/sessions")
        assert {s["pid"] for s in sessions} == \
            {p.pid for p in procs.values()}
        send("writer", r)
        send("reader", w)
        assert line("writer") == {"connected": True}
        assert line("reader") == {"connected": True}
        send("writer", {})
        assert line("writer") == {"done": True}
        send("reader", {})
        assert bytes.fromhex(line("reader")["bytes"]) == data
        for p in procs.values():
            assert p.wait(60) == 0, p.stderr.read()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    assert d.get("/v1/sessions")[1] == []


def test_c_client_writes_python_reads(pyshared):
    d = pyshared
    data = b"written by librdmad, read by python " + secrets.token_bytes(16)
    at = 17 * MIB + 5
    r = subprocess.run([str(BUILD / "tests" / "pattern_writer"), d.sock,
                        "ingest", "ring", str(at), data.hex()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"wrote {len(data)} local")
    # As uid 1000 (local mode registers 65 MiB: its memlock limit must
    # allow it): through its own pyverbs MR, and through mr_map.
    import resource
    old = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (128 * MIB, 128 * MIB))
    try:
        out = as_user(d, USER, """
import json, sys
import rdmad
with rdmad.connect(sys.argv[1]) as conn:
    with conn.attach("ingest") as prof:
        at, n = int(sys.argv[2]), int(sys.argv[3])
        print(json.dumps({"mr": prof.mr("ring").read(n, at).hex(),
                          "map": bytes(prof.mr_map("ring")[at:at + n]).hex(),
                          "mode": prof.mode}))
""", str(at), str(len(data)))
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, old)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "local"
    assert bytes.fromhex(doc["mr"]) == data
    assert bytes.fromhex(doc["map"]) == data


def test_bad_profile_name(pyshared):
    before = nfds()
    conn = rdmad.connect(pyshared.sock)
    for name in ("nope", "", "x" * 300, "../ingest"):
        with pytest.raises(rdmad.Error) as e:
            conn.attach(name)
        assert e.value.code in ("not_found", "bad_request"), e.value
        assert e.value.message
    with pytest.raises(rdmad.Error) as e:
        conn.attach("nope")
    assert e.value.code == "not_found" and "nope" in e.value.message
    assert nfds() == before + 1          # the socket alone
    # The connection serves on.
    with conn.attach("ingest") as prof:
        assert prof.mode == "local"
    conn.close()
    assert nfds() == before


UNAUTHORIZED = """
import json, os, sys
import rdmad
before = len(os.listdir("/proc/self/fd"))
try:
    conn = rdmad.connect(sys.argv[1])
except rdmad.Error as e:
    print(json.dumps({"step": "connect", "code": e.code,
                      "message": e.message, "before": before,
                      "after": len(os.listdir("/proc/self/fd"))}))
    sys.exit(3)
try:
    conn.attach("ingest")
except rdmad.Error as e:
    inside = len(os.listdir("/proc/self/fd"))
    conn.close()
    print(json.dumps({"step": "attach", "code": e.code,
                      "message": e.message, "before": before,
                      "inside": inside,
                      "after": len(os.listdir("/proc/self/fd"))}))
    sys.exit(3)
print("attached")
"""


def test_unauthorized_uid(pyshared):
    # In the socket's group, not on the profile's allow list.
    r = as_user(pyshared, OTHER, UNAUTHORIZED, groups=[USER])
    assert r.returncode == 3, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["step"] == "attach" and out["code"] == "forbidden", out
    assert out["message"]
    assert out["inside"] == out["before"] + 1
    assert out["after"] == out["before"]
    # Outside the socket's group: the connection itself is refused.
    r = as_user(pyshared, OTHER, UNAUTHORIZED)
    assert r.returncode == 3, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["step"] == "connect" and out["code"] == "forbidden", out
    assert "control group" in out["message"]
    assert out["after"] == out["before"]


def test_daemon_goes_away_mid_attach(pyshared):
    d = pyshared
    before = nfds()
    conn = rdmad.connect(d.sock)
    assert conn.request("GET", "/v1/health") == HEALTH
    result = {}

    def attach():
        try:
            result["prof"] = conn.attach("ingest", wait=60)
        except rdmad.Error as e:
            result["error"] = e

    # The daemon stops, takes the ATTACH (unread), and dies.
    os.kill(d.pid, signal.SIGSTOP)
    t = threading.Thread(target=attach)
    t.start()
    time.sleep(0.5)
    os.kill(d.pid, signal.SIGKILL)
    t.join(60)
    assert not t.is_alive()
    d.proc.wait(30)
    e = result.get("error")
    assert e is not None, result
    assert e.code == "daemon_gone", e
    assert "went away" in e.message and "connect again" in e.message
    assert nfds() == before + 1          # the socket alone
    # Nothing more goes out on it; closing is quiet.
    with pytest.raises(rdmad.Error) as e2:
        conn.request("GET", "/v1/health")
    assert e2.value.code == "not_connected"
    conn.close()
    assert nfds() == before


def test_daemon_goes_away_while_attached(pyshared):
    d = pyshared
    before = nfds(d)
    conn = rdmad.connect(d.sock)
    prof = conn.attach("ingest")
    prof.mr_map("ring")[0:4] = b"kept"
    d.stop()
    # What this process holds is its own: released quietly.
    assert bytes(prof.mr_map("ring")[0:4]) == b"kept"
    prof.detach()
    conn.close()
    assert nfds(d) == before


def test_wait_for_a_profile_being_created(rdmad, run_dir):  # noqa: F811
    from conftest import free_port
    d = start(rdmad, run_dir, big_conf(run_dir, free_port()))
    from conftest import settle
    assert settle(lambda: creating(d) is not None, 60), d.log()
    before = nfds()
    with client.connect(d.sock) as conn:
        if creating(d) is not None:
            with pytest.raises(client.Error) as e:
                conn.attach("p")
            assert e.value.code == "not_ready"
        if creating(d) is not None:
            with pytest.raises(client.Error) as e:
                conn.attach("p", wait=0.001)
            assert e.value.code == "not_ready" and "timed out" in \
                e.value.message
        with conn.attach("p", wait=300) as prof:
            assert prof.mode == "local"
            assert prof.mr("small").length == 4096
    assert nfds() == before
    d.settle(120)


def uverbs_fd(ibdev):
    """A new command fd of ibdev, as the daemon would pass in shared
    mode (the daemon dups its context's)."""
    base = "/sys/class/infiniband_verbs"
    for u in os.listdir(base):
        if not u.startswith("uverbs"):
            continue  # abi_version
        try:
            with open(f"{base}/{u}/ibdev") as f:
                if f.read().strip() == ibdev:
                    return os.open(f"/dev/infiniband/{u}",
                                   os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            pass
    raise AssertionError(f"no uverbs device for {ibdev}")


class FakeDaemon:
    """A stand-in for rdmad that answers ATTACH with a shared-mode
    ATTACHED carrying a real command fd of rxe0 (which rdmad itself
    never sends on rxe: it cannot import), to take the client's shared
    mode as far as the device lets it. Records what it is sent."""

    def __init__(self, path, attached):
        self.attached = attached
        self.got = []
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.srv.bind(path)
        self.srv.listen(1)
        self.thread = threading.Thread(target=self.serve)
        self.thread.start()

    def send(self, c, mtype, mid, doc, fds=()):
        body = json.dumps(doc).encode()
        head = proto.HEADER.pack(proto.PROTO_MAGIC, 1, mtype, 0, len(fds),
                                 mid, len(body))
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                array.array("i", fds))] if fds else []
        c.sendmsg([head + body], anc)

    def serve(self):
        c, _ = self.srv.accept()
        with c:
            while data := c.recv(proto.PROTO_MAX_FRAME + 1):
                _, _, mtype, _, _, mid, _ = proto.HEADER.unpack_from(data)
                doc = json.loads(data[proto.PROTO_HDR_SIZE:])
                self.got.append((proto.type_name(mtype), doc))
                if mtype == proto.PROTO_HELLO:
                    self.send(c, proto.PROTO_WELCOME, mid,
                              {"version": 1, "server": "fake",
                               "server_version": "0"})
                elif mtype == proto.PROTO_ATTACH:
                    cmd = uverbs_fd("rxe0")
                    mem = os.memfd_create("m", os.MFD_CLOEXEC)
                    os.ftruncate(mem, MIB)
                    fds = [cmd, mem]
                    self.send(c, proto.PROTO_ATTACHED, mid, self.attached,
                              fds)
                    for fd in fds:
                        os.close(fd)
                elif mtype == proto.PROTO_DETACH:
                    self.send(c, proto.PROTO_DETACHED, mid, doc)

    def close(self):
        self.thread.join(30)
        self.srv.close()


SHARED_ATTACHED = {
    "profile": "p", "attachment": 7, "mode": "shared", "ibdev": "rxe0",
    "port": 1, "gid_index": 1, "import_capable": True, "cmd_fd": 0,
    "memory": [{"name": "m", "size": MIB, "backing": "memfd", "fd": 1}],
    "pd": [{"name": "a", "handle": 0}],
    "mr": [{"name": "r", "pd": "a", "memory": "m", "handle": 1,
            "lkey": 1, "rkey": 1, "length": MIB, "offset": 0, "iova": 0,
            "zero_based": True, "access": ["local_write"]}]}


@pytest.mark.parametrize("case", ["import", "malformed"])
def test_shared_mode_up_to_where_rxe_refuses(tmp_path, case):
    """The client's shared mode for real: it maps the memory and asks
    pyverbs to import the context from the command fd (Context(cmd_fd=),
    ibv_import_device), which rxe refuses; or it finds the ATTACHED
    malformed. Either way: an Error, every fd closed, the attachment
    given back."""
    doc = dict(SHARED_ATTACHED)
    if case == "malformed":
        doc["mr"] = [dict(doc["mr"][0], offset=MIB)]  # past the memory
    path = str(tmp_path / "fake.sock")
    before = nfds()  # the stand-in's sockets are gone when it is closed
    fake = FakeDaemon(path, doc)
    try:
        conn = rdmad.connect(path)
        with pytest.raises(rdmad.Error) as e:
            conn.attach("p", mode="shared")
        conn.close()
    finally:
        fake.close()
    if case == "import":
        assert e.value.code == "setup_failed", e.value
        assert "cannot import the context of rxe0" in e.value.message
        assert e.value.errno == errno.EOPNOTSUPP, e.value
    else:
        assert e.value.code == "protocol_error", e.value
        assert "offset and length" in e.value.message
    assert [t for t, _ in fake.got] == ["HELLO", "ATTACH", "DETACH"]
    assert fake.got[2][1] == {"attachment": 7}
    assert nfds() == before
