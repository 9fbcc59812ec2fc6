# SPDX-License-Identifier: MIT
"""A remote peer of an rdmad target, written with pyverbs' own rdma_cm
classes (CMID, CMEventChannel: an implementation independent of rdmad's):
it connects, decodes the descriptor from the accept private data, and
RDMA-writes and reads through the windows it was given.

rxe does not carry traffic between rxe0 and rxe1, so a peer in the same
guest connects from the target's own address (another context on the same
device: its own QP, its own rkeys, the semantics of a remote host).

Peer runs the connection in a child process (`python3 cmpeer.py`,
driven over a pipe): librdmacm keeps a context open on every device it
touched until its process exits, and an rxe device cannot be removed
while one is open, so the test process itself must never hold one (later
tests delete rxe0)."""

import json
import os
import select
import struct
import subprocess
import sys

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, ConnParam
from pyverbs.mr import MR
from pyverbs.qp import QPCap, QPInitAttr

# proto/target_proto.h
REJECT_ADDRESS, REJECT_TOKEN, REJECT_FULL = 1, 2, 3
# At most this long for one call of the peer (TCG is slow; an accept
# takes a second or two).
CALL_TIMEOUT = 60


class Rejected(Exception):
    def __init__(self, reason, text):
        super().__init__(f"rejected ({reason}): {text}")
        self.reason = reason
        self.text = text


def decode(data):
    """The ranges of a descriptor: [(addr, rkey, length), ...]."""
    assert data[:3] == b"RD\x01", data[:8]
    n = data[3]
    assert 1 <= n <= 8
    out = []
    for i in range(n):
        addr, rkey, reserved, length = struct.unpack_from(
            ">QIIQ", data, 4 + 24 * i)
        assert reserved == 0
        out.append((addr, rkey, length))
    return out


class _Peer:
    """The peer itself, in the child process."""

    def __init__(self, addr, port, token=None, src=None, size=1 << 16):
        self.ch = CMEventChannel()
        self.cmid = CMID(creator=self.ch)
        ai = AddrInfo(src=src or addr, dst=addr, dst_service=str(port),
                      port_space=ce.RDMA_PS_TCP)
        self.cmid.resolve_addr(ai, 5000)
        self.expect(ce.RDMA_CM_EVENT_ADDR_RESOLVED)
        self.cmid.resolve_route(5000)
        self.expect(ce.RDMA_CM_EVENT_ROUTE_RESOLVED)
        cap = QPCap(max_send_wr=8, max_recv_wr=1, max_send_sge=1,
                    max_recv_sge=1)
        self.cmid.create_qp(QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap))
        # pyverbs sends data_len bytes of private data (none by default).
        param = ConnParam(resources=4, depth=4, retry=3, rnr_retry=3,
                          data_len=len(token or b""))
        if token:
            param.set_private_data(token)
        self.cmid.connect(param)
        ev = CMEvent(self.ch)
        t, data = ev.event_type, ev.private_data
        ev.ack_cm_event()
        if t == ce.RDMA_CM_EVENT_REJECTED:
            data = bytes(data or b"")
            reason = data[3] if data[:3] == b"RD\x01" else 0
            self.cmid.close()
            self.ch.close()
            raise Rejected(reason, data[4:].rstrip(b"\0").decode())
        assert t == ce.RDMA_CM_EVENT_ESTABLISHED, t
        self.ranges = decode(bytes(data))
        self.mr = MR(self.cmid.pd, size, e.IBV_ACCESS_LOCAL_WRITE)

    def expect(self, want):
        ev = CMEvent(self.ch)
        t = ev.event_type
        ev.ack_cm_event()
        assert t == want, (t, want)

    def write(self, data, i=0, offset=0, at=None):
        """RDMA-write data into range i (or at = [addr, rkey] of the
        peer's choosing): the completion's status."""
        addr, rkey = at or self.ranges[i][:2]
        self.mr.write(data, len(data))
        self.cmid.post_write(self.mr, len(data), addr + offset, rkey)
        return self.cmid.get_send_comp().status

    def read(self, length, i=0, offset=0, at=None):
        """RDMA-read from range i (or at [addr, rkey]): (status, bytes)."""
        addr, rkey = at or self.ranges[i][:2]
        self.cmid.post_read(self.mr, length, addr + offset, rkey)
        wc = self.cmid.get_send_comp()
        return wc.status, self.mr.read(length, 0)

    def next_event(self):
        ev = CMEvent(self.ch)
        t = ev.event_type
        ev.ack_cm_event()
        return t

    def close(self):
        try:
            self.cmid.disconnect()
        except Exception:
            pass
        self.cmid.close()
        self.ch.close()


class Peer:
    """A _Peer in a child process: the same calls, over a pipe."""

    def __init__(self, addr, port, token=None, src=None):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ranges = [tuple(r) for r in self._call(
            "connect", addr=addr, port=port,
            token=token.hex() if token is not None else None, src=src)]

    def _call(self, op, **args):
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        # A call that hangs (an accept that never comes) fails the test
        # instead of holding the whole suite.
        ready, _, _ = select.select([self.proc.stdout], [], [], CALL_TIMEOUT)
        if not ready:
            self.proc.kill()
            self.proc.wait(10)
            raise TimeoutError(f"cmpeer: no answer to {op} in "
                               f"{CALL_TIMEOUT} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"cmpeer child died during {op}")
        r = json.loads(line)
        if "rejected" in r:
            self.close()
            raise Rejected(*r["rejected"])
        if "error" in r:
            raise RuntimeError(r["error"])
        return r["result"]

    def write(self, data, i=0, offset=0, at=None):
        return self._call("write", data=data.hex(), i=i, offset=offset,
                          at=at)

    def read(self, length, i=0, offset=0, at=None):
        status, data = self._call("read", length=length, i=i,
                                  offset=offset, at=at)
        return status, bytes.fromhex(data)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "close"}) + "\n")
                self.proc.stdin.flush()
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            self.proc.wait(60)


def _serve():
    peer = None
    for line in sys.stdin:
        req = json.loads(line)
        op = req.pop("op")
        try:
            if op == "connect":
                tok = req.pop("token")
                peer = _Peer(token=bytes.fromhex(tok) if tok is not None
                             else None, **req)
                out = {"result": peer.ranges}
            elif op == "write":
                out = {"result": int(peer.write(bytes.fromhex(req["data"]),
                                                req["i"], req["offset"],
                                                req.get("at")))}
            elif op == "read":
                st, data = peer.read(req["length"], req["i"],
                                     req["offset"], req.get("at"))
                out = {"result": [int(st), bytes(data).hex()]}
            elif op == "close":
                if peer:
                    peer.close()
                return
        except Rejected as e:
            out = {"rejected": [e.reason, e.text]}
        except Exception as e:  # reported to the test
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    _serve()
