# SPDX-License-Identifier: MIT
"""A minimal client of rdmad's control socket, written from proto/proto.h
and proto/PROTOCOL.md alone, so that the tests check the wire format
independently of librdmad."""

import array
import json
import socket
import struct

MAGIC = 0x444D4452
HDR = struct.Struct("<IHHHHII")   # magic version type flags n_fds id length
HELLO, WELCOME, ERROR, REQUEST, REPLY, ATTACH, ATTACHED, DETACH, \
    DETACHED, REPORT, EVENT, MADE, MAP, MAPPED = range(1, 15)
MAX_FRAME = 64 * 1024


def frame(mtype, payload, mid=1, version=1, n_fds=0, magic=MAGIC):
    body = json.dumps(payload).encode() if not isinstance(
        payload, bytes) else payload
    return HDR.pack(magic, version, mtype, 0, n_fds, mid, len(body)) + body


class Client:
    def __init__(self, path, hello=True, timeout=30):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.next_id = 1
        self.events = []  # EVENT payloads call() set aside
        if hello:
            t, doc, _ = self.call(HELLO, {"versions": [1, 1]})
            assert t == WELCOME, doc

    def send(self, mtype, payload, fds=(), raw=None):
        mid = self.next_id
        self.next_id += 1
        data = raw if raw is not None else frame(mtype, payload, mid,
                                                 n_fds=len(fds))
        if fds:
            self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                        array.array("i", fds))])
        else:
            self.sock.send(data)
        return mid

    def recv(self):
        """(type, payload, fds); fds are owned by the caller."""
        msg, fds, _, _ = socket.recv_fds(self.sock, MAX_FRAME + 1, 64)
        if not msg:
            raise ConnectionResetError("rdmad closed the session")
        magic, _v, mtype, _f, n_fds, _id, length = HDR.unpack_from(msg)
        assert magic == MAGIC and length == len(msg) - HDR.size
        assert n_fds == len(fds)
        return mtype, json.loads(msg[HDR.size:]), fds

    def call(self, mtype, payload, fds=()):
        """Send, and read the answer; EVENTs that come first are kept
        in self.events."""
        self.send(mtype, payload, fds)
        while True:
            t, doc, fds = self.recv()
            if t != EVENT:
                return t, doc, fds
            self.events.append(doc)

    def request(self, method, path, body=None):
        req = {"method": method, "path": path}
        if body is not None:
            req["body"] = body
        t, doc, _ = self.call(REQUEST, req)
        assert t == REPLY, doc
        return doc["status"], doc["body"]

    def close(self):
        self.sock.close()
