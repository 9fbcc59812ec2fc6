# SPDX-License-Identifier: MIT
"""Objects imported when first used (issue 48): a shared client of a
profile of many MRs imports only the PD and MRs it asks for, moves data
through one of them, gets ESTALE (librdmad(3)) for an MR a reload
removed after its attach and before it asked, keeps using one it had
imported (draining, until its detach), and its detach lets the drained
objects go.

Oracles: the kernel's (the ioctl calls the client makes, counted by
strace: an import of an MR is one RDMA_VERBS_IOCTL), librdmad(3) for
the errors, REST for leases and what a reload left. Needs a device that
imports (tests/vm/run --import)."""

import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BUILD

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client"
                       / "python"))
import rdmad as pyrdmad  # noqa: E402

pytestmark = pytest.mark.needs_import

N_MEM, PER_MEM, MR_SIZE = 10, 100, 4096
N_MR = N_MEM * PER_MEM
ACCESS = '[ "local_write", "remote_write", "remote_read" ]'


def conf(skip=()):
    mems = ",\n".join(f'{{ name = "m{i}"; size = "{PER_MEM * 4}K"; }}'
                      for i in range(N_MEM))
    mrs = ",\n".join(
        f'{{ name = "r{i}"; pd = "a"; memory = "m{i // PER_MEM}"; '
        f'offset = {(i % PER_MEM) * MR_SIZE}; length = {MR_SIZE}; '
        f'access = {ACCESS}; }}' for i in range(N_MR) if i not in skip)
    return f"""
devices = ( {{ name = "d"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  memory = ( {mems} );
  pd = ( {{ name = "a"; }} );
  mr = ( {mrs} );
}} );
"""


def ioctls(cmd, tmp_path):
    """What cmd prints, and how many ioctl(2) calls it made."""
    trace = tmp_path / "strace.out"
    out = subprocess.run([shutil.which("strace"), "-f", "-qq", "-e",
                          "trace=ioctl", "-o", str(trace), *cmd],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    calls = [ln for ln in trace.read_text().splitlines()
             if "RDMA_VERBS_IOCTL" in ln]
    return out.stdout, len(calls)


def leases(d, name):
    status, mr = d.get(f"/v1/profiles/p/mr/{name}")
    assert status == 200, mr
    return mr["leases"]


@pytest.fixture
def big(rdmad):
    d = rdmad(conf())
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        status, prof = d.get("/v1/profiles/p")
        if status == 200 and prof["state"] == "ready":
            return d
        time.sleep(0.5)
    pytest.fail("the profile was not ready in 600 s")


def test_one_mr_used_is_the_one_imported(big, tmp_path):
    """Data moves through one of the 1,000 MRs, and the client's calls
    into the kernel are those of one MR, not of every MR: an attach that
    imported them all makes 1,000 ioctls more."""
    if not shutil.which("strace"):
        pytest.skip("no strace here")
    out, n = ioctls([str(BUILD / "tests" / "shared_rdma"), big.sock, "p",
                     "shared", "write", "r777", "0", "5", str(MR_SIZE)],
                    tmp_path)
    assert out.split()[:2] == ["ok", "shared"], out
    status, rest = big.get("/v1/profiles/p/mr/r777")
    keys = dict(w.split("=") for w in out.split()[2:])
    assert int(keys["rkey"]) == rest["rkey"], (keys, rest)
    # shared_rdma's own QPs, CQs and PD of its peer take a few dozen.
    assert n < N_MR // 4, n
    # One MR more costs one ioctl more: the import itself.
    _, n1 = ioctls([str(BUILD / "tests" / "lazy_client"), big.sock, "p",
                    "mr:r1"], tmp_path)
    _, n3 = ioctls([str(BUILD / "tests" / "lazy_client"), big.sock, "p",
                    "mr:r1", "mr:r2", "mr:r3", "mr:r2"], tmp_path)
    assert n3 - n1 == 2, (n1, n3)
    assert leases(big, "r1") == 0


def test_names_and_keys_without_import(big):
    """Every MR is listed (rdmad_mr_name()) and each asked for has the
    daemon's keys; unknown names are ENOENT."""
    out = subprocess.run([str(BUILD / "tests" / "lazy_client"), big.sock,
                          "p", "names", "mr:r999", "mr:nope", "pd:a",
                          "pd:nope"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1] == f"names {N_MR} r0 r{N_MR - 1}", lines
    status, rest = big.get("/v1/profiles/p/mr/r999")
    assert lines[2] == f"mr r999 ok {rest['rkey']}", lines
    assert lines[3] == "mr nope err ENOENT", lines
    assert lines[4:6] == ["pd a ok", "pd nope err ENOENT"], lines
    assert lines[6] == "detached 0", lines


def test_mr_removed_by_a_reload_after_the_attach(big):
    """r1 imported before the reload stays usable (draining) until the
    detach; r2, removed before it was asked for, is ESTALE, never a dead
    handle; r3, kept, imports; once the client detaches the drained MRs
    go."""
    p = subprocess.Popen([str(BUILD / "tests" / "lazy_client"), big.sock,
                          "p", "mr:r1", "wait", "draining:r2", "mr:r2",
                          "mr:r1", "mr:r3"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "attached"
        first = p.stdout.readline().split()
        assert first[:3] == ["mr", "r1", "ok"], first
        assert leases(big, "r2") == 1  # held although not imported
        big.conf.write_text(conf(skip=(1, 2)))
        status, body = big.request("POST", "/v1/reload")
        assert status == 200, body
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "draining r2"
        assert p.stdout.readline().split() == ["mr", "r2", "err", "ESTALE"]
        again = p.stdout.readline().split()
        assert again == first, (again, first)  # the same, still there
        status, rest = big.get("/v1/profiles/p/mr/r3")
        assert p.stdout.readline().split() == ["mr", "r3", "ok",
                                               str(rest["rkey"])]
        assert p.stdout.readline().strip() == "detached 0"
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # The drained MRs go once their holder has let go.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, doc = big.get("/v1/profiles/p/mr/r2")
        if status == 404:
            break
        time.sleep(0.2)
    assert status == 404, doc
    assert big.get("/v1/profiles/p/mr/r1")[0] == 404


PY_CLIENT = r"""
import sys
sys.path.insert(0, sys.argv[2])
import rdmad
with rdmad.connect(sys.argv[1]) as c:
    with c.attach("p", mode="shared") as p:
        for name in sys.argv[3:]:
            print(name, p.mr(name).rkey)
"""


def test_python_imports_what_it_uses(big, tmp_path):
    """The Python client: the same, one ioctl per MR first asked for
    (and none for one asked again)."""
    if not shutil.which("strace"):
        pytest.skip("no strace here")
    pkg = str(Path(__file__).resolve().parents[2] / "client" / "python")
    base = [sys.executable, "-c", PY_CLIENT, big.sock, pkg]
    out1, n1 = ioctls(base + ["r10"], tmp_path)
    out3, n3 = ioctls(base + ["r10", "r11", "r12", "r11"], tmp_path)
    status, rest = big.get("/v1/profiles/p/mr/r12")
    assert out3.splitlines()[2] == f"r12 {rest['rkey']}", out3
    assert n3 - n1 == 2, (n1, n3)
    assert n1 < N_MR // 4, n1


def test_python_stale_after_a_reload(big):
    """An MR a reload removed before the Python client asked for it is
    Error "stale" (ESTALE) once the client read the event; names and
    keys of the others come from the table without an import."""
    with pyrdmad.connect(big.sock) as c:
        with c.attach("p", mode="shared") as p:
            assert len(p.mr_names) == N_MR
            kept = p.mr("r5")
            status, rest = big.get("/v1/profiles/p/mr/r6")
            assert p.daemon_rkey("r6") == rest["rkey"]
            big.conf.write_text(conf(skip=(5, 6)))
            status, body = big.request("POST", "/v1/reload")
            assert status == 200, body
            seen = set()
            deadline = time.monotonic() + 20
            while "r6" not in seen and time.monotonic() < deadline:
                ev = c.next_event(timeout=1)
                if ev and ev.get("event") == "object_draining":
                    seen.add(ev.get("name"))
            assert "r6" in seen, seen
            with pytest.raises(pyrdmad.Error) as e:
                p.mr("r6")
            assert e.value.code == "stale" and \
                e.value.errno == errno.ESTALE, e.value
            assert p.mr("r5") is kept  # imported before: still there
            assert p.mr("r7").rkey == big.get(
                "/v1/profiles/p/mr/r7")[1]["rkey"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and \
            big.get("/v1/profiles/p/mr/r6")[0] != 404:
        time.sleep(0.2)
    assert big.get("/v1/profiles/p/mr/r6")[0] == 404


def requests_sent(cmd, tmp_path, env=None):
    """What cmd prints, and how many messages it sent over unix sockets
    (the control protocol: one sendmsg per request, PROTOCOL.md)."""
    trace = tmp_path / "strace.sock"
    out = subprocess.run([shutil.which("strace"), "-f", "-qq", "-e",
                          "trace=sendmsg", "-o", str(trace), *cmd],
                         capture_output=True, text=True, timeout=300,
                         env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    # The RDMA netlink socket libibverbs lists devices through is
    # AF_NETLINK (its sendmsg names the address family); ours is not.
    calls = [ln for ln in trace.read_text().splitlines()
             if "sendmsg(" in ln and "AF_NETLINK" not in ln]
    return out.stdout, len(calls)


def test_first_use_asks_nothing_when_the_fds_came_with_the_attach(
        big, tmp_path):
    """The memories' fds come with a shared attach when the profile has
    at most RDMAD_MEMORY_FDS memories (librdmad(3); 128 unless set), or
    with RDMAD_ATTACH_MAP mapped already: MRs of two memories, each asked
    for the first time, then cost no request to rdmad. With fewer allowed
    than the profile's 10 memories, each memory first used is one MAP
    more. Either way the MR's address is its bytes here."""
    if not shutil.which("strace"):
        pytest.skip("no strace here")
    lazy = [str(BUILD / "tests" / "lazy_client"), big.sock, "p"]
    two = [*lazy, "mr:r1", f"mr:r{PER_MEM + 1}"]

    def env(**kw):
        e = {k: v for k, v in os.environ.items()
             if k not in ("RDMAD_MEMORY_FDS", "LAZY_CLIENT_MAP")}
        return dict(e, LAZY_CLIENT_AT="1", **kw)
    _, none = requests_sent(lazy, tmp_path, env())
    for label, e, more in (
            ("mapped at attach", env(LAZY_CLIENT_MAP="1"), 0),
            ("default (128)", env(), 0),
            ("exactly the profile's", env(RDMAD_MEMORY_FDS=str(N_MEM)), 0),
            ("one fewer", env(RDMAD_MEMORY_FDS=str(N_MEM - 1)), 2),
            ("none", env(RDMAD_MEMORY_FDS="0"), 2)):
        _, n0 = requests_sent(lazy, tmp_path, e)
        out, n = requests_sent(two, tmp_path, e)
        lines = out.splitlines()
        assert lines[1].startswith("mr r1 ok ") and \
            lines[1].endswith(" at"), (label, out)
        assert lines[2].endswith(" at"), (label, out)
        assert lines[-1] == "detached 0", (label, out)
        # The attach itself asks no more either way.
        assert n0 == none, (label, none, n0)
        assert n == none + more, (label, none, n)
    assert leases(big, "r1") == 0


PY_MAPPER = r"""
import sys
sys.path.insert(0, sys.argv[2])
import rdmad
with rdmad.connect(sys.argv[1]) as c:
    with c.attach("p", mode="shared", map_memory=sys.argv[3] == "1") as p:
        for name in sys.argv[4:]:
            v = p.mr_map(name)
            print(name, p.mr(name).rkey, len(v), p.mr_addr(name) != 0)
            v.release()
"""


def test_python_map_memory_first_use_asks_nothing(big, tmp_path):
    """attach(map_memory=True), the Python counterpart of
    RDMAD_ATTACH_MAP: the memories come mapped, so the bytes of MRs of
    two memories cost no request to rdmad; without it the same while the
    profile has at most RDMAD_MEMORY_FDS memories (the fds came with the
    attach, unmapped), and with fewer allowed each memory first used is
    one MAP more; the attach itself asks the same either way (a request
    is one send on the control socket, PROTOCOL.md). Counted as the
    system calls that send on a socket."""
    if not shutil.which("strace"):
        pytest.skip("no strace here")
    pkg = str(Path(__file__).resolve().parents[2] / "client" / "python")
    trace = tmp_path / "strace.py"

    def sends(flag, *names, fds=None):
        env = {k: v for k, v in os.environ.items()
               if k != "RDMAD_MEMORY_FDS"}
        if fds is not None:
            env["RDMAD_MEMORY_FDS"] = str(fds)
        out = subprocess.run(
            [shutil.which("strace"), "-f", "-qq", "-e",
             "trace=sendto,sendmsg,send", "-o", str(trace), sys.executable,
             "-c", PY_MAPPER, big.sock, pkg, flag, *names],
            capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stdout + out.stderr
        calls = [ln for ln in trace.read_text().splitlines()
                 if ("sendto(" in ln or "sendmsg(" in ln) and
                 "AF_NETLINK" not in ln]
        return out.stdout.splitlines(), len(calls)

    two = ("r1", f"r{PER_MEM + 1}")
    _, none = sends("1")
    out, mapped = sends("1", *two)
    _, lazy_none = sends("0", fds=0)
    out_few, few = sends("0", *two)
    out_exact, exact = sends("0", *two, fds=N_MEM)
    out_asked, asked = sends("0", *two, fds=N_MEM - 1)
    for lines in (out, out_few, out_exact, out_asked):
        for line, name in zip(lines, two):
            status, rest = big.get(f"/v1/profiles/p/mr/{name}")
            assert line == f"{name} {rest['rkey']} {MR_SIZE} True", lines
    # The fds came with the answer: no MAP at the attach either.
    assert none == lazy_none, (lazy_none, none)
    assert mapped == none, (none, mapped)
    assert few == lazy_none, (lazy_none, few)
    assert exact == lazy_none, (lazy_none, exact)
    assert asked == lazy_none + 2, (lazy_none, asked)
    assert leases(big, "r1") == 0
