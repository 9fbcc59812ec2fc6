# SPDX-License-Identifier: MIT
"""Every object kind on a real device (rxe): created with its declared
attributes, checked against the kernel's view; what rxe cannot do (XRC,
device memory) is failed with a reason while the rest runs; a loopback RC
pair reaches RTS from config alone and moves data."""

import json
import subprocess
from pathlib import Path

from conftest import RDMAD, rdma_res, rdmactl

KINDS = """
devices = ( { name = "d0"; match = { netdev = "veth0"; };
              gid = { type = "roce_v2"; family = "ipv4"; }; } );
profiles = (
  { name = "all"; device = "d0";
    memory = ( { name = "m"; size = "4M"; }, { name = "tm"; size = "64K"; } );
    xrcd = ( { name = "x"; } );
    pd = ( { name = "a"; }, { name = "tp"; } );
    dm = ( { name = "dev"; size = "64K"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m";
             access = [ "local_write", "remote_write", "remote_read",
                        "mw_bind" ]; },
           # The target's: reached only through its windows.
           { name = "tr"; pd = "tp"; memory = "tm";
             access = [ "local_write", "mw_bind" ]; } );
    mw = ( { name = "w1"; pd = "a"; type = 1; },
           { name = "w2"; pd = "a"; type = 2; } );
    cq = ( { name = "c"; cqe = 128; }, { name = "c2"; cqe = 64; },
           { name = "ct"; cqe = 16; } );
    srq = ( { name = "s"; pd = "a"; max_wr = 64; max_sge = 2;
              srq_limit = 8; },
            { name = "sx"; pd = "a"; type = "xrc"; xrcd = "x"; cq = "c"; } );
    qp = ( { name = "q0"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "q1";
             access = [ "remote_write", "remote_read" ]; },
           { name = "q1"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "q0";
             access = [ "remote_write", "remote_read" ]; },
           { name = "u0"; pd = "a"; type = "uc"; send_cq = "c";
             recv_cq = "c"; state = "rtr"; path = { dqpn = 17; mtu = 512; }; },
           { name = "d0"; pd = "a"; type = "ud"; send_cq = "c2";
             recv_cq = "c2"; srq = "s"; state = "rts"; },
           { name = "xs"; pd = "a"; type = "xrc_send"; send_cq = "c";
             state = "init"; },
           { name = "xr"; type = "xrc_recv"; xrcd = "x"; } );
    ah = ( { name = "h"; pd = "a"; dgid = "192.0.2.1"; } );
    target = ( { name = "t"; listen = "192.0.2.1:7471"; pd = "tp";
                 cq = "ct"; allow = [ "192.0.2.0/24" ];
                 expose = ( { mr = "tr"; access = [ "remote_read" ];
                              length = 4096; } ); } );
    mcast = ( { name = "g"; addr = "239.1.9.9"; qps = [ "d0" ]; } );
  }
);
"""


def objects(d, profile):
    status, p = d.get(f"/v1/profiles/{profile}")
    assert status == 200
    return p, {(o["kind"], o["name"]): o for o in p["objects"]}


def test_every_kind(rdmad):
    d = rdmad(KINDS)
    prof, objs = objects(d, "all")
    assert prof["ibdev"] == "rxe0"          # matched by netdev
    assert prof["gid_index"] == 1           # the RoCE v2 IPv4 GID
    assert prof["import_capable"] is False  # rxe cannot import
    assert prof["state"] == "degraded"

    # What rxe refuses (no XRC, no device memory): failed with errno and
    # a sentence.
    for key in (("xrcd", "x"), ("dm", "dev"), ("qp", "xs")):
        o = objs[key]
        assert o["state"] == "failed", o
        assert o["errno"] in (95, 38), o   # EOPNOTSUPP / ENOSYS
        assert o["reason"]
    # ... and what depends on it.
    for key in (("srq", "sx"), ("qp", "xr")):
        assert objs[key]["state"] == "failed"
        assert "xrcd 'x' it depends on is failed" in objs[key]["reason"]

    # The rest runs, as declared.
    for key in (("memory", "m"), ("memory", "tm"), ("pd", "a"), ("pd", "tp"),
                ("mr", "r"),
                ("mr", "tr"), ("mw", "w1"),
                ("mw", "w2"), ("cq", "c"), ("cq", "c2"), ("srq", "s"),
                ("qp", "q0"), ("qp", "q1"), ("qp", "u0"), ("qp", "d0"),
                ("ah", "h"), ("cq", "ct"), ("target", "t"), ("mcast", "g")):
        assert objs[key]["state"] == "ready", (key, objs[key])
    t = objs[("target", "t")]
    assert t["listen"] == "192.0.2.1:7471" and t["listening"] is True
    assert t["connections"] == [] and t["config"]["expose"][0]["mr"] == "tr"
    assert objs[("mw", "w1")]["type"] == 1
    assert objs[("mw", "w2")]["type"] == 2
    assert objs[("srq", "s")]["max_wr"] >= 64
    assert objs[("srq", "s")]["srq_limit"] == 8

    q0, q1 = objs[("qp", "q0")], objs[("qp", "q1")]
    assert q0["qp_state"] == "rts" and q1["qp_state"] == "rts"
    assert q0["dqpn"] == q1["qp_num"] and q1["dqpn"] == q0["qp_num"]
    assert q0["dgid"] == "0000:0000:0000:0000:0000:ffff:c000:0201"
    u0 = objs[("qp", "u0")]
    assert u0["qp_state"] == "rtr" and u0["dqpn"] == 17
    assert u0["mtu"] == 512
    assert objs[("qp", "d0")]["qp_state"] == "rts"

    # The kernel agrees.
    kqp = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
    assert kqp[q0["qp_num"]]["state"] == "RTS"
    assert kqp[q0["qp_num"]]["rqpn"] == q1["qp_num"]
    assert kqp[u0["qp_num"]]["type"] == "UC"
    assert kqp[u0["qp_num"]]["state"] == "RTR"
    assert len(rdma_res("srq", d.pid)) == 1
    assert len(rdma_res("cq", d.pid)) == 3
    # The target's listener, and the group's id (bound, joined).
    assert sorted(c["state"] for c in rdma_res("cm_id", d.pid)) == \
        ["ADDR_BOUND", "LISTEN"]
    # In the profile's context (librdmacm, for the target's listener,
    # opens a context of its own, with a PD).
    ctx = [r for r in rdma_res("pd", d.pid) if r.get("ctxn") == prof["ctxn"]]
    assert len(ctx) == 2
    assert len(rdma_res("mr", d.pid)) == 2


def test_selftest_moves_data(rdmad):
    d = rdmad(KINDS)
    status, body = d.request("POST", "/v1/profiles/all/selftest",
                             {"a": "q0", "b": "q1", "mr": "r"})
    assert status == 200, body
    assert body["ok"] is True
    assert body["rdma_write"]["ok"] is True
    assert body["rdma_write"]["bytes"] > 0
    assert body["send_recv"]["ok"] is True
    assert body["send_recv"]["bytes"] > 0


def test_selftest_refuses_what_is_not_connected(rdmad):
    d = rdmad(KINDS)
    # u0 is a UC QP in RTR: not a connected RC pair in RTS.
    status, body = d.request("POST", "/v1/profiles/all/selftest",
                             {"a": "q0", "b": "u0", "mr": "r"})
    assert status == 422, body
    assert body["ok"] is False
    status, body = d.request("POST", "/v1/profiles/all/selftest",
                             {"a": "q0", "b": "nope"})
    assert status == 404
    status, body = d.request("POST", "/v1/profiles/all/selftest",
                             {"a": "q0", "b": "xr"})
    assert status == 409  # failed on rxe: not ready


def test_mutating_calls_need_the_token(rdmad):
    d = rdmad(KINDS)
    status, body = d.request("POST", "/v1/profiles/all/selftest",
                             {"a": "q0", "b": "q1"}, token=False)
    assert status == 401
    assert body["error"]["code"] == "unauthorized"
    status, body = d.request("POST", "/v1/reload", token="wrong" * 4)
    assert status == 401


def test_dump_reads_back_the_same(write_conf, tmp_path):
    path = write_conf(KINDS)
    r = subprocess.run([str(RDMAD), "--dump", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    dumped = tmp_path / "dumped.conf"
    dumped.write_text(r.stdout)
    r2 = subprocess.run([str(RDMAD), "--dump", "-c", str(dumped)],
                        capture_output=True, text=True, timeout=60)
    assert r2.returncode == 0, r2.stderr
    # The same effective configuration, apart from the header line.
    assert r.stdout.splitlines()[1:] == r2.stdout.splitlines()[1:]
    assert 'peer = "q1";' in r.stdout
    assert "max_send_wr = 16;" in r.stdout  # defaults are shown


def test_check_refuses_limits_above_the_device(write_conf):
    path = write_conf("""
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = ( { name = "p"; device = "d0";
  pd = ( { name = "a"; } );
  cq = ( { name = "c"; cqe = 4000000; } );
  qp = ( { name = "q"; pd = "a"; type = "rc"; send_cq = "c"; recv_cq = "c";
           cap = { max_send_sge = 1000; }; } ); } );
""")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78
    assert f"{path}:5: cq 'c': cqe 4000000 is above the" in r.stderr
    assert "that rxe0 supports" in r.stderr
    assert f"{path}:6: qp 'q': max_send_sge 1000 is above the" in r.stderr


def rxe0_attr(name):
    """A device attribute as ibv_devinfo -v prints it for rxe0."""
    out = subprocess.run(["ibv_devinfo", "-v", "-d", "rxe0"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        k, _, v = line.strip().partition(":")
        if k.strip() == name:
            return v.strip()
    raise AssertionError(f"ibv_devinfo has no {name}:\n{out}")


def test_check_refuses_reads_in_flight_above_the_device(write_conf):
    """max_rd_atomic and max_dest_rd_atomic against the device's own
    max_qp_init_rd_atom and max_qp_rd_atom (ibv_devinfo's reading)."""
    init = int(rxe0_attr("max_qp_init_rd_atom"))
    dest = int(rxe0_attr("max_qp_rd_atom"))
    assert init < 255 and dest < 255  # else rxe could not be exceeded
    text = """
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "p"; device = "d0";
  pd = ( {{ name = "a"; }} );
  cq = ( {{ name = "c"; }} );
  qp = ( {{ name = "q"; pd = "a"; type = "rc"; send_cq = "c"; recv_cq = "c";
           state = "rts"; path = {{ dgid = "192.0.2.1"; dqpn = 4660;
           max_rd_atomic = {ri}; max_dest_rd_atomic = {rd}; }}; }} ); }} );
"""
    ok = write_conf(text.format(ri=init, rd=dest), name="ok.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(ok)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    bad = write_conf(text.format(ri=init + 1, rd=dest + 1), name="bad.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78
    assert (f"{bad}:6: qp 'q': path max_rd_atomic {init + 1} is above the "
            f"{init} that rxe0 supports") in r.stderr, r.stderr
    assert (f"{bad}:6: qp 'q': path max_dest_rd_atomic {dest + 1} is above "
            f"the {dest} that rxe0 supports") in r.stderr, r.stderr


def test_check_says_what_an_absent_device_leaves_unchecked(write_conf):
    path = write_conf("""
devices = ( { name = "gone"; match = { ibdev = "no-such-rdma9"; }; } );
profiles = ( { name = "p"; device = "gone"; pd = ( { name = "a"; } ); } );
""")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert ("device 'gone' is not present: the limits, GID indexes and "
            "target addresses of its 1 profile were not checked") in r.stderr


def test_config_endpoint_speaks_the_file_vocabulary(rdmad):
    d = rdmad(KINDS)
    status, c = d.get("/v1/config")
    assert status == 200
    prof = c["profiles"][0]
    assert prof["name"] == "all"
    assert prof["qp"][0]["peer"] == "q1"
    assert prof["mr"][0]["access"] == ["local_write", "remote_write",
                                       "remote_read", "mw_bind"]
    assert c["devices"][0]["match"] == {"netdev": "veth0"}


def test_rdmactl_selftest_and_reload(rdmad):
    d = rdmad(KINDS)
    r = rdmactl(d, "selftest", "all", "q0", "q1", "r")
    assert r.returncode == 0, r.stderr
    assert "selftest all: q0 <-> q1 through mr r: ok" in r.stdout
    assert "rdma_write ok" in r.stdout and "send_recv  ok" in r.stdout
    r = rdmactl(d, "reload")
    assert r.returncode == 0, r.stderr
    # Nothing changed; what failed on rxe is tried again, and says so.
    lines = r.stdout.splitlines()
    assert lines[-1] == "5 changes, 19 objects kept"
    assert all(line.split()[0] == "retry" for line in lines[:-1]), lines
    assert {line.split()[2] for line in lines[:-1]} == {
        "x", "dev", "sx", "xs", "xr"}
    # (A user who is neither root nor in admin_group is refused on the
    # control socket: test_sharing.py.)


def rxe0_max_inline(qp_type):
    """The most inline data rxe0 takes for a QP of qp_type, found with
    pyverbs by halving (no device attribute says it)."""
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.pd import PD
    from pyverbs.pyverbs_error import PyverbsRDMAError
    from pyverbs.qp import QP, QPCap, QPInitAttr

    with Context(name="rxe0") as ctx, PD(ctx) as pd, CQ(ctx, 2) as cq:
        def takes(n):
            cap = QPCap(max_send_wr=1, max_recv_wr=1, max_send_sge=1,
                        max_recv_sge=1, max_inline_data=n)
            try:
                QP(pd, QPInitAttr(qp_type=qp_type, scq=cq, rcq=cq,
                                  cap=cap)).close()
                return True
            except PyverbsRDMAError:
                return False
        lo, hi = 0, 1 << 20
        assert takes(lo) and not takes(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if takes(mid) else (lo, mid)
        return lo


def test_check_refuses_inline_data_above_the_device(write_conf, rdmad):
    """max_inline_data is no device attribute: --check tries a throwaway
    QP and, when the device refuses, says the most it takes (the same
    figure pyverbs finds by trying); at the limit the daemon makes the
    QP, and the kernel gives it at least that much."""
    import pyverbs.enums as e
    most = {"rc": rxe0_max_inline(e.IBV_QPT_RC),
            "uc": rxe0_max_inline(e.IBV_QPT_UC)}
    text = """
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "p"; device = "d0";
  pd = ( {{ name = "a"; }} );
  cq = ( {{ name = "c"; }} );
  qp = ( {{ name = "q"; pd = "a"; type = "rc"; send_cq = "c";
           recv_cq = "c"; cap = {{ max_inline_data = {rc}; }}; }},
         {{ name = "u"; pd = "a"; type = "uc"; send_cq = "c";
           recv_cq = "c"; cap = {{ max_inline_data = {uc}; }}; }},
         {{ name = "q2"; pd = "a"; type = "rc"; send_cq = "c";
           recv_cq = "c"; cap = {{ max_inline_data = {rc}; }}; }} ); }} );
"""
    bad = write_conf(text.format(rc=most["rc"] + 1, uc=most["uc"] + 100),
                     name="bad.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78, r.stderr
    for name, line, typ, asked in (("q", 6, "rc", most["rc"] + 1),
                                   ("u", 8, "uc", most["uc"] + 100),
                                   ("q2", 10, "rc", most["rc"] + 1)):
        assert (f"{bad}:{line}: qp '{name}': max_inline_data {asked} is "
                f"above the {most[typ]} bytes that rxe0 takes for a {typ} "
                f"QP") in r.stderr, r.stderr
    good = text.format(rc=most["rc"], uc=most["uc"])
    r = subprocess.run([str(RDMAD), "--check", "-c",
                        str(write_conf(good, name="good.conf"))],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    d = rdmad(good)
    _, objs = objects(d, "p")
    for name, typ in (("q", "rc"), ("u", "uc"), ("q2", "rc")):
        o = objs[("qp", name)]
        assert o["state"] == "ready", o
        assert o["cap"]["max_inline_data"] >= most[typ], o


HUGE = Path("/sys/kernel/mm/hugepages")

HUGETLB = """
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "p"; device = "d0";
  memory = ( {{ name = "h"; size = "{size}"; backing = "hugetlb";
               page_size = "{page}"; }} );
  pd = ( {{ name = "a"; }} );
  mr = ( {{ name = "r"; pd = "a"; memory = "h"; }} ); }} );
"""


def set_pool(kb, n):
    pool = HUGE / f"hugepages-{kb}kB"
    (pool / "nr_hugepages").write_text(f"{n}\n")
    return (int((pool / "nr_hugepages").read_text()),
            int((pool / "free_hugepages").read_text()))


def page_sizes_of(pid, name):
    """KernelPageSize of each mapping of memfd name in pid (smaps)."""
    sizes, cur = [], False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if line[:1] in "0123456789abcdef" and "-" in line.split()[0]:
            cur = f"/memfd:{name} " in line + " "
        elif cur and line.startswith("KernelPageSize:"):
            sizes.append(int(line.split()[1]))
    return sizes


def test_hugetlb_page_size_and_an_empty_pool(write_conf, rdmad):
    """page_size picks the huge page pool: --check refuses what the pool
    cannot give with how to raise it, the daemon started anyway fails
    the memory with the same words and runs the rest; with the pool
    filled the memory is made of 2M pages (the kernel's smaps says so)
    and registered, and its pages go back to the pool at stop. A page
    size the host lacks (1G, where the CPU or kernel has none) is said
    to be missing."""
    text = HUGETLB.format(size="4M", page="2M")
    path = write_conf(text, name="huge.conf")
    try:
        assert set_pool(2048, 0) == (0, 0)
        r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 78, r.stderr
        shortage = ("the 2M huge page pool has 0 free pages (of 0), 2 "
                    "needed; raise /sys/kernel/mm/hugepages/"
                    "hugepages-2048kB/nr_hugepages")
        assert f"{path}:4: memory 'h': {shortage}" in r.stderr, r.stderr
        d = rdmad(text)
        p, objs = objects(d, "p")
        assert objs[("memory", "h")]["state"] == "failed"
        assert shortage in objs[("memory", "h")]["reason"], objs
        assert objs[("pd", "a")]["state"] == "ready"
        assert d.stop() == 0

        assert set_pool(2048, 2) == (2, 2)
        r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        d = rdmad(text)
        p, objs = objects(d, "p")
        assert objs[("memory", "h")]["state"] == "ready", objs
        assert objs[("memory", "h")]["page_size"] == 2 << 20
        assert objs[("mr", "r")]["state"] == "ready", objs
        assert [m["mrlen"] for m in rdma_res("mr", d.pid)] == [4 << 20]
        assert page_sizes_of(d.pid, "h") == [2048], page_sizes_of(d.pid, "h")
        assert set_pool(2048, 2) == (2, 0)  # both taken, at creation
        assert d.stop() == 0
        assert set_pool(2048, 2) == (2, 2)
    finally:
        set_pool(2048, 0)

    gig = write_conf(HUGETLB.format(size="1G", page="1G"), name="gig.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(gig)],
                       capture_output=True, text=True, timeout=60)
    pool = HUGE / "hugepages-1048576kB"
    if not pool.exists():
        assert r.returncode == 78
        assert (f"{gig}:4: memory 'h': this host has no 1G huge pages (no "
                f"{pool})") in r.stderr, r.stderr
    elif int((pool / "free_hugepages").read_text()) == 0:
        assert r.returncode == 78
        assert f"{gig}:4: memory 'h': the 1G huge page pool has 0 free" \
            in r.stderr, r.stderr
    else:
        assert r.returncode == 0, r.stderr
    bad = write_conf(HUGETLB.format(size="3M", page="2M"), name="bad.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78
    assert (f"{bad}:4: memory 'h': size 3145728 is not a multiple of its "
            f"page_size 2097152") in r.stderr, r.stderr


ODP = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = ( { name = "p"; device = "d0";
  memory = ( { name = "m"; size = "1M"; } );
  pd = ( { name = "a"; } );
  mr = ( { name = "r"; pd = "a"; memory = "m"; odp = true;
           access = [ "local_write" ]; } ); } );
"""


def test_odp_checked_against_the_device(write_conf):
    """odp = true needs a device that pages on demand: rxe's odp_caps (as
    pyverbs reads them) say whether it does; without, --check and a start
    refuse the mr at its line (tests/hw/test_odp_hw.py registers one on
    hardware that has it)."""
    import pyverbs.enums as e
    from pyverbs.device import Context

    with Context(name="rxe0") as ctx:
        caps = ctx.query_device_ex().odp_caps.general_caps
    path = write_conf(ODP, name="odp.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    if caps & e.IBV_ODP_SUPPORT:
        assert r.returncode == 0, r.stderr
        return
    msg = (f"{path}:6: mr 'r': odp, but rxe0 has no on-demand paging (its "
           f"odp_caps say none)")
    assert r.returncode == 78, r.stderr
    assert msg in r.stderr, r.stderr
    r = subprocess.run([str(RDMAD), "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78, r.stderr
    assert msg in r.stderr, r.stderr
    # Without odp the same file is fine.
    plain = write_conf(ODP.replace(" odp = true;", ""), name="plain.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(plain)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # An implicit mr (odp alone: the whole address space) is refused
    # the same way; on a device that is absent it is left for later.
    implicit = ODP.replace('memory = "m"; odp = true;', "odp = true;")
    path = write_conf(implicit, name="implicit.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78, r.stderr
    assert (f"{path}:6: mr 'r': odp, but rxe0 has no on-demand paging"
            in r.stderr), r.stderr
    absent = write_conf(implicit.replace('"rxe0"', '"no-such-rdma9"'),
                        name="absent.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(absent)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
