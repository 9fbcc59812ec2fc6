# SPDX-License-Identifier: MIT
"""The daemon's QPs in trouble, on rxe, with the kernel's own events and
states: a QP that goes to the error state is reported (REST, the event
stream on both front ends) and, with recover = "reset", brought back to
its declared state and path as the same QP; the SRQ limit event fires
when the receives posted to an SRQ fall below its limit, and is armed
again after each time.

The remote end is this test process's own pyverbs QP on rxe0 (rxe moves
data between QPs of one device as between hosts); rxe raises no async
event for a QP that fails, so what finds it there is the daemon's RDMA
netlink scan (every 10 s), as `rdma resource show qp` sees the state."""

import json
import subprocess
import threading
import time

import pytest

from conftest import RDMACTL, rdma_res
from test_events import Collector, monitor_reader, sse_reader

pyverbs = pytest.importorskip("pyverbs")
import pyverbs.enums as e  # noqa: E402
from pyverbs.addr import AHAttr, GlobalRoute  # noqa: E402
from pyverbs.cq import CQ  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr  # noqa: E402
from pyverbs.wr import SGE, SendWR  # noqa: E402

TIMEOUT = 60  # TCG; the scan runs every 10 s

# The profile's memory, PD, MR and CQ; each test adds its QPs.
HEAD = """
devices = ( {{ name = "d0"; match = {{ netdev = "veth0"; }};
              gid = {{ type = "roce_v2"; family = "ipv4"; }}; }} );
profiles = (
  {{ name = "p"; device = "d0";
    memory = ( {{ name = "m"; size = "1M"; }} );
    pd = ( {{ name = "a"; }} );
    mr = ( {{ name = "r"; pd = "a"; memory = "m";
             access = [ "local_write", "remote_write", "remote_read" ]; }} );
    cq = ( {{ name = "c"; cqe = 128; }} );
"""

CONF = HEAD + """    srq = ( {{ name = "s"; pd = "a"; max_wr = 16; max_sge = 1;
              srq_limit = 1; }} );
    qp = ( {{ name = "t"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; recover = "reset";
             access = [ "remote_write", "remote_read" ];
             path = {{ dqpn = {t}; }}; }},
           {{ name = "n"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts";
             access = [ "remote_write", "remote_read" ];
             path = {{ dqpn = {n}; }}; }},
           {{ name = "q0"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "q1";
             access = [ "remote_write" ]; }},
           {{ name = "q1"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; srq = "s"; state = "rts"; peer = "q0";
             access = [ "remote_write" ]; }} );
  }}
);
"""


class Peer:
    """One RC QP of this process on rxe0, the remote end of a daemon QP."""

    def __init__(self, ctx, pd):
        self.ctx, self.pd = ctx, pd
        self.cq = CQ(ctx, 16)
        cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1,
                    max_recv_sge=1)
        self.qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq,
                                    rcq=self.cq, cap=cap))
        self.buf = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)

    def connect(self, ep):
        """To the daemon QP of endpoint document ep (PSNs 0 both ways,
        as the daemon's path leaves them)."""
        attr = QPAttr()
        attr.qp_access_flags = 0
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = ep["qp_num"]
        attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
        attr.min_rnr_timer, attr.timeout = 12, 14
        attr.retry_cnt = attr.rnr_retry = 6
        gid = self.ctx.query_gid(1, ep["gid_index"])
        attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=gid,
                                             sgid_index=ep["gid_index"]),
                              is_global=1, port_num=1)
        # From whatever state it is in (ERR after a failed request).
        self.qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET),
                       e.IBV_QP_STATE)
        self.qp.to_rts(attr)

    def rdma(self, opcode, rkey, addr, data=None, n=0):
        """One RDMA write (of data) or read (of n bytes); the status."""
        if data is not None:
            self.buf.write(data, len(data))
            n = len(data)
        wr = SendWR(opcode=opcode, num_sge=1,
                    sg=[SGE(self.buf.buf, n, self.buf.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, addr)
        self.qp.post_send(wr)
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            k, wcs = self.cq.poll()
            if k:
                return wcs[0].status
            time.sleep(0.001)
        raise AssertionError("no completion")

    def read(self, n):
        return self.buf.read(n, 0)

    def close(self):
        self.qp.close()
        self.buf.close()
        self.cq.close()


@pytest.fixture
def peers():
    ctx = Context(name="rxe0")
    pd = PD(ctx)
    made = [Peer(ctx, pd), Peer(ctx, pd)]
    yield made
    for p in made:
        p.close()
    pd.close()
    ctx.close()


@pytest.fixture
def streams(rdmad, peers):
    """The daemon, with both event streams read from its start."""
    t, n = peers
    d = rdmad(CONF.format(t=t.qp.qp_num, n=n.qp.qp_num)).settle()
    stop = threading.Event()
    sse = Collector("GET /v1/events")
    mon = Collector("rdmactl monitor --json")
    threading.Thread(target=sse_reader, args=(d.port, sse, stop),
                     daemon=True).start()
    proc = subprocess.Popen([str(RDMACTL), "--socket", d.sock, "--json",
                             "monitor"], stdout=subprocess.PIPE, text=True)
    threading.Thread(target=monitor_reader, args=(proc, mon),
                     daemon=True).start()
    sse.wait_for(lambda ev: ev["event"] == "subscribed")
    # The monitor is subscribed once its first answer came back: give it
    # a moment (the events below are seconds away anyway).
    time.sleep(1)
    yield d, sse, mon
    stop.set()
    proc.terminate()
    proc.wait(timeout=10)


def get(d, path):
    status, doc = d.get(path)
    assert status == 200, (path, status, doc)
    return doc


def kernel_qp(d, qpn):
    rows = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
    return rows[qpn]


def test_qp_error_reported_and_recovered(streams, peers):
    d, sse, mon = streams
    pt, pn = peers
    mr = get(d, "/v1/profiles/p/mr/r")
    t0 = get(d, "/v1/profiles/p/qp/t")
    n0 = get(d, "/v1/profiles/p/qp/n")
    assert t0["config"]["recover"] == "reset", t0
    assert n0["config"]["recover"] == "none", n0
    assert t0["recoveries"] == 0 and "qp_error" not in t0, t0
    pt.connect(get(d, "/v1/profiles/p/qp/t/endpoint"))
    pn.connect(get(d, "/v1/profiles/p/qp/n/endpoint"))

    # Data moves into the daemon's MR through t and back out.
    pattern = bytes(range(256)) * 4
    ok = e.IBV_WC_SUCCESS
    assert pt.rdma(e.IBV_WR_RDMA_WRITE, mr["rkey"], mr["iova"],
                   data=pattern) == ok
    pt.buf.write(bytes(len(pattern)), len(pattern))
    assert pt.rdma(e.IBV_WR_RDMA_READ, mr["rkey"], mr["iova"],
                   n=len(pattern)) == ok
    assert pt.read(len(pattern)) == pattern

    # A write with a key that is not the MR's: the daemon's QP (the
    # responder) goes to ERR, as the kernel shows.
    bad = mr["rkey"] ^ 0x5a5a00
    for peer in (pt, pn):
        assert peer.rdma(e.IBV_WR_RDMA_WRITE, bad, mr["iova"],
                         data=b"x" * 64) == e.IBV_WC_REM_ACCESS_ERR
    assert kernel_qp(d, n0["qp_num"])["state"] == "ERR"

    # Both are reported on both streams; t is brought back, n stays.
    for col in (sse, mon):
        for name in ("t", "n"):
            ev = col.wait_for(lambda ev: ev["event"] == "qp_error" and
                              ev["name"] == name)
            assert ev["profile"] == "p" and ev["kind"] == "qp", ev
            assert "ERR" in ev["reason"], ev
        rec = col.wait_for(lambda ev: ev["event"] == "qp_recovered")
        assert rec["name"] == "t" and rec["qp_num"] == t0["qp_num"], rec
        assert rec["recoveries"] == 1, rec
        err_t = col.wait_for(lambda ev: ev["event"] == "qp_error" and
                             ev["name"] == "t")
        assert rec["seq"] > err_t["seq"]
    assert not any(ev["event"] == "qp_recovered" and ev["name"] == "n"
                   for ev in sse.snapshot())
    # The same JSON on both front ends.
    pick = ("qp_error", "qp_recovered")
    assert [ev for ev in sse.snapshot() if ev["event"] in pick] == \
        [ev for ev in mon.snapshot() if ev["event"] in pick]

    # t: the same QP, in RTS again with its declared path; n: in error,
    # with the reason in its document.
    t1 = get(d, "/v1/profiles/p/qp/t")
    assert t1["qp_num"] == t0["qp_num"] and t1["qp_state"] == "rts", t1
    assert t1["dqpn"] == pt.qp.qp_num and t1["recoveries"] == 1, t1
    assert "qp_error" not in t1 and t1["state"] == "ready", t1
    k = kernel_qp(d, t0["qp_num"])
    assert k["state"] == "RTS" and k["rqpn"] == pt.qp.qp_num, k
    n1 = get(d, "/v1/profiles/p/qp/n")
    assert n1["qp_state"] == "error" and n1["state"] == "ready", n1
    assert "ERR" in n1["qp_error"] and n1["recoveries"] == 0, n1
    assert kernel_qp(d, n0["qp_num"])["state"] == "ERR"

    # Through the recovered t, data moves again (the peer's QP went to
    # error with its failed request: it starts over too).
    pt.connect(get(d, "/v1/profiles/p/qp/t/endpoint"))
    again = bytes(reversed(pattern))
    assert pt.rdma(e.IBV_WR_RDMA_WRITE, mr["rkey"], mr["iova"],
                   data=again) == ok
    pt.buf.write(bytes(len(again)), len(again))
    assert pt.rdma(e.IBV_WR_RDMA_READ, mr["rkey"], mr["iova"],
                   n=len(again)) == ok
    assert pt.read(len(again)) == again

    # n, moved out of error by hand (PATCH with the peer's endpoint
    # again): the error is over in its document.
    status, doc = d.request("PATCH", "/v1/profiles/p/qp/n",
                            {"state": "rts", "path": {"dqpn":
                                                      pn.qp.qp_num}})
    assert status == 200, doc
    assert doc["qp_state"] == "rts" and "qp_error" not in doc, doc
    assert kernel_qp(d, n0["qp_num"])["state"] == "RTS"


def test_srq_limit_fires_and_is_armed_again(streams):
    """The selftest sends from q0 to q1, which receives through SRQ s:
    the one receive it posts there is consumed, the count falls below
    srq_limit 1, and rxe raises the SRQ limit event; the daemon arms it
    again, so the next run raises it again."""
    d, sse, mon = streams
    assert get(d, "/v1/profiles/p/srq/s")["srq_limit"] == 1
    seen = []
    for run in range(2):
        status, rep = d.request("POST", "/v1/profiles/p/selftest",
                                {"a": "q0", "b": "q1", "mr": "r"})
        assert status == 200 and rep["ok"] is True, rep
        assert rep["send_recv"]["ok"] is True, rep
        for col in (sse, mon):
            ev = col.wait_for(lambda ev: ev["event"] == "srq_limit_reached"
                              and ev.get("seq", 0) > max(seen, default=0))
            assert ev["profile"] == "p" and ev["kind"] == "srq", ev
            assert ev["name"] == "s" and ev["device"] == "rxe0", ev
        seen.append(ev["seq"])
        # Armed again: the device shows the limit back.
        deadline = time.monotonic() + TIMEOUT
        while get(d, "/v1/profiles/p/srq/s")["srq_limit"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert seen[1] > seen[0]


def test_reload_changes_rts_qps_in_place(streams, peers):
    """A reload that changes only what a QP in RTS can change (its path's
    timeout, retry_cnt, min_rnr_timer; access; recover) keeps the QP:
    the same qp_num and kernel object, the new attributes on the device,
    connected all along (data moves through it before and after)."""
    d, _, _ = streams
    pt, _ = peers
    mr = get(d, "/v1/profiles/p/mr/r")
    t0 = get(d, "/v1/profiles/p/qp/t")
    q0 = get(d, "/v1/profiles/p/qp/q0")
    kernel0 = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
    assert (t0["timeout"], t0["retry_cnt"], t0["min_rnr_timer"]) == \
        (14, 7, 12), t0
    pt.connect(get(d, "/v1/profiles/p/qp/t/endpoint"))
    ok = e.IBV_WC_SUCCESS
    assert pt.rdma(e.IBV_WR_RDMA_WRITE, mr["rkey"], mr["iova"],
                   data=b"before" * 10) == ok

    conf = d.conf.read_text()
    conf = conf.replace('recover = "reset";', 'recover = "none";')
    conf = conf.replace("path = {{ dqpn = {0}; }}".format(pt.qp.qp_num),
                        "path = {{ dqpn = {0}; timeout = 18; retry_cnt = 5;"
                        " min_rnr_timer = 20; }}".format(pt.qp.qp_num))
    conf = conf.replace('peer = "q1";\n             access = [ "remote_write" ]',
                        'peer = "q1";\n             access = [ "remote_write",'
                        ' "remote_read" ]')
    assert conf.count("timeout = 18") == 1 and conf.count('"remote_read" ]') == 4
    d.conf.write_text(conf)
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    assert sorted((c["kind"], c["name"], c["action"])
                  for c in body["changes"]) == [
        ("qp", "q0", "update"), ("qp", "t", "update")], body

    t1 = get(d, "/v1/profiles/p/qp/t")
    assert t1["state"] == "ready" and t1["qp_state"] == "rts", t1
    assert t1["qp_num"] == t0["qp_num"] and t1["dqpn"] == pt.qp.qp_num
    assert (t1["timeout"], t1["retry_cnt"], t1["min_rnr_timer"]) == \
        (18, 5, 20), t1
    assert t1["config"]["recover"] == "none"
    q1 = get(d, "/v1/profiles/p/qp/q0")
    assert q1["state"] == "ready" and q1["qp_state"] == "rts", \
        q1.get("reason")
    assert q1["qp_num"] == q0["qp_num"]
    kernel1 = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
    assert set(kernel1) == set(kernel0)
    for qpn in (t0["qp_num"], q0["qp_num"]):
        assert kernel1[qpn]["state"] == "RTS", kernel1[qpn]
        assert kernel1[qpn]["rqpn"] == kernel0[qpn]["rqpn"]
    # Still connected, PSNs and all: no reset on either side.
    data = b"after!" * 10
    assert pt.rdma(e.IBV_WR_RDMA_WRITE, mr["rkey"], mr["iova"],
                   data=data) == ok
    pt.buf.write(bytes(len(data)), len(data))
    assert pt.rdma(e.IBV_WR_RDMA_READ, mr["rkey"], mr["iova"],
                   n=len(data)) == ok
    assert pt.read(len(data)) == data
    status, rep = d.request("POST", "/v1/profiles/p/selftest",
                            {"a": "q0", "b": "q1", "mr": "r"})
    assert status == 200 and rep["ok"] is True, rep

    # What RTS cannot change (the path's dqpn): recreated, a new QP.
    d.conf.write_text(conf.replace("timeout = 18;", "timeout = 18; "
                                   "sq_psn = 7;"))
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    assert [(c["name"], c["action"]) for c in body["changes"]] == \
        [("t", "recreate")], body


ENDPOINT_CONF = HEAD + """    qp = ( {{ name = "f"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "@{file}";
             access = [ "remote_write", "remote_read" ]; }},
           {{ name = "i"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "{inline}";
             access = [ "remote_write", "remote_read" ]; }} );
  }}
);
"""


def roce_v2_ipv4_gid_index():
    """The GID the daemon selects with type roce_v2, family ipv4: rxe0
    port 1's first such entry (sysfs)."""
    base = "/sys/class/infiniband/rxe0/ports/1"
    for i in range(16):
        try:
            with open(f"{base}/gid_attrs/types/{i}") as t, \
                    open(f"{base}/gids/{i}") as g:
                if t.read().strip() == "RoCE v2" and \
                        g.read().startswith("0000:0000:0000:0000:0000:ffff:"):
                    return i
        except OSError:
            continue
    raise AssertionError("rxe0 has no RoCE v2 IPv4 GID")


def endpoint_of(peer, gid_index):
    """This process's QP as GET .../endpoint documents a QP."""
    gid = peer.ctx.query_gid(1, gid_index)
    return {"qp_num": peer.qp.qp_num, "port": 1, "lid": 0,
            "gid": str(gid), "gid_index": gid_index, "psn": 0,
            "mtu": 1024, "type": "rc"}


def test_peer_from_an_endpoint_document(rdmad, peers, tmp_path):
    """A QP brought up from the endpoint document of a QP on another
    host (here: this process's pyverbs QPs on rxe0), from a file and
    inline, without rdma_cm: data moves both ways; a reload after the
    file changed connects the QP to the new remote end."""
    pf, pi = peers
    gidx = roce_v2_ipv4_gid_index()
    f = tmp_path / "ep.json"
    f.write_text(json.dumps(endpoint_of(pf, gidx)))
    inline = json.dumps(endpoint_of(pi, gidx)).replace('"', '\\"')
    d = rdmad(ENDPOINT_CONF.format(file=f, inline=inline)).settle()
    assert get(d, "/v1/profiles/p")["gid_index"] == gidx
    mr = get(d, "/v1/profiles/p/mr/r")
    ok = e.IBV_WC_SUCCESS
    for name, peer in (("f", pf), ("i", pi)):
        q = get(d, f"/v1/profiles/p/qp/{name}")
        assert q["state"] == "ready" and q["qp_state"] == "rts", q
        assert q["dqpn"] == peer.qp.qp_num, q
        assert q["config"]["peer"].startswith("@" if name == "f" else "{")
        k = kernel_qp(d, q["qp_num"])
        assert k["rqpn"] == peer.qp.qp_num and k["state"] == "RTS", k
        peer.connect(get(d, f"/v1/profiles/p/qp/{name}/endpoint"))
        data = name.encode() * 100
        assert peer.rdma(e.IBV_WR_RDMA_WRITE, mr["rkey"], mr["iova"],
                         data=data) == ok
        peer.buf.write(bytes(len(data)), len(data))
        assert peer.rdma(e.IBV_WR_RDMA_READ, mr["rkey"], mr["iova"],
                         n=len(data)) == ok
        assert peer.read(len(data)) == data

    # The other host's QP changed: the file says so, a reload follows.
    f.write_text(json.dumps(endpoint_of(pi, gidx)))
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    assert [(c["name"], c["action"]) for c in body["changes"]] == \
        [("f", "recreate")], body
    q = get(d, "/v1/profiles/p/qp/f")
    assert q["state"] == "ready" and q["dqpn"] == pi.qp.qp_num, q
    # A file that no longer holds an endpoint: the reload is refused,
    # with the QP's file:line, and nothing changes.
    f.write_text('{"psn": 1}')
    status, body = d.request("POST", "/v1/reload")
    assert status == 422 and body["error"]["code"] == "config_invalid", body
    assert "qp 'f': peer: endpoint: 'qp_num' is missing" in json.dumps(body)
    assert get(d, "/v1/profiles/p/qp/f")["qp_num"] == q["qp_num"]
