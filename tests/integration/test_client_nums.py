# SPDX-License-Identifier: MIT
"""QPs and SRQs by number, for clients (librdmad's rdmad_qp_num(),
rdmad_srq_num(), rdmad_open_qp(); the Python client's qp_num() and
srq_num()): the numbers are the kernel's (`rdma resource show qp`), for
every QP type rxe has; names that do not exist, SRQs that are not XRC
and QPs that are not XRC targets get their clear errors. rxe has no XRC:
opening a daemon's XRC target QP (ibv_open_qp) and an XRC SRQ's srq_num
are covered in tests/hw/test_xrc_hw.py."""

import subprocess
import sys

from conftest import BUILD, ROOT, rdma_res
from test_client_events import run_dir, start  # noqa: F401

sys.path.insert(0, str(ROOT / "client" / "python"))
import rdmad as rdmadpy  # noqa: E402

HELPER = BUILD / "tests" / "nums_client"

QPS = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = (
  { name = "p"; device = "d0";
    memory = ( { name = "m"; size = "1M"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m";
             access = [ "local_write", "remote_write" ]; } );
    cq = ( { name = "c"; } );
    srq = ( { name = "s"; pd = "a"; } );
    qp = ( { name = "rc0"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; },
           { name = "ud0"; pd = "a"; type = "ud"; send_cq = "c";
             recv_cq = "c"; state = "rts"; },
           { name = "uc0"; pd = "a"; type = "uc"; send_cq = "c";
             recv_cq = "c"; srq = "s"; } ); }
);
"""


def test_numbers_are_the_kernels(rdmad, run_dir):  # noqa: F811
    d = start(rdmad, run_dir)
    d.conf.write_text(d.conf.read_text().split("devices =")[0] + QPS)
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    d.settle()
    kernel = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
    want = {}
    for name, kind in (("rc0", "RC"), ("ud0", "UD"), ("uc0", "UC")):
        doc = d.get(f"/v1/profiles/p/qp/{name}")[1]
        assert kernel[doc["qp_num"]]["type"] == kind, kernel
        want[name] = doc["qp_num"]

    r = subprocess.run([str(HELPER), d.sock, "p", "qp:rc0", "qp:ud0",
                        "qp:uc0", "qp:nope", "srq:s", "srq:nope",
                        "open:rc0"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    got = {}
    for line in r.stdout.splitlines()[:-1]:
        kind, name, num, err, *msg = line.split(" ", 4) + [""]
        got[(kind, name)] = (int(num) if num.isdigit() else num, err,
                             " ".join(msg))
    for name, qpn in want.items():
        assert got[("qp", name)][:2] == (qpn, "0"), got
    assert got[("qp", "nope")][:2] == (0, "ENOENT"), got
    assert "has no ready qp 'nope'" in got[("qp", "nope")][2]
    assert got[("srq", "s")][:2] == (0, "EINVAL"), got
    assert "is not an XRC SRQ" in got[("srq", "s")][2]
    assert got[("srq", "nope")][:2] == (0, "ENOENT"), got
    assert got[("open", "rc0")][:2] == (0, "EINVAL"), got
    assert "not an XRC target QP" in got[("open", "rc0")][2]
    assert r.stdout.splitlines()[-1] == "detached 0"

    # The Python client: the same numbers, the same refusals.
    with rdmadpy.connect(d.sock) as conn, conn.attach("p") as prof:
        for name, qpn in want.items():
            assert prof.qp_num(name) == qpn
        for call, arg, code in ((prof.qp_num, "nope", "not_found"),
                                (prof.srq_num, "s", "bad_request"),
                                (prof.srq_num, "nope", "not_found")):
            try:
                call(arg)
            except rdmadpy.Error as e:
                assert e.code == code, (arg, e)
            else:
                raise AssertionError(f"{call.__name__}({arg!r}) passed")


DM = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = (
  { name = "p"; device = "d0";
    memory = ( { name = "m"; size = "1M"; } );
    pd = ( { name = "a"; } );
    dm = ( { name = "dev"; size = "64K"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m"; },
           { name = "dr"; pd = "a"; dm = "dev"; length = "4K";
             access = [ "local_write" ]; } ); }
);
"""


def test_device_memory_up_to_where_rxe_refuses(rdmad, run_dir):  # noqa: F811
    """An mr over device memory (dm = "...") is declared and refused
    where rxe refuses it: rxe has no device memory (ibv_devinfo's
    max_dm_size is 0), so the dm fails with why and its mr with it,
    while the rest is made; a client is told no such dm, and in local
    mode that device memory is the daemon's context's. (max_dm_size as
    pyverbs reads it says rxe has none.) Importing it
    (ibv_import_dm) and the MR over it is tests/hw/test_dm_hw.py."""
    from pyverbs.device import Context

    with Context(name="rxe0") as ctx:
        assert ctx.query_device_ex().max_dm_size == 0
    d = start(rdmad, run_dir)
    d.conf.write_text(d.conf.read_text().split("devices =")[0] + DM)
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    d.settle()
    objs = {(o["kind"], o["name"]): o
            for o in d.get("/v1/profiles/p")[1]["objects"]}
    assert objs[("dm", "dev")]["state"] == "failed"
    assert "device memory needs a device that has it" in \
        objs[("dm", "dev")]["reason"], objs
    assert objs[("mr", "dr")]["state"] == "failed"
    assert "dm 'dev'" in objs[("mr", "dr")]["reason"], objs
    assert objs[("mr", "r")]["state"] == "ready"
    assert [m["mrlen"] for m in rdma_res("mr", d.pid)] == [1 << 20]

    r = subprocess.run([str(HELPER), d.sock, "p", "dm:dev", "mr:dr",
                        "mr:r"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("dm dev 0 ENOENT profile 'p' has no ready "
                               "dm 'dev' in local mode"), lines
    assert lines[1].startswith("mr dr 0 ENOENT"), lines
    assert lines[2].split()[:2] == ["mr", "r"] and lines[2].split()[3] == "0"
    assert lines[-1] == "detached 0"
