# SPDX-License-Identifier: MIT
"""The event stream: `rdmactl monitor --json` (the control socket's
subscription) and `GET /v1/events` (Server-Sent Events) both show rxe0's
port going down and up (`ip link set veth0 down/up`: the kernel's own
async events on the daemon's context), a reload's result and the
objects it creates, with the same JSON, in the same order, numbered
without gaps. The SRQ limit is armed at creation (the device shows it)."""

import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import RDMACTL
from rdmadproto import ATTACH, ATTACHED, ERROR, Client

NETDEV = "veth0"

CONF = """
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = (
  {{ name = "p"; device = "d0";
    memory = ( {{ name = "m"; size = "1M"; }} );
    pd = ( {{ name = "a"; }}{extra} );
    cq = ( {{ name = "c"; cqe = 16; }} );
    srq = ( {{ name = "s"; pd = "a"; max_wr = 16; max_sge = 1;
              srq_limit = 4; }} ); }}
);
"""

TIMEOUT = 60  # TCG is slow


class Collector:
    """Events as one front end gives them, read on a thread."""

    def __init__(self, name):
        self.name = name
        self.events = []
        self.lock = threading.Lock()
        self.error = None

    def add(self, ev):
        with self.lock:
            self.events.append(ev)

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def wait_for(self, pred, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in self.snapshot():
                if pred(ev):
                    return ev
            time.sleep(0.05)
        raise AssertionError(f"{self.name}: no such event in "
                             f"{json.dumps(self.snapshot(), indent=1)}")


def sse_reader(port, col, stop):
    """GET /v1/events over HTTP/1.0 (no chunking: the stream is the
    body), parsed as Server-Sent Events."""
    s = socket.create_connection(("127.0.0.1", port), timeout=1)
    s.sendall(b"GET /v1/events HTTP/1.0\r\n\r\n")
    buf = b""
    head = None
    try:
        while not stop.is_set():
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            buf += chunk
            if head is None:
                if b"\r\n\r\n" not in buf:
                    continue
                head, _, buf = buf.partition(b"\r\n\r\n")
                assert b" 200 " in head.split(b"\r\n")[0], head
                assert b"text/event-stream" in head, head
            while b"\n\n" in buf:
                block, _, buf = buf.partition(b"\n\n")
                fields = {}
                for line in block.decode().split("\n"):
                    if line.startswith(":"):
                        continue  # a keep-alive
                    k, _, v = line.partition(": ")
                    fields[k] = v
                if "data" not in fields:
                    continue
                ev = json.loads(fields["data"])
                # The SSE fields agree with the JSON.
                assert fields.get("event") == ev["event"], fields
                if "seq" in ev:
                    assert fields.get("id") == str(ev["seq"]), fields
                col.add(ev)
    except Exception as e:  # seen by the test
        col.error = e
    finally:
        s.close()


def monitor_reader(proc, col):
    for line in proc.stdout:
        col.add(json.loads(line))


def link(state):
    subprocess.run(["ip", "link", "set", NETDEV, state], check=True,
                   timeout=TIMEOUT)


def port_state(d):
    status, doc = d.get("/v1/devices/rxe0/ports/1")
    assert status == 200, doc
    return doc["state_name"]


@pytest.fixture
def veth_up():
    yield
    link("up")


def test_port_reload_same_stream_on_both(rdmad, write_conf, veth_up):
    d = rdmad(CONF.format(extra=""))
    status, srq = d.get("/v1/profiles/p/srq/s")
    assert status == 200, srq
    assert srq["state"] == "ready", srq
    # ibv_create_srq() ignores srq_limit; the daemon arms it after.
    assert srq["srq_limit"] == 4, srq

    stop = threading.Event()
    sse = Collector("GET /v1/events")
    mon = Collector("rdmactl monitor --json")
    t_sse = threading.Thread(target=sse_reader, args=(d.port, sse, stop),
                             daemon=True)
    t_sse.start()
    proc = subprocess.Popen([str(RDMACTL), "--socket", d.sock, "--json",
                             "monitor"], stdout=subprocess.PIPE, text=True)
    t_mon = threading.Thread(target=monitor_reader, args=(proc, mon),
                             daemon=True)
    t_mon.start()
    try:
        sse.wait_for(lambda e: e["event"] == "subscribed")
        # The monitor says nothing before an event: reload until both
        # have heard one, then the stream from there is the same.
        deadline = time.monotonic() + TIMEOUT
        while True:
            d.proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)
            if any(e["event"] == "reload" for e in mon.snapshot()):
                break
            assert time.monotonic() < deadline, d.log()
        start = max(e["seq"] for e in mon.snapshot()
                    if e["event"] == "reload")

        def after(ev):
            return ev.get("seq", 0) > start

        link("down")
        for col in (sse, mon):
            ev = col.wait_for(lambda e: after(e) and
                              e["event"] == "port_error" and
                              e["profile"] == "p")
            assert ev["device"] == "rxe0" and ev["port"] == 1, ev
            assert ev["state_name"] != "active", ev
        link("up")
        for col in (sse, mon):
            ev = col.wait_for(lambda e: after(e) and
                              e["event"] == "port_active" and
                              e["profile"] == "p")
            assert ev["device"] == "rxe0" and ev["port"] == 1, ev
            assert ev["state_name"] == "active" and ev["state"] == 4, ev
        assert port_state(d) == "active"

        # A reload that adds a PD: its result, then the PD coming up.
        d.conf.write_text(d.conf.read_text().replace(
            '{ name = "a"; }', '{ name = "a"; }, { name = "b"; }'))
        d.proc.send_signal(signal.SIGHUP)
        for col in (sse, mon):
            ev = col.wait_for(lambda e: after(e) and
                              e["event"] == "reload" and e["changes"])
            assert ev["status"] == "ok", ev
            assert {"profile": "p", "kind": "pd", "name": "b",
                    "action": "create"} in ev["changes"], ev
            ready = col.wait_for(lambda e: after(e) and
                                 e["event"] == "object_state" and
                                 e["name"] == "b")
            assert ready["kind"] == "pd" and ready["state"] == "ready"
            assert ready["seq"] > ev["seq"]
            col.wait_for(lambda e: after(e) and
                         e["event"] == "profile_state" and
                         e["state"] == "ready" and e["seq"] > ready["seq"])
        status, pd = d.get("/v1/profiles/p/pd/b")
        assert status == 200 and pd["state"] == "ready", pd
        last = max(e["seq"] for e in mon.snapshot())
        sse.wait_for(lambda e: e.get("seq") == last)
    finally:
        stop.set()
        proc.terminate()
        proc.wait(TIMEOUT)
        t_sse.join(TIMEOUT)
    assert sse.error is None, sse.error

    # The same JSON, in the same order, numbered without a gap.
    a = [e for e in sse.snapshot() if after(e) and e["seq"] <= last]
    b = [e for e in mon.snapshot() if after(e) and e["seq"] <= last]
    assert a == b
    assert [e["seq"] for e in a] == list(range(start + 1, last + 1))
    names = [e["event"] for e in a]
    assert names.index("port_error") < names.index("port_active") < \
        len(names) - 1 - names[::-1].index("reload")


def test_monitor_text_and_filter(rdmad, veth_up):
    """Text lines, like ip monitor: time, event, fields; EVENT filters."""
    d = rdmad(CONF.format(extra=""))
    proc = subprocess.Popen([str(RDMACTL), "--socket", d.sock, "monitor",
                             "port"], stdout=subprocess.PIPE, text=True)
    lines = []
    t = threading.Thread(target=lambda: lines.extend(proc.stdout),
                         daemon=True)
    t.start()
    try:
        time.sleep(1)  # subscribed (nothing to wait for: filtered)
        link("down")
        link("up")
        deadline = time.monotonic() + TIMEOUT
        while not any(" port_active " in ln for ln in lines):
            assert time.monotonic() < deadline, (lines, d.log())
            time.sleep(0.1)
        d.proc.send_signal(signal.SIGHUP)
        time.sleep(1)
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)
        t.join(TIMEOUT)
    assert all(" port_" in ln for ln in lines), lines
    down = next(ln for ln in lines if " port_error " in ln)
    assert "profile=p" in down and "device=rxe0" in down and \
        "port=1" in down, down


def test_librdmad_client_hears_its_port(rdmad, veth_up):
    """An attached client (librdmad, helpers/event_client.c) hears its
    profile's port go down and come back up (RDMAD_EVENT_PORT_DOWN,
    RDMAD_EVENT_PORT_ACTIVE), and keeps its attachment."""
    from test_client_events import Helper
    d = rdmad(CONF.format(extra=""))
    h = Helper(d.sock, "-t", "120")
    try:
        h.expect("attached local rxe0")
        link("down")
        assert h.expect("event port_down").split()[2:] == ["p", "rxe0"]
        link("up")
        assert h.expect("event port_active").split()[2:] == ["p", "rxe0"]
        status, sessions = d.get("/v1/sessions")
        assert status == 200 and len(sessions) == 1, sessions
    finally:
        h.kill()


def test_streams_are_not_idle(rdmad, tmp_path):
    """With daemon.http.idle_timeout = 1 s, an events stream that hears
    nothing for longer stays open (the connection is asleep, not idle),
    and so does a subscribed control session with nothing attached;
    both then get the next event."""
    from conftest import TOKEN, free_port
    port = free_port()
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "token").chmod(0o600)
    d = rdmad(f'daemon = {{ runtime_dir = "{tmp_path}"; http = {{ '
              f'listen = [ "127.0.0.1:{port}" ]; idle_timeout = 1; '
              f'token_file = "{tmp_path}/token"; }}; }};\n'
              + CONF.format(extra=""))
    stop = threading.Event()
    sse = Collector("GET /v1/events")
    t_sse = threading.Thread(target=sse_reader, args=(d.port, sse, stop),
                             daemon=True)
    t_sse.start()
    proc = subprocess.Popen([str(RDMACTL), "--socket", d.sock, "--json",
                             "monitor"], stdout=subprocess.PIPE, text=True)
    mon = Collector("rdmactl monitor --json")
    t_mon = threading.Thread(target=monitor_reader, args=(proc, mon),
                             daemon=True)
    t_mon.start()
    try:
        sse.wait_for(lambda e: e["event"] == "subscribed")
        time.sleep(4)
        assert t_sse.is_alive() and proc.poll() is None
        d.proc.send_signal(signal.SIGHUP)
        for col in (sse, mon):
            col.wait_for(lambda e: e["event"] == "reload")
        # Stopping with a stream open (asleep in libmicrohttpd) and a
        # subscribed session: both end, the daemon exits cleanly.
        time.sleep(1)
        assert d.stop() == 0, d.log()
        t_sse.join(TIMEOUT)
        assert not t_sse.is_alive()
        assert proc.wait(TIMEOUT) == 69  # EX_UNAVAILABLE: daemon gone
    finally:
        stop.set()
        if proc.poll() is None:
            proc.terminate()
        proc.wait(TIMEOUT)
        t_sse.join(TIMEOUT)
    assert sse.error is None, sse.error


def gid_table(dev="rxe0"):
    """{index: gid} of port 1, as sysfs has it (unused entries left out)."""
    base = f"/sys/class/infiniband/{dev}/ports/1/gids"
    out = {}
    for name in os.listdir(base):
        try:
            with open(f"{base}/{name}") as f:
                g = f.read().strip()
        except OSError:
            continue  # an unused entry reads EINVAL
        if g != "0000:0000:0000:0000:0000:0000:0000:0000":
            out[int(name)] = g
    return out


@pytest.fixture
def veth_address():
    yield
    subprocess.run(["ip", "addr", "del", "192.0.2.77/24", "dev", NETDEV],
                   stderr=subprocess.DEVNULL)
    subprocess.run(["ip", "addr", "add", "192.0.2.1/24", "dev", NETDEV],
                   stderr=subprocess.DEVNULL)


def test_gid_change_selects_the_gid_again(rdmad, veth_address):
    """The profile's RoCE v2 IPv4 GID goes with its address: the daemon
    selects the new one (GID_CHANGE async event), says so on the stream,
    and shows it in the profile's document."""
    d = rdmad(CONF.format(extra=""))
    status, p = d.get("/v1/profiles/p")
    old = p["gid_index"]
    assert gid_table()[old].endswith("c000:0201")  # 192.0.2.1
    mon = subprocess.Popen([str(RDMACTL), "--socket", d.sock, "monitor",
                            "--json", "gid_selected"],
                           stdout=subprocess.PIPE, text=True)
    col = Collector("monitor")
    threading.Thread(target=monitor_reader, args=(mon, col),
                     daemon=True).start()
    try:
        time.sleep(1)
        subprocess.run(["ip", "addr", "del", "192.0.2.1/24", "dev", NETDEV],
                       check=True)
        subprocess.run(["ip", "addr", "add", "192.0.2.77/24", "dev",
                        NETDEV], check=True)
        ev = col.wait_for(lambda e: e.get("event") == "gid_selected" and
                          e.get("gid", "").endswith("c000:024d"))
        new = ev["gid_index"]
        assert gid_table()[new].endswith("c000:024d")  # 192.0.2.77
        status, p = d.get("/v1/profiles/p")
        assert p["gid_index"] == new
        status, port = d.get("/v1/devices/rxe0/ports/1")
        assert status == 200
    finally:
        mon.terminate()
        mon.wait()


@pytest.fixture
def veth_address_back():
    yield
    subprocess.run(["ip", "addr", "add", "192.0.2.1/24", "dev", NETDEV],
                   stderr=subprocess.DEVNULL)


def test_attach_refused_while_no_gid_matches(rdmad, veth_address_back):
    """PROTOCOL.md: ATTACHED gives the GID index the profile uses, an
    integer from 0. With the profile's RoCE v2 IPv4 address gone, no GID
    of the port matches its gid settings: an ATTACH is answered
    not_ready, saying so (never an ATTACHED without a usable index);
    with the address back, it attaches with the index REST shows."""
    conf = CONF.format(extra="").replace(
        'match = { ibdev = "rxe0"; };',
        'match = { ibdev = "rxe0"; };\n'
        '              gid = { type = "roce_v2"; family = "ipv4"; };')
    assert "family" in conf
    d = rdmad(conf)
    c = Client(d.sock)
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "local"})
    assert t == ATTACHED, doc
    for fd in fds:
        os.close(fd)
    subprocess.run(["ip", "addr", "del", "192.0.2.1/24", "dev", NETDEV],
                   check=True)
    deadline = time.monotonic() + 30
    while d.get("/v1/profiles/p")[1]["gid_index"] not in (None, -1):
        assert time.monotonic() < deadline, "the GID never went"
        time.sleep(0.2)
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "local"})
    assert t == ERROR and doc["error"]["code"] == "not_ready", doc
    assert "GID" in doc["error"]["message"], doc
    assert fds == []
    subprocess.run(["ip", "addr", "add", "192.0.2.1/24", "dev", NETDEV],
                   check=True)
    deadline = time.monotonic() + 30
    while True:
        t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "local"})
        for fd in fds:
            os.close(fd)
        if t == ATTACHED:
            break
        assert time.monotonic() < deadline, doc
        time.sleep(0.2)
    assert doc["gid_index"] == d.get("/v1/profiles/p")[1]["gid_index"] >= 0
    c.close()
