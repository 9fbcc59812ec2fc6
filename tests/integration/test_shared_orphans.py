# SPDX-License-Identifier: MIT
"""Orphans in shared mode: a client imports the profile's context, makes
a CQ, a QP and an MR of its own in it, and is SIGKILLed. Its objects stay
in the daemon's context (the kernel ties them to the context, which the
daemon holds): they must show up as orphans in /metrics and REST. Once no
session holds a lease any more, the policy retires the context: a fresh
one is opened, the profile's objects are created again, and the orphans
are gone from the kernel (`rdma resource show`). Needs a device that
imports (mlx5, or rxe with tests/vm/run --import)."""

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


def kernel_qpns():
    out = subprocess.run(["rdma", "-j", "resource", "show", "qp"],
                         check=True, capture_output=True, text=True).stdout
    return {r["lqpn"] for r in (json.loads(out) if out.strip() else [])
            if r.get("ifname") == DEV}


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


def test_dead_clients_objects_are_orphans_until_the_context_retires(
        daemon, tmp_path):
    before = get("/v1/profiles/p/orphans")
    assert wait_for(lambda: get("/v1/profiles/p/orphans")["scanned"])
    assert get("/v1/profiles/p/orphans")["orphans"] == []
    ctxn = before["ctxn"]

    # A second client holds leases: the context may not retire yet.
    holder = Client(daemon)
    t, hdoc, hfds = holder.call(ATTACH, {"profile": "p", "mode": "shared"})
    assert t == ATTACHED, hdoc

    script = tmp_path / "leaker.py"
    script.write_text(textwrap.dedent(LEAKER))
    leaker = subprocess.Popen(
        [sys.executable, str(script), daemon, str(ROOT / "tests" /
                                                  "integration")],
        stdout=subprocess.PIPE, text=True)
    try:
        made = json.loads(leaker.stdout.readline())
        # While it lives, its objects are a client's, not orphans.
        view = wait_for(lambda: (lambda d: d if d["objects"]["client"]["qp"]
                                 == 1 else None)(
            get("/v1/profiles/p/orphans")))
        assert view, get("/v1/profiles/p/orphans")
        assert view["orphans"] == []
    finally:
        leaker.send_signal(signal.SIGKILL)
        leaker.wait()
    assert made["qp_num"] in kernel_qpns()

    # Dead: its CQ, QP and MR are orphans, in REST and in /metrics.
    view = wait_for(lambda: (lambda d: d if d["objects"]["orphan"]["qp"]
                             else None)(get("/v1/profiles/p/orphans")))
    assert view, get("/v1/profiles/p/orphans")
    assert view["ctxn"] == ctxn
    assert view["objects"]["orphan"] == {"pd": 0, "cq": 1, "qp": 1,
                                         "mr": 1, "srq": 0}, view
    assert view["objects"]["client"]["qp"] == 0
    assert made["qp_num"] in {o["lqpn"] for o in view["orphans"]
                              if o["kind"] == "qp"}
    assert get("/v1/profiles/p")["orphans"] == 3
    for kind, n in (("cq", 1), ("qp", 1), ("mr", 1), ("pd", 0)):
        assert metric("rdmad_orphan_objects", profile="p", device=DEV,
                      kind=kind) == n
    # The daemon's own objects are not touched meanwhile.
    assert get("/v1/profiles/p")["state"] == "ready"
    assert metric("rdmad_context_retirements_total") == 0
    # And the kernel still has them: the context holds them.
    assert made["qp_num"] in kernel_qpns()

    # The last lease ends: the policy retires the context.
    t, _, _ = holder.call(DETACH, {"attachment": hdoc["attachment"]})
    assert t == DETACHED
    for fd in hfds:
        os.close(fd)
    holder.close()
    assert wait_for(lambda: metric("rdmad_context_retirements_total") == 1)
    after = wait_for(lambda: (lambda d: d if d.get("scanned") and
                              d.get("ctxn") not in (None, ctxn) and
                              d["state"] == "ready" else None)(
        get("/v1/profiles/p/orphans")))
    assert after, get("/v1/profiles/p/orphans")
    assert after["orphans"] == []
    assert after["objects"]["daemon"]["mr"] == 1
    # Freed with the old context: gone from the kernel's own list.
    assert wait_for(lambda: made["qp_num"] not in kernel_qpns())
    assert get("/v1/profiles/p")["state"] == "ready"
    for kind in ("cq", "qp", "mr"):
        assert metric("rdmad_orphan_objects", profile="p", device=DEV,
                      kind=kind) == 0
