# SPDX-License-Identifier: MIT
"""Orphans in shared mode: a client imports the profile's context, makes
a CQ, a QP and an MR of its own in it, and is SIGKILLed. Its objects stay
in the daemon's context (the kernel ties them to the context, which the
daemon holds). The daemon destroys them by handle once their maker is
gone (issue 37, item 3), with another session attached or without: the
kernel's counts (`rdma resource show`) return to what they were, the
context is not retired and the profile's MR keeps its handle and keys.
A live client's objects are never destroyed. Needs a device that imports
(mlx5, or rxe with tests/vm/run --import)."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import SHARED_DEV as DEV, free_port
from pyclient_setup import one_mr_conf
from rdmadproto import ATTACH, ATTACHED, DETACH, DETACHED, REPLY, Client

ROOT = Path(__file__).resolve().parents[2]
PORT = None

pytestmark = pytest.mark.needs_import


@pytest.fixture
def daemon(rdmad, tmp_path):
    global PORT
    PORT = free_port()
    run = tmp_path / "run"
    d = rdmad(one_mr_conf(run, PORT, DEV, "16M",
                          more='  cq = ( { name = "c"; } );\n'))
    yield str(run / "rdmad.sock")
    assert d.stop() == 0


def get(path):
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}" + path) as r:
        body = r.read()
    return body.decode() if path == "/metrics" else json.loads(body)


def metric(name, **labels):
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(rf"^{name}\{{{re.escape(want)}\}} (\S+)$" if labels
                  else rf"^{name} (\S+)$", get("/metrics"), re.M)
    return float(m.group(1)) if m else None


def wait_for(pred, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    return pred()


def kernel_rows(kind):
    out = subprocess.run(["rdma", "-j", "resource", "show", kind],
                         check=True, capture_output=True, text=True).stdout
    return [r for r in (json.loads(out) if out.strip() else [])
            if r.get("ifname") == DEV]


def kernel_qpns():
    return {r["lqpn"] for r in kernel_rows("qp")}


def kernel_counts():
    """How many objects of each kind the kernel has on the device."""
    return {k: len(kernel_rows(k)) for k in ("pd", "cq", "qp", "mr")}


LEAKER = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
from rdmadproto import *
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.cq import CQ
from pyverbs.qp import QP, QPInitAttr, QPCap
import pyverbs.enums as e
c = Client(sys.argv[1])
t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared"})
assert t == ATTACHED and doc["mode"] == "shared", doc
ctx = Context(cmd_fd=fds[doc["cmd_fd"]])            # the daemon's context
pd = PD(ctx, handle=doc["pd"][0]["handle"])         # the daemon's PD
cq = CQ(ctx, 8)                                     # ours, in its context
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=4, max_recv_wr=4)))
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
print(json.dumps({"qp_num": qp.qp_num, "lkey": mr.lkey}), flush=True)
time.sleep(600)
"""


def start_leaker(daemon, tmp_path):
    script = tmp_path / "leaker.py"
    script.write_text(textwrap.dedent(LEAKER))
    leaker = subprocess.Popen(
        [sys.executable, str(script), daemon, str(ROOT / "tests" /
                                                  "integration")],
        stdout=subprocess.PIPE, text=True)
    return leaker, json.loads(leaker.stdout.readline())


def kill(p):
    p.send_signal(signal.SIGKILL)
    p.wait()  # reaped: no zombie the kernel still names


@pytest.mark.parametrize("holder", [True, False],
                         ids=["another session attached", "alone"])
def test_dead_clients_leftovers_are_reclaimed_without_retiring(
        daemon, tmp_path, holder):
    assert wait_for(lambda: get("/v1/profiles/p/orphans")["scanned"])
    assert get("/v1/profiles/p/orphans")["orphans"] == []
    ctxn = get("/v1/profiles/p/orphans")["ctxn"]
    mr_before = get("/v1/profiles/p/mr/r")
    base = kernel_counts()

    if holder:
        h = Client(daemon)
        t, hdoc, hfds = h.call(ATTACH, {"profile": "p", "mode": "shared"})
        assert t == ATTACHED, hdoc
    leaker, made = start_leaker(daemon, tmp_path)
    try:
        # While it lives, its objects are a client's: never destroyed,
        # however long they stay.
        view = wait_for(lambda: (lambda d: d if d["objects"]["client"]["qp"]
                                 == 1 else None)(
            get("/v1/profiles/p/orphans")))
        assert view, get("/v1/profiles/p/orphans")
        time.sleep(4)  # two reclaim delays
        assert made["qp_num"] in kernel_qpns()
        assert metric("rdmad_orphans_reclaimed_total", profile="p",
                      kind="qp") == 0
    finally:
        kill(leaker)

    # Gone: its CQ, QP and MR are destroyed by handle, the kernel's
    # counts are back where they were, with or without the holder.
    assert wait_for(lambda: made["qp_num"] not in kernel_qpns(), 30), \
        get("/v1/profiles/p/orphans")
    assert wait_for(lambda: kernel_counts() == base, 15), \
        (kernel_counts(), base)
    for kind in ("cq", "qp", "mr"):
        assert wait_for(lambda: metric("rdmad_orphans_reclaimed_total",
                                       profile="p", kind=kind) == 1), kind
    assert metric("rdmad_context_retirements_total") == 0
    # The profile's own objects were not touched: same context, same MR.
    after = wait_for(lambda: (lambda d: d if d["scanned"] and
                              d["orphans"] == [] else None)(
        get("/v1/profiles/p/orphans")))
    assert after and after["ctxn"] == ctxn, get("/v1/profiles/p/orphans")
    mr_after = get("/v1/profiles/p/mr/r")
    for k in ("handle", "lkey", "rkey"):
        assert mr_after[k] == mr_before[k], (k, mr_before, mr_after)
    assert get("/v1/profiles/p")["state"] == "ready"
    for kind in ("cq", "qp", "mr"):
        assert wait_for(lambda: metric("rdmad_orphan_objects", profile="p",
                                       device=DEV, kind=kind) == 0)
    if holder:
        sessions = get("/v1/sessions")
        assert [a["attachment"] for s in sessions
                for a in s["attachments"]] == [hdoc["attachment"]]
        for fd in hfds:
            os.close(fd)
        h.close()


def test_a_live_clients_objects_keep_a_dead_ones_of_their_kind(
        daemon, tmp_path):
    """While a live client has QPs in the context, a dead client's QPs
    cannot be told from them: all stay. Once the last maker is gone,
    both go."""
    assert wait_for(lambda: get("/v1/profiles/p/orphans")["scanned"])
    base = kernel_counts()
    live, lmade = start_leaker(daemon, tmp_path)
    dead, dmade = start_leaker(daemon, tmp_path)
    kill(dead)
    try:
        view = wait_for(lambda: (lambda d: d if d["objects"]["orphan"]["qp"]
                                 == 1 else None)(
            get("/v1/profiles/p/orphans")))
        assert view, get("/v1/profiles/p/orphans")
        time.sleep(5)
        qpns = kernel_qpns()
        assert lmade["qp_num"] in qpns and dmade["qp_num"] in qpns
        assert metric("rdmad_context_retirements_total") == 0
    finally:
        kill(live)
    assert wait_for(lambda: kernel_counts() == base, 30), \
        (kernel_counts(), base)
    assert metric("rdmad_orphans_reclaimed_total", profile="p",
                  kind="qp") == 2
    assert metric("rdmad_context_retirements_total") == 0


# ---- MRs matched to their makers (issue 44, item 3) ----

WORKER = """
import json, os, sys, time, types
sys.path.insert(0, sys.argv[4])
from pyclient_setup import rc_to_rts
import rdmad
from rdmadproto import ATTACH, ATTACHED, Client
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

sock, size, slot, stack = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                           sys.argv[5])
if stack == "package":           # the Python client (client/python)
    conn = rdmad.connect(sock)
    prof = conn.attach("p", mode="shared")
    ctx, pd, r = prof.context, prof.pd("a"), prof.mr("r")
    port, gid_index, r_iova = prof.port, prof.gid_index, prof.mr_iova("r")
else:                            # the wire protocol and raw pyverbs
    c = Client(sock)
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared"})
    assert t == ATTACHED and doc["mode"] == "shared", doc
    ctx = Context(cmd_fd=fds[doc["cmd_fd"]])
    pd = PD(ctx, handle=doc["pd"][0]["handle"])
    (rd,) = [m for m in doc["mr"] if m["name"] == "r"]
    r = MR(pd, handle=rd["handle"])
    port, gid_index, r_iova = doc["port"], doc["gid_index"], rd["iova"]
where = types.SimpleNamespace(context=ctx, port=port, gid_index=gid_index)
acc = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | \\
    e.IBV_ACCESS_REMOTE_READ
cq = CQ(ctx, 16)
cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
       for _ in range(2)]
for a, b in ((qps[0], qps[1]), (qps[1], qps[0])):
    rc_to_rts(where, a, b.qp_num, e.IBV_ACCESS_REMOTE_WRITE |
              e.IBV_ACCESS_REMOTE_READ)
mr = MR(pd, size, acc)          # ours, in the daemon's context


def rdma(opcode, lkey, laddr, rkey, raddr, n):
    wr = SendWR(opcode=opcode, num_sge=1, sg=[SGE(laddr, n, lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(rkey, raddr)
    qps[0].post_send(wr)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        k, wcs = cq.poll()
        if k:
            assert wcs[0].status == e.IBV_WC_SUCCESS, wcs[0].status
            return
    raise AssertionError("no completion")


print(json.dumps({"lkey": mr.lkey, "rkey": mr.rkey, "length": size}),
      flush=True)
for line in sys.stdin:
    # Our own MR, one half written into the other and read back; and
    # the profile's MR r, at our slot.
    data = os.urandom(4096)
    mr.write(data, len(data))
    rdma(e.IBV_WR_RDMA_WRITE, mr.lkey, mr.buf, mr.rkey, mr.buf + size // 2,
         4096)
    rdma(e.IBV_WR_RDMA_WRITE, mr.lkey, mr.buf, r.rkey, r_iova + slot * 4096,
         4096)
    rdma(e.IBV_WR_RDMA_READ, mr.lkey, mr.buf + 4096, r.rkey,
         r_iova + slot * 4096, 4096)
    ok = (mr.read(4096, size // 2) == data and
          mr.read(4096, 4096) == data)
    print("ok" if ok else "bad", flush=True)
"""


class Worker:
    def __init__(self, daemon, tmp_path, slot, size, stack):
        script = tmp_path / "worker.py"
        if not script.exists():
            script.write_text(textwrap.dedent(WORKER))
        self.slot = slot
        self.proc = subprocess.Popen(
            [sys.executable, str(script), daemon, str(size), str(slot),
             str(ROOT / "tests" / "integration"), stack],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.made = None

    def ready(self):
        """Wait until it has made its objects (all start at once)."""
        self.made = json.loads(self.proc.stdout.readline())
        return self

    def moves_data(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip() == "ok"


def kernel_mr_lkeys():
    return {int(r["lkey"], 16) if isinstance(r["lkey"], str) else r["lkey"]
            for r in kernel_rows("mr") if "lkey" in r}


def test_each_dead_clients_mr_goes_while_its_neighbours_live(daemon,
                                                             tmp_path):
    """Eight clients of one profile, each with an MR of its own (of its
    own size), a CQ and QPs; SIGKILLed one at a time: each one's MR is
    gone from the kernel within 10 s, while every live one's stays and
    still carries RDMA writes and reads (into its MR and the profile's);
    the profile's MR keeps its handle and keys."""
    assert wait_for(lambda: get("/v1/profiles/p/orphans")["scanned"])
    r_before = get("/v1/profiles/p/mr/r")
    base = kernel_counts()
    workers = [Worker(daemon, tmp_path, i, (i + 1) * 256 * 1024,
                      "package" if i % 2 else "wire") for i in range(8)]
    try:
        for w in workers:
            w.ready()
        lkeys = kernel_mr_lkeys()
        for w in workers:
            assert w.made["lkey"] in lkeys
            assert w.moves_data()
        # A scan has seen each MR with its maker alive (a GET of an
        # older view asks for one).
        # (Asserted after the kills: what matters first is that they go.)
        att = wait_for(lambda: (lambda a: a if a.get("mrs_live") == 8
                                else None)(
            get("/v1/profiles/p/orphans").get("attribution", {})))
        for i, w in enumerate(workers):
            kill(w.proc)
            t0 = time.monotonic()
            gone = wait_for(
                lambda: w.made["lkey"] not in kernel_mr_lkeys(), 10)
            took = time.monotonic() - t0
            assert gone, (i, get("/v1/profiles/p/orphans"))
            assert took < 10, took
            lkeys = kernel_mr_lkeys()
            for v in workers[i + 1:]:
                assert v.made["lkey"] in lkeys, (i, v.slot)
                assert v.moves_data(), (i, v.slot)
            # Nothing of the profile's own was touched.
            r_now = get("/v1/profiles/p/mr/r")
            assert all(r_now[k] == r_before[k]
                       for k in ("handle", "lkey", "rkey")), (r_before, r_now)
    finally:
        for w in workers:
            if w.proc.poll() is None:
                kill(w.proc)
    assert att and att["makers"] == 8 and att.get("mr_keys") is True, att
    assert metric("rdmad_orphans_reclaimed_total", profile="p",
                  kind="mr") >= 8
    # With nobody left, counting takes their CQs and QPs too.
    assert wait_for(lambda: kernel_counts() == base, 30), \
        (kernel_counts(), base)
    assert metric("rdmad_reclaim_stale_handles_total", profile="p",
                  kind="mr") == 0
    assert metric("rdmad_context_retirements_total") == 0
    assert get("/v1/profiles/p")["state"] == "ready"


SWAPPER = """
import json, sys, threading
sys.path.insert(0, sys.argv[2])
from rdmadproto import ATTACH, ATTACHED, Client
import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD

c = Client(sys.argv[1])
t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared"})
assert t == ATTACHED, doc
ctx = Context(cmd_fd=fds[doc["cmd_fd"]])
pd = PD(ctx, handle=doc["pd"][0]["handle"])


def in_a_thread(size):
    # A thread that exits at once: the kernel then names no maker for
    # the MR, as for a dead client's.
    out = []
    th = threading.Thread(target=lambda: out.append(
        MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE)))
    th.start()
    th.join()
    return out[0]


x = in_a_thread(4096)
print(json.dumps({"lkey": x.lkey, "handle": x.handle}), flush=True)
sys.stdin.readline()
# The handle is freed and given to another MR of ours (uverbs gives the
# lowest free handle: holes below it are filled first, then let go).
h = x.handle
x.close()
fill = []
for _ in range(64):
    y = in_a_thread(8192)
    if y.handle == h:
        break
    fill.append(y)
for f in fill:
    f.close()
print(json.dumps({"lkey": y.lkey, "handle": y.handle}), flush=True)
sys.stdin.readline()
y.close()
print("closed", flush=True)
sys.stdin.readline()
"""


def test_a_handle_given_to_another_mr_is_left_alone(daemon, tmp_path):
    """A leftover MR (no maker named: counting's) waits at handle H; its
    handle is freed and given to another client's MR before the reclaim
    delay is over. Reclaim sees H's keys changed, leaves it alone and
    counts it; the new MR is still there."""
    assert wait_for(lambda: get("/v1/profiles/p/orphans")["scanned"])
    script = tmp_path / "swapper.py"
    script.write_text(textwrap.dedent(SWAPPER))
    s = subprocess.Popen([sys.executable, str(script), daemon,
                          str(ROOT / "tests" / "integration")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        x = json.loads(s.stdout.readline())
        # A scan has seen it a leftover (the orphans document lists it).
        assert wait_for(lambda: any(
            o["kind"] == "mr" and o.get("lkey") == x["lkey"]
            for o in get("/v1/profiles/p/orphans")["orphans"])), \
            get("/v1/profiles/p/orphans")
        s.stdin.write("swap\n")
        s.stdin.flush()
        y = json.loads(s.stdout.readline())
        assert y["handle"] == x["handle"] and y["lkey"] != x["lkey"]
        # Either the stale handle is seen, or (today's daemon) the handle
        # is destroyed and the new MR with it.
        wait_for(lambda: (metric("rdmad_reclaim_stale_handles_total",
                                 profile="p", kind="mr") or 0) >= 1 or
                 y["lkey"] not in kernel_mr_lkeys(), 10)
        assert y["lkey"] in kernel_mr_lkeys(), "destroyed by a stale handle"
        assert metric("rdmad_reclaim_stale_handles_total", profile="p",
                      kind="mr") >= 1, get("/v1/profiles/p/orphans")
        s.stdin.write("close\n")
        s.stdin.flush()
        assert s.stdout.readline().strip() == "closed"
        assert get("/v1/profiles/p/orphans")["attribution"][
            "stale_handles"] >= 1
    finally:
        kill(s)


# ---- QPs and CQs a client says it made (MADE) ----

CLAIMER = """
import ctypes, json, os, sys, time
sys.path.insert(0, sys.argv[2])
from rdmadproto import ATTACH, ATTACHED, MADE, REPLY, Client
import pyclient_setup  # noqa: F401 (client/python on the path)
import rdmad

ibv = ctypes.CDLL("libibverbs.so.1")
for f, res, args in (
        ("ibv_import_device", ctypes.c_void_p, [ctypes.c_int]),
        ("ibv_import_pd", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_uint32]),
        ("ibv_create_cq", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int,
                                            ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_int]),
        ("ibv_create_qp", ctypes.c_void_p, [ctypes.c_void_p,
                                            ctypes.c_void_p])):
    getattr(ibv, f).restype = res
    getattr(ibv, f).argtypes = args


class Cap(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in (
        "max_send_wr", "max_recv_wr", "max_send_sge", "max_recv_sge",
        "max_inline_data")]


class InitAttr(ctypes.Structure):
    _fields_ = [("qp_context", ctypes.c_void_p),
                ("send_cq", ctypes.c_void_p), ("recv_cq", ctypes.c_void_p),
                ("srq", ctypes.c_void_p), ("cap", Cap),
                ("qp_type", ctypes.c_int), ("sq_sig_all", ctypes.c_int)]


def u32_at(ptr, off):
    return ctypes.c_uint32.from_address(ptr + off).value


if sys.argv[3] == "package":     # the Python client's made()
    prof = rdmad.connect(sys.argv[1]).attach("p", mode="shared")
    cmd_fd, doc = prof.context.cmd_fd, prof.document
else:                            # the wire protocol
    c = Client(sys.argv[1])
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared"})
    assert t == ATTACHED, doc
    cmd_fd = fds[doc["cmd_fd"]]
# Raw verbs: a CQ and a QP made with libibverbs itself.
ctx = ibv.ibv_import_device(os.dup(cmd_fd))
pd = ibv.ibv_import_pd(ctx, doc["pd"][0]["handle"])
cq = ibv.ibv_create_cq(ctx, 8, None, None, 0)
attr = InitAttr(send_cq=cq, recv_cq=cq, cap=Cap(4, 4, 1, 1, 0), qp_type=2)
qp = ibv.ibv_create_qp(pd, ctypes.byref(attr))
assert ctx and pd and cq and qp
# struct ibv_cq: context, channel, cq_context, then handle; struct
# ibv_qp: context, qp_context, pd, send_cq, recv_cq, srq, then handle
# and qp_num.
made = {"cq": u32_at(cq, 24), "qp": u32_at(qp, 48), "qp_num": u32_at(qp, 52)}
objs = [{"kind": "qp", "handle": made["qp"], "qp_num": made["qp_num"]},
        {"kind": "cq", "handle": made["cq"]}]
if sys.argv[3] == "package":
    made["answer"] = prof.made(objs)
else:
    t, rep, _ = c.call(MADE, {"attachment": doc["attachment"], "made": objs})
    assert t == REPLY, rep
    made["answer"] = rep["body"]["made"]
print(json.dumps(made), flush=True)
time.sleep(600)
"""


def start_claimer(daemon, tmp_path, stack):
    script = tmp_path / "claimer.py"
    if not script.exists():  # not under a claimer that reads it
        script.write_text(textwrap.dedent(CLAIMER))
    return subprocess.Popen([sys.executable, str(script), daemon,
                             str(ROOT / "tests" / "integration"), stack],
                            stdout=subprocess.PIPE, text=True)


def claimer_made(p):
    return json.loads(p.stdout.readline())


def start_made_client(daemon):
    """librdmad's rdmad_create_cq/srq/qp() (helpers/made_client.c)."""
    return subprocess.Popen([str(ROOT / "build" / "tests" / "made_client"),
                             daemon, "p", "a"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def made_client_qpn(p):
    line = p.stdout.readline().strip()
    assert line.startswith("qp_num="), line
    return int(line.split("=")[1])


def claimed():
    return get("/v1/profiles/p/orphans")["attribution"]["claimed"]


def test_a_dead_clients_claimed_qps_cqs_srqs_go_while_a_live_one_keeps_its(
        daemon, tmp_path):
    """Clients with QPs, CQs and an SRQ of their own, said made (MADE:
    the wire protocol, the Python client's made(), librdmad's
    rdmad_create_*()): while one lives, counting cannot tell the others'
    from its; their claims can. The dead ones' go within 10 s, the live
    one's stay; one taken back (rdmad_destroy_*) is no claim."""
    assert wait_for(lambda: get("/v1/profiles/p/orphans")["scanned"])
    def counts():
        return dict(kernel_counts(), srq=len(kernel_rows("srq")))

    base = counts()
    # All four at once: each makes its objects and says so.
    live = start_claimer(daemon, tmp_path, "package")
    dead = start_claimer(daemon, tmp_path, "wire")
    cdead = start_made_client(daemon)
    undoer = start_made_client(daemon)
    try:
        lmade, dmade = claimer_made(live), claimer_made(dead)
        c_qpn = made_client_qpn(cdead)
        made_client_qpn(undoer)
        assert lmade["answer"] == 2 and dmade["answer"] == 2
        assert wait_for(lambda: claimed() == {"qp": 4, "cq": 4, "srq": 2})
        undoer.stdin.write("undo\n")
        undoer.stdin.flush()
        assert undoer.stdout.readline().strip() == "undone"
        assert wait_for(lambda: claimed() == {"qp": 3, "cq": 3, "srq": 1})
        kill(dead)
        kill(cdead)
        t0 = time.monotonic()
        assert wait_for(lambda: not {dmade["qp_num"], c_qpn} &
                        kernel_qpns(), 10), get("/v1/profiles/p/orphans")
        assert wait_for(lambda: counts() == dict(base, cq=base["cq"] + 1,
                                                 qp=base["qp"] + 1),
                        10 - (time.monotonic() - t0)), (
            counts(), base, get("/v1/profiles/p/orphans"))
        assert lmade["qp_num"] in kernel_qpns()
        for kind, n in (("qp", 2), ("cq", 2), ("srq", 1)):
            assert metric("rdmad_orphans_reclaimed_total", profile="p",
                          kind=kind) == n, kind
        assert claimed() == {"qp": 1, "cq": 1, "srq": 0}
    finally:
        for p in (live, dead, cdead, undoer):
            if p.poll() is None:
                kill(p)
    assert wait_for(lambda: counts() == base, 30), (counts(), base)
