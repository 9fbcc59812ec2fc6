# SPDX-License-Identifier: MIT
"""UD multicast groups (kind mcast) on rxe: the daemon joins through
rdma_cm (the netdev's IP multicast membership, `ip maddr`, is the judge),
attaches its UD QPs and describes the group (MGID, MLID, qkey, AH) so that
a client's own QPs (pyverbs, tests/integration/mcast_peer.py) attach and
send to it: a datagram sent to the group arrives at both receivers.
Removal on reload detaches and leaves."""

import json
import subprocess
from pathlib import Path

from conftest import BUILD, rdma_res, rdmactl

HERE = Path(__file__).resolve().parent

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
