# SPDX-License-Identifier: MIT
"""The daemon creates exactly the objects its configuration declares, on a
real device, and destroys them all on SIGTERM. The kernel's own view
(`rdma resource show`) is the judge."""

import signal

from conftest import rdma_res

MIB = 1 << 20

CONFIG = """
devices = ( { name = "fabric0"; match = { ibdev = "rxe0"; }; port = 1; } );
profiles = (
  { name = "ingest";
    device = "fabric0";
    memory = ( { name = "ring"; size = "64M"; backing = "memfd"; },
               { name = "small"; size = 1048576; } );
    pd = ( { name = "main"; }, { name = "aux"; }, { name = "spare"; } );
    mr = ( { name = "ring"; pd = "main"; memory = "ring";
             access = [ "local_write", "remote_write", "remote_read" ];
             zero_based = true; },
           { name = "small"; pd = "aux"; memory = "small";
             access = [ "local_write" ]; offset = "4K"; length = "256K"; } );
    cq = ( { name = "cq0"; cqe = 1024; channel = true; },
           { name = "cq1"; cqe = 64; } );
    qp = ( { name = "q0"; pd = "main"; type = "rc"; send_cq = "cq0";
             recv_cq = "cq0"; state = "init"; access = [ "remote_write" ];
             cap = { max_send_wr = 64; max_recv_wr = 32;
                     max_send_sge = 1; max_recv_sge = 1; }; },
           { name = "q1"; pd = "aux"; type = "ud"; send_cq = "cq1";
             recv_cq = "cq1"; state = "reset"; } );
  }
);
"""


def by_name(profile, kind):
    return {o["name"]: o for o in profile["objects"] if o["kind"] == kind}


def test_objects_exist_in_kernel_and_go_on_sigterm(rdmad):
    d = rdmad(CONFIG)
    pds = rdma_res("pd", d.pid)
    mrs = rdma_res("mr", d.pid)
    cqs = rdma_res("cq", d.pid)
    qps = rdma_res("qp", d.pid)
    assert len(pds) == 3
    assert len(mrs) == 2
    assert len(cqs) == 2
    assert len(qps) == 2
    assert sorted(m["mrlen"] for m in mrs) == [256 * 1024, 64 * MIB]

    assert d.stop(signal.SIGTERM) == 0
    for kind in ("pd", "mr", "cq", "qp"):
        assert rdma_res(kind, d.pid) == [], kind
    assert "stopped" in d.log()


def test_rest_matches_kernel(rdmad):
    d = rdmad(CONFIG)
    status, prof = d.get("/v1/profiles/ingest")
    assert status == 200
    assert prof["state"] == "ready", prof
    assert prof["ibdev"] == "rxe0"
    assert all(o["state"] == "ready" for o in prof["objects"])

    mrs = by_name(prof, "mr")
    # iproute2 prints keys in hex.
    kernel_mrs = {int(m["rkey"], 16): m for m in rdma_res("mr", d.pid)}
    for name, length in (("ring", 64 * MIB), ("small", 256 * 1024)):
        mr = mrs[name]
        assert mr["length"] == length
        k = kernel_mrs[mr["rkey"]]
        assert int(k["lkey"], 16) == mr["lkey"]
        assert k["mrlen"] == length
    assert mrs["ring"]["iova"] == 0
    assert mrs["small"]["iova"] != 0
    assert mrs["ring"]["access"] == ["local_write", "remote_write",
                                     "remote_read"]

    qps = by_name(prof, "qp")
    kernel_qps = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
    assert kernel_qps[qps["q0"]["qp_num"]]["type"] == "RC"
    assert kernel_qps[qps["q0"]["qp_num"]]["state"] == "INIT"
    assert kernel_qps[qps["q1"]["qp_num"]]["type"] == "UD"
    assert kernel_qps[qps["q1"]["qp_num"]]["state"] == "RESET"
    assert qps["q0"]["qp_state"] == "init"
    assert qps["q0"]["cap"]["max_send_wr"] >= 64

    cqs = by_name(prof, "cq")
    assert cqs["cq0"]["cqe"] >= 1024
    assert cqs["cq0"]["channel"] is True

    status, one = d.get("/v1/profiles/ingest/mr/ring")
    assert status == 200
    assert one == mrs["ring"]

    status, lst = d.get("/v1/profiles")
    assert status == 200
    assert [p["name"] for p in lst] == ["ingest"]
    assert lst[0]["objects"] == 11


def test_absent_device_leaves_profile_pending(rdmad):
    d = rdmad("""
devices = ( { name = "gone"; match = { ibdev = "rxe9"; }; },
            { name = "here"; match = { ibdev = "rxe1"; }; } );
profiles = ( { name = "p"; device = "gone"; pd = ( { name = "a"; } ); },
             { name = "q"; device = "here"; pd = ( { name = "b"; } ); } );
""")
    status, p = d.get("/v1/profiles/p")
    assert status == 200
    assert p["state"] == "pending"
    assert "rxe9" in p["reason"]
    status, q = d.get("/v1/profiles/q")
    assert q["state"] == "ready"
    assert len(rdma_res("pd", d.pid)) == 1


def test_not_found_is_json_404(rdmad):
    d = rdmad(CONFIG)
    for path in ("/nope", "/v1/nope", "/v1/profiles/nope",
                 "/v1/profiles/ingest/mr/nope", "/v1/profiles/ingest/xx/ring",
                 "/v1/devices/nope", "/v1/devices/rxe0/ports/0",
                 "/v1/devices/rxe0/ports/99", "/v1/devices/rxe0/ports/x"):
        status, body = d.get(path)
        assert status == 404, path
        assert body["error"]["code"] == "not_found", path
        assert body["error"]["message"], path
    status, body = d.request("DELETE", "/v1/profiles")
    assert status == 405
    assert body["error"]["code"] == "method_not_allowed"


def test_address_handles_with_and_without_grh(rdmad):
    """An AH with a dgid has a GRH; one with only a dlid is IB LID
    routing, which a RoCE port (rxe) refuses: the object fails with the
    device's reason, and the rest of the profile is ready."""
    d = rdmad("""
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = ( { name = "p"; device = "d0";
  pd = ( { name = "a"; } );
  ah = ( { name = "grh"; pd = "a"; dgid = "192.0.2.1"; sl = 3;
           static_rate = 7; },
         { name = "lid"; pd = "a"; dlid = 5; } ); } );
""")
    status, p = d.get("/v1/profiles/p")
    assert status == 200
    ahs = by_name(p, "ah")
    assert ahs["grh"]["state"] == "ready", ahs["grh"]
    assert ahs["grh"]["dgid"] == "0000:0000:0000:0000:0000:ffff:c000:0201"
    assert ahs["lid"]["state"] == "failed", ahs["lid"]
    assert "ibv_create_ah to lid 5" in ahs["lid"]["reason"]
    assert by_name(p, "pd")["a"]["state"] == "ready"
