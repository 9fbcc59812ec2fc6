# SPDX-License-Identifier: MIT
"""Memory fds on first map (issue 48, PROTOCOL.md "MAP / MAPPED"): a
shared ATTACH with "memory_fds": false carries the context's fd (and the
MR table's) however many memories the profile has; MAP then gives one
memory's fd, the incarnation the attachment holds, to its own session
only.

Oracles: PROTOCOL.md for the messages (spoken by rdmadproto, written
from the protocol alone), the daemon's own fds under /proc for which
memory an fd is (its inode), the bytes read through that /proc entry,
and REST for what a reload left. Needs a device that imports."""

import mmap
import os
import subprocess
import sys
import time

import pytest

from conftest import memfd
from rdmadproto import (ATTACH, ATTACHED, DETACH, DETACHED, ERROR, MAP,
                        MAPPED, Client)
from test_sharing import USER, shared  # noqa: F401 (a fixture)

pytestmark = pytest.mark.needs_import

N_MEM = 6
KIB = 1024


def size_of(i, grow=0):
    return (16 + 4 * i + grow) * KIB


def conf(grow=(), drop=()):
    mems = ",\n".join(
        f'{{ name = "m{i}"; size = "{size_of(i, 8 if i in grow else 0) // KIB}K"; }}'
        for i in range(N_MEM) if i not in drop)
    mrs = ",\n".join(
        f'{{ name = "r{i}"; pd = "a"; memory = "m{i}"; '
        f'access = [ "local_write" ]; }}'
        for i in range(N_MEM) if i not in drop)
    return f"""
devices = ( {{ name = "d"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  memory = ( {mems} );
  pd = ( {{ name = "a"; }} );
  mr = ( {mrs} );
}} );
"""


@pytest.fixture
def daemon(rdmad):
    return rdmad(conf())


def attach(c, **extra):
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared",
                                  **extra})
    assert t == ATTACHED, doc
    return doc, fds


def close_all(fds):
    for fd in fds:
        os.close(fd)


def ask(c, attachment, memory):
    """MAP: (type, doc, fds)."""
    return c.call(MAP, {"attachment": attachment, "memory": memory})


def mapped(c, attachment, memory):
    """The one fd MAPPED gives, checked as PROTOCOL.md says a client
    checks it; (fd, size)."""
    t, doc, fds = ask(c, attachment, memory)
    assert t == MAPPED, doc
    assert len(fds) == 1 and doc["fd"] == 0, (doc, fds)
    assert doc["memory"] == memory, doc
    assert os.fstat(fds[0]).st_size >= doc["size"], doc
    return fds[0], doc["size"]


def reload(d, text):
    """The profiles of text, the daemon section kept (admit_root: these
    tests' clients are root)."""
    daemon_line = next(ln for ln in d.conf.read_text().splitlines()
                       if ln.startswith("daemon ="))
    d.conf.write_text(daemon_line + "\n" + text)
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body


def test_an_attach_without_memory_fds_carries_only_the_context(daemon):
    """Without memory fds, an ATTACH's fds are the context's (and the
    table's): the same for 6 memories as for 1; the memories are listed
    with their sizes and no fd. With them, one more fd per memory."""
    c = Client(daemon.sock)
    try:
        doc, fds = attach(c, memory_fds=False)
        close_all(fds)
        assert len(fds) == 1 and doc["cmd_fd"] == 0, (doc, fds)
        assert [(m["name"], m["size"]) for m in doc["memory"]] == \
            [(f"m{i}", size_of(i)) for i in range(N_MEM)], doc
        assert all("fd" not in m for m in doc["memory"]), doc
        doc2, fds2 = attach(c, memory_fds=False, mr_table=True)
        close_all(fds2)
        assert len(fds2) == 2, doc2
        assert {doc2["cmd_fd"], doc2["mr_table"]["fd"]} == {0, 1}, doc2
        doc3, fds3 = attach(c)
        close_all(fds3)
        assert len(fds3) == 1 + N_MEM, doc3
        assert sorted(m["fd"] for m in doc3["memory"]) == \
            list(range(1, 1 + N_MEM)), doc3
    finally:
        c.close()


def table_memories(fd, size):
    """The memories of an MR table, read as PROTOCOL.md lays it out:
    [(name, size)]."""
    import struct
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as t:
        assert t[0:8] == b"RDMADMRT"
        names_off, = struct.unpack_from("=I", t, 28)
        names_len, = struct.unpack_from("=Q", t, 32)
        off, count, rec = struct.unpack_from("=III", t, 40)
        assert rec == 24 and off % 8 == 0
        out = []
        for i in range(count):
            noff, nlen, msize = struct.unpack_from("=IIQ", t, off + 24 * i)
            assert noff + nlen < names_len
            at = names_off + noff
            assert t[at + nlen] == 0
            out.append((t[at:at + nlen].decode(), msize))
        return out


def test_memories_in_the_table_leave_the_message(daemon):
    """With "memory_table": true the memories are in the MR table, not in
    ATTACHED: the message has no "memory" list, its fds are the
    context's and the table's, the table lists each memory with its
    size, and MAP gives the memory of a name read there."""
    c = Client(daemon.sock)
    try:
        doc, fds = attach(c, memory_fds=False, mr_table=True,
                          memory_table=True)
        try:
            assert "memory" not in doc, doc
            assert len(fds) == 2, (doc, fds)
            t = doc["mr_table"]
            assert t["memories"] == N_MEM, doc
            mems = table_memories(fds[t["fd"]], t["size"])
        finally:
            close_all(fds)
        assert mems == [(f"m{i}", size_of(i)) for i in range(N_MEM)], mems
        name, size = mems[-1]
        fd, got = mapped(c, doc["attachment"], name)
        try:
            assert got == size
            assert os.fstat(fd).st_ino == memfd(daemon.pid, name)[1]
        finally:
            os.close(fd)
        # Without the key, the list is there as before.
        doc2, fds2 = attach(c, memory_fds=False, mr_table=True)
        close_all(fds2)
        assert len(doc2["memory"]) == N_MEM and \
            "memories" not in doc2["mr_table"], doc2
    finally:
        c.close()


def test_memories_in_the_table_come_with_their_fds_when_few(daemon):
    """"memory_fds": N with "memory_table": true: when the profile has at
    most N memories (or N is true), their fds come too, memory i's at the
    table's "memory_fd" + i in its memories' order, each the daemon's
    memfd of that name; bytes written through one are the daemon's. With
    N under the profile's memories, or false, none come (as before)."""
    c = Client(daemon.sock)
    try:
        for n in (N_MEM, N_MEM + 100, True):
            doc, fds = attach(c, memory_fds=n, mr_table=True,
                              memory_table=True)
            try:
                assert "memory" not in doc, doc
                t = doc["mr_table"]
                assert len(fds) == 2 + N_MEM, (n, doc, len(fds))
                first = t["memory_fd"]
                mine = {doc["cmd_fd"], t["fd"],
                        *range(first, first + N_MEM)}
                assert mine == set(range(2 + N_MEM)), (n, doc)
                mems = table_memories(fds[t["fd"]], t["size"])
                assert mems == [(f"m{i}", size_of(i))
                                for i in range(N_MEM)], mems
                for i, (name, size) in enumerate(mems):
                    fd = fds[first + i]
                    path, ino = memfd(daemon.pid, name)
                    assert os.fstat(fd).st_ino == ino, (n, name)
                    assert os.fstat(fd).st_size >= size
                data = os.urandom(32)
                with mmap.mmap(fds[first + 2], size_of(2)) as mem:
                    mem[:32] = data
                with open(memfd(daemon.pid, "m2")[0], "rb") as f:
                    assert f.read(32) == data
            finally:
                close_all(fds)
        for n in (N_MEM - 1, 0, -1, False):
            doc, fds = attach(c, memory_fds=n, mr_table=True,
                              memory_table=True)
            close_all(fds)
            assert len(fds) == 2 and "memory_fd" not in doc["mr_table"], \
                (n, doc)
        # A list (no memory_table) follows the same rule.
        doc, fds = attach(c, memory_fds=N_MEM - 1, mr_table=True)
        close_all(fds)
        assert len(fds) == 2 and all("fd" not in m for m in doc["memory"])
        doc, fds = attach(c, memory_fds=N_MEM, mr_table=True)
        close_all(fds)
        assert len(fds) == 2 + N_MEM and \
            all("fd" in m for m in doc["memory"]), doc
    finally:
        c.close()


def test_map_gives_the_daemons_memory(daemon):
    """Each memory's fd is the daemon's memfd of that name (the same
    inode), of the size ATTACHED gave; bytes written through it are in
    the daemon's memory."""
    c = Client(daemon.sock)
    try:
        doc, fds = attach(c, memory_fds=False)
        close_all(fds)
        for i in range(N_MEM):
            fd, size = mapped(c, doc["attachment"], f"m{i}")
            try:
                path, ino = memfd(daemon.pid, f"m{i}")
                assert os.fstat(fd).st_ino == ino
                assert size == size_of(i)
                data = os.urandom(64)
                with mmap.mmap(fd, size) as mem:
                    mem[size - 64:] = data
                with open(path, "rb") as f:
                    f.seek(size - 64)
                    assert f.read(64) == data
            finally:
                os.close(fd)
        # Asked again: the same memory again (a client may map twice).
        fd, _ = mapped(c, doc["attachment"], "m0")
        assert os.fstat(fd).st_ino == memfd(daemon.pid, "m0")[1]
        os.close(fd)
    finally:
        c.close()


def test_map_refuses_what_the_session_does_not_hold(daemon):
    """not_found for a memory the profile lacks, for another session's
    attachment and for one detached; bad_request for a malformed MAP;
    the session goes on after each."""
    a, b = Client(daemon.sock), Client(daemon.sock)
    try:
        doc, fds = attach(a, memory_fds=False)
        close_all(fds)
        mine = doc["attachment"]
        cases = [
            (b, {"attachment": mine, "memory": "m0"}, "not_found"),
            (a, {"attachment": mine, "memory": "nope"}, "not_found"),
            (a, {"attachment": mine + 1000, "memory": "m0"}, "not_found"),
            (a, {"attachment": "1", "memory": "m0"}, "bad_request"),
            (a, {"attachment": mine}, "bad_request"),
            (a, {"attachment": mine, "memory": 5}, "bad_request"),
        ]
        for c, req, code in cases:
            t, err, fds = c.call(MAP, req)
            close_all(fds)
            assert t == ERROR and err["error"]["code"] == code, (req, err)
            assert not fds, req
        fd, _ = mapped(a, mine, "m3")  # still there
        os.close(fd)
        t, d, _ = a.call(DETACH, {"attachment": mine})
        assert t == DETACHED, d
        t, err, fds = ask(a, mine, "m3")
        assert t == ERROR and err["error"]["code"] == "not_found", err
        assert not fds
    finally:
        a.close()
        b.close()


def test_map_after_a_reload_gives_the_incarnation_attached(daemon):
    """A reload that changed m1 (its size) and removed m2 leaves the old
    ones draining: MAP on the attachment from before gives those (the
    old inode, the old size); a new attachment gets the new m1 and no
    m2."""
    old = {n: memfd(daemon.pid, n)[1] for n in ("m1", "m2")}
    c, late = Client(daemon.sock), Client(daemon.sock)
    try:
        doc, fds = attach(c, memory_fds=False)
        close_all(fds)
        reload(daemon, conf(grow=(1,), drop=(2,)))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, m = daemon.get("/v1/profiles/p/memory/m1")
            if status == 200 and m.get("size") == size_of(1, 8) and \
                    m.get("state") == "ready":
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"m1 was not made again: {m}")
        for name, want in (("m1", size_of(1)), ("m2", size_of(2))):
            fd, size = mapped(c, doc["attachment"], name)
            assert os.fstat(fd).st_ino == old[name], name
            assert size == want, name
            os.close(fd)
        new, fds = attach(late, memory_fds=False)
        close_all(fds)
        fd, size = mapped(late, new["attachment"], "m1")
        assert os.fstat(fd).st_ino != old["m1"]
        assert size == size_of(1, 8)
        os.close(fd)
        t, err, fds = ask(late, new["attachment"], "m2")
        assert t == ERROR and err["error"]["code"] == "not_found", err
    finally:
        c.close()
        late.close()
    # Once the old attachment is gone, so are the drained memories.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and \
            daemon.get("/v1/profiles/p/memory/m2")[0] != 404:
        time.sleep(0.2)
    assert daemon.get("/v1/profiles/p/memory/m2")[0] == 404


FORBIDDEN_CLIENT = """
import sys
from rdmadproto import ATTACH, MAP, Client
c = Client(sys.argv[1])
t, doc, fds = c.call(ATTACH, {"profile": "ingest", "mode": "shared",
                              "memory_fds": False})
print(t, len(fds), flush=True)
sys.stdin.readline()
t, doc, fds = c.call(MAP, {"attachment": doc["attachment"],
                           "memory": "side"})
print(t, len(fds), doc.get("error", {}).get("code"), flush=True)
"""


def test_map_is_forbidden_once_the_profile_no_longer_admits(shared):
    """uid 1000 attached; a reload takes it off the allow list; its MAP
    is then forbidden, no fd given."""
    d = shared
    path = d.code / "forbidden_client.py"
    path.write_text(FORBIDDEN_CLIENT)
    path.chmod(0o644)
    p = subprocess.Popen([sys.executable, str(path), d.sock], user=USER,
                         group=USER, extra_groups=[], cwd=str(d.code),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().split() == [str(ATTACHED), "1"]
        d.conf.write_text(d.conf.read_text().replace(
            f"uids = [ {USER} ]", "uids = [ 4243 ]"))
        status, body = d.request("POST", "/v1/reload")
        assert status == 200, body
        p.stdin.write("go\n")
        p.stdin.flush()
        out = p.stdout.readline().split()
        assert out == [str(ERROR), "0", "forbidden"], (out, p.stderr.read())
    finally:
        p.kill()
        p.wait()


MANY = 1100
MANY_CLIENT = r"""
import resource, sys
sys.path.insert(0, sys.argv[2])
import rdmad
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
with rdmad.connect(sys.argv[1]) as c:
    with c.attach("p", mode="shared") as p:
        last = p.mr_map(sys.argv[3])
        last[0:4] = b"many"
        print("ok", len(p.mr_names), flush=True)
"""


def test_more_memories_than_the_clients_fd_limit(rdmad, tmp_path):
    """A profile of 1,100 memories attaches in shared mode in a client
    whose RLIMIT_NOFILE is 256 (an attach that passed an fd per memory
    could not be received there), and the client maps the last one."""
    mems = ",\n".join(f'{{ name = "m{i}"; size = "4K"; }}'
                      for i in range(MANY))
    d = rdmad(f"""
devices = ( {{ name = "d"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  memory = ( {mems} );
  pd = ( {{ name = "a"; }} );
  mr = ( {{ name = "last"; pd = "a"; memory = "m{MANY - 1}";
           access = [ "local_write" ]; }} );
}} );
""")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status, prof = d.get("/v1/profiles/p")
        if status == 200 and prof["state"] == "ready":
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"not ready: {prof}")
    pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                       "..", "client", "python")
    out = subprocess.run([sys.executable, "-c", MANY_CLIENT, d.sock, pkg,
                          "last"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "1"], out.stdout
    path, _ = memfd(d.pid, f"m{MANY - 1}")
    with open(path, "rb") as f:
        assert f.read(4) == b"many"
