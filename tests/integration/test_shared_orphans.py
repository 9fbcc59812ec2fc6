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
from rdmadproto import ATTACH, ATTACHED, DETACH, DETACHED, Client

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
