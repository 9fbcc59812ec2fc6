# SPDX-License-Identifier: MIT
"""Declared objects that a shared client destroys come back (issue 37,
item 1). A client that attached SHARED holds the daemon's context file:
it can destroy the daemon's objects in it, by mistake (ibv_dereg_mr() on
an imported MR instead of ibv_unimport_mr(), ibv_dealloc_pd() on an
imported PD) or by handle through the kernel's ioctl interface (the kinds
rdma-core cannot import). The daemon must notice within seconds, announce
it (object_lost, to the attached sessions and on the event stream), make
the object again (new handle and keys), announce that (object_recreated),
count both in /metrics and show the count in the object's document; an
ATTACH never hands out a handle the kernel does not have; a new client
moves data through what was made again.

The oracles here are the kernel's (its uverbs ioctl ABI, written from
<rdma/rdma_user_ioctl_cmds.h> and <rdma/ib_user_ioctl_cmds.h>; RDMA
netlink through iproute2's `rdma resource show`) and rdma-core's own
calls through ctypes: nothing of the daemon's code. Needs a device that
imports (mlx5, or rxe with tests/vm/run --import)."""

import ctypes
import errno
import json
import os
import secrets
import socket
import struct
import threading
import time
import urllib.request

import pytest

from conftest import SHARED_DEV as DEV, free_port, kernel_mrs, rdma_res
from pyclient_setup import one_mr_conf, rc_to_rts, rdmad as pyrdmad
from rdmadproto import ATTACH, ATTACHED, DETACH, EVENT, ERROR, Client

pytestmark = pytest.mark.needs_import

MIB = 1 << 20

# ---- the kernel's uverbs ioctl ABI (uapi headers), by hand ----------------
# struct ib_uverbs_ioctl_hdr: length, object_id, method_id, num_attrs (u16),
# reserved1 (u64), driver_id, reserved2 (u32); struct ib_uverbs_attr:
# attr_id, len, flags, attr_data (u16), data (u64).
HDR = struct.Struct("<HHHHQII")
ATTR = struct.Struct("<HHHHQ")
# _IOWR(RDMA_IOCTL_MAGIC 0x1b, 1, struct ib_uverbs_ioctl_hdr (24 bytes))
RDMA_VERBS_IOCTL = (3 << 30) | (HDR.size << 16) | (0x1B << 8) | 1
F_MANDATORY = 1
# enum uverbs_default_objects, and each kind's DESTROY method with its
# handle attribute (0) and, where the kernel wants one, its response
# attribute (1) and size.
DESTROY = {
    "pd": (1, 0, None), "cq": (3, 1, 8), "qp": (4, 1, 4), "srq": (5, 1, 4),
    "ah": (6, 0, None), "mr": (7, 1, None), "mw": (8, 0, None),
}
UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INFO_HANDLES = 0, 1

libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]


def raw_ioctl(fd, obj, method, attrs, driver_id):
    buf = ctypes.create_string_buffer(HDR.size + ATTR.size * len(attrs))
    HDR.pack_into(buf, 0, len(buf), obj, method, len(attrs), 0, driver_id,
                  0)
    for i, (aid, length, data) in enumerate(attrs):
        ATTR.pack_into(buf, HDR.size + i * ATTR.size, aid, length,
                       F_MANDATORY, 0, data)
    if libc.ioctl(fd, RDMA_VERBS_IOCTL, buf) < 0:
        return -ctypes.get_errno()
    return 0


def uverbs_ioctl(fd, obj, method, attrs):
    """attrs: [(attr_id, len, data)] -> 0 or -errno. The header names the
    device's driver (enum rdma_driver_id in <rdma/ib_user_ioctl_verbs.h>:
    RDMA_DRIVER_RXE is 14, RDMA_DRIVER_MLX5 1), which the kernel checks:
    whichever of the two it does not refuse."""
    for driver_id in (14, 1):
        r = raw_ioctl(fd, obj, method, attrs, driver_id)
        if r != -22:
            return r
    return r


def destroy_by_handle(fd, kind, handle):
    obj, method, resp = DESTROY[kind]
    out = ctypes.create_string_buffer(16)
    attrs = [(0, 0, handle)]
    if resp:
        attrs.append((1, resp, ctypes.addressof(out)))
    return uverbs_ioctl(fd, obj, method, attrs)


def handles(fd, kind):
    """The handles of kind in the context file fd (INFO_HANDLES)."""
    obj = DESTROY[kind][0]
    total = ctypes.c_uint32(0)
    lst = (ctypes.c_uint32 * 4096)()
    r = uverbs_ioctl(fd, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INFO_HANDLES,
                     [(0, 8, obj), (1, 4, ctypes.addressof(total)),
                      (2, ctypes.sizeof(lst), ctypes.addressof(lst))])
    assert r == 0, r
    return set(lst[:total.value])


# ---- rdma-core's own calls, as a careless client makes them ---------------
ibv = ctypes.CDLL("libibverbs.so.1", use_errno=True)
ibv.ibv_import_device.restype = ctypes.c_void_p
ibv.ibv_import_device.argtypes = [ctypes.c_int]
ibv.ibv_import_pd.restype = ctypes.c_void_p
ibv.ibv_import_pd.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
ibv.ibv_import_mr.restype = ctypes.c_void_p
ibv.ibv_import_mr.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
ibv.ibv_dereg_mr.argtypes = [ctypes.c_void_p]
ibv.ibv_dealloc_pd.argtypes = [ctypes.c_void_p]
ibv.ibv_unimport_pd.argtypes = [ctypes.c_void_p]
ibv.ibv_close_device.argtypes = [ctypes.c_void_p]


CONF_MORE = """
  pd = ( { name = "a"; }, { name = "b"; } );
  cq = ( { name = "c"; cqe = 16; }, { name = "qc"; cqe = 16; } );
  srq = ( { name = "s"; pd = "a"; max_wr = 8; max_sge = 1; } );
  mw = ( { name = "w"; pd = "a"; type = 2; } );
  ah = ( { name = "h"; pd = "a"; dgid = "::ffff:192.0.2.1"; } );
  qp = ( { name = "q"; pd = "a"; type = "rc"; send_cq = "qc";
           recv_cq = "qc"; state = "init"; } );
"""


@pytest.fixture
def daemon(rdmad, tmp_path):
    port = free_port()
    run = tmp_path / "run"
    conf = one_mr_conf(run, port, DEV, "8M", more=CONF_MORE)
    # one_mr_conf declares pd "a" itself: this profile declares a and b.
    conf = conf.replace('  pd = ( { name = "a"; } );\n', "", 1)
    d = rdmad(conf)
    d.sockpath = str(run / "rdmad.sock")
    yield d
    assert d.stop() == 0


def get(d, path):
    with urllib.request.urlopen(d.url + path, timeout=30) as r:
        body = r.read()
    return body.decode() if path == "/metrics" else json.loads(body)


def metric(d, name, **labels):
    want = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    for line in get(d, "/metrics").splitlines():
        if line.startswith(name + want + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def wait_for(pred, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


class Stream:
    """GET /v1/events (Server-Sent Events, HTTP/1.0), collected."""

    def __init__(self, port):
        self.events, self.stop = [], False
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"GET /v1/events HTTP/1.0\r\n\r\n")
        self.sock.settimeout(0.5)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        buf = b""
        while not self.stop:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                return
            buf += chunk
            while b"\n\n" in buf:
                block, buf = buf.split(b"\n\n", 1)
                for line in block.split(b"\n"):
                    if line.startswith(b"data:"):
                        self.events.append(json.loads(line[5:]))

    def named(self, event, **fields):
        return [e for e in self.events if e.get("event") == event and
                all(e.get(k) == v for k, v in fields.items())]

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


def holder_events(c, timeout=10):
    """EVENTs that reach the attached session c within timeout (all
    that come until none has come for a while)."""
    out, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        c.sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            t, doc, fds = c.recv()
        except (socket.timeout, TimeoutError):
            break
        for fd in fds:
            os.close(fd)
        if t == EVENT:
            out.append(doc)
    return out


def obj(d, kind, name):
    return get(d, f"/v1/profiles/p/{kind}/{name}")


def careless(fds, doc, kind, name, handle):
    """A shared client's mistake: the daemon's object destroyed through
    its imported context. MR and PD the way rdma-core's users do it
    (ibv_dereg_mr / ibv_dealloc_pd on the imported object); the kinds
    rdma-core cannot import by handle, through the ioctl interface."""
    fd = fds[doc["cmd_fd"]]
    if kind in ("mr", "pd"):
        ctx = ibv.ibv_import_device(os.dup(fd))
        assert ctx, os.strerror(ctypes.get_errno())
        if kind == "mr":
            pd_handle = next(p["handle"] for p in doc["pd"]
                             if p["name"] == "a")
            pd = ibv.ibv_import_pd(ctx, pd_handle)
            mr = ibv.ibv_import_mr(pd, handle)
            assert pd and mr
            assert ibv.ibv_dereg_mr(mr) == 0
            ibv.ibv_unimport_pd(pd)
        else:
            pd = ibv.ibv_import_pd(ctx, handle)
            assert pd
            assert ibv.ibv_dealloc_pd(pd) == 0
        ibv.ibv_close_device(ctx)
        return
    assert destroy_by_handle(fd, kind, handle) == 0


def identity(doc):
    return {k: doc.get(k) for k in ("handle", "lkey", "rkey", "qp_num")
            if k in doc}


KINDS = [("mr", "r"), ("pd", "b"), ("cq", "c"), ("qp", "q"), ("srq", "s"),
         ("mw", "w"), ("ah", "h")]


def test_destroyed_objects_are_noticed_announced_and_made_again(daemon):
    d = daemon
    stream = Stream(d.port)
    holder = Client(d.sockpath)
    t, hdoc, hfds = holder.call(ATTACH, {"profile": "p", "mode": "shared"})
    assert t == ATTACHED and hdoc["mode"] == "shared", hdoc
    try:
        for kind, name in KINDS:
            before = obj(d, kind, name)
            assert before["state"] == "ready" and before["lost"] == 0
            t0 = time.monotonic()
            careless(hfds, hdoc, kind, name, before["handle"])

            lost = wait_for(lambda: stream.named("object_lost", kind=kind,
                                                 name=name), 10)
            noticed = time.monotonic() - t0
            assert lost, (kind, stream.events[-5:])
            print(f"{kind} {name}: noticed in {noticed:.2f} s")
            assert noticed < 5, noticed
            ev = lost[0]
            assert ev["profile"] == "p"
            assert ev["handle"] == before["handle"]
            for k, v in identity(before).items():
                assert ev[k] == v, (k, ev, before)
            # Who was attached then: the holder's session.
            assert [s["attachment"] for s in ev["sessions"]] == \
                [hdoc["attachment"]], ev

            after = wait_for(lambda: (lambda o: o if o["state"] == "ready"
                                      and o["lost"] == 1 else None)(
                obj(d, kind, name)))
            assert after, obj(d, kind, name)
            made = wait_for(lambda: stream.named("object_recreated",
                                                 kind=kind, name=name), 10)
            assert made and made[0]["lost"] == 1
            assert made[0]["handle"] == after["handle"]
            if kind == "mr":
                assert (after["lkey"], after["rkey"]) != \
                    (before["lkey"], before["rkey"])
                assert (made[0]["lkey"], made[0]["rkey"]) == \
                    (after["lkey"], after["rkey"])
            if kind == "qp":
                assert after["qp_num"] != before["qp_num"]
                qpns = {r["lqpn"] for r in rdma_res("qp")}
                assert after["qp_num"] in qpns
                assert before["qp_num"] not in qpns
            # The new one is in the kernel's table of the file.
            assert after["handle"] in handles(hfds[hdoc["cmd_fd"]], kind)
            assert metric(d, "rdmad_objects_lost_total", profile="p",
                          kind=kind) == 1
            assert wait_for(lambda: metric(
                d, "rdmad_objects_recreated_total", profile="p",
                kind=kind) == 1)

        # The attached session heard both, for each kind, with its id.
        heard = holder.events + holder_events(holder, timeout=2)
        for kind, name in KINDS:
            for what in ("object_lost", "object_recreated"):
                assert [e for e in heard if e.get("event") == what and
                        e.get("kind") == kind and e.get("name") == name and
                        e.get("attachment") == hdoc["attachment"]], \
                    (what, kind, heard)
    finally:
        stream.close()
        for fd in hfds:
            os.close(fd)
        holder.close()
    assert get(d, "/v1/profiles/p")["state"] == "ready"


def move_data(d, pd_name="a"):
    """A new client (the Python client) writes by RDMA into MR r through
    QPs of its own on PD pd_name and reads it back in the mapping."""
    import pyverbs.enums as e
    from pyverbs.cq import CQ
    from pyverbs.mr import MR
    from pyverbs.qp import QP, QPCap, QPInitAttr
    from pyverbs.wr import SGE, SendWR

    daemon_mr = obj(d, "mr", "r")
    with pyrdmad.connect(d.sockpath) as conn:
        with conn.attach("p", mode="shared") as prof:
            mr = prof.mr("r")
            assert (mr.lkey, mr.rkey) == (daemon_mr["lkey"],
                                          daemon_mr["rkey"])
            pd = prof.pd(pd_name)
            cq = CQ(prof.context, 16)
            cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1,
                        max_recv_sge=1)
            qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                     cap=cap)) for _ in range(2)]
            access = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
            if pd_name != "a":
                # Through the PD made again: an MR of ours on it, the
                # target of the write.
                target = MR(pd, MIB, e.IBV_ACCESS_LOCAL_WRITE | access)
                rkey, addr = target.rkey, target.buf
            else:
                rkey, addr = mr.rkey, prof.mr_iova("r") + MIB
            for qp, peer in ((qps[0], qps[1]), (qps[1], qps[0])):
                rc_to_rts(prof, qp, peer.qp_num, access)
            data = secrets.token_bytes(4096)
            src = MR(pd, len(data), e.IBV_ACCESS_LOCAL_WRITE)
            src.write(data, len(data))
            wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                        sg=[SGE(src.buf, len(data), src.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_rdma(rkey, addr)
            qps[0].post_send(wr)
            for _ in range(1000000):
                n, wcs = cq.poll()
                if n:
                    break
            assert n and wcs[0].status == e.IBV_WC_SUCCESS, wcs
            if pd_name != "a":
                assert target.read(len(data), 0) == data
                target.close()
            else:
                view = prof.mr_map("r")
                assert bytes(view[MIB:MIB + len(data)]) == data
            for o in (src, *qps, cq):
                o.close()


def test_a_new_client_moves_data_through_what_was_made_again(daemon):
    d = daemon
    c = Client(d.sockpath)
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared"})
    assert t == ATTACHED, doc
    for kind, name in (("mr", "r"), ("pd", "b")):
        before = obj(d, kind, name)
        careless(fds, doc, kind, name, before["handle"])
        assert wait_for(lambda: obj(d, kind, name)["lost"] == 1 and
                        obj(d, kind, name)["state"] == "ready")
    for fd in fds:
        os.close(fd)
    c.close()
    move_data(d, "a")
    move_data(d, "b")


def test_attach_never_hands_out_a_handle_the_kernel_lost(daemon):
    """Right after the MR is destroyed, an ATTACH either waits for it or
    says the profile is not ready: the MR handle it gives is one the
    kernel has, with the kernel's keys."""
    d = daemon
    c = Client(d.sockpath)
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared"})
    assert t == ATTACHED, doc
    fd = fds[doc["cmd_fd"]]
    for round_ in range(3):
        assert wait_for(lambda: obj(d, "mr", "r")["state"] == "ready")
        mr = obj(d, "mr", "r")
        assert destroy_by_handle(fd, "mr", mr["handle"]) == 0
        other = Client(d.sockpath)
        t, odoc, ofds = other.call(ATTACH, {"profile": "p",
                                            "mode": "shared",
                                            "wait_ms": 20000})
        if t == ATTACHED:
            given = next(m for m in odoc["mr"] if m["name"] == "r")
            assert given["handle"] in handles(fd, "mr"), (round_, given)
            # The MR made again, not the one destroyed.
            assert (given["lkey"], given["rkey"]) != (mr["lkey"],
                                                      mr["rkey"])
            assert kernel_mrs(given["lkey"]), given
        else:
            assert t == ERROR and odoc["code"] == "not_ready", odoc
        for f in ofds:
            os.close(f)
        other.close()
    for f in fds:
        os.close(f)
    c.close()


def test_table_client_never_gets_a_destroyed_mr(daemon):
    """A client that reads the MR table (the Python client does) has
    each MR looked up by the kernel when it first asks for it: right
    after the MR is destroyed through the shared context, asking for it
    is Error "stale" (ESTALE, librdmad(3)), or, once the daemon made it
    again, the new MR with the kernel's keys; never the destroyed one."""
    d = daemon
    c = Client(d.sockpath)
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared"})
    assert t == ATTACHED, doc
    fd = fds[doc["cmd_fd"]]
    outcomes = set()
    for round_ in range(3):
        # Ready under a handle the kernel has (the last round's made
        # again: the table's attach leaves noticing it to the timer).
        def ready_in_kernel():
            o = obj(d, "mr", "r")  # one reading: its state may move on
            return o["state"] == "ready" and o["handle"] in handles(fd, "mr")
        assert wait_for(ready_in_kernel)
        mr = obj(d, "mr", "r")
        assert destroy_by_handle(fd, "mr", mr["handle"]) == 0
        assert mr["handle"] not in handles(fd, "mr")
        try:
            with pyrdmad.connect(d.sockpath) as pc:
                with pc.attach("p", mode="shared", wait=20) as p:
                    assert p.document.get("mr_table"), p.document
                    try:
                        got = p.mr("r")
                    except pyrdmad.Error as e:
                        assert e.code == "stale" and \
                            e.errno == errno.ESTALE, e
                        outcomes.add("stale")
                        continue
                    assert (got.lkey, got.rkey) != (mr["lkey"],
                                                    mr["rkey"]), round_
                    assert kernel_mrs(got.lkey), got.lkey
                    outcomes.add("made again")
        except pyrdmad.Error as e:
            # The attach itself saw the MR lost (a round of the timer
            # came first) and the wait ran out: not ready, no handle.
            assert e.code in ("not_ready", "timeout"), e
            outcomes.add("not ready")
    assert outcomes, outcomes
    for f in fds:
        os.close(f)
    c.close()


@pytest.fixture
def plain(rdmad, tmp_path):
    """Profile p of one PD, a, and the MR r on it: every PD has an MR."""
    port = free_port()
    run = tmp_path / "run"
    d = rdmad(one_mr_conf(run, port, DEV, "1M"))
    d.sockpath = str(run / "rdmad.sock")
    yield d
    assert d.stop() == 0


@pytest.fixture
def late_witness(rdmad, tmp_path):
    """Profile p of two PDs, z and a, where a's one MR, r, comes after
    z's 40: the MR that vouches for a at an attach is found late (and
    remembered by the daemon for the next attach)."""
    port = free_port()
    run = tmp_path / "run"
    zs = "".join(f', {{ name = "z{i}"; pd = "z"; memory = "m"; '
                 f'offset = {i * 4096}; length = 4096; '
                 f'access = [ "local_write" ]; }}' for i in range(40))
    conf = one_mr_conf(run, port, DEV, "1M", more_mrs=zs)
    conf = conf.replace('pd = ( { name = "a"; } );',
                        'pd = ( { name = "z"; }, { name = "a"; } );')
    # r last: z's MRs first in the profile's list.
    head, r = conf.split('mr = ( ', 1)
    r_def, rest = r.split('}, ', 1)
    conf = head + 'mr = ( ' + rest.replace(' );\n', f', {r_def}}} );\n', 1)
    d = rdmad(conf)
    d.sockpath = str(run / "rdmad.sock")
    yield d
    assert d.stop() == 0


@pytest.mark.parametrize("shape", ["plain", "late_witness"])
def test_table_attach_never_hands_out_a_destroyed_pd(request, shape):
    """The MR on the profile's PD destroyed through the shared context,
    then the PD: an ATTACH that reads the MR table (whose PD check asks
    the kernel for an MR on each PD rather than for the list of every
    handle) right after either waits or says not_ready, or answers with
    a PD handle the kernel has; never the destroyed one. late_witness:
    the PD's MR is the profile's last, after another PD's, and the
    attaches before found it there."""
    d = request.getfixturevalue(shape)
    c = Client(d.sockpath)
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared"})
    assert t == ATTACHED, doc
    fd = fds[doc["cmd_fd"]]
    ctx = ibv.ibv_import_device(os.dup(fd))
    assert ctx, os.strerror(ctypes.get_errno())
    destroyed = 0
    for round_ in range(3):
        assert wait_for(lambda: obj(d, "pd", "a")["state"] == "ready" and
                        obj(d, "mr", "r")["state"] == "ready")
        pdo, mro = obj(d, "pd", "a"), obj(d, "mr", "r")
        pd = ibv.ibv_import_pd(ctx, pdo["handle"])
        mr = ibv.ibv_import_mr(pd, mro["handle"])
        assert pd and mr
        assert ibv.ibv_dereg_mr(mr) == 0
        # The daemon may have made the MR again on it already (EBUSY):
        # another round.
        if ibv.ibv_dealloc_pd(pd) != 0:
            ibv.ibv_unimport_pd(pd)
            continue
        destroyed += 1
        assert pdo["handle"] not in handles(fd, "pd")
        other = Client(d.sockpath)
        t, odoc, ofds = other.call(ATTACH, {"profile": "p",
                                            "mode": "shared",
                                            "mr_table": True,
                                            "wait_ms": 20000})
        if t == ATTACHED:
            given = next(p for p in odoc["pd"] if p["name"] == "a")
            # Made again (maybe under the same number): the kernel has
            # it, and so does the daemon, counted as lost once more.
            assert given["handle"] in handles(fd, "pd"), (round_, given)
            assert obj(d, "pd", "a")["lost"] >= destroyed, obj(d, "pd", "a")
        else:
            assert t == ERROR and odoc["code"] == "not_ready", odoc
        for f in ofds:
            os.close(f)
        other.close()
    assert destroyed, "the daemon made the MR again before each dealloc"
    ibv.ibv_close_device(ctx)
    for f in fds:
        os.close(f)
    c.close()
