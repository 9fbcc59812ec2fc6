# SPDX-License-Identifier: MIT
"""A remote peer for rdmad's examples and tests, played by pyverbs on the same device in another context
(rxe cannot route between rxe0 and rxe1): it connects its own RC QP to a
QP of a profile and RDMA-writes into / reads from the daemon's MR."""

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

GID_INDEX = 1  # ::ffff:192.0.2.1 on rxe0


class Peer:
    def __init__(self, ibdev="rxe0", size=1 << 20):
        self.ctx = Context(name=ibdev)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 16)
        cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1,
                    max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq,
                                          rcq=self.cq, cap=cap))
        self.mr = MR(self.pd, size, e.IBV_ACCESS_LOCAL_WRITE)
        self.gid = self.ctx.query_gid(1, GID_INDEX)

    @property
    def qp_num(self):
        return self.qp.qp_num

    def connect(self, remote_qpn):
        attr = QPAttr()
        attr.qp_access_flags = (e.IBV_ACCESS_REMOTE_WRITE |
                                e.IBV_ACCESS_REMOTE_READ)
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = remote_qpn
        attr.rq_psn = 0
        attr.sq_psn = 0
        attr.max_dest_rd_atomic = 1
        attr.max_rd_atomic = 1
        attr.min_rnr_timer = 12
        attr.timeout = 14
        attr.retry_cnt = 6
        attr.rnr_retry = 6
        gr = GlobalRoute(dgid=self.gid, sgid_index=GID_INDEX)
        attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
        self.qp.to_rts(attr)

    def _post(self, opcode, length, rkey, addr):
        sge = SGE(self.mr.buf, length, self.mr.lkey)
        wr = SendWR(opcode=opcode, num_sge=1, sg=[sge],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, addr)
        self.qp.post_send(wr)
        for _ in range(200000):
            n, wcs = self.cq.poll()
            if n:
                assert wcs[0].status == e.IBV_WC_SUCCESS, wcs[0].status
                return
        raise TimeoutError("no completion")

    def write(self, data, rkey, addr):
        self.mr.write(data, len(data))
        self._post(e.IBV_WR_RDMA_WRITE, len(data), rkey, addr)

    def read(self, length, rkey, addr):
        self._post(e.IBV_WR_RDMA_READ, length, rkey, addr)
        return self.mr.read(length, 0)

    def close(self):
        for o in (self.qp, self.mr, self.cq, self.pd, self.ctx):
            o.close()
