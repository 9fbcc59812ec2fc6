# SPDX-License-Identifier: MIT
"""Local users who mean harm (issue 45): what a socket delivers can
neither stall the daemon's loop nor grow its memory without bound.

Fds sent with a message: no client message carries any (PROTOCOL.md),
so the daemon refuses the message and the session; the fds must be
closed where a slow close stalls nothing. The slow fd here is a TCP
socket with unsent data that its peer never reads and SO_LINGER set:
its last close(2) waits out the linger (20 s) in the closing thread.
Throughout, GET /v1/health answers in 100 ms (or, on a machine too slow
for that, in three times the worst answer before the attack), never
in a second."""

import json
import os
import secrets
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import free_port, settle
from rdmadproto import (ATTACH, ATTACHED, DETACH, DETACHED, ERROR, HDR,
                        HELLO, REPLY, REPORT, REQUEST, Client, frame)

LINGER = 20


def conf(run, port):
    return f"""
daemon = {{ runtime_dir = "{run}";
           http = {{ listen = [ "127.0.0.1:{port}" ]; }}; }};
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "p"; device = "d0";
               memory = ( {{ name = "m"; size = "1M"; }} ); }} );
"""


@pytest.fixture
def run_dir():
    """A runtime directory off the 9p share (unix sockets need it)."""
    run = Path("/run") / f"rdmad-test-{secrets.token_hex(4)}"
    run.mkdir(mode=0o755)
    yield run
    subprocess.run(["rm", "-rf", str(run)])


def started(rdmad, run, text):
    d = rdmad(text)
    d.sock = str(run / "rdmad.sock")
    return d


@pytest.fixture
def daemon(rdmad, run_dir):
    return started(rdmad, run_dir, conf(run_dir, free_port()))


def health(d, timeout=30):
    t0 = time.monotonic()
    with urllib.request.urlopen(d.url + "/v1/health", timeout=timeout) as r:
        assert r.status == 200
        json.loads(r.read())
    return time.monotonic() - t0


class Sink:
    """A loopback listener that accepts nothing and reads nothing: the
    connections to it fill up and stay full."""

    def __init__(self):
        self.l = socket.socket()
        self.l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.l.bind(("127.0.0.1", 0))
        self.l.listen(64)

    def lingering(self):
        """A connected socket whose send queue is full and whose close
        lingers LINGER seconds (SO_LINGER, socket(7))."""
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        c.connect(self.l.getsockname())
        c.setblocking(False)
        for _ in range(3):
            try:
                while True:
                    c.send(b"x" * 4096)
            except BlockingIOError:
                pass
            time.sleep(0.02)
        c.setblocking(True)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, LINGER))
        return c

    def close(self):
        self.l.close()


@pytest.fixture
def sink():
    s = Sink()
    yield s
    s.close()


def error_of(sock):
    sock.settimeout(10)
    msg = sock.recv(70000)
    assert msg, "closed without a word"
    _m, _v, mtype, _f, _n, _id, _l = HDR.unpack_from(msg)
    return mtype, json.loads(msg[HDR.size:])


def send_with(sock, mtype, payload, fd, mid=1):
    sock.sendmsg([frame(mtype, payload, mid, n_fds=1)],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                   struct.pack("i", fd.fileno()))])


def responsive(d, seconds, bound):
    """GET /v1/health for seconds: its answers' median is within bound,
    and none takes a second (a stalled loop answers after the linger,
    20 s; a shared, emulated machine has pauses of a tenth of one)."""
    times, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        times.append(health(d))
        time.sleep(0.05)
    times.sort()
    median, worst = times[len(times) // 2], times[-1]
    assert median <= bound and worst < 1, \
        f"/v1/health: median {median:.3f} s (bound {bound:.3f}), worst {worst:.3f} s"


@pytest.mark.parametrize("how", ["hello", "request", "queued"])
def test_fds_a_client_sends_never_stall_the_loop(daemon, sink, how):
    """hello: a lingering socket sent with HELLO; request: with a REQUEST
    of a welcomed session; queued: five sent with requests by a client
    that closes at once, so that they are still queued in its socket
    when the daemon ends the session. Each message with fds is refused
    (ERROR bad_message) and the loop goes on answering."""
    d = daemon
    bound = max(0.1, 3 * max(health(d) for _ in range(10)))
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(d.sock)
    slow = [sink.lingering() for _ in range(5 if how == "queued" else 1)]
    if how == "hello":
        send_with(c, HELLO, {"versions": [1, 1]}, slow[0])
    else:
        c.send(frame(HELLO, {"versions": [1, 1]}, 1))
        c.settimeout(10)
        c.recv(70000)  # WELCOME
        for i, s in enumerate(slow):
            send_with(c, REQUEST, {"method": "GET", "path": "/v1/health"},
                      s, mid=2 + i)
    for s in slow:
        s.close()  # the daemon's copy is the last one now
    if how == "queued":
        c.close()
    else:
        mtype, doc = error_of(c)
        assert mtype == ERROR, doc
        assert doc["error"]["code"] == "bad_message", doc
        assert "file descriptor" in doc["error"]["message"], doc
        c.close()
    responsive(d, 3, bound)
    # And a new client is served as before.
    ok = Client(d.sock)
    assert ok.request("GET", "/v1/health")[0] == 200
    ok.close()


# ---- memory: sessions that send and never read ----

NOBODY = 65534
GROUP = 1000  # the control group; nobody joins it for the test
OUT_BUDGET = 16 << 20
UID_BUDGET = 8 << 20


def budget_conf(run, port):
    return f"""
daemon = {{ runtime_dir = "{run}"; control_group = "{GROUP}";
           output_budget = "16M"; output_budget_per_uid = "8M";
           http = {{ listen = [ "127.0.0.1:{port}" ]; }}; }};
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "p"; device = "d0"; allow = {{ groups = [ "{GROUP}" ]; }};
               memory = ( {{ name = "m"; size = "1M"; }} );
               pd = ( {{ name = "pd"; }} );
               mr = ( {{ name = "mr"; pd = "pd"; memory = "m"; }} ); }} );
"""


def rss(pid):
    """The process's resident set, bytes (proc(5): VmRSS)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def become(uid):
    """This (forked) process becomes uid, in GROUP only."""
    os.setgroups([])
    os.setgid(GROUP)
    os.setuid(uid)


def flood_as(path, uid, sessions, requests):
    """A child of uid (group GROUP) with `sessions` sessions, each sending
    up to `requests` REQUESTs for the biggest document there is and
    reading nothing, until its pipe closes. Returns (pid, write end)."""
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(w)
            os.close(r2)
            become(uid)
            held = []
            for _ in range(sessions):
                c = Client(path)
                c.sock.setblocking(False)
                for i in range(requests):
                    try:
                        c.sock.send(frame(REQUEST, {
                            "method": "GET",
                            "path": "/v1/openapi.json"}, 2 + i))
                    except OSError:
                        break  # full, or ended by the daemon
                held.append(c)
            os.write(w2, b"k")
            os.read(r, 1)
        finally:
            os._exit(0)
    os.close(r)
    os.close(w2)
    assert os.read(r2, 1) == b"k"
    os.close(r2)
    return pid, w


@pytest.fixture
def budget_daemon(rdmad, run_dir):
    return started(rdmad, run_dir, budget_conf(run_dir, free_port()))


def sessions(sock):
    """GET /v1/sessions asked as root on the control socket: an admin,
    who is shown every session's pid and uid (rdmad(8))."""
    c = Client(sock)
    try:
        status, body = c.request("GET", "/v1/sessions")
        assert status == 200, body
        return body
    finally:
        c.close()


def sanitized():
    from conftest import RDMAD
    return "san" in RDMAD.name


def test_sessions_that_never_read_hold_the_budget_and_no_more(budget_daemon):
    """128 sessions of nobody (in the control group, admitted to nothing)
    send requests for the OpenAPI document (about 64 KiB each) and read
    nothing: those whose answers would pass nobody's budget (8 MiB) are
    ended. The daemon's resident set grows by at most the budget plus a
    fixed 24 MiB; an admitted client of another uid still attaches and
    is answered; once the flood has gone, the resident set is back within
    10 % (and 4 MiB) of where it started. (RSS bounds: the plain daemon;
    a sanitizer's quarantine keeps freed memory by design.)"""
    d = budget_daemon
    for _ in range(3):  # the document rendered and cached once
        assert d.get("/v1/openapi.json")[0] == 200
    ok = Client(d.sock)
    assert ok.request("GET", "/v1/health")[0] == 200
    time.sleep(0.5)
    start = rss(d.pid)
    pid, w = flood_as(d.sock, NOBODY, 128, 400)
    try:
        time.sleep(2)
        peak = rss(d.pid)
        # Another uid is served meanwhile: a request, and an attach.
        t0 = time.monotonic()
        assert ok.request("GET", "/v1/health")[0] == 200
        other = Client(d.sock)
        t, doc, fds = other.call(ATTACH, {"profile": "p"})
        for fd in fds:
            os.close(fd)
        assert t == ATTACHED, doc
        assert time.monotonic() - t0 < 5
        other.close()
        # Answers pile up to nobody's budget, not past it: the sessions
        # that would pass it have been ended.
        assert len([s for s in sessions(d.sock)
                    if s["uid"] == NOBODY]) < 128
    finally:
        os.close(w)
        os.waitpid(pid, 0)
    assert settle(lambda: not [s for s in sessions(d.sock)
                               if s["uid"] == NOBODY], 30)
    time.sleep(1)
    end = rss(d.pid)
    print(f"RSS start {start >> 10} KiB, flood {peak >> 10} KiB, "
          f"after {end >> 10} KiB")
    if not sanitized():
        assert peak - start <= OUT_BUDGET + (24 << 20), (start, peak)
        assert end - start <= max(start // 10, 4 << 20), (start, end)


def test_attachments_per_session_are_bounded(rdmad, tmp_path):
    """daemon.max_attachments_per_session: one more ATTACH gets
    resource_exhausted, naming the key; a DETACH makes room again."""
    d = rdmad("""
daemon = { runtime_dir = "%s"; max_attachments_per_session = 3;
           http = { listen = [ "127.0.0.1:%d" ]; }; };
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = ( { name = "p"; device = "d0";
               memory = ( { name = "m"; size = "1M"; } ); } );
""" % (tmp_path, free_port()))
    c = Client(str(tmp_path / "rdmad.sock"))
    ids = []
    for _ in range(3):
        t, doc, fds = c.call(ATTACH, {"profile": "p"})
        for fd in fds:
            os.close(fd)
        assert t == ATTACHED, doc
        ids.append(doc["attachment"])
    t, doc, _ = c.call(ATTACH, {"profile": "p"})
    assert t == ERROR
    assert doc["error"]["code"] == "resource_exhausted"
    assert "max_attachments_per_session" in doc["error"]["message"]
    t, doc, _ = c.call(DETACH, {"attachment": ids[0]})
    assert t == DETACHED, doc
    t, doc, fds = c.call(ATTACH, {"profile": "p"})
    for fd in fds:
        os.close(fd)
    assert t == ATTACHED, doc
    c.close()


def test_a_report_keeps_only_what_the_profile_declares(rdmad, tmp_path):
    """A local-mode REPORT whose entries are not {name, lkey, rkey, iova,
    length} with the name of one of the profile's MRs is refused
    (bad_request), and GET /v1/sessions shows only what was accepted."""
    d = rdmad("""
daemon = { runtime_dir = "%s";
           http = { listen = [ "127.0.0.1:%d" ]; }; };
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = ( { name = "p"; device = "d0";
               memory = ( { name = "m"; size = "1M"; } );
               pd = ( { name = "pd"; } );
               mr = ( { name = "mr"; pd = "pd"; memory = "m"; } ); } );
""" % (tmp_path, free_port()))
    c = Client(str(tmp_path / "rdmad.sock"))
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "local"})
    for fd in fds:
        os.close(fd)
    assert t == ATTACHED, doc
    att = doc["attachment"]
    good = {"name": "mr", "lkey": 1, "rkey": 2, "iova": 0, "length": 4096}
    bad = [dict(good, name="other"), dict(good, junk="x" * 60000),
           dict(good, lkey=1 << 40), {"name": "mr"}, "mr"]
    for entry in bad:
        t, doc, _ = c.call(REPORT, {"attachment": att, "mr": [entry]})
        assert t == ERROR and doc["error"]["code"] == "bad_request", doc
    t, doc, _ = c.call(REPORT, {"attachment": att, "mr": [good]})
    assert t == REPLY and doc["status"] == 200, doc
    t, doc, _ = c.call(REPORT, {"attachment": att, "append": True,
                                "mr": [good] * 8})
    assert t == ERROR and doc["error"]["code"] == "too_large", doc
    mine = [s for s in sessions(str(tmp_path / "rdmad.sock"))
            if s["pid"] == os.getpid() and s["attachments"]]
    assert [a["report"] for a in mine[0]["attachments"]] == [[good]]
    c.close()


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def random_client(path, uid, seed, steps, sink_port):
    """A child of uid doing `steps` seeded random things to the daemon:
    open or close sessions, send requests and read some of the answers
    or none, attach and detach, send an fd; it exits when done."""
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        import random
        rng = random.Random(seed)
        os.setgroups([])
        os.setgid(GROUP)
        os.setuid(uid)
        sessions = []
        end = time.monotonic() + 30
        for _ in range(steps):
            if time.monotonic() > end:
                break
            op = rng.choice(["open", "open", "close", "flood", "read",
                             "attach", "detach", "fd"])
            if op == "open" or not sessions:
                # A uid whose sessions hold unread answers past its
                # budget is not read: HELLO may go unanswered a while.
                try:
                    if len(sessions) < 40:
                        c = Client(path, timeout=0.5)
                        c.atts = []
                        sessions.append(c)
                except OSError:
                    pass
                continue
            c = rng.choice(sessions)
            try:
                if op == "close":
                    sessions.remove(c)
                    c.close()
                elif op == "flood":
                    c.sock.setblocking(False)
                    for i in range(rng.randrange(1, 60)):
                        c.sock.send(frame(REQUEST, {
                            "method": "GET", "path": "/v1/openapi.json"},
                            1000 + i))
                elif op == "read":
                    c.sock.setblocking(False)
                    for _ in range(rng.randrange(1, 200)):
                        c.sock.recv(70000)
                elif op == "attach" and not c.sock.getblocking():
                    continue  # answers of a flood ahead: not mixed in
                elif op == "attach":
                    # Long enough to take ATTACHED and its fds whole
                    # (see the note on leftovers below).
                    c.sock.settimeout(10)
                    t, doc, fds = c.call(ATTACH, {"profile": "p"})
                    for fd in fds:
                        os.close(fd)
                    if t == ATTACHED:
                        c.atts.append(doc["attachment"])
                elif op == "detach" and c.atts and c.sock.getblocking():
                    c.sock.settimeout(10)
                    c.call(DETACH, {"attachment": c.atts.pop()})
                elif op == "fd":
                    s = socket.create_connection(("127.0.0.1", sink_port))
                    send_with(c.sock, REQUEST, {"method": "GET",
                                                "path": "/v1/health"}, s)
                    s.close()
            except (BlockingIOError, ConnectionError, OSError):
                pass  # a full socket, a session the daemon ended
        for c in sessions:
            c.close()
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    os._exit(code)


def test_random_sessions_stay_within_the_budgets(budget_daemon, sink):
    """A property of the budgets, on seeded random sequences
    (RDMAD_TEST_SEED): three uids of the control group each open and
    close sessions, flood them with requests, read some answers or none,
    attach and detach, send fds. Sampled throughout: the daemon's
    resident set stays under start + output_budget + 24 MiB, and its fds
    under its fds at start + 3 per session + 16; once every client has
    gone, both are back (fds exactly, RSS within 10 % and 4 MiB)."""
    import random
    d = budget_daemon
    seed = int(os.environ.get("RDMAD_TEST_SEED", random.randrange(1 << 30)))
    print(f"RDMAD_TEST_SEED={seed}")
    for _ in range(3):
        assert d.get("/v1/openapi.json")[0] == 200
    time.sleep(0.5)
    rss0, fds0 = rss(d.pid), fd_count(d.pid)
    port = sink.l.getsockname()[1]
    kids = [random_client(d.sock, uid, seed + uid, 150, port)
            for uid in (1000, 1001, 1002)]
    worst_rss = worst_fds = 0
    running = set(kids)
    while running:
        assert d.proc.poll() is None, \
            f"rdmad exited {d.proc.returncode}: " + d.log()[-6000:]
        for k in list(running):
            done, status = os.waitpid(k, os.WNOHANG)
            if done:
                assert status == 0, f"client {k} failed"
                running.discard(k)
        n = len(d.get("/v1/sessions")[1])
        r, f = rss(d.pid), fd_count(d.pid)
        worst_rss, worst_fds = max(worst_rss, r), max(worst_fds, f)
        assert f <= fds0 + 3 * n + 16, (f, fds0, n)
        if not sanitized():
            assert r <= rss0 + OUT_BUDGET + (24 << 20), (r, rss0)
        time.sleep(0.2)
    # Every client has gone: so have their sessions. (A session whose
    # queued answers met a closed socket once closed its output fd twice,
    # the second time another session's new socket under the same
    # number: that session was never read again and stayed listed;
    # seed 315215037 showed it about one run in three.)
    assert settle(lambda: not d.get("/v1/sessions")[1], 30), \
        f"sessions of gone clients still listed: {d.get('/v1/sessions')[1]}"
    time.sleep(1)
    print(f"RSS {rss0 >> 10} -> worst {worst_rss >> 10} -> "
          f"{rss(d.pid) >> 10} KiB; fds {fds0} -> worst {worst_fds} -> "
          f"{fd_count(d.pid)}")
    assert settle(lambda: fd_count(d.pid) == fds0, 10), fd_count(d.pid)
    if not sanitized():
        assert rss(d.pid) - rss0 <= max(rss0 // 10, 4 << 20)


def leave_as(path, uid, how, n):
    """A child of uid (group GROUP) with n sessions, each leaving the way
    `how` says, then exiting without reading: "attach" sends ATTACH,
    "attach_flood" ATTACH then 40 REQUESTs, "detach_unread" ATTACH, reads
    ATTACHED, sends DETACH and exits before DETACHED. Returns its pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            become(uid)
            held = []
            for i in range(n):
                c = Client(path)
                if how == "detach_unread":
                    t, doc, fds = c.call(ATTACH, {"profile": "p"})
                    for fd in fds:
                        os.close(fd)
                    assert t == ATTACHED, doc
                    c.send(DETACH, {"attachment": doc["attachment"]})
                else:
                    c.send(ATTACH, {"profile": "p"})
                if how == "attach_flood":
                    c.sock.setblocking(False)
                    for j in range(40):
                        try:
                            c.sock.send(frame(REQUEST, {
                                "method": "GET",
                                "path": "/v1/openapi.json"}, 100 + j))
                        except OSError:
                            break
                held.append(c)
            # Long enough for the daemon to answer into the sockets.
            time.sleep(1)
            code = 0
        finally:
            os._exit(code)
    return pid


@pytest.mark.parametrize("how", ["attach", "attach_flood", "detach_unread"])
def test_a_client_gone_with_answers_unread_leaves_no_session(
        budget_daemon, how):
    """Clients that exit with the daemon's answers unread in their
    sockets (an ATTACHED and its fds; answers to a flood; a DETACHED):
    within 5 s of the last one's exit no session of theirs is listed,
    none of their attachments holds anything, and the daemon's fds are
    back to what they were (rdmad(8): a session ends with its socket)."""
    d = budget_daemon
    assert not [s for s in sessions(d.sock) if s.get("uid") in (1000, 1001)]
    fds0 = fd_count(d.pid)
    kids = [leave_as(d.sock, uid, how, 6) for uid in (1000, 1001)]
    for k in kids:
        _, status = os.waitpid(k, 0)
        assert status == 0
    left = lambda: [s for s in sessions(d.sock)  # noqa: E731
                    if s.get("uid") in (1000, 1001)]
    assert settle(lambda: not left(), 5), left()
    # At most what it had: the session that asked for the list just
    # before may still have been counted then (its socket is closed off
    # the loop).
    assert settle(lambda: fd_count(d.pid) <= fds0, 5), \
        (fd_count(d.pid), fds0)
    assert d.proc.poll() is None
