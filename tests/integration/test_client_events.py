# SPDX-License-Identifier: MIT
"""Clients are told: a librdmad program (helpers/event_client.c) attached
in local mode hears that its device went (EVENT device_removed), lets go
of what it opened on it, and so does not hold up `rdma link del` (rxe
waits for every context on the device to close); one that ignores the
event holds the removal until it exits. A client whose daemon is killed
hears it (RDMAD_EVENT_DAEMON_GONE, ECONNRESET on the old connection),
and once the daemon is back, reconnects and attaches again."""

import os
import secrets
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD, TOKEN, settle
from rdmadproto import ATTACH, ATTACHED, EVENT, Client

HELPER = BUILD / "tests" / "event_client"

CONF = """
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = (
  {{ name = "p"; device = "d0";
    memory = ( {{ name = "m"; size = "1M"; }} );
    pd = ( {{ name = "a"; }} );
    mr = ( {{ name = "r"; pd = "a"; memory = "m";
             access = [ "local_write", "remote_write" ]; }} ); }}
);
"""


@pytest.fixture
def run_dir():
    # Sockets cannot be bound on the 9p share the VM runs the tree from.
    run = Path("/run") / f"rdmad-events-{secrets.token_hex(4)}"
    run.mkdir(mode=0o755)
    (run / "token").write_text(TOKEN + "\n")
    (run / "token").chmod(0o600)
    yield run
    subprocess.run(["rm", "-rf", str(run)])


def start(rdmad, run, port=None):
    from conftest import free_port
    port = port or free_port()
    text = (f'daemon = {{ runtime_dir = "{run}"; '
            f'http = {{ listen = [ "127.0.0.1:{port}" ]; '
            f'token_file = "{run}/token"; }}; }};\n') + CONF.format()
    d = rdmad(text)
    d.token = TOKEN
    d.sock = str(run / "rdmad.sock")
    return d


class Helper:
    """event_client, its lines read as they come."""

    def __init__(self, sock, *args):
        if not HELPER.exists():
            pytest.skip(f"{HELPER} not built (make helpers)")
        self.proc = subprocess.Popen([str(HELPER), *args, sock, "p"],
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.lines = []
        self.partial = b""

    def expect(self, prefix, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines:
                if line.startswith(prefix):
                    return line
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [],
                                              left)[0]:
                raise AssertionError(f"no '{prefix}' from event_client: "
                                     f"{self.lines}")
            # Unbuffered: select() sees only what no buffer took yet.
            data = os.read(self.proc.stdout.fileno(), 4096)
            if not data:
                raise AssertionError(f"event_client ended without "
                                     f"'{prefix}': {self.lines}")
            self._add(data)

    def _add(self, data):
        *done, self.partial = (self.partial + data).split(b"\n")
        self.lines += [x.decode() for x in done]

    def finish(self, timeout=60):
        rc = self.proc.wait(timeout)
        self._add(self.proc.stdout.read() + b"\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def state(d):
    status, p = d.get("/v1/profiles/p")
    assert status == 200
    return p["state"]


def link_del():
    """`rdma link del rxe0`: its result and how long it took."""
    t0 = time.monotonic()
    r = subprocess.run(["rdma", "link", "del", "rxe0"], capture_output=True,
                       text=True, timeout=120)
    return r, time.monotonic() - t0


def link_add():
    r = subprocess.run(["rdma", "link", "add", "rxe0", "type", "rxe",
                        "netdev", "veth0"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr


def report(name, seconds):
    line = f"{name}: rdma link del took {seconds:.2f} s"
    print(line)
    out = BUILD / "tmp"
    out.mkdir(exist_ok=True)
    with open(out / "client-events-timings.txt", "a") as f:
        f.write(line + "\n")


def test_device_removed_event_lets_the_device_go(rdmad, run_dir):
    d = start(rdmad, run_dir)
    h = Helper(d.sock)
    # The wire format, seen by a client that opens nothing on the device.
    raw = Client(d.sock)
    t, att, fds = raw.call(ATTACH, {"profile": "p", "mode": "local"})
    assert t == ATTACHED, att
    for fd in fds:
        os.close(fd)
    try:
        assert h.expect("attached") == "attached local rxe0"
        try:
            r, took = link_del()
            assert r.returncode == 0, r.stderr
        finally:
            link_add()
        report("event-aware client", took)
        t, ev, fds = raw.recv()
        assert (t, fds) == (EVENT, [])
        assert "rxe0" in ev.pop("reason"), ev
        assert ev == {"event": "device_removed", "profile": "p",
                      "attachment": att["attachment"], "device": "rxe0"}
        assert h.expect("event") == "event device_removed p rxe0 same"
        assert h.expect("detached") == "detached 0"
        assert h.finish() == 0, h.lines
        # It let go at once: the removal did not wait for it.
        assert took < 10, f"rdma link del took {took:.1f} s: {h.lines}"
        log = d.log()
        assert "told it profile p lost its device" in log
        # The profile comes back with the device; the session is gone.
        assert settle(lambda: state(d) == "ready", 60)
        status, sessions = d.get("/v1/sessions")
        assert [s["pid"] for s in sessions] == [os.getpid()]
    finally:
        raw.close()
        h.kill()


def test_a_client_that_ignores_the_event_holds_the_removal(rdmad, run_dir):
    """What the event saves: rxe's removal waits for the client's own
    context, here until the client exits 8 s after it was told."""
    d = start(rdmad, run_dir)
    h = Helper(d.sock, "-i", "8")
    try:
        assert h.expect("attached") == "attached local rxe0"
        try:
            r, took = link_del()
            assert r.returncode == 0, r.stderr
        finally:
            link_add()
        report("client ignoring the event (exits 8 s later)", took)
        assert h.expect("event") == "event device_removed p rxe0 same"
        assert h.finish() == 0, h.lines
        assert took >= 6, f"rdma link del took only {took:.1f} s"
        assert settle(lambda: state(d) == "ready", 60)
    finally:
        h.kill()


def test_daemon_killed_client_reconnects(rdmad, run_dir):
    d = start(rdmad, run_dir)
    h = Helper(d.sock)
    try:
        assert h.expect("attached") == "attached local rxe0"
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(30)
        assert h.expect("event") == "event daemon_gone"
        old = h.expect("old")
        assert old.startswith("old ECONNRESET rdmad went away (stopped or "
                              "restarted)"), old
        assert "connect again" in old
        # Released here; the lease died with the daemon: no error.
        assert h.expect("detached") == "detached 0 "
        time.sleep(1)  # it tries to reconnect meanwhile, and fails
        assert not any(x.startswith("reconnected") for x in h.lines)
        d2 = start(rdmad, run_dir, d.port)
        assert os.path.exists(d2.sock)
        assert h.expect("reconnected", 60)
        assert h.expect("reattached") == "reattached local rxe0"
        assert h.finish() == 0, h.lines
        assert h.lines[-1] == "detached 0"
        assert "attached to p, local mode" in d2.log()
    finally:
        h.kill()


def test_draining_object_is_told_and_let_go(rdmad, run_dir):
    """A reload that changes an MR a client holds: the MR drains (kept
    for the client) and the client hears it (RDMAD_EVENT_OBJECT_DRAINING,
    naming the MR), detaches, and the old MR goes; the new one serves."""
    d = start(rdmad, run_dir)
    h = Helper(d.sock)
    try:
        h.expect("attached local rxe0")
        old = d.get("/v1/profiles/p/mr/r")[1]
        conf = d.conf.read_text()
        d.conf.write_text(conf.replace('"local_write", "remote_write"',
                                       '"local_write", "remote_read"'))
        status, body = d.request("POST", "/v1/reload")
        assert status == 200, body
        assert {"profile": "p", "kind": "mr", "name": "r",
                "action": "recreate"} in body["changes"], body
        line = h.expect("event object_draining p ")
        assert "mr 'r' was removed or changed by a reload" in line, line
        h.expect("detached 0")
        assert h.finish() == 0, h.lines
        # The old incarnation is gone once let go; the new one is ready.
        assert settle(lambda: not any(
            o["state"] == "draining"
            for o in d.get("/v1/profiles/p")[1]["objects"]), 10)
        new = d.get("/v1/profiles/p/mr/r")[1]
        assert new["state"] == "ready" and new["leases"] == 0, new
        assert new["rkey"] != old["rkey"], (old, new)
    finally:
        h.kill()
