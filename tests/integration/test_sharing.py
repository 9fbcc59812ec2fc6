# SPDX-License-Identifier: MIT
"""Sharing: clients attach over the control socket, get the profile's
memory (and, where the device can import, its context), and use the
daemon's registration. Identity from SO_PEERCRED; allow lists; leases;
bad frames; many clients. The kernel's view is the judge for objects."""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import urllib.request
import time
from pathlib import Path

import pytest

from conftest import HEALTH, ROOT, rdma_res
from rdmadproto import (ATTACH, ATTACHED, DETACH, DETACHED, ERROR, HELLO,
                        REPORT, REPLY, WELCOME, Client, frame)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "examples"))
MIB = 1 << 20
USER, OTHER = 1000, 1001
GROUP = 4242  # in no group database: only the kernel knows who holds it


def profile_conf(run):
    return f"""
daemon = {{ runtime_dir = "{run}"; control_group = "{USER}";
           http = {{ listen = [ "@LISTEN@" ]; token_file = "{run}/token"; }}; }};
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = (
  {{ name = "ingest"; device = "d0";
    allow = {{ uids = [ {USER} ]; groups = [ "{GROUP}" ]; }};
    memory = ( {{ name = "ring"; size = "64M"; }},
               {{ name = "side"; size = "1M"; }} );
    pd = ( {{ name = "main"; }} );
    mr = ( {{ name = "ring"; pd = "main"; memory = "ring"; zero_based = true;
             access = [ "local_write", "remote_write", "remote_read" ]; }},
           {{ name = "side"; pd = "main"; memory = "side";
             access = [ "local_write" ]; }} );
    cq = ( {{ name = "c"; }} );
    qp = ( {{ name = "q0"; pd = "main"; type = "rc"; send_cq = "c";
             recv_cq = "c"; access = [ "remote_write", "remote_read" ]; }} );
  }}
);
"""


@pytest.fixture
def shared(rdmad, tmp_path):
    """The daemon with the sharing profile; sock is its control socket."""
    run = Path("/run") / f"rdmad-test-{secrets.token_hex(4)}"
    run.mkdir(mode=0o755)
    (run / "token").write_text("rdmad-test-token-0123456789\n")
    (run / "token").chmod(0o600)
    from conftest import free_port
    port = free_port()
    conf = profile_conf(run).replace("@LISTEN@", f"127.0.0.1:{port}")
    d = rdmad(conf)
    d.token = "rdmad-test-token-0123456789"
    d.sock = str(run / "rdmad.sock")
    # Somewhere uid 1000 can read the client code.
    d.code = run / "code"
    d.code.mkdir(mode=0o755)
    (d.code / "rdmadproto.py").write_text((HERE / "rdmadproto.py").read_text())
    yield d
    d.stop()
    subprocess.run(["rm", "-rf", str(run)])


def as_user(d, uid, script, *args, timeout=60, groups=()):
    """Run python code as uid (primary group uid, and groups)."""
    path = d.code / f"client-{secrets.token_hex(4)}.py"
    path.write_text(textwrap.dedent(script))
    path.chmod(0o644)
    return subprocess.run([sys.executable, str(path), d.sock, *args],
                          user=uid, group=uid, extra_groups=list(groups),
                          cwd=str(d.code), capture_output=True, text=True,
                          timeout=timeout)


READER = """
import json, mmap, os, sys
from rdmadproto import *
c = Client(sys.argv[1])
fds_before = len(os.listdir("/proc/self/fd"))
t, doc, fds = c.call(ATTACH, {"profile": "ingest"})
if t != ATTACHED:
    print(json.dumps({"type": t, "doc": doc, "fds": len(fds),
                      "fds_before": fds_before,
                      "fds_after": len(os.listdir("/proc/self/fd"))}))
    sys.exit(3)
mr = [m for m in doc["mr"] if m["name"] == "ring"][0]
mem = [m for m in doc["memory"] if m["name"] == mr["memory"]][0]
buf = mmap.mmap(fds[mem["fd"]], mem["size"])
off = mr["offset"] + int(sys.argv[2])
print(json.dumps({"doc": doc, "bytes": buf[off:off + int(sys.argv[3])].hex()}))
if len(sys.argv) > 4:
    data = bytes.fromhex(sys.argv[4])
    buf[off:off + len(data)] = data
buf.close()
for fd in fds:
    os.close(fd)
t, _, _ = c.call(DETACH, {"attachment": doc["attachment"]})
assert t == DETACHED
"""


def qp_info(d, name="q0"):
    status, q = d.get(f"/v1/profiles/ingest/qp/{name}")
    assert status == 200
    return q


def connect_peer(d, peer):
    q = qp_info(d)
    status, body = d.request("PATCH", "/v1/profiles/ingest/qp/q0",
                             {"state": "rts",
                              "path": {"dqpn": peer.qp_num,
                                       "dgid": "::ffff:192.0.2.1"}})
    assert status == 200, body
    assert body["qp_state"] == "rts" and body["dqpn"] == peer.qp_num
    peer.connect(q["qp_num"])


def test_unprivileged_user_sees_what_a_peer_wrote(shared):
    from peer import Peer
    d = shared
    status, mr = d.get("/v1/profiles/ingest/mr/ring")
    assert mr["length"] == 64 * MIB and mr["iova"] == 0
    peer = Peer()
    try:
        connect_peer(d, peer)
        msg = b"written by a remote peer into the daemon's MR"
        at = 48 * MIB + 123                     # deep into the 64 MiB
        peer.write(msg, mr["rkey"], mr["iova"] + at)
        r = as_user(d, USER, READER, str(at), str(len(msg)),
                    b"written back by uid 1000".hex())
        assert r.returncode == 0, r.stderr + r.stdout
        out = json.loads(r.stdout)
        assert bytes.fromhex(out["bytes"]) == msg
        # rxe cannot import: local mode, memory only, no context fd.
        assert out["doc"]["mode"] == "local"
        assert "cmd_fd" not in out["doc"]
        assert out["doc"]["import_capable"] is False
        # The reverse: the client wrote through its mapping, the peer
        # RDMA-reads it from the daemon's MR.
        back = peer.read(len(b"written back by uid 1000"), mr["rkey"],
                         mr["iova"] + at)
        assert back == b"written back by uid 1000"
    finally:
        peer.close()


def test_user_not_on_the_list_gets_nothing(shared):
    # Outside the socket's group: cannot even connect.
    r = as_user(shared, OTHER, READER, "0", "1")
    assert r.returncode == 1 and "PermissionError" in r.stderr
    # In the socket's group but not on the profile's allow list.
    r = as_user(shared, OTHER, READER, "0", "1", groups=[USER])
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["type"] == ERROR
    assert out["doc"]["error"]["code"] == "forbidden"
    assert out["fds"] == 0
    assert out["fds_after"] == out["fds_before"]


def test_supplementary_group_admits(shared):
    """Group membership is what the peer process holds (SO_PEERGROUPS),
    not what a directory says: no lookup when a client comes."""
    r = as_user(shared, OTHER, READER, "0", "1", groups=[USER, GROUP])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["doc"]["profile"] == "ingest" and "bytes" in out, out


def test_sessions_and_kill(shared):
    d = shared
    hold = """
import sys, time
from rdmadproto import *
c = Client(sys.argv[1])
t, doc, fds = c.call(ATTACH, {"profile": "ingest"})
assert t == ATTACHED
print("attached", flush=True)
time.sleep(600)
"""
    path = d.code / "hold.py"
    path.write_text(textwrap.dedent(hold))
    path.chmod(0o644)
    p = subprocess.Popen([sys.executable, str(path), d.sock], user=USER,
                         group=USER, extra_groups=[], cwd=str(d.code),
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "attached"
        status, sessions = d.get("/v1/sessions")
        assert status == 200
        mine = [s for s in sessions if s["pid"] == p.pid]
        assert len(mine) == 1 and mine[0]["uid"] == USER
        att = mine[0]["attachments"][0]
        assert att["profile"] == "ingest" and att["mode"] == "local"
        assert att["leases"] == 5   # 2 memory, 1 pd, 2 mr
        status, prof = d.get("/v1/profiles/ingest")
        leased = {o["name"] for o in prof["objects"] if o["leases"]}
        assert {"ring", "side", "main"} <= leased
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        status, sessions = d.get("/v1/sessions")
        if not [s for s in sessions if s["pid"] == p.pid]:
            break
        time.sleep(0.05)
    assert not [s for s in sessions if s["pid"] == p.pid]
    status, prof = d.get("/v1/profiles/ingest")
    assert all(o["leases"] == 0 for o in prof["objects"])


def test_reload_drains_a_leased_mr(shared):
    d = shared
    c = Client(d.sock)
    t, doc, fds = c.call(ATTACH, {"profile": "ingest"})
    assert t == ATTACHED
    for fd in fds:
        os.close(fd)
    side = [m for m in rdma_res("mr", d.pid) if m["mrlen"] == MIB]
    assert len(side) == 1
    text = d.conf.read_text().replace(
        """,
           { name = "side"; pd = "main"; memory = "side";
             access = [ "local_write" ]; } );""", " );")
    assert text != d.conf.read_text()
    d.conf.write_text(text)
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    assert {"profile": "ingest", "kind": "mr", "name": "side",
            "action": "remove"} in body["changes"]
    status, prof = d.get("/v1/profiles/ingest")
    drain = [o for o in prof["objects"] if o["name"] == "side" and
             o["kind"] == "mr"]
    assert drain and drain[0]["state"] == "draining"
    # Still in the kernel while the client holds it...
    assert [m for m in rdma_res("mr", d.pid) if m["mrlen"] == MIB]
    t, _, _ = c.call(DETACH, {"attachment": doc["attachment"]})
    assert t == DETACHED
    # ... and gone with its last lease.
    assert not [m for m in rdma_res("mr", d.pid) if m["mrlen"] == MIB]
    status, prof = d.get("/v1/profiles/ingest")
    assert not [o for o in prof["objects"] if o["state"] == "draining"]
    c.close()


def attach_doc(c):
    """ATTACH ingest; the ATTACHED document (its fds closed)."""
    t, doc, fds = c.call(ATTACH, {"profile": "ingest", "mode": "local"})
    assert t == ATTACHED, doc
    assert len(fds) == len(doc["memory"])
    for fd in fds:
        os.close(fd)
    return doc


def rest_mr(d, name):
    status, mr = d.get(f"/v1/profiles/ingest/mr/{name}")
    assert status == 200, mr
    return {k: mr[k] for k in ("handle", "lkey", "rkey", "length", "iova")}


def test_attached_says_what_clients_read_and_no_more(shared):
    """ATTACHED lists only the kinds the profile has ready (an absent
    list is an empty one, proto/PROTOCOL.md), and its objects carry no
    REST-only field (kind, state, leases): every attach parses it."""
    c = Client(shared.sock)
    doc = attach_doc(c)
    # memory, pd, mr and one ready RC QP; no XRC, SRQ, DM, implicit MR.
    assert set(doc) - {"import_error"} == {
        "attachment", "profile", "mode", "ibdev", "port", "gid_index",
        "import_capable", "memory", "pd", "mr", "qp"}, doc
    assert {m["name"] for m in doc["memory"]} == {"ring", "side"}
    assert {m["name"] for m in doc["mr"]} == {"ring", "side"}
    assert [q["name"] for q in doc["qp"]] == ["q0"]
    for o in doc["memory"] + doc["mr"]:
        assert not {"kind", "state", "leases"} & set(o), o
    assert {"size", "backing", "fd"} <= set(doc["memory"][0])
    assert {"pd", "memory", "handle", "lkey", "rkey", "length", "offset",
            "iova", "zero_based", "access"} <= set(doc["mr"][0])
    t, _, _ = c.call(DETACH, {"attachment": doc["attachment"]})
    assert t == DETACHED
    c.close()


def test_attached_follows_the_objects(shared):
    """ATTACHED is rendered once and sent again while the objects stay
    as they are: two attaches differ only in their attachment, and after
    a reload that re-creates an MR the next one tells the new MR."""
    d = shared
    c = Client(d.sock)
    first, second = attach_doc(c), attach_doc(c)
    assert second["attachment"] > first["attachment"]
    assert {k: v for k, v in first.items() if k != "attachment"} == \
        {k: v for k, v in second.items() if k != "attachment"}
    for name in ("ring", "side"):
        mr = [m for m in first["mr"] if m["name"] == name][0]
        assert {k: mr[k] for k in rest_mr(d, name)} == rest_mr(d, name)
    for doc in (first, second):
        t, _, _ = c.call(DETACH, {"attachment": doc["attachment"]})
        assert t == DETACHED
    before = rest_mr(d, "side")
    text = d.conf.read_text().replace(
        """memory = "side";
             access = [ "local_write" ]; }""",
        """memory = "side";
             access = [ "local_write", "remote_read" ]; }""")
    assert text != d.conf.read_text()
    d.conf.write_text(text)
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    assert {"profile": "ingest", "kind": "mr", "name": "side",
            "action": "recreate"} in body["changes"], body
    d.settle()
    after = rest_mr(d, "side")
    assert after != before
    third = attach_doc(c)
    side = [m for m in third["mr"] if m["name"] == "side"][0]
    assert {k: side[k] for k in after} == after
    assert side["access"] == ["local_write", "remote_read"]
    ring = [m for m in third["mr"] if m["name"] == "ring"][0]
    assert {k: ring[k] for k in rest_mr(d, "ring")} == rest_mr(d, "ring")
    c.close()


BAD_FRAMES = {
    "garbage": b"\x00" * 7,
    "bad_magic": frame(HELLO, {"versions": [1, 1]}, magic=0x12345678),
    "wrong_version": frame(HELLO, {"versions": [1, 1]}, version=9),
    "length_lies": frame(HELLO, {"versions": [1, 1]})[:-3],
    "not_json": frame(HELLO, b"{nope"),
    "too_deep": frame(HELLO, b"[" * 40 + b"]" * 40),
    "oversized": frame(HELLO, b"{\"x\":\"" + b"a" * (70 * 1024) + b"\"}"),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_bad_frames_get_an_error_and_the_daemon_serves_on(shared, name):
    d = shared
    c = Client(d.sock, hello=False)
    c.send(0, None, raw=BAD_FRAMES[name])
    t, doc, fds = c.recv()
    assert t == ERROR, doc
    assert doc["error"]["code"] and doc["error"]["message"]
    assert fds == []
    c.close()
    ok = Client(d.sock)
    status, body = ok.request("GET", "/v1/health")
    assert status == 200 and body == HEALTH
    ok.close()


def test_unexpected_fds_are_closed(shared):
    d = shared
    c = Client(d.sock)
    r, w = os.pipe()
    c.send(REPORT, {"attachment": 1}, fds=[w])
    os.close(w)
    t, doc, _ = c.recv()
    assert t == ERROR
    # The daemon holds no copy of the pipe's write end: EOF on read.
    assert os.read(r, 1) == b""
    os.close(r)


def test_unsupported_protocol_version(shared):
    c = Client(shared.sock, hello=False)
    t, doc, _ = c.call(HELLO, {"versions": [7, 9]})
    assert t == ERROR
    assert doc["error"]["code"] == "unsupported_version"


def test_control_requests_on_the_socket(shared):
    d = shared
    c = Client(d.sock)
    status, body = c.request("GET", "/v1/profiles/ingest/mr/ring")
    rest_status, rest = d.get("/v1/profiles/ingest/mr/ring")
    assert status == 200 and body == rest
    status, body = c.request("POST", "/v1/reload", {})
    assert status == 200        # root
    c.close()
    r = as_user(d, USER, """
import json, sys
from rdmadproto import *
c = Client(sys.argv[1])
print(json.dumps(c.request("POST", "/v1/reload", {})))
""")
    status, body = json.loads(r.stdout)
    assert status == 403 and body["error"]["code"] == "forbidden"


def test_many_clients_leave_nothing_behind(shared):
    d = shared
    fds0 = len(os.listdir(f"/proc/{d.pid}/fd"))
    kernel0 = {k: len(rdma_res(k, d.pid)) for k in ("pd", "mr", "qp", "cq")}
    code = """
import os, sys, threading
from rdmadproto import *
errors = []
def one():
    try:
        c = Client(sys.argv[1])
        t, doc, fds = c.call(ATTACH, {"profile": "ingest"})
        assert t == ATTACHED, doc
        for fd in fds:
            os.close(fd)
        t, _, _ = c.call(DETACH, {"attachment": doc["attachment"]})
        assert t == DETACHED
        c.close()
    except Exception as e:
        errors.append(repr(e))
ts = [threading.Thread(target=one) for _ in range(200)]
for t in ts: t.start()
for t in ts: t.join()
print(len(errors), errors[:3])
sys.exit(1 if errors else 0)
"""
    r = as_user(d, USER, code, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    for _ in range(50):
        if len(os.listdir(f"/proc/{d.pid}/fd")) == fds0:
            break
        time.sleep(0.1)
    assert len(os.listdir(f"/proc/{d.pid}/fd")) == fds0
    assert {k: len(rdma_res(k, d.pid))
            for k in ("pd", "mr", "qp", "cq")} == kernel0
    status, sessions = d.get("/v1/sessions")
    assert sessions == []


def test_shared_mode_is_refused_where_import_is_not(shared):
    d = shared
    status, prof = d.get("/v1/profiles/ingest")
    assert prof["import_capable"] is False
    assert prof["import_error"] == "Operation not supported"  # EOPNOTSUPP
    c = Client(d.sock)
    t, doc, fds = c.call(ATTACH, {"profile": "ingest", "mode": "shared"})
    assert t == ERROR and fds == []
    assert doc["error"]["code"] == "not_supported"
    assert "local or auto" in doc["error"]["message"]
    c.close()


def install_attach(d):
    """build/examples/attach where uid 1000 can run it ($ORIGIN/.. rpath)."""
    import shutil
    root = HERE.parents[1] / "build"
    (d.code / "bin").mkdir(mode=0o755, exist_ok=True)
    shutil.copy(root / "examples" / "attach", d.code / "bin" / "attach")
    shutil.copy(root / "librdmad.so", d.code / "librdmad.so.0")
    return str(d.code / "bin" / "attach")


def run_limited(cmd, memlock, uid=USER):
    import resource
    old = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (memlock, memlock))
    try:
        return subprocess.run(cmd, user=uid, group=uid, extra_groups=[],
                              capture_output=True, text=True, timeout=120)
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, old)


def test_librdmad_local_mode_as_user(shared):
    from peer import Peer
    d = shared
    attach = install_attach(d)
    status, mr = d.get("/v1/profiles/ingest/mr/ring")
    peer = Peer()
    try:
        connect_peer(d, peer)
        peer.write(b"RDMAD-PEER-BYTES", mr["rkey"], mr["iova"])
    finally:
        peer.close()
    # Local mode pins 65 MiB in the client: too little memlock is an
    # error that names the limit needed.
    r = run_limited([attach, "-s", d.sock, "ingest"], 8 << 20)
    assert r.returncode != 0
    assert "RLIMIT_MEMLOCK" in r.stderr and "65 MiB" in r.stderr, r.stderr
    r = run_limited([attach, "-s", d.sock, "ingest"], 128 << 20)
    assert r.returncode == 0, r.stderr
    assert "local" in r.stdout
    assert "RDMAD-PEER-BYTES".encode().hex()[:16] in \
        r.stdout.replace(" ", "").lower() or "RDMAD-PEER-BYTES" in r.stdout, \
        r.stdout
    status, sessions = d.get("/v1/sessions")
    assert sessions == []


def test_rdmactl_over_the_socket(shared):
    d = shared
    exe = str(HERE.parents[1] / "build" / "rdmactl")
    r = subprocess.run([exe, "--socket", d.sock, "--json", "show", "ingest"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    status, doc = d.get("/v1/profiles/ingest")
    assert json.loads(r.stdout) == doc
    r = subprocess.run([exe, "--socket", d.sock, "sessions"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("SESSION")
    r = subprocess.run([exe, "--socket", d.sock, "reload"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr        # root may


def test_rdmactl_qp_state_change(shared):
    from peer import Peer
    d = shared
    exe = str(HERE.parents[1] / "build" / "rdmactl")
    status, mr = d.get("/v1/profiles/ingest/mr/ring")
    peer = Peer()
    try:
        r = subprocess.run([exe, "--socket", d.sock, "qp", "ingest", "q0",
                            "--state", "rts", f"dqpn={peer.qp_num}",
                            "timeout=14"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "qp_state=rts" in r.stdout
        q = qp_info(d)
        assert q["dqpn"] == peer.qp_num
        # The profile's own GID, in the one form GIDs are written in.
        assert q["dgid"] == "0000:0000:0000:0000:0000:ffff:c000:0201"
        peer.connect(q["qp_num"])
        peer.write(b"via rdmactl qp", mr["rkey"], mr["iova"] + 64)
        assert peer.read(14, mr["rkey"], mr["iova"] + 64) == b"via rdmactl qp"
    finally:
        peer.close()
    r = subprocess.run([exe, "--socket", d.sock, "qp", "ingest", "q0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 64 and "--state" in r.stderr
    r = subprocess.run([exe, "--socket", d.sock, "qp", "ingest", "q0",
                        "--state", "rts", "timeout=99"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "timeout" in r.stderr


def test_metrics(shared):
    d = shared
    c = Client(d.sock)
    t, doc, fds = c.call(ATTACH, {"profile": "ingest"})
    assert t == ATTACHED
    for fd in fds:
        os.close(fd)
    with urllib.request.urlopen(d.url + "/metrics", timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines()
                 if line and not line.startswith("#"))
    assert lines["rdmad_up"] == "1"
    assert lines['rdmad_objects{profile="ingest",kind="mr",state="ready"}'] \
        == "2"
    assert lines['rdmad_registered_bytes{profile="ingest"}'] == \
        str(65 * MIB)
    assert lines["rdmad_sessions"] == "1"
    assert lines["rdmad_attachments"] == "1"
    assert lines["rdmad_attach_seconds_count"] == "1"
    assert lines['rdmad_attach_seconds_bucket{le="+Inf"}'] == "1"
    # The port's own counters, from sysfs.
    assert 'rdmad_port_stat_total{device="rxe0",port="1",' \
        'group="hw_counters",counter="rcvd_pkts"}' in lines
    # Prometheus' own linter accepts the whole page.
    promtool = shutil.which("promtool") or \
        ROOT / ".cache/tools/usr/bin/promtool"
    r = subprocess.run([str(promtool), "check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    c.close()


def test_removing_a_leased_profile_drains_it(shared):
    """A reload that removes a whole profile (here: every profile, so it
    needs force) keeps what sessions hold until they let go."""
    d = shared
    c = Client(d.sock)
    t, doc, fds = c.call(ATTACH, {"profile": "ingest"})
    assert t == ATTACHED
    for fd in fds:
        os.close(fd)
    held = len(rdma_res("mr", d.pid))
    assert held == 2
    text = d.conf.read_text()
    d.conf.write_text(text.split("\ndevices")[0] + "\n")
    status, body = d.request("POST", "/v1/reload")
    assert status == 409, body
    status, body = d.request("POST", "/v1/reload", {"force": True})
    assert status == 200, body
    assert {"profile": "ingest", "kind": "profile",
            "action": "remove"} in body["changes"]
    status, _ = d.get("/v1/profiles/ingest")
    assert status == 404
    # The leased MRs and their PD stay in the kernel while held; the
    # unleased CQ and QP went.
    assert len(rdma_res("mr", d.pid)) == held
    assert len(rdma_res("pd", d.pid)) == 1
    assert not rdma_res("qp", d.pid) and not rdma_res("cq", d.pid)
    # The session is told, before the answer to what it asks next.
    t, _, _ = c.call(DETACH, {"attachment": doc["attachment"]})
    assert t == DETACHED
    assert c.events == [{"event": "profile_removed", "profile": "ingest",
                         "attachment": doc["attachment"]}]
    assert not rdma_res("mr", d.pid) and not rdma_res("pd", d.pid)
    c.close()
