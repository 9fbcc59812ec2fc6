# SPDX-License-Identifier: MIT
"""The REST front end and rdmactl: listen addresses (TCP and unix socket),
rdmactl's JSON (over the control socket) equals the REST documents,
signals, bad requests."""

import http.client
import json
import os
import signal
import socket
import subprocess
import time

from conftest import (HEALTH, RDMAD, RDMACTL, free_port, raw_http, rdmactl,
                      settle)
from rdmadproto import ATTACH, ERROR, HDR, MAGIC, REPLY, REQUEST, Client

PROFILE = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = ( { name = "p"; device = "d0";
               memory = ( { name = "m"; size = "1M"; } );
               pd = ( { name = "a"; } );
               mr = ( { name = "r"; pd = "a"; memory = "m"; } ); } );
"""


def unix_get(path, url_path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(f"GET {url_path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_unix_and_tcp_listeners(rdmad, tmp_path):
    sock = tmp_path / "http.sock"
    port = free_port()
    d = rdmad(f'daemon = {{ http = {{ listen = [ "127.0.0.1:{port}", '
              f'"unix:{sock}" ]; }}; }};\n' + PROFILE)
    status, tcp = d.get("/v1/profiles/p")
    assert status == 200
    status, via_unix = unix_get(str(sock), "/v1/profiles/p")
    assert status == 200
    assert via_unix == tcp
    assert d.stop() == 0
    assert not sock.exists(), "the unix socket is removed at exit"


def test_rdmactl_json_is_the_rest_document(rdmad):
    d = rdmad(PROFILE)
    for args, path in ((["profiles"], "/v1/profiles"),
                       (["show", "p"], "/v1/profiles/p"),
                       (["show", "p", "mr", "r"], "/v1/profiles/p/mr/r"),
                       (["devices"], "/v1/devices"),
                       (["gids", "rxe0"], "/v1/devices/rxe0/ports/1/gids")):
        r = rdmactl(d, "--json", *args)
        assert r.returncode == 0, (args, r.stderr)
        status, doc = d.get(path)
        assert status == 200
        if args == ["devices"]:
            for dev in doc:
                dev.pop("import_error", None)
            doc_ctl = json.loads(r.stdout)
            for dev in doc_ctl:
                dev.pop("import_error", None)
            assert doc_ctl == doc
        else:
            assert json.loads(r.stdout) == doc, args


def test_rdmactl_text_and_errors(rdmad, tmp_path):
    d = rdmad(PROFILE)
    r = rdmactl(d, "show", "p")
    assert r.returncode == 0
    assert "mr      r" in r.stdout and "ready" in r.stdout
    r = rdmactl(d, "show", "nope")
    assert r.returncode == 1
    assert "no profile 'nope'" in r.stderr
    r = rdmactl(d, "show", "../v1")
    assert r.returncode == 64
    r = rdmactl(d, "frobnicate")
    assert r.returncode == 64
    # No daemon at the socket.
    r = subprocess.run([str(RDMACTL), "--socket", str(tmp_path / "none.sock"),
                        "profiles"], capture_output=True, text=True)
    assert r.returncode == 69
    assert "cannot connect to rdmad" in r.stderr
    # The REST client is gone from rdmactl: remote operators use REST.
    r = subprocess.run([str(RDMACTL), "--url", d.url, "profiles"],
                       capture_output=True, text=True)
    assert r.returncode == 64


def test_sigint_stops_cleanly_and_sighup_reloads(rdmad):
    d = rdmad(PROFILE)
    d.proc.send_signal(signal.SIGHUP)
    for _ in range(100):
        if "reloaded" in d.log():
            break
        time.sleep(0.1)
    assert "0 changes, 3 objects kept" in d.log()
    status, _ = d.get("/v1/health")
    assert status == 200
    assert d.stop(signal.SIGINT) == 0


def test_request_bodies_are_checked(rdmad):
    d = rdmad(PROFILE)
    status, body = raw_http(
        d.port, b"GET /v1/profiles HTTP/1.0\r\nContent-Length: 2\r\n"
                b"\r\n{}")
    assert status == 413
    assert body["error"]["code"] == "body_not_allowed"
    status, body = raw_http(
        d.port, b"POST /v1/reload HTTP/1.0\r\nContent-Length: 5\r\n"
                b"\r\nhello")
    assert status == 400
    assert body["error"]["code"] == "bad_json"
    big = 100 * 1024
    status, body = raw_http(
        d.port, b"POST /v1/reload HTTP/1.0\r\nContent-Length: %d\r\n"
                b"\r\n" % big + b"x" * big)
    assert status == 413
    assert body["error"]["code"] == "body_too_large"
    status, _ = d.get("/v1/health")
    assert status == 200


def test_changes_need_a_configured_token(rdmad, tmp_path):
    port = free_port()
    d = rdmad(f'daemon = {{ http = {{ listen = [ "127.0.0.1:{port}" ]; }}; '
              f'}};\n' + PROFILE)
    status, body = d.request("POST", "/v1/reload", {})
    assert status == 403
    assert "token_file" in body["error"]["message"]


def test_address_in_use_exits_69(write_conf):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = write_conf(f'daemon = {{ http = {{ listen = '
                          f'[ "127.0.0.1:{port}" ]; }}; }};\n' + PROFILE)
        r = subprocess.run([str(RDMAD), "-c", str(path)],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 69
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr


def mapped(pid, name):
    with open(f"/proc/{pid}/maps") as f:
        return any(name in line for line in f)


def test_libmicrohttpd_is_opened_only_to_listen(write_conf, tmp_path):
    """REST opens libmicrohttpd, and the TLS stack it brings, when it has
    an address to listen on (daemon/front/mhd.c): --check and a daemon
    with listen = [ ] never load them; one that listens does, and
    serves."""
    rt = tmp_path / "rt"
    quiet = write_conf(f'daemon = {{ runtime_dir = "{rt}"; '
                       f'http = {{ listen = [ ]; }}; }};\n' + PROFILE)
    r = subprocess.run([str(RDMAD), "--check", "-c", str(quiet)],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, LD_DEBUG="files"))
    assert r.returncode == 0, r.stderr
    assert "file=libjansson" in r.stderr  # LD_DEBUG names what it loads
    assert "libmicrohttpd" not in r.stderr
    assert "libgnutls" not in r.stderr
    port = free_port()
    loud = write_conf(f'daemon = {{ runtime_dir = "{rt}"; http = {{ '
                      f'listen = [ "127.0.0.1:{port}" ]; }}; }};\n'
                      + PROFILE)
    for conf, listens in ((quiet, False), (loud, True)):
        p = subprocess.Popen([str(RDMAD), "-c", str(conf)],
                             stdin=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert settle(lambda: rdmactl_health(rt / "rdmad.sock"), 60)
            assert mapped(p.pid, "libmicrohttpd") == listens
            assert mapped(p.pid, "libgnutls") == listens
            if listens:
                c = http.client.HTTPConnection("127.0.0.1", port,
                                               timeout=30)
                c.request("GET", "/v1/health")
                assert c.getresponse().status == 200
                c.close()
        finally:
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "Sanitizer" not in err and "runtime error:" not in err, err


def rdmactl_health(sock):
    r = subprocess.run([str(RDMACTL), "--socket", str(sock), "health"],
                       capture_output=True, text=True, timeout=30)
    return r.returncode == 0


def test_cli_usage():
    r = subprocess.run([str(RDMAD), "--help"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "--config" in r.stdout
    r = subprocess.run([str(RDMAD), "--bogus"], capture_output=True,
                       text=True)
    assert r.returncode == 64
    r = subprocess.run([str(RDMAD), "--version"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout.startswith("rdmad ")


def test_unix_listen_replaces_only_a_stale_socket(write_conf, tmp_path):
    sock = tmp_path / "http.sock"
    conf = write_conf(f'daemon = {{ http = {{ listen = [ "unix:{sock}" ]; '
                      f'}}; }};\n' + PROFILE)

    # Someone listens there: rdmad must not steal the path.
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(str(sock))
    live.listen()
    r = subprocess.run([str(RDMAD), "-c", str(conf)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 69, r.stderr
    assert "Address already in use" in r.stderr
    live.close()

    # A regular file there is left alone.
    sock.unlink()
    sock.write_text("precious")
    r = subprocess.run([str(RDMAD), "-c", str(conf)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 69
    assert sock.read_text() == "precious"
    sock.unlink()

    # A stale socket (nobody listening) is replaced.
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock))
    stale.close()
    p = subprocess.Popen([str(RDMAD), "-c", str(conf)],
                         stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):
            try:
                status, _ = unix_get(str(sock), "/v1/health")
                break
            except OSError:
                time.sleep(0.1)
        assert status == 200
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0


def test_error_messages_are_utf8_whatever_the_path_holds(rdmad):
    """A path with bytes that are not UTF-8, or long enough for the
    message to be cut inside a character, still gets its 404 document
    (it used to be a closed connection, and REPLY {} on the socket)."""
    d = rdmad(PROFILE)
    for path in (b"/v1/profiles/%FF%FE", b"/v1/profiles/" + b"%C3%A9" * 300,
                 b"/v1/nothing/%E2%82"):
        status, body = raw_http(
            d.port, b"GET " + path + b" HTTP/1.0\r\n\r\n")
        assert status == 404, path
        assert body["error"]["code"] == "not_found"
        assert body["error"]["message"].startswith("no ")
    sock = d.conf.parent / "rdmad.sock"
    c = Client(str(sock))
    try:
        status, body = c.request("GET", "/v1/profiles/" + "\u00e9" * 400)
        assert status == 404
        assert body["error"]["code"] == "not_found"
        assert body["error"]["message"].startswith("no profile '")
        t, doc, _ = c.call(ATTACH, {"profile": "\u00e9" * 400})
        assert t == ERROR, doc
        assert doc["error"]["code"] == "not_found"
    finally:
        c.close()


def http_exchange(port, method, path, headers=None):
    """status, headers, body bytes of one request (http.client: HEAD
    answers carry no body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, r, r.read()
    finally:
        c.close()


def test_http_conventions_allow_head_and_authenticate(rdmad):
    d = rdmad(PROFILE)
    # 405 names what the path does answer to.
    for method, path, allow in (
            ("DELETE", "/v1/profiles", {"GET", "HEAD"}),
            ("GET", "/v1/reload", {"POST"}),
            ("PUT", "/v1/profiles/p/selftest", {"POST"}),
            ("POST", "/metrics", {"GET", "HEAD"}),
            ("DELETE", "/v1/events", {"GET", "HEAD"})):
        status, r, body = http_exchange(d.port, method, path)
        assert status == 405, (method, path)
        assert json.loads(body)["error"]["code"] == "method_not_allowed"
        assert {m.strip() for m in r.getheader("Allow").split(",")} == allow
    # HEAD: GET's status and headers, no body.
    for path in ("/v1/health", "/v1/profiles", "/v1/profiles/p", "/metrics",
                 "/v1/profiles/nope"):
        gstatus, g, gbody = http_exchange(d.port, "GET", path)
        hstatus, h, hbody = http_exchange(d.port, "HEAD", path)
        assert hstatus == gstatus, path
        assert hbody == b"", path
        assert h.getheader("Content-Type") == g.getheader("Content-Type")
        assert int(h.getheader("Content-Length")) == len(gbody), path
    # HEAD of the event stream: its headers at once, no body, no wait.
    hstatus, h, hbody = http_exchange(d.port, "HEAD", "/v1/events")
    assert (hstatus, hbody) == (200, b"")
    assert h.getheader("Content-Type") == "text/event-stream"
    # 401 says how to authenticate; 403 and 200 do not.
    status, r, _ = http_exchange(d.port, "POST", "/v1/reload")
    assert status == 401
    assert r.getheader("WWW-Authenticate").startswith("Bearer")
    status, r, _ = http_exchange(d.port, "GET", "/v1/health")
    assert status == 200 and r.getheader("WWW-Authenticate") is None


def test_control_socket_serves_documents_rendered_once(rdmad):
    """GET documents that change only when the engine says so (a
    profile's, /v1/health) are rendered once and sent again under each
    REQUEST's own id; a change (an attach leases the MR) is in the very
    next answer, the same as REST's."""
    d = rdmad(PROFILE)
    c = Client(str(d.conf.parent / "rdmad.sock"))
    try:
        ids = [c.send(REQUEST, {"method": "GET", "path": "/v1/profiles/p"})
               for _ in range(3)]
        answers = []
        for want in ids:
            msg = c.sock.recv(1 << 17)
            _, _, mtype, _, _, mid, _ = HDR.unpack_from(msg)
            body = json.loads(msg[HDR.size:])
            answers.append((mtype, mid, body))
        assert [a[1] for a in answers] == ids, answers
        assert all(a[0] == REPLY and a[2]["status"] == 200 for a in answers)
        assert answers[0][2] == answers[1][2] == answers[2][2]
        first = answers[0][2]["body"]
        assert first == d.get("/v1/profiles/p")[1]
        leases = {o["name"]: o["leases"] for o in first["objects"]}
        assert leases["r"] == 0
        a = Client(str(d.conf.parent / "rdmad.sock"))
        try:
            t, doc, fds = a.call(ATTACH, {"profile": "p", "mode": "local"})
            for fd in fds:
                os.close(fd)
            status, now = c.request("GET", "/v1/profiles/p")
            assert status == 200
            assert {o["name"]: o["leases"] for o in now["objects"]}["r"] \
                == 1, now
            assert now == d.get("/v1/profiles/p")[1]
        finally:
            a.close()
        assert c.request("GET", "/v1/health") == (200, HEALTH)
        assert c.request("GET", "/v1/health") == (200, HEALTH)
    finally:
        c.close()


def test_a_request_seen_before_is_still_checked_whole(rdmad):
    """A REQUEST whose bytes were answered from the cache before is
    answered again without decoding it, but only when its whole frame is
    as good: a bad header, fds or a session without HELLO still get an
    ERROR (and the fds are closed); the same request spelt otherwise gets
    the same answer."""
    d = rdmad(PROFILE)
    sock = str(d.conf.parent / "rdmad.sock")
    payload = json.dumps({"method": "GET", "path": "/v1/health"}).encode()
    c = Client(sock)
    try:
        for _ in range(3):
            assert c.request("GET", "/v1/health") == (200, HEALTH)
        other = {"path": "/v1/health", "method": "GET"}
        t, doc, _ = c.call(REQUEST, other)
        assert (t, doc) == (REPLY, {"status": 200, "body": HEALTH})
    finally:
        c.close()

    def refused(raw, fds=(), hello=True):
        c = Client(sock, hello=hello)
        try:
            c.send(REQUEST, None, fds=fds, raw=raw)
            t, doc, got = c.recv()
            for fd in got:
                os.close(fd)
            return t, doc["error"]
        finally:
            c.close()

    def head(version=1, flags=0, n_fds=0, mid=7, length=len(payload)):
        return HDR.pack(MAGIC, version, REQUEST, flags, n_fds, mid, length)

    t, doc = refused(head(version=99) + payload)
    assert t == ERROR and doc["code"] == "unsupported_version", doc
    t, doc = refused(head(flags=0x4000) + payload)
    assert t == ERROR and doc["code"] == "bad_message", doc
    t, doc = refused(head(length=len(payload) + 1) + payload)
    assert t == ERROR and doc["code"] == "bad_message", doc
    t, doc = refused(head(), hello=False)
    assert t == ERROR, doc
    t, doc = refused(head() + payload, hello=False)
    assert t == ERROR and "not expected" in doc["message"], doc
    r, w = os.pipe()
    try:
        t, doc = refused(head(n_fds=1) + payload, fds=[w])
        assert t == ERROR and doc["code"] == "bad_message", doc
    finally:
        os.close(w)
    # The daemon kept no copy of the pipe: the reader sees end of file
    # (a copy left open would read EAGAIN here).
    os.set_blocking(r, False)

    def eof():
        try:
            return os.read(r, 1) == b""
        except BlockingIOError:
            return False

    assert settle(eof, 5)
    os.close(r)
    c = Client(sock)
    try:
        c.send(REQUEST, None, raw=head(mid=4242) + payload)
        msg = c.sock.recv(1 << 17)
        _, _, mtype, _, _, mid, _ = HDR.unpack_from(msg)
        assert (mtype, mid) == (REPLY, 4242)
        assert json.loads(msg[HDR.size:]) == {"status": 200,
                                              "body": HEALTH}
    finally:
        c.close()
