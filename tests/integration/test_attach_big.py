# SPDX-License-Identifier: MIT
"""A profile far over one frame attaches (issue 38): 100 memfd memories
and 10,000 MRs of 4 KiB, in shared and in local mode, from a raw socket
that speaks protocol version 2 (written from proto/PROTOCOL.md alone:
the frames, their caps and their fds), from librdmad
(helpers/big_client.c, shared_rdma.c) and from the Python client, with
every object and fd; a client that speaks only version 1 gets ERROR
too_large, never a truncated list. And ATTACHED is never stale: after a
reload changes an MR, a new ATTACH carries its new keys.

Oracles: proto/PROTOCOL.md (the framing, the fields, too_large), REST
(GET /v1/profiles/big/mr/NAME for the keys), the daemon's own memfds
under /proc for the bytes. Needs the import-capable rxe provider for
shared mode (tests/vm/run --import)."""

import json
import mmap
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import (BUILD, TOKEN, Daemon, daemon_section, free_port,
                      memfd)
from rdmadproto import (ATTACH, ATTACHED, DETACH, DETACHED, ERROR, HDR,
                        HELLO, MAGIC, MAX_FRAME, WELCOME, Client)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client"
                       / "python"))
import rdmad as pyrdmad  # noqa: E402

N_MEM, MR_PER_MEM, MR_SIZE = 100, 100, 4096
N_MR = N_MEM * MR_PER_MEM
MORE = 0x0001  # PROTOCOL.md: this frame is not its message's last
MAX_FDS = 32
ACCESS = '[ "local_write", "remote_write", "remote_read" ]'
MODES = ["local", pytest.param("shared", marks=pytest.mark.needs_import)]


def big_conf():
    mems = ",\n".join(f'{{ name = "m{i}"; size = "{MR_PER_MEM * 4}K"; }}'
                      for i in range(N_MEM))
    mrs = ",\n".join(
        f'{{ name = "r{i}"; pd = "a"; memory = "m{i // MR_PER_MEM}"; '
        f'offset = {(i % MR_PER_MEM) * MR_SIZE}; length = {MR_SIZE}; '
        f'access = {ACCESS}; }}' for i in range(N_MR))
    return f"""
devices = ( {{ name = "d"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "big"; device = "d";
  memory = ( {mems} );
  pd = ( {{ name = "a"; }} );
  mr = ( {mrs} );
}} );
"""


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """One daemon with the big profile for the module: making 10,000 MRs
    takes a while in the VM (printed: READY_S)."""
    tmp = tmp_path_factory.mktemp("big")
    port = free_port()
    conf = tmp / "rdmad.conf"
    conf.write_text(daemon_section(port, tmp) + big_conf())
    t0 = time.monotonic()
    d = Daemon(conf, port, tmp, TOKEN)
    d.wait_ready(timeout=600)
    print(f"READY_S big profile ready in {time.monotonic() - t0:.1f} s")
    status, prof = d.get("/v1/profiles/big")
    assert status == 200 and prof["state"] == "ready", prof["state"]
    yield d
    d.stop()
    log = d.log()
    assert "Sanitizer" not in log and "runtime error:" not in log, log


class V2:
    """A client of the control socket that speaks version 2, from
    PROTOCOL.md: a message is frames with MORE on all but the last, each
    within 64 KiB and 32 fds; payload bytes and fds concatenated."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(60)
        self.sock.connect(path)
        self.next_id = 1
        t, doc, _, _ = self.call(HELLO, {"versions": [1, 2]}, version=1)
        assert t == WELCOME and doc["version"] == 2, doc

    def send(self, mtype, payload, version=2):
        mid = self.next_id
        self.next_id += 1
        body = json.dumps(payload).encode()
        self.sock.send(HDR.pack(MAGIC, version, mtype, 0, 0, mid,
                                len(body)) + body)
        return mid

    def recv(self):
        """(type, payload, fds, frames) of one whole message."""
        data, fds, frames, first = b"", [], 0, None
        while True:
            msg, got, _, _ = socket.recv_fds(self.sock, MAX_FRAME + 1,
                                             MAX_FDS + 1)
            assert msg, "rdmad closed the session"
            assert len(msg) <= MAX_FRAME, len(msg)
            magic, _v, mtype, flags, n_fds, mid, length = \
                HDR.unpack_from(msg)
            assert magic == MAGIC and length == len(msg) - HDR.size
            assert n_fds == len(got) <= MAX_FDS, (n_fds, len(got))
            assert first in (None, (mtype, mid)), "frames interleaved"
            first = (mtype, mid)
            frames += 1
            data += msg[HDR.size:]
            fds += got
            if not flags & MORE:
                return mtype, json.loads(data), fds, frames

    def call(self, mtype, payload, version=2):
        self.send(mtype, payload, version)
        return self.recv()

    def close(self):
        self.sock.close()


def leases(d, name):
    status, mr = d.get(f"/v1/profiles/big/mr/{name}")
    assert status == 200, mr
    return mr["leases"]


def map_memory(fd, size):
    return mmap.mmap(fd, size, mmap.MAP_SHARED,
                     mmap.PROT_READ | mmap.PROT_WRITE)


@pytest.mark.parametrize("mode", MODES)
def test_v1_client_gets_too_large(big, mode):
    """Version 1: one frame; the answer is too_large, saying the sizes
    and that version 2 is needed, and nothing is leased; the session
    goes on."""
    c = Client(big.sock)
    try:
        t, doc, fds = c.call(ATTACH, {"profile": "big", "mode": mode})
        assert t == ERROR and not fds, (t, doc)
        assert doc["error"]["code"] == "too_large", doc
        assert "version 2" in doc["error"]["message"], doc
        assert leases(big, "r0") == 0
        assert c.request("GET", "/v1/health")[0] == 200
    finally:
        c.close()


@pytest.mark.parametrize("mode", MODES)
def test_v2_frames_carry_every_object_and_fd(big, mode):
    """Every memory with its fd, every MR with the keys REST gives;
    the frames within their caps; the memory fds map the daemon's
    bytes (written through one attach, read through another and in the
    daemon's memfd); leased while attached, released on DETACH."""
    one, two = V2(big.sock), V2(big.sock)
    docs, fdss = [], []
    try:
        for c in (one, two):
            t0 = time.monotonic()
            t, doc, fds, frames = c.call(ATTACH, {"profile": "big",
                                                  "mode": mode})
            print(f"ATTACH_S {mode} {time.monotonic() - t0:.3f} s, "
                  f"{frames} frames")
            assert t == ATTACHED, doc
            docs.append(doc)
            fdss.append(fds)
        doc, fds = docs[0], fdss[0]
        assert doc["mode"] == mode
        assert len(doc["memory"]) == N_MEM and len(doc["mr"]) == N_MR
        assert len(fds) == N_MEM + (mode == "shared")
        assert sorted(m["fd"] for m in doc["memory"]) == \
            list(range(mode == "shared", len(fds)))
        for name in ("r0", "r4321", f"r{N_MR - 1}"):
            mr = [m for m in doc["mr"] if m["name"] == name][0]
            status, rest = big.get(f"/v1/profiles/big/mr/{name}")
            for k in ("lkey", "rkey", "handle", "offset", "length",
                      "memory"):
                assert mr[k] == rest[k], (name, k, mr, rest)
        assert leases(big, "r4321") == 2
        # The bytes: written through the first attach's fd of m37,
        # read through the second's and in the daemon's memfd.
        fd_of = [{m["name"]: f[m["fd"]] for m in d["memory"]}
                 for d, f in zip(docs, fdss)]
        size = MR_PER_MEM * 4096
        a, b = map_memory(fd_of[0]["m37"], size), \
            map_memory(fd_of[1]["m37"], size)
        pattern = os.urandom(4096)
        a[8192:12288] = pattern
        assert b[8192:12288] == pattern
        path, _ = memfd(big.pid, "m37")
        with open(path, "rb") as f:
            f.seek(8192)
            assert f.read(4096) == pattern
        a.close()
        b.close()
        for c, d in zip((one, two), docs):
            t, _, _, _ = c.call(DETACH, {"attachment": d["attachment"]})
            assert t == DETACHED
        assert leases(big, "r4321") == 0
    finally:
        for f in fdss:
            for fd in f:
                os.close(fd)
        one.close()
        two.close()


def test_session_gone_mid_message_releases(big):
    """A client that asks and leaves before reading: its leases go with
    its session, and the daemon serves the next one."""
    for _ in range(3):
        c = V2(big.sock)
        c.send(ATTACH, {"profile": "big", "mode": "local"})
        time.sleep(0.2)
        c.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (
            leases(big, "r0") or big.get("/v1/sessions")[1]):
        time.sleep(0.1)
    assert leases(big, "r0") == 0
    assert big.get("/v1/sessions")[1] == []


def big_client(d, mode, *ops):
    out = subprocess.run([str(BUILD / "tests" / "big_client"), d.sock,
                          "big", mode, *ops], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("mode", MODES)
def test_librdmad_attaches_it(big, mode):
    """librdmad: every MR, the daemon's keys, and bytes that one process
    writes through an MR's mapping and another reads."""
    got = big_client(big, mode, "keys:r4321", "put:r777:77")
    print(f"LIBRDMAD_ATTACH_S {mode} {got['attach_s']:.3f}")
    assert (got["mode"], got["mr"], got["pd"]) == (mode, N_MR, 1), got
    status, rest = big.get("/v1/profiles/big/mr/r4321")
    assert got["keys:r4321"] == [rest["rkey"], rest["iova"]], (got, rest)
    assert got["put:r777"] == MR_SIZE
    got = big_client(big, mode, "get:r777", "get:r778")
    assert got["get:r777"] == [77, 77]
    assert got["get:r778"] != [77, 77]
    assert leases(big, "r777") == 0


def test_too_few_fds_left_says_so(big):
    """A client that may open fewer fds than the profile's memories: the
    kernel cuts the fds short (MSG_CTRUNC) and librdmad's attach fails,
    naming RLIMIT_NOFILE, never with a profile missing memories; the
    daemon keeps no lease for it."""
    out = subprocess.run(["prlimit", "--nofile=40:40",
                          str(BUILD / "tests" / "big_client"), big.sock,
                          "big", "local"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode != 0, out.stdout
    assert "RLIMIT_NOFILE" in out.stderr, out.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and leases(big, "r0"):
        time.sleep(0.1)
    assert leases(big, "r0") == 0


def test_too_few_fds_left_says_so_in_python(big):
    """The same for the Python client: the attach raises, naming
    RLIMIT_NOFILE."""
    code = ("import sys; sys.path.insert(0, sys.argv[2]); import rdmad\n"
            "c = rdmad.connect(sys.argv[1])\n"
            "try:\n"
            "    c.attach('big', mode='local')\n"
            "except Exception as e:\n"
            "    print(e); sys.exit(3)\n")
    pkg = Path(__file__).resolve().parents[2] / "client" / "python"
    out = subprocess.run(["prlimit", "--nofile=40:40", sys.executable, "-c",
                          code, big.sock, str(pkg)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "RLIMIT_NOFILE" in out.stdout, out.stdout


@pytest.mark.needs_import
def test_rdma_through_one_mr_in_shared_mode(big):
    """Data moves by RDMA through one of the 10,000 MRs, imported."""
    out = subprocess.run([str(BUILD / "tests" / "shared_rdma"), big.sock,
                          "big", "shared", "write", "r9876", "0", "5",
                          str(MR_SIZE)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    words = out.stdout.split()
    assert words[:2] == ["ok", "shared"], out.stdout
    keys = dict(w.split("=") for w in words[2:])
    status, rest = big.get("/v1/profiles/big/mr/r9876")
    assert int(keys["rkey"]) == rest["rkey"], (keys, rest)


@pytest.mark.parametrize("mode", MODES)
def test_python_client_attaches_it(big, mode):
    """The Python client: every MR and PD, the daemon's keys, the bytes
    of an MR shared with the daemon's memory."""
    with pyrdmad.connect(big.sock) as conn:
        t0 = time.monotonic()
        with conn.attach("big", mode=mode) as p:
            print(f"PYTHON_ATTACH_S {mode} {time.monotonic() - t0:.3f}")
            assert len(p.mr_names) == N_MR
            assert len(p.pd_names) == 1
            status, rest = big.get("/v1/profiles/big/mr/r1234")
            assert p.daemon_rkey("r1234") == rest["rkey"]
            view = p.mr_map("r1234")
            view[:4] = b"big!"
            path, _ = memfd(big.pid, "m12")
            with open(path, "rb") as f:
                f.seek(34 * MR_SIZE)
                assert f.read(4) == b"big!"
    assert leases(big, "r1234") == 0


SMALL = """
devices = ( { name = "d"; match = { ibdev = "rxe0"; }; } );
profiles = ( { name = "p"; device = "d";
  memory = ( { name = "m"; size = "1M"; } );
  pd = ( { name = "a"; } );
  mr = ( { name = "r"; pd = "a"; memory = "m"; access = ACCESS; } );
} );
"""


def test_attached_follows_a_reload(rdmad, write_conf):
    """ATTACHED is kept while nothing it says changes, and never after:
    an MR a reload makes again (new access) is attached with its new
    keys, the same as REST's."""
    d = rdmad(SMALL.replace("ACCESS", '[ "local_write" ]'))
    c = Client(d.sock)
    try:
        keys = []
        for access in ('[ "local_write" ]',
                       '[ "local_write", "remote_read" ]'):
            if keys:
                d.conf.write_text(d.conf.read_text().replace(
                    '[ "local_write" ]', access))
                status, body = d.request("POST", "/v1/reload")
                assert status == 200, body
            for _ in range(2):  # rendered once, then kept
                t, doc, fds = c.call(ATTACH, {"profile": "p",
                                              "mode": "local"})
                assert t == ATTACHED, doc
                for fd in fds:
                    os.close(fd)
                status, rest = d.get("/v1/profiles/p/mr/r")
                assert doc["mr"][0]["rkey"] == rest["rkey"], (doc, rest)
                assert doc["mr"][0]["access"] == rest["access"]
                keys.append(doc["mr"][0]["rkey"])
                t, _, _ = c.call(DETACH, {"attachment": doc["attachment"]})
                assert t == DETACHED
        assert keys[0] == keys[1] and keys[2] == keys[3], keys
        assert keys[1] != keys[2], keys
    finally:
        c.close()
