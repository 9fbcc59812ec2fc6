# SPDX-License-Identifier: MIT
"""One process of the shared-mode stress suite (test_shared_stress.py):
SESSIONS sessions to rdmad, each looping: attach SHARED, import the
context, the PD and the MR "ring" by handle (pyverbs: rdma-core's own
import, which asks the kernel for the MR), make a CQ and a QP of its own
in the daemon's context, unimport and detach; for SECONDS seconds.

  shared_stress_client.py SOCKET PROFILE SESSIONS SECONDS [careless]

With "careless", the first session's first cycle destroys the MR it
imported (ibv_dereg_mr(), the mistake rdmad must survive) and prints
"careless HANDLE" before going on like the others.
An import the kernel refuses is counted in "dead", with the handle it was
given. Prints one JSON line of counts at the end: cycles, refused (by
code), broken (transport errors), dead ([handle...]), errors (the first
three transport errors, for people).
"""

import ctypes
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rdmadproto import ATTACH, ATTACHED, DETACH, DETACHED, Client  # noqa

import pyverbs.enums as e  # noqa: E402
from pyverbs.cq import CQ  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError  # noqa
from pyverbs.qp import QP, QPCap, QPInitAttr  # noqa: E402

# The MR each cycle imports (RDMAD_STRESS_MR; "ring" by default).
MR_NAME = os.environ.get("RDMAD_STRESS_MR", "ring")

ibv = ctypes.CDLL("libibverbs.so.1")
ibv.ibv_import_device.restype = ctypes.c_void_p
ibv.ibv_import_device.argtypes = [ctypes.c_int]
ibv.ibv_import_pd.restype = ctypes.c_void_p
ibv.ibv_import_pd.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
ibv.ibv_import_mr.restype = ctypes.c_void_p
ibv.ibv_import_mr.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
ibv.ibv_dereg_mr.argtypes = [ctypes.c_void_p]
ibv.ibv_unimport_pd.argtypes = [ctypes.c_void_p]
ibv.ibv_close_device.argtypes = [ctypes.c_void_p]


def deregister(fd, pd_handle, mr_handle):
    """ibv_dereg_mr() on the imported MR: what a careless client does."""
    ctx = ibv.ibv_import_device(os.dup(fd))
    pd = ibv.ibv_import_pd(ctx, pd_handle)
    mr = ibv.ibv_import_mr(pd, mr_handle)
    ok = bool(mr) and ibv.ibv_dereg_mr(mr) == 0
    ibv.ibv_unimport_pd(pd)
    ibv.ibv_close_device(ctx)
    return ok


def cycle(c, profile, counts, careless):
    t, doc, fds = c.call(ATTACH, {"profile": profile, "mode": "shared",
                                  "wait_ms": 20000})
    if t != ATTACHED:
        for fd in fds:
            os.close(fd)
        code = doc.get("error", {}).get("code", doc.get("code", "?"))
        counts["refused"][code] = counts["refused"].get(code, 0) + 1
        time.sleep(0.05)
        return
    fd = fds[doc["cmd_fd"]]
    pdd = doc["pd"][0]
    mrd = [m for m in doc["mr"] if m["name"] == MR_NAME][0]
    ctx = Context(cmd_fd=os.dup(fd))
    pd = PD(ctx, handle=pdd["handle"])
    try:
        mr = MR(pd, handle=mrd["handle"])
    except (PyverbsError, PyverbsRDMAError):
        counts["dead"].append(mrd["handle"])
        mr = None
    if mr is not None and careless:
        print("careless %d" % mrd["handle"], flush=True)
        mr.unimport()
        mr = None
        assert deregister(fd, pdd["handle"], mrd["handle"])
    for f in fds:
        os.close(f)
    cq = CQ(ctx, 4)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=2, max_recv_wr=2)))
    qp.close()
    cq.close()
    if mr is not None:
        mr.unimport()
    pd.unimport()
    ctx.close()
    t, _, _ = c.call(DETACH, {"attachment": doc["attachment"]})
    if t != DETACHED:
        counts["broken"] += 1
    counts["cycles"] += 1


def main():
    sock, profile = sys.argv[1], sys.argv[2]
    n, seconds = int(sys.argv[3]), float(sys.argv[4])
    careless = len(sys.argv) > 5 and sys.argv[5] == "careless"
    counts = {"cycles": 0, "refused": {}, "broken": 0, "dead": [],
              "errors": []}
    clients = [None] * n
    deadline = time.monotonic() + seconds
    print("started", flush=True)
    while time.monotonic() < deadline:
        for k in range(n):
            try:
                if clients[k] is None:
                    clients[k] = Client(sock, timeout=60)
                cycle(clients[k], profile, counts, careless)
                careless = False
            except OSError as e:
                counts["broken"] += 1
                if len(counts["errors"]) < 3:
                    counts["errors"].append(repr(e))
                if clients[k] is not None:
                    clients[k].close()
                clients[k] = None
                time.sleep(0.01)
    for c in clients:
        if c is not None:
            c.close()
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main()
