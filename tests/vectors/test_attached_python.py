# SPDX-License-Identifier: MIT
"""The Python client against the protocol, on the host, no device:

- its ATTACHED decoder (rdmad/attached.py) against the shared vectors of
  tests/vectors/attached (each a payload and its fd count, and what a
  correct decoder yields, written by hand from proto/PROTOCOL.md: the
  canonical document, or "error"); tests/unit/test_attached.c checks the
  C codec against the same files;
- its receiving of messages of several frames (protocol version 2), from
  a fake daemon that frames as proto.h says: payload and fds put
  together in order, and a continuation of another message refused.
"""

import array
import json
import os
import socket
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "client" / "python"))

import rdmad  # noqa: E402
from rdmad import attached, proto  # noqa: E402

VECTORS = sorted((ROOT / "tests" / "vectors" / "attached").glob("*.json"))


def test_there_are_vectors():
    assert len(VECTORS) >= 12


@pytest.mark.parametrize("path", VECTORS, ids=lambda p: p.stem)
def test_vector(path):
    v = json.loads(path.read_text())
    want = path.with_suffix(".expect").read_text().strip()
    if want == "error":
        with pytest.raises(attached.Malformed):
            attached.decode(v["payload"], v["n_fds"])
    else:
        assert attached.decode(v["payload"], v["n_fds"]) == json.loads(want)


def frames(mtype, mid, body, fds, version=2):
    """body and fds cut as proto_frame_pack cuts them: (bytes, fds)."""
    n = max(1, -(-len(body) // (proto.PROTO_MAX_FRAME -
                                proto.PROTO_HDR_SIZE)),
            -(-len(fds) // proto.PROTO_MAX_FDS))
    step = proto.PROTO_MAX_FRAME - proto.PROTO_HDR_SIZE
    for i in range(n):
        part = body[i * step:(i + 1) * step]
        f = fds[i * proto.PROTO_MAX_FDS:(i + 1) * proto.PROTO_MAX_FDS]
        more = proto.PROTO_FLAG_MORE if i + 1 < n else 0
        head = proto.HEADER.pack(proto.PROTO_MAGIC,
                                 version if n > 1 else 1, mtype, more,
                                 len(f), mid, len(part))
        yield head + part, f


def fake_daemon(path, answer):
    """Accept one client: WELCOME it to version 2, then answer its first
    request with answer(id) -> list of (bytes, fds)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(str(path))
    srv.listen(1)

    def run():
        c, _ = srv.accept()
        with c:
            hello = c.recv(proto.PROTO_MAX_FRAME)
            hid = proto.HEADER.unpack_from(hello)[5]
            assert json.loads(hello[proto.PROTO_HDR_SIZE:])["versions"] \
                == [1, 2]
            body = json.dumps({"version": 2, "server": "rdmad"}).encode()
            c.send(proto.HEADER.pack(proto.PROTO_MAGIC, 1,
                                     proto.PROTO_WELCOME, 0, 0, hid,
                                     len(body)) + body)
            req = c.recv(proto.PROTO_MAX_FRAME)
            rid = proto.HEADER.unpack_from(req)[5]
            for data, fds in answer(rid):
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                        array.array("i", fds))] if fds else []
                c.sendmsg([data], anc)
            c.recv(16)  # until the client goes
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return srv, t


def test_reply_of_several_frames(tmp_path):
    doc = {"status": 200, "body": {"pad": "x" * 200000}}
    body = json.dumps(doc).encode()
    srv, t = fake_daemon(tmp_path / "s",
                         lambda rid: frames(proto.PROTO_REPLY, rid, body,
                                            []))
    with srv, rdmad.connect(str(tmp_path / "s")) as c:
        assert c.version == 2
        assert c.request("GET", "/v1/health") == doc["body"]
    t.join(5)


def test_fds_of_several_frames(tmp_path):
    """ATTACHED's fds over three frames, taken in order (the Python
    client's _recv, below the attach that would need a device)."""
    files = [os.memfd_create(f"f{i}") for i in range(70)]
    for i, fd in enumerate(files):
        os.ftruncate(fd, i)
    body = json.dumps({"attachment": 1}).encode()
    srv, t = fake_daemon(tmp_path / "s",
                         lambda rid: frames(proto.PROTO_ATTACHED, rid, body,
                                            files))
    with srv, rdmad.connect(str(tmp_path / "s")) as c:
        mid = c._send(proto.PROTO_REQUEST, {"method": "GET", "path": "/"})
        mtype, rid, doc, fds = c._recv("ATTACH")
        assert (mtype, rid, doc) == (proto.PROTO_ATTACHED, mid, json.loads(body))
        assert [os.fstat(fd).st_size for fd in fds] == list(range(70))
        for fd in fds:
            os.close(fd)
    for fd in files:
        os.close(fd)
    t.join(5)


def test_continuation_of_another_message(tmp_path):
    body = json.dumps({"status": 200, "body": {"pad": "x" * 70000}}).encode()

    def answer(rid):
        (a, _), (b, _) = frames(proto.PROTO_REPLY, rid, body, [])
        b = bytearray(b)
        b[12:16] = (rid + 1).to_bytes(4, "little")  # another id
        return [(a, []), (bytes(b), [])]

    srv, t = fake_daemon(tmp_path / "s", answer)
    with srv, rdmad.connect(str(tmp_path / "s")) as c:
        with pytest.raises(rdmad.Error) as e:
            c.request("GET", "/v1/health")
        assert e.value.code == "protocol_error"
    t.join(5)
