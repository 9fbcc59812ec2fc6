# SPDX-License-Identifier: MIT
"""UD multicast groups (kind mcast) on rxe: the daemon joins through
rdma_cm (the netdev's IP multicast membership, `ip maddr`, is the judge),
attaches its UD QPs and describes the group (MGID, MLID, qkey, AH) so that
a client's own QPs (pyverbs, tests/integration/mcast_peer.py) attach and
send to it: a datagram sent to the group arrives at both receivers.
Removal on reload detaches and leaves."""

import json
import os
import subprocess
import threading
import time

import pytest

from conftest import BUILD, RDMAD, ROOT, rdma_res, rdmactl, settle
from test_events import Collector, monitor_reader

QPS = """
    pd = ( { name = "a"; } );
    cq = ( { name = "c"; cqe = 64; } );
    qp = ( { name = "u0"; pd = "a"; type = "ud"; send_cq = "c";
             recv_cq = "c"; state = "rts"; qkey = 0x01234567; },
           { name = "u1"; pd = "a"; type = "ud"; send_cq = "c";
             recv_cq = "c"; state = "rts"; qkey = 0x01234567; },
           { name = "rc"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "init"; } );
"""

DEVICE = """
devices = ( { name = "d0"; match = { netdev = "veth0"; };
              gid = { type = "roce_v2"; family = "ipv4"; }; } );
"""


def conf(groups, second=""):
    return DEVICE + f"""
profiles = (
  {{ name = "p"; device = "d0";{QPS}
    mcast = ( {groups} );
  }}{second}
);
"""


GROUP = '{ name = "g"; addr = "239.1.2.3"; qps = [ "u0", "u1" ]; }'


def maddr(dev="veth0"):
    """The IP multicast groups the kernel has dev in (ip maddr)."""
    out = subprocess.run(["ip", "maddr", "show", "dev", dev], check=True,
                         capture_output=True, text=True).stdout
    return out


def group_doc(d, profile="p", name="g"):
    status, doc = d.get(f"/v1/profiles/{profile}/mcast/{name}")
    assert status == 200, doc
    return doc


def test_join_attach_and_document(rdmad):
    d = rdmad(conf(GROUP))
    g = group_doc(d)
    assert g["state"] == "ready", g
    assert g["join_state"] == "joined" and g["join"] == "full", g
    assert g["group"] == "239.1.2.3"
    # RoCE: the MGID is the IPv4-mapped address of the group.
    assert g["mgid"] == "0000:0000:0000:0000:0000:ffff:ef01:0203", g
    assert g["ah"]["dgid"] == g["mgid"] and g["ah"]["is_global"], g
    assert g["qkey"] == 0x01234567 and g["remote_qpn"] == 0xffffff, g
    kernel = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
    assert [q["name"] for q in g["qps"]] == ["u0", "u1"]
    for q in g["qps"]:
        assert q["attached"] is True
        assert kernel[q["qp_num"]]["type"] == "UD", kernel
        status, qp = d.get(f"/v1/profiles/p/qp/{q['name']}")
        assert qp["qp_num"] == q["qp_num"]
    assert "239.1.2.3" in maddr(), maddr()
    # The kernel's rdma_cm id that holds the membership: bound to the
    # profile's address (its IPv4-mapped GID), UDP port space.
    ids = [c for c in rdma_res("cm_id", d.pid) if c.get("ps") == "UDP"]
    assert len(ids) == 1 and \
        ids[0]["src-addr"].startswith("192.0.2.1:"), ids


def peer(d, profile="p", group="g", nrecv=2):
    """build/tests/mcast_peer: a librdmad client that takes the group
    from ATTACHED (rdmad_mcast), attaches nrecv UD QPs of its own and
    sends one datagram to the group."""
    r = subprocess.run([str(BUILD / "tests" / "mcast_peer"), d.sock,
                        profile, group, str(nrecv)], capture_output=True,
                       text=True, timeout=60)
    return r


def test_datagram_reaches_both_receivers(rdmad):
    d = rdmad(conf(GROUP))
    g = group_doc(d)
    r = peer(d)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # ATTACHED says what REST says.
    assert out["mlid"] == g["mlid"] and out["qkey"] == g["qkey"], (out, g)
    assert out["sent"], out
    assert out["received"] == [out["payload"]] * 2, out


def rewrite(d, text):
    """Replace the daemon's config, keeping its generated daemon section."""
    head = d.conf.read_text().split("\ndevices")[0]
    d.conf.write_text(head + "\n" + text.lstrip())


def test_reload_removal_detaches_and_leaves(rdmad):
    d = rdmad(conf(GROUP + ',\n { name = "h"; addr = "239.1.2.4"; '
                   'qps = [ "u1" ]; }'))
    assert group_doc(d, name="h")["join_state"] == "joined"
    joined = maddr()
    assert "239.1.2.3" in joined and "239.1.2.4" in joined, joined
    qps = {q["name"]: q["qp_num"] for q in group_doc(d)["qps"]}

    rewrite(d, conf('{ name = "h"; addr = "239.1.2.4"; qps = [ "u1" ]; }'))
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    assert [(c["kind"], c["name"], c["action"]) for c in body["changes"]] \
        == [("mcast", "g", "remove")], body
    status, _ = d.get("/v1/profiles/p/mcast/g")
    assert status == 404
    # Left: the netdev is no longer in the group; the other one stays.
    left = maddr()
    assert "239.1.2.3" not in left and "239.1.2.4" in left, left
    assert len([c for c in rdma_res("cm_id", d.pid)
                if c.get("ps") == "UDP"]) == 1
    # The QPs stay, detached: a datagram to the group reaches no one
    # (there is no membership to loop it back through).
    for name, num in qps.items():
        status, qp = d.get(f"/v1/profiles/p/qp/{name}")
        assert qp["state"] == "ready" and qp["qp_num"] == num
    r = peer(d, group="g")
    assert r.returncode == 1 and "no joined mcast group 'g'" in r.stderr, \
        r.stderr
    status, _ = d.request("POST", "/v1/reload")
    assert status == 200
    # SIGTERM leaves the rest.
    assert d.stop() == 0
    assert "239.1.2.4" not in maddr(), maddr()


def test_two_profiles_join_one_group(rdmad):
    second = f""",
  {{ name = "q"; device = "d0";{QPS}
    mcast = ( {{ name = "g2"; addr = "239.1.2.3"; qps = [ "u0" ]; }} );
  }}"""
    d = rdmad(conf(GROUP, second))
    a, b = group_doc(d), group_doc(d, "q", "g2")
    assert a["join_state"] == b["join_state"] == "joined"
    assert a["mgid"] == b["mgid"] and a["mlid"] == b["mlid"]
    # Three daemon QPs attached in all, distinct.
    nums = [q["qp_num"] for q in a["qps"] + b["qps"]]
    assert len(set(nums)) == 3 and all(q["attached"] for q in a["qps"])
    # The membership is counted: one profile's group going leaves the
    # other's.
    r = peer(d, "q", "g2")
    out = json.loads(r.stdout)
    assert out["received"] == [out["payload"]] * 2, out
    rewrite(d, conf(GROUP))
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    assert "239.1.2.3" in maddr()


def test_send_only_member(rdmad):
    d = rdmad(conf('{ name = "g"; addr = "239.1.2.5"; qps = [ "u0" ]; '
                   'join = "send_only"; }'))
    g = group_doc(d)
    assert g["join"] == "send_only" and g["join_state"] == "joined", g
    # A send-only member receives nothing: its QPs are not attached, and
    # the netdev joins no IP group (no IGMP report).
    assert [q["attached"] for q in g["qps"]] == [False]
    assert "239.1.2.5" not in maddr()
    assert g["ah"]["dgid"] == "0000:0000:0000:0000:0000:ffff:ef01:0205"


def test_rdmactl_show_lists_groups(rdmad):
    d = rdmad(conf(GROUP))
    r = rdmactl(d, "show", "p")
    assert r.returncode == 0, r.stderr
    line = [x.split() for x in r.stdout.splitlines()
            if x.startswith("mcast ")]
    assert line == [["mcast", "g", "ready", "group=239.1.2.3",
                     "join_state=joined", "qps=u0,u1"]], r.stdout
    r = rdmactl(d, "--json", "show", "p", "mcast", "g")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["join_state"] == "joined"
    assert [q["name"] for q in doc["qps"]] == ["u0", "u1"]
    assert doc["mgid"] == "0000:0000:0000:0000:0000:ffff:ef01:0203", doc


BAD = [
    ("not_multicast", '{ name = "g"; addr = "192.0.2.9"; qps = [ "u0" ]; }',
     "mcast 'g': addr 192.0.2.9 is not an IPv4 multicast address"),
    ("not_ud", '{ name = "g"; addr = "239.1.2.3"; qps = [ "rc" ]; }',
     "mcast 'g': qp 'rc' is rc: only UD QPs join a multicast group"),
    ("missing_qp", '{ name = "g"; addr = "239.1.2.3"; qps = [ "zz" ]; }',
     "mcast 'g': qp 'zz' is not declared in profile 'p'"),
    ("twice", GROUP + ',\n      { name = "h"; addr = "239.1.2.3"; '
     'qps = [ "u1" ]; }', "mcast 'h': group 239.1.2.3 is declared already, "
     "by mcast 'g'"),
    ("family", '{ name = "g"; addr = "ff12::1"; qps = [ "u0" ]; }',
     "mcast 'g': addr ff12::1 is IPv6, device 'd0' uses IPv4 GIDs"),
    ("no_address", '{ name = "g"; qps = [ "u0" ]; }',
     "mcast 'g': needs addr (an IP multicast address) or mgid"),
]


@pytest.mark.parametrize("name,group,msg", BAD, ids=[b[0] for b in BAD])
def test_check_refuses(write_conf, name, group, msg):
    path = write_conf(conf(group), name=f"{name}.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1)
                if "mcast" in text) + (1 if name == "twice" else 0)
    assert f"{path}:{line}: {msg}" in r.stderr, r.stderr


PY_SENDER = """
import sys
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import rdmad

with rdmad.connect(sys.argv[1]) as conn, conn.attach("p") as prof:
    g = prof.mcast("g")
    pd = PD(prof.context)
    cq = CQ(prof.context, 8)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=4, max_recv_wr=4)))
    attr = QPAttr(qp_state=e.IBV_QPS_INIT)
    attr.qkey, attr.pkey_index, attr.port_num = g.qkey, 0, prof.port
    qp.to_rts(attr)
    payload = b"from python to " + g.mgid.encode()
    mr = MR(pd, 256, e.IBV_ACCESS_LOCAL_WRITE)
    mr.write(payload, len(payload))
    wr = SendWR(opcode=e.IBV_WR_SEND, num_sge=1,
                sg=[SGE(mr.buf, len(payload), mr.lkey)])
    wr.set_wr_ud(g.ah(pd), g.remote_qpn, g.qkey)
    qp.post_send(wr)
    while True:
        n, wcs = cq.poll()
        if n:
            assert wcs[0].status == e.IBV_WC_SUCCESS, wcs[0]
            break
    try:
        prof.mcast("nope")
    except rdmad.Error as err:
        assert err.code == "not_found", err
    print(payload.decode())
"""


def test_python_client_sends_to_the_group(rdmad):
    """prof.mcast(name): a pyverbs QP of the client's sends through the
    group's AH; two receivers of another client (mcast_peer, librdmad)
    get it."""
    d = rdmad(conf(GROUP))
    rx = subprocess.Popen([str(BUILD / "tests" / "mcast_peer"), d.sock,
                           "p", "g", "2"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "MCAST_PEER_WAIT": "60000"})
    try:
        assert rx.stdout.readline() == "attached\n", rx.stderr.read()
        tx = subprocess.run(["/usr/bin/python3", "-c", PY_SENDER, d.sock],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ,
                                 "PYTHONPATH": str(ROOT / "client" /
                                                   "python")})
        assert tx.returncode == 0, tx.stderr
        out, err = rx.communicate(timeout=60)
    finally:
        rx.kill()
    got = json.loads(out)
    assert got["received"] == [tx.stdout.strip()] * 2, (got, err)


def test_rejoined_after_a_gid_change(rdmad):
    """A GID table change (an address added to the netdev: the stream's
    gid_change) makes the daemon leave and join the group again, its QPs
    detached and attached again; the group works as before."""
    d = rdmad(conf(GROUP))
    assert group_doc(d)["rejoins"] == 0
    mon = subprocess.Popen([str(BUILD / "rdmactl"), "--socket", d.sock,
                            "monitor", "--json"], stdout=subprocess.PIPE,
                           text=True)
    col = Collector("monitor")
    threading.Thread(target=monitor_reader, args=(mon, col),
                     daemon=True).start()
    try:
        time.sleep(1)
        subprocess.run(["ip", "addr", "add", "192.0.2.88/24", "dev",
                        "veth0"], check=True)
        assert settle(lambda: group_doc(d)["rejoins"] >= 1 and
                      group_doc(d)["join_state"] == "joined", 30), \
            group_doc(d)
        # The stream says why and that it is joined again.
        col.wait_for(lambda e: e.get("event") == "gid_change")
        ev = col.wait_for(lambda e: e.get("event") == "mcast_join")
        assert ev["profile"] == "p" and ev["name"] == "g" and \
            ev["kind"] == "mcast" and ev["group"] == "239.1.2.3", ev
    finally:
        mon.terminate()
        mon.wait()
        subprocess.run(["ip", "addr", "del", "192.0.2.88/24", "dev",
                        "veth0"], stderr=subprocess.DEVNULL)
    assert settle(lambda: group_doc(d)["join_state"] == "joined", 30)
    g = group_doc(d)
    assert all(q["attached"] for q in g["qps"]), g
    assert "239.1.2.3" in maddr()
    assert "joining again" in d.log()
    out = json.loads(peer(d).stdout)
    assert out["received"] == [out["payload"]] * 2, out


RAW_SENDER = """
import json, sys
import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE

g = json.loads(sys.argv[1])
a = g["ah"]
ctx = Context(name="rxe0")
pd = PD(ctx)
cq = CQ(ctx, 8)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=4, max_recv_wr=4)))
attr = QPAttr(qp_state=e.IBV_QPS_INIT)
attr.qkey, attr.pkey_index, attr.port_num = g["qkey"], 0, a["port_num"]
qp.to_rts(attr)
gr = GlobalRoute(dgid=GID(g["mgid"]), sgid_index=a["sgid_index"],
                 hop_limit=a["hop_limit"])
ah = AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=a["port_num"]))
payload = b"still joined"
mr = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
mr.write(payload, len(payload))
wr = SendWR(opcode=e.IBV_WR_SEND, num_sge=1,
            sg=[SGE(mr.buf, len(payload), mr.lkey)])
wr.set_wr_ud(ah, g["remote_qpn"], g["qkey"])
qp.post_send(wr)
while True:
    n, wcs = cq.poll()
    if n:
        assert wcs[0].status == e.IBV_WC_SUCCESS, wcs[0]
        break
print(payload.decode())
"""


def test_drained_while_leased(rdmad):
    """A client holds the group (it is in its ATTACHED): a reload that
    removes it leaves it joined, draining, without the daemon's QPs,
    until the client goes; then the daemon leaves."""
    d = rdmad(conf(GROUP))
    g = group_doc(d)
    rx = subprocess.Popen([str(BUILD / "tests" / "mcast_peer"), d.sock,
                           "p", "g", "1"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "MCAST_PEER_WAIT": "60000"})
    try:
        assert rx.stdout.readline() == "attached\n", rx.stderr.read()
        status, doc = d.get("/v1/profiles/p/mcast/g")
        assert doc["leases"] == 1, doc
        rewrite(d, conf('{ name = "h"; addr = "239.1.2.4"; '
                        'qps = [ "u1" ]; }'))
        status, body = d.request("POST", "/v1/reload")
        assert status == 200, body
        status, prof = d.get("/v1/profiles/p")
        drain = [o for o in prof["objects"] if o["kind"] == "mcast" and
                 o["name"] == "g"]
        assert drain and drain[0]["state"] == "draining", prof
        assert "239.1.2.3" in maddr()
        # Still a group: a datagram sent to it reaches the client.
        tx = subprocess.run(["/usr/bin/python3", "-c", RAW_SENDER,
                             json.dumps(g)], capture_output=True, text=True,
                            timeout=60)
        assert tx.returncode == 0, tx.stderr
        out, err = rx.communicate(timeout=60)
        assert json.loads(out)["received"] == ["still joined"], (out, err)
    finally:
        rx.kill()
    # The client is gone: so is the group.
    assert settle(lambda: not [o for o in d.get("/v1/profiles/p")[1]
                               ["objects"] if o["name"] == "g"], 30)
    assert settle(lambda: "239.1.2.3" not in maddr(), 10), maddr()
    assert "239.1.2.4" in maddr()


def test_refused_join_fails_the_group(rdmad):
    """A join the kernel refuses (an IPv6 group over RoCE v2: Linux 6.1's
    rdma_cm does not do it) fails the group with a reason; the rest of
    the profile runs."""
    text = conf('{ name = "v6"; addr = "ff12::1:2"; qps = [ "u0" ]; },\n'
                '      ' + GROUP).replace(
        'type = "roce_v2"; family = "ipv4";', 'type = "roce_v2";')
    d = rdmad(text)
    bad = group_doc(d, name="v6")
    assert bad["state"] == "failed", bad
    assert bad["errno"] == 95 and "rdma_join_multicast ff12::1:2: not " \
        "supported" in bad["reason"], bad
    assert group_doc(d)["join_state"] == "joined"
    status, p = d.get("/v1/profiles/p")
    assert p["state"] == "degraded", p
    assert "ff12::1:2" not in maddr()
    r = rdmactl(d, "show", "p", "mcast", "v6")
    assert "failed" in r.stdout and "not supported" in r.stdout, r.stdout


def test_reload_recreating_a_qp_recreates_its_group(rdmad):
    """A group depends on its QPs: a reload that recreates one (its cap
    changed) makes the group again, attached to the new QP."""
    d = rdmad(conf(GROUP))
    before = {q["name"]: q["qp_num"] for q in group_doc(d)["qps"]}
    rewrite(d, conf(GROUP).replace(
        'qp = ( { name = "u0"; pd = "a"; type = "ud";',
        'qp = ( { name = "u0"; pd = "a"; type = "ud"; '
        'cap = { max_send_wr = 32; };'))
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    got = sorted((c["kind"], c["name"], c["action"])
                 for c in body["changes"])
    assert got == [("mcast", "g", "recreate"), ("qp", "u0", "recreate")], \
        body
    g = group_doc(d)
    assert g["join_state"] == "joined", g
    after = {q["name"]: q["qp_num"] for q in g["qps"]}
    assert after["u1"] == before["u1"] and after["u0"] != before["u0"]
    status, qp = d.get("/v1/profiles/p/qp/u0")
    assert qp["qp_num"] == after["u0"]
    assert "239.1.2.3" in maddr()
    out = json.loads(peer(d).stdout)
    assert out["received"] == [out["payload"]] * 2, out
