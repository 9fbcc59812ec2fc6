# SPDX-License-Identifier: MIT
"""Shared mode for real: unprivileged clients import the daemon's device
context, PD and MR by handle (ibv_import_device/pd/mr over the passed
cmd_fd) and work through the daemon's one registration.

Needs a device that imports: mlx5, or rxe with the test-only provider
(tests/rxe-import) that `tests/vm/run --import` loads; make check runs
these there, against the plain and the sanitized daemon. On stock rxe the
tests marked needs_import are deselected (conftest.py says so) and
test_auto_mode_picks_by_device checks local mode instead.

What is checked with tools of their own: the kernel's list of MRs (`rdma
resource show mr`), the daemon's fds, the bytes in the daemon's memfd."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (import_capable, kernel_mrs, memfd, rdma_res, rdmactl,
                      settle)
from rdmadproto import ATTACH, ATTACHED, DETACH, DETACHED, Client
from test_sharing import USER, as_user, shared  # noqa: F401 (a fixture)

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build"
MIB = 1 << 20

needs_import = pytest.mark.needs_import


def install_helper(d):
    """build/tests/shared_rdma where uid 1000 can run it ($ORIGIN/..)."""
    import shutil
    prog = d.code / "bin" / "shared_rdma"
    if not prog.exists():
        prog.parent.mkdir(mode=0o755, exist_ok=True)
        shutil.copy(BUILD / "librdmad.so", d.code / "librdmad.so.0")
        shutil.copy(BUILD / "tests" / "shared_rdma", prog)
    return str(prog)


def client(d, mode, *op, uid=USER, hold=False, peer=None):
    """The C client (shared_rdma) as uid, started: a Popen with pipes."""
    # The provider (tests/vm/run --import) goes with it, as it would in
    # the user's environment; nothing else of ours does.
    env = {"PATH": "/usr/bin:/bin",
           **{k: os.environ[k] for k in ("RDMAV_DRIVERS",)
              if k in os.environ}}
    if hold:
        env["HOLD"] = "1"
    if peer is not None:
        env["PEER_QPN"] = str(peer)
    return subprocess.Popen(
        [install_helper(d), d.sock, "ingest", mode, *map(str, op)],
        user=uid, group=uid, extra_groups=[], env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, cwd=str(d.code))


def run_client(d, mode, *op, **kw):
    p = client(d, mode, *op, **kw)
    out, _ = p.communicate(timeout=120)
    return p.returncode, out


def parse_ok(line):
    """'ok MODE lkey=L rkey=R iova=I' -> dict."""
    words = line.split()
    assert words and words[0] == "ok", line
    return {"mode": words[1],
            **{k: int(v) for k, v in (w.split("=") for w in words[2:])}}


def mr_doc(d, name="ring"):
    status, mr = d.get(f"/v1/profiles/ingest/mr/{name}")
    assert status == 200, mr
    return mr


def pattern(seed, n):
    """shared_rdma's pattern SEED, for n bytes."""
    out = bytearray(n)
    for i in range(n):
        x = (seed * 0x9e3779b97f4a7c15 + i) & (2**64 - 1)
        x ^= x >> 29
        x = (x * 0xbf58476d1ce4e5b9) & (2**64 - 1)
        out[i] = (x >> 32) & 0xff
    return bytes(out)


def daemon_fds(pid):
    """The daemon's fds but the MR tables it keeps for the attaches of a
    generation (memfds named rdmad-mr-table:PROFILE, PROTOCOL.md): a
    cache made at the first shared attach, not a leak."""
    out = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        out += not link.startswith("/memfd:rdmad-mr-table:")
    return out


def baseline(d):
    """What the daemon holds: fds, and its kernel objects by kind."""
    return (daemon_fds(d.pid),
            {k: len(rdma_res(k, d.pid)) for k in ("pd", "mr", "qp", "cq")})


def back_to(d, base, timeout=10):
    deadline = time.monotonic() + timeout
    while baseline(d) != base and time.monotonic() < deadline:
        time.sleep(0.1)
    assert baseline(d) == base
    status, sessions = d.get("/v1/sessions")
    assert sessions == [], sessions


@pytest.mark.both_providers
def test_auto_mode_picks_by_device(shared):
    """Auto is shared where the device imports and local on stock rxe,
    and ATTACHED, REST and rdmactl say which."""
    d = shared
    want = "shared" if import_capable() else "local"
    status, prof = d.get("/v1/profiles/ingest")
    assert prof["import_capable"] is (want == "shared"), prof
    c = Client(d.sock)
    t, doc, fds = c.call(ATTACH, {"profile": "ingest"})
    assert t == ATTACHED, doc
    try:
        assert doc["mode"] == want
        assert ("cmd_fd" in doc) is (want == "shared")
        status, sessions = d.get("/v1/sessions")
        mine = [s for s in sessions if s["pid"] == os.getpid()]
        assert mine[0]["attachments"][0]["mode"] == want
        out = rdmactl(d, "--json", "sessions")
        assert out.returncode == 0, out.stderr
        mine = [s for s in json.loads(out.stdout) if s["pid"] == os.getpid()]
        assert mine[0]["attachments"][0]["mode"] == want
        out = rdmactl(d, "sessions")
        assert want in out.stdout, out.stdout
    finally:
        for fd in fds:
            os.close(fd)
        t, _, _ = c.call(DETACH, {"attachment": doc["attachment"]})
        assert t == DETACHED
        c.close()


@needs_import
def test_c_clients_as_user_use_the_one_registration(shared):
    """uid 1000 imports context, PD and MR; its keys are the daemon's; the
    kernel holds that MR once; one client process RDMA-writes through it
    and another RDMA-reads the bytes back; they are in the daemon's
    memory."""
    d = shared
    base = baseline(d)
    mr = mr_doc(d)
    off, seed, n = 3 * MIB + 17, 7, 256 << 10
    w = client(d, "shared", "write", "ring", off, seed, n, hold=True)
    try:
        got = parse_ok(w.stdout.readline())
        assert got["mode"] == "shared"
        assert (got["lkey"], got["rkey"]) == (mr["lkey"], mr["rkey"])
        # One registration in the kernel, the daemon's: not a copy.
        rows = kernel_mrs(mr["lkey"])
        assert len(rows) == 1, rows
        assert rows[0]["rkey"] == mr["rkey"]
        assert len(rdma_res("mr", d.pid)) == base[1]["mr"]
        status, sessions = d.get("/v1/sessions")
        att = [s for s in sessions if s["pid"] == w.pid][0]
        assert att["uid"] == USER
        assert att["attachments"][0]["mode"] == "shared"
    finally:
        w.stdin.close()
        assert w.wait(60) == 0, w.stdout.read()
    rc, out = run_client(d, "shared", "read", "ring", off, seed, n)
    assert rc == 0, out
    path, _ = memfd(d.pid, "ring")
    with open(path, "rb") as f:
        f.seek(mr["offset"] + off)
        assert f.read(n) == pattern(seed, n)
    back_to(d, base)


@needs_import
def test_client_qp_writes_through_a_daemon_qp(shared):
    """A client QP on the imported PD, connected to the daemon's QP q0:
    the RDMA write lands in the daemon's MR through the daemon's QP."""
    d = shared
    mr = mr_doc(d)
    status, q = d.get("/v1/profiles/ingest/qp/q0")
    assert status == 200, q
    off, seed, n = 8 * MIB, 11, 64 << 10
    w = client(d, "shared", "write", "ring", off, seed, n, peer=q["qp_num"])
    try:
        line = w.stdout.readline()
        assert line.startswith("qpn="), line + w.stdout.read()
        qpn = int(line.split("=")[1])
        status, body = d.request("PATCH", "/v1/profiles/ingest/qp/q0",
                                 {"state": "rts",
                                  "path": {"dqpn": qpn,
                                           "dgid": "::ffff:192.0.2.1"}})
        assert status == 200, body
        w.stdin.write("go\n")
        w.stdin.flush()
        got = parse_ok(w.stdout.readline())
        assert (got["mode"], got["rkey"]) == ("shared", mr["rkey"])
    finally:
        w.stdin.close()
        assert w.wait(60) == 0, w.stdout.read()
    path, _ = memfd(d.pid, "ring")
    with open(path, "rb") as f:
        f.seek(mr["offset"] + off)
        assert f.read(n) == pattern(seed, n)


PYCLIENT = """
import json, sys
sys.path.insert(0, sys.argv[2])
import rdmad
from pyverbs.device import Context
from pyverbs.mr import MR
with rdmad.connect(sys.argv[1]) as conn:
    with conn.attach("ingest", mode="shared") as prof:
        mr = prof.mr("ring")
        assert isinstance(prof.context, Context) and isinstance(mr, MR)
        print(json.dumps({"mode": prof.mode, "lkey": mr.lkey,
                          "rkey": mr.rkey, "length": mr.length}))
"""


@needs_import
def test_python_client_as_user_imports(shared):
    import shutil
    d = shared
    mr = mr_doc(d)
    pkg = d.code / "py"
    if not pkg.exists():
        shutil.copytree(HERE.parents[1] / "client" / "python", pkg)
        for p in [pkg, *pkg.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    r = as_user(d, USER, PYCLIENT, str(pkg))
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)
    assert got["mode"] == "shared"
    assert (got["lkey"], got["rkey"]) == (mr["lkey"], mr["rkey"])
    assert got["length"] == mr["length"]
    assert len(kernel_mrs(mr["lkey"])) == 1


@needs_import
def test_killed_mid_transfer_leaves_nothing_behind(shared):
    d = shared
    base = baseline(d)
    mr = mr_doc(d)
    p = client(d, "shared", "stream", "ring")
    try:
        assert p.stdout.readline().strip() == "streaming"
        time.sleep(0.3)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    # What it made in the daemon's context (a CQ, QPs, an MR) outlived
    # it there: orphans, and with no session left the context retires
    # (test_shared_orphans.py): the kernel ends with the daemon's
    # objects only, the MR registered once.
    def only_the_daemons():
        # (QP 1 is the kernel's own GSI QP of the port.)
        qps = [q for q in rdma_res("qp")
               if q.get("ifname") == "rxe0" and q.get("lqpn", 0) > 1]
        return len(qps) == 1 and baseline(d) == base
    assert settle(only_the_daemons, 30), (rdma_res("qp"), baseline(d))
    now = mr_doc(d)
    assert len(kernel_mrs(now["lkey"])) == 1
    if now["lkey"] != mr["lkey"]:
        assert not kernel_mrs(mr["lkey"])
    status, prof = d.get("/v1/profiles/ingest")
    assert prof["state"] == "ready"
    rc, out = run_client(d, "shared", "write", "ring", 0, 3, 4096)
    assert rc == 0, out
    back_to(d, base)


@needs_import
def test_200_clients_attaching_in_a_loop(shared):
    d = shared
    base = baseline(d)
    procs = [client(d, "shared", "loop", 50) for _ in range(4)]
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0 and "attached 50" in out, out
    back_to(d, base)
    status, m = d.get("/v1/profiles/ingest")
    assert all(o["leases"] == 0 for o in m["objects"])


@needs_import
def test_reload_drains_an_imported_mr(shared):
    """A reload that removes an MR a client has imported keeps it (in the
    kernel, for the client's RDMA) until the client lets go."""
    d = shared
    mr = mr_doc(d)
    w = client(d, "shared", "write", "ring", 0, 5, 4096, hold=True)
    try:
        assert parse_ok(w.stdout.readline())["mode"] == "shared"
        text = d.conf.read_text()
        start = text.index('{ name = "ring"; pd = "main"')
        end = text.index("},", start) + 2
        d.conf.write_text(text[:start] + text[end:])
        status, body = d.request("POST", "/v1/reload")
        assert status == 200, body
        status, prof = d.get("/v1/profiles/ingest")
        drain = [o for o in prof["objects"]
                 if (o["kind"], o["name"]) == ("mr", "ring")]
        assert drain and drain[0]["state"] == "draining", prof
        assert len(kernel_mrs(mr["lkey"])) == 1
    finally:
        w.stdin.close()
        assert w.wait(60) == 0, w.stdout.read()
    deadline = time.monotonic() + 10
    while kernel_mrs(mr["lkey"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert kernel_mrs(mr["lkey"]) == []
    status, _ = d.get("/v1/profiles/ingest/mr/ring")
    assert status == 404


def rxe0(action):
    args = (["rdma", "link", "add", "rxe0", "type", "rxe", "netdev", "veth0"]
            if action == "add" else ["rdma", "link", "delete", "rxe0"])
    return subprocess.Popen(args, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


@needs_import
def test_device_removal_under_an_importer(shared):
    """rxe0 goes while a client holds an imported context: the profile
    goes pending; the kernel finishes the removal once the client lets
    go (rxe waits for every context); nothing of the daemon's is left;
    the device back, the profile is ready and shared again."""
    d = shared
    w = client(d, "shared", "write", "ring", 0, 9, 4096, hold=True)
    assert parse_ok(w.stdout.readline())["mode"] == "shared"
    gone = rxe0("delete")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, prof = d.get("/v1/profiles/ingest")
            if prof["state"] == "pending":
                break
            time.sleep(0.1)
        assert prof["state"] == "pending", prof
        w.stdin.close()
        assert w.wait(60) == 0, w.stdout.read()
        assert gone.wait(60) == 0, gone.stdout.read()
        assert not Path("/sys/class/infiniband/rxe0").exists()
        assert not [f for f in os.listdir(f"/proc/{d.pid}/fd")
                    if "uverbs" in os.readlink(f"/proc/{d.pid}/fd/{f}")]
    finally:
        if w.poll() is None:
            w.kill()
        gone.wait(60)
        if not Path("/sys/class/infiniband/rxe0").exists():
            assert rxe0("add").wait(60) == 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, prof = d.get("/v1/profiles/ingest")
        if prof["state"] == "ready":
            break
        time.sleep(0.2)
    assert prof["state"] == "ready", prof
    rc, out = run_client(d, "shared", "write", "ring", 0, 4, 4096)
    assert rc == 0 and parse_ok(out.splitlines()[0])["mode"] == "shared", \
        out
