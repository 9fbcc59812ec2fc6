# SPDX-License-Identifier: MIT
"""The Python client in shared mode, on a device that imports (mlx5, or
rxe with tests/vm/run --import): prof.context, prof.pd() and prof.mr() are
the daemon's objects imported by pyverbs (Context(cmd_fd=), PD(handle=),
MR(handle=)); data moved by RDMA into the imported MR shows in mr_map();
detach leaves no fd. On stock rxe the import is refused, which
test_python_client.py covers."""

import os
import secrets
import urllib.request

import pytest

from conftest import SHARED_DEV as DEV, free_port
from pyclient_setup import one_mr_conf, rc_to_rts, rdmad

MIB = 1 << 20

pytestmark = pytest.mark.needs_import


@pytest.fixture
def daemon(rdmad, tmp_path):  # noqa: F811 (the conftest fixture)
    port = free_port()
    run = tmp_path / "run"
    d = rdmad(one_mr_conf(run, port, DEV, "16M", "zero_based = true;"))
    yield str(run / "rdmad.sock"), d.url
    assert d.stop() == 0


def get(url, path):
    import json
    with urllib.request.urlopen(url + path) as r:
        return json.loads(r.read())


def connect_loopback(prof, a, b):
    """Connect RC QPs a and b to each other on the profile's port."""
    import pyverbs.enums as e

    for qp, peer in ((a, b), (b, a)):
        rc_to_rts(prof, qp, peer.qp_num, e.IBV_ACCESS_REMOTE_WRITE |
                  e.IBV_ACCESS_REMOTE_READ)


def test_shared_attach_gives_imported_pyverbs_objects(daemon):
    import pyverbs.enums as e
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPCap, QPInitAttr
    from pyverbs.wr import SGE, SendWR

    sock, url = daemon
    daemon_mr = get(url, "/v1/profiles/p/mr/r")
    before = len(os.listdir("/proc/self/fd"))
    with rdmad.connect(sock) as conn:
        with conn.attach("p", mode="shared") as prof:
            assert prof.mode == rdmad.MODE_SHARED
            assert prof.import_capable is True
            assert isinstance(prof.context, Context)
            assert isinstance(prof.pd("a"), PD)
            mr = prof.mr("r")
            assert isinstance(mr, MR)
            # The daemon's one registration, imported: its keys.
            assert (mr.lkey, mr.rkey) == (daemon_mr["lkey"],
                                          daemon_mr["rkey"])
            assert mr.length == 16 * MIB and prof.mr_iova("r") == 0
            sessions = get(url, "/v1/sessions")
            assert sessions[0]["attachments"][0]["mode"] == "shared"

            # An RDMA write from a buffer of ours into the imported MR
            # (its rkey, its zero-based IOVA), seen through mr_map().
            cq = CQ(prof.context, 16)
            cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1,
                        max_recv_sge=1)
            qps = [QP(prof.pd("a"), QPInitAttr(qp_type=e.IBV_QPT_RC,
                                               scq=cq, rcq=cq, cap=cap))
                   for _ in range(2)]
            connect_loopback(prof, *qps)
            data = secrets.token_bytes(4096)
            src = MR(prof.pd("a"), len(data), e.IBV_ACCESS_LOCAL_WRITE)
            src.write(data, len(data))
            wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                        sg=[SGE(src.buf, len(data), src.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_rdma(mr.rkey, prof.mr_iova("r") + 5 * MIB)
            qps[0].post_send(wr)
            for _ in range(1000000):
                n, wcs = cq.poll()
                if n:
                    break
            assert n and wcs[0].status == e.IBV_WC_SUCCESS
            view = prof.mr_map("r")
            assert bytes(view[5 * MIB:5 * MIB + len(data)]) == data
            for o in (src, *qps, cq):
                o.close()
        assert get(url, "/v1/sessions")[0]["attachments"] == []
    assert len(os.listdir("/proc/self/fd")) == before
