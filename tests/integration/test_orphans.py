# SPDX-License-Identifier: MIT
"""Orphans: the daemon reads its own context through RDMA netlink and
sorts what is there by who made it. On rxe (no import: local mode only)
the daemon's view of its context must be exactly the objects it claims,
`rdma resource show` (iproute2, an independent reader of the same
netlink) must agree, and nothing is ever an orphan: a local-mode client
makes its objects in a context of its own, which dies with it. Shared
mode, where orphans really appear, is tests/hw/test_orphans_hw.py."""

import json
import re
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from conftest import rdma_res, rdmactl, settle, tasks

HERE = Path(__file__).resolve().parent
KINDS = ("pd", "cq", "qp", "mr", "srq")

CONF = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = (
  { name = "p"; device = "d0";
    memory = ( { name = "m"; size = "1M"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m";
             access = [ "local_write", "remote_write" ]; } );
    cq = ( { name = "c"; } );
    srq = ( { name = "s"; pd = "a"; max_wr = 16; } );
    qp = ( { name = "q0"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; },
           { name = "q1"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; } );
  }
);
"""


def claimed(d):
    """What the daemon says it holds in profile p, by kind."""
    status, prof = d.get("/v1/profiles/p")
    assert status == 200
    n = dict.fromkeys(KINDS, 0)
    for o in prof["objects"]:
        if o["kind"] in n and o["state"] == "ready":
            n[o["kind"]] += 1
    return n, prof


def fresh_view(d, since):
    """The orphans document of a scan that started after `since`."""
    doc = {}

    def scanned():
        nonlocal doc
        status, doc = d.get("/v1/profiles/p/orphans")
        assert status == 200, doc
        return doc.get("scanned_at", 0) > since
    assert settle(scanned, 15), doc
    return doc


def kernel_context(ctxn):
    """`rdma resource show`'s objects of context ctxn on rxe0: PDs and
    CQs name it, QPs, MRs and SRQs join it by their PD."""
    rows = {k: [r for r in rdma_res(k) if r.get("ifname") == "rxe0"]
            for k in KINDS}
    pds = {r["pdn"] for r in rows["pd"] if r.get("ctxn") == ctxn}
    return {
        "pd": [r for r in rows["pd"] if r.get("ctxn") == ctxn],
        "cq": [r for r in rows["cq"] if r.get("ctxn") == ctxn],
        "qp": [r for r in rows["qp"] if r.get("pdn") in pds],
        "mr": [r for r in rows["mr"] if r.get("pdn") in pds],
        "srq": [r for r in rows["srq"] if r.get("pdn") in pds],
    }


def metric(d, name, **labels):
    with __import__("urllib.request").request.urlopen(
            d.url + "/metrics") as r:
        text = r.read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(rf"^{name}\{{{re.escape(want)}\}} (\S+)$" if labels
                  else rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_own_context_is_exactly_what_the_daemon_claims(rdmad):
    d = rdmad(CONF)
    t0 = time.time()
    n, prof = claimed(d)
    assert n == {"pd": 1, "cq": 1, "qp": 2, "mr": 1, "srq": 1}, prof
    doc = fresh_view(d, t0)
    assert doc["profile"] == "p" and doc["ibdev"] == "rxe0"
    assert doc["import_capable"] is False
    assert "error" not in doc, doc
    assert doc["objects"]["daemon"] == n, (doc, d.log())
    assert doc["objects"]["client"] == dict.fromkeys(KINDS, 0)
    assert doc["objects"]["orphan"] == dict.fromkeys(KINDS, 0)
    assert doc["orphans"] == []
    # The profile's summary counts orphans once a scan has looked: ask
    # again now (the first reading may predate the first scan).
    _, prof = claimed(d)
    assert prof["ctxn"] == doc["ctxn"] and prof["orphans"] == 0

    # The independent reader sees the same context, made by our threads.
    k = kernel_context(doc["ctxn"])
    assert {kind: len(rows) for kind, rows in k.items()} == n, k
    mine = tasks(d.pid)
    assert all(r.get("pid") in mine for rows in k.values() for r in rows), k
    qpns = {o["qp_num"] for o in prof["objects"] if o["kind"] == "qp"}
    assert {r["lqpn"] for r in k["qp"]} == qpns
    # And the context is ours: opened by the daemon.
    ctxs = [r for r in rdma_res("ctx") if r.get("ifname") == "rxe0" and
            r.get("ctxn") == doc["ctxn"]]
    assert len(ctxs) == 1 and ctxs[0].get("pid") == d.pid, ctxs

    for kind in KINDS:
        assert metric(d, "rdmad_orphan_objects", profile="p",
                      device="rxe0", kind=kind) == 0
        assert metric(d, "rdmad_context_objects", profile="p",
                      device="rxe0", kind=kind, owner="daemon") == n[kind]
    assert metric(d, "rdmad_context_retirements_total") == 0


def test_reload_keeps_the_view_in_step(rdmad, write_conf):
    d = rdmad(CONF)
    doc = fresh_view(d, time.time())
    ctxn = doc["ctxn"]
    # One QP less: the same context, one QP fewer in its view.
    d.conf.write_text(d.conf.read_text().replace(
        """,
           { name = "q1"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; }""", ""))
    t0 = time.time()
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    doc = fresh_view(d, t0)
    assert doc["ctxn"] == ctxn
    assert doc["objects"]["daemon"]["qp"] == 1
    assert len(kernel_context(ctxn)["qp"]) == 1


def test_rdmactl_orphans_speaks_the_same_document(rdmad):
    d = rdmad(CONF)
    fresh_view(d, time.time())
    r = rdmactl(d, "--json", "orphans", "p")
    assert r.returncode == 0, r.stderr
    status, doc = d.get("/v1/profiles/p/orphans")
    got = json.loads(r.stdout)
    # Scans go on: compare all but when.
    got.pop("scanned_at")
    doc.pop("scanned_at")
    assert got == doc
    r = rdmactl(d, "orphans", "p")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("profile p on rxe0, context ")
    assert re.search(r"^daemon +1 +1 +2 +1 +1$", r.stdout, re.M), r.stdout
    assert re.search(r"^orphan +0 +0 +0 +0 +0$", r.stdout, re.M), r.stdout
    status, body = d.get("/v1/profiles/nope/orphans")
    assert status == 404 and body["error"]["code"] == "not_found"


LOCAL_CLIENT = """
import json, mmap, os, sys, time
sys.path.insert(0, sys.argv[2])
from rdmadproto import *
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.cq import CQ
from pyverbs.qp import QP, QPInitAttr, QPCap
import pyverbs.enums as e
c = Client(sys.argv[1])
t, doc, fds = c.call(ATTACH, {"profile": "p"})
assert t == ATTACHED and doc["mode"] == "local", doc
mem = doc["memory"][0]
buf = mmap.mmap(fds[mem["fd"]], mem["size"])
ctx = Context(name=doc["ibdev"])
pd = PD(ctx)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
cq = CQ(ctx, 8)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=4, max_recv_wr=4)))
print(json.dumps({"qp_num": qp.qp_num}), flush=True)
time.sleep(600)
"""


def test_local_mode_counts_nothing_even_when_the_client_dies(rdmad,
                                                             tmp_path):
    run = Path("/run") / f"rdmad-orph-{secrets.token_hex(4)}"
    run.mkdir()
    try:
        sock = run / "rdmad.sock"
        d = rdmad(f'daemon = {{ runtime_dir = "{run}"; control_socket = '
                  f'"{sock}"; http = {{ listen = [ "127.0.0.1:@PORT@" ]; '
                  f'}}; }};\n'.replace("@PORT@", str(_port())) + CONF)
        script = tmp_path / "client.py"
        script.write_text(textwrap.dedent(LOCAL_CLIENT))
        p = subprocess.Popen([sys.executable, str(script), str(sock),
                              str(HERE)], stdout=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline()
            assert line, "the client did not attach"
            qpn = json.loads(line)["qp_num"]
            # Its objects are in its own context, not in ours.
            assert any(r["lqpn"] == qpn for r in rdma_res("qp", p.pid))
            doc = fresh_view(d, time.time())
            assert doc["objects"]["client"] == dict.fromkeys(KINDS, 0)
            assert doc["objects"]["orphan"] == dict.fromkeys(KINDS, 0)
            assert qpn not in {r["lqpn"] for r in
                               kernel_context(doc["ctxn"])["qp"]}
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait()
        assert settle(lambda: not [s for s in d.get("/v1/sessions")[1]
                                   if s["pid"] == p.pid], 5)
        doc = fresh_view(d, time.time())
        assert doc["orphans"] == [] and \
            doc["objects"]["orphan"] == dict.fromkeys(KINDS, 0)
        assert doc["objects"]["daemon"] == claimed(d)[0]
        # Its context died with it: nothing of it is left anywhere.
        assert not [r for r in rdma_res("qp") if r.get("lqpn") == qpn]
        assert metric(d, "rdmad_context_retirements_total") == 0
    finally:
        subprocess.run(["rm", "-rf", str(run)])


def _port():
    from conftest import free_port
    return free_port()


def scans_ended(d):
    return sum(v for k, v in d.metrics().items()
               if k.startswith("rdmad_orphan_scans_total"))


def test_no_scan_while_a_reload_reads(rdmad, monkeypatch):
    """A reload under way holds scans back (orphans_pause): one asked for
    meanwhile (here by looking at the orphans document) waits, and runs
    once the reload is over, whatever its end."""
    monkeypatch.setenv("RDMAD_TEST_VALIDATE", "hang")
    monkeypatch.setenv("RDMAD_VALIDATE_TIMEOUT_MS", "4000")
    d = rdmad(CONF)
    fresh_view(d, 0)
    # A changed file: the reload reads it in a child first, which hangs
    # for 4 s; then the reload fails.
    d.conf.write_text(d.conf.read_text().replace('size = "1M"',
                                                 'size = "2M"'))
    out = {}

    def reload():
        out["r"] = d.request("POST", "/v1/reload", settle=False)

    t = threading.Thread(target=reload)
    t0 = time.time()
    t.start()
    time.sleep(0.3)
    before = scans_ended(d)
    end = time.monotonic() + 3
    while time.monotonic() < end:
        # Each look asks for a scan once the view is 1 s old.
        status, doc = d.get("/v1/profiles/p/orphans")
        assert status == 200, doc
        assert doc["scanned_at"] < t0, doc
        time.sleep(0.2)
    assert scans_ended(d) == before
    t.join(30)
    assert out["r"][0] == 422, out["r"]
    # The scan asked for during the reload comes now.
    fresh_view(d, t0)
    assert scans_ended(d) > before
