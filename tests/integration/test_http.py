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


# ---- issue 45, items 5, 6 and 8 ----

def read_answer(s):
    """(status, {lower-case header: value}, body bytes) of one HTTP/1.1
    answer on s, framed by its Content-Length (RFC 9112, 6.3), or up to
    the close when it has none."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(body) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
    return int(lines[0].split()[1]), headers, body


def one_exchange(port, head, timeout=10):
    """One request (its head as bytes, ending with its empty line) on a
    fresh connection: (status, headers, JSON body or None)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head)
        status, headers, body = read_answer(s)
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        doc = None
    return status, headers, doc


def test_host_and_origin_are_checked(rdmad, tmp_path):
    """Only the loopback names, the listen address and the names of
    daemon.http.hosts are served (RFC 9110, 7.4: a Host not ours is
    421 Misdirected Request, 15.5.20); an HTTP/1.1 request without a
    Host, or with one that is not host[:port], is 400 (RFC 9112, 3.2);
    a request whose Origin (RFC 6454) is not one of ours is a browser's
    cross-site request: 403, reads included (DNS rebinding reads GETs),
    and a refused change is not made."""
    port = free_port()
    token = tmp_path / "token"
    token.write_text("tok-0123456789abcdef\n")
    token.chmod(0o600)
    d = rdmad(f'daemon = {{ runtime_dir = "{tmp_path}"; http = {{ '
              f'listen = [ "127.0.0.1:{port}" ]; token_file = "{token}"; '
              f'hosts = [ "rdmad.example", "Ops.Example.org" ]; }}; }};\n'
              + PROFILE)

    def get(host=None, origin=None, method="GET", path="/v1/health",
            extra=""):
        h = f"{method} {path} HTTP/1.1\r\n"
        if host is not None:
            h += f"Host: {host}\r\n"
        if origin is not None:
            h += f"Origin: {origin}\r\n"
        h += extra + "Connection: close\r\n\r\n"
        return one_exchange(port, h.encode())

    for host in ("localhost", f"localhost:{port}", "LOCALHOST",
                 "127.0.0.1", f"127.0.0.1:{port}", "[::1]", f"[::1]:{port}",
                 "rdmad.example", f"rdmad.example:{port}",
                 "ops.example.org", "RDMAD.EXAMPLE"):
        status, _, doc = get(host)
        assert (status, doc) == (200, HEALTH), host
    for host in ("attacker.example", f"attacker.example:{port}",
                 "rdmad.example.attacker.example", "localhost.example",
                 "127.0.0.2", "192.0.2.1", f"[::2]:{port}"):
        for path in ("/v1/health", "/v1/config", "/v1/nothing"):
            status, _, doc = get(host, path=path)
            assert status == 421, (host, path, status, doc)
            assert doc["error"]["code"] == "misdirected_request", doc
            assert doc["error"]["message"]
    for host in ("local host", "user@localhost", "localhost:port",
                 "[::1", "http://localhost"):
        status, _, doc = get(host)
        assert status == 400, (host, status, doc)
        assert doc["error"]["code"] == "bad_request", doc
    # HTTP/1.1 needs a Host; HTTP/1.0 may go without one.
    status, _, doc = get(None)
    assert status == 400 and doc["error"]["code"] == "bad_request", doc
    status, _, doc = one_exchange(port, b"GET /v1/health HTTP/1.0\r\n\r\n")
    assert (status, doc) == (200, HEALTH)

    # Origins: ours are served, others refused whatever the method.
    for origin in (f"http://localhost:{port}", f"http://127.0.0.1:{port}",
                   "http://rdmad.example", f"https://[::1]:{port}"):
        status, _, doc = get("localhost", origin)
        assert (status, doc) == (200, HEALTH), origin
    for origin in ("http://attacker.example", f"http://attacker.example:{port}",
                   "null", "http://localhost.attacker.example", "garbage"):
        status, _, doc = get("localhost", origin)
        assert status == 403, (origin, status, doc)
        assert doc["error"]["code"] == "forbidden_origin", doc
    # A cross-site change, with the token even: refused, and not made.
    d.conf.write_text(d.conf.read_text().replace('name = "r"', 'name = "r2"'))
    status, _, doc = get(f"127.0.0.1:{port}", "http://attacker.example",
                         "POST", "/v1/reload",
                         "Authorization: Bearer tok-0123456789abcdef\r\n"
                         "Content-Length: 0\r\n")
    assert status == 403 and doc["error"]["code"] == "forbidden_origin", doc
    status, doc = d.get("/v1/profiles/p/mr/r")
    assert status == 200, "the refused reload was not made"


def test_token_holder_is_never_starved(rdmad, tmp_path):
    """Anonymous clients (loopback, no token) hold every REST connection
    they can, as event streams and idle keep-alive connections, and
    silent ones on top; the token holder's POST /v1/reload still
    succeeds, and an anonymous request past their share is told 503
    with a Retry-After (RFC 9110, 15.6.4 and 10.2.3)."""
    port = free_port()
    token = tmp_path / "token"
    token.write_text("tok-0123456789abcdef\n")
    token.chmod(0o600)
    d = rdmad(f'daemon = {{ runtime_dir = "{tmp_path}"; http = {{ '
              f'listen = [ "127.0.0.1:{port}" ]; token_file = "{token}"; '
              f'max_connections = 16; idle_timeout = 600; '
              f'header_timeout = 600; }}; }};\n' + PROFILE)
    d.token = "tok-0123456789abcdef"  # d.request() is the token holder
    host = f"127.0.0.1:{port}"
    held, refused = [], []
    try:
        # Event streams, as many as the daemon takes.
        for _ in range(16):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(f"GET /v1/events HTTP/1.1\r\nHost: {host}\r\n\r\n"
                      .encode())
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            if data.startswith(b"HTTP/1.1 200"):
                held.append(s)
            else:
                refused.append(data)
                s.close()
        # Idle keep-alives, as many as the daemon keeps open.
        for _ in range(32):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            try:
                s.sendall(f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n"
                          .encode())
                status, headers, body = read_answer(s)
            except OSError:
                s.close()
                refused.append(b"")
                continue
            if status == 200 and headers.get("connection") != "close":
                held.append(s)
            else:
                refused.append((status, headers, body))
                s.close()
        # And silent ones, which never send a head.
        for _ in range(16):
            try:
                held.append(socket.create_connection(("127.0.0.1", port),
                                                     timeout=10))
            except OSError:
                break
        time.sleep(0.5)
        assert len(held) >= 16, "anonymous clients hold what they can"
        # An anonymous request now: refused, with when to come back.
        status, headers, doc = one_exchange(
            port, f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\n"
                  f"Connection: close\r\n\r\n".encode())
        assert status == 503, (status, doc)
        assert doc["error"]["code"] == "too_many_connections", doc
        assert headers.get("retry-after", "").isdigit(), headers
        # The token holder is served.
        d.conf.write_text(d.conf.read_text().replace('name = "r"',
                                                     'name = "r2"'))
        for _ in range(3):
            status, headers, doc = one_exchange(
                port, f"POST /v1/reload HTTP/1.1\r\nHost: {host}\r\n"
                      f"Authorization: Bearer tok-0123456789abcdef\r\n"
                      f"Content-Length: 0\r\nConnection: close\r\n\r\n"
                      .encode(), timeout=60)
            assert status == 200, (status, doc)
        assert d.settle()
        status, doc = d.request("GET", "/v1/profiles/p/mr/r2", settle=False)
    finally:
        for s in held:
            s.close()
    assert status == 200, doc
    # Once the anonymous clients are gone, anyone is served again.
    assert settle(lambda: d.get("/v1/health")[0] == 200, 10)


def uverbs_opens(pid, action):
    """How many times process pid opens a uverbs device node while
    action() runs (strace: the daemon's own system calls)."""
    import shutil
    import tempfile
    if not shutil.which("strace"):
        import pytest
        pytest.skip("no strace")
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        tracer = subprocess.Popen(
            ["strace", "-f", "-qq", "-e", "trace=open,openat", "-o",
             out.name, "-p", str(pid)], stderr=subprocess.DEVNULL)
        try:
            # Every thread of the daemon traced before the requests.
            def traced():
                for t in os.listdir(f"/proc/{pid}/task"):
                    status = open(f"/proc/{pid}/task/{t}/status").read()
                    if "TracerPid:\t0\n" in status:
                        return False
                return True
            assert settle(traced, 30), "strace did not attach"
            action()
            time.sleep(0.5)
        finally:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(30)
        lines = out.read().splitlines()
        return sum("/dev/infiniband/uverbs" in line for line in lines)


def test_device_list_opens_no_device_per_request(rdmad):
    """GET /v1/devices answers from the daemon's view of the devices:
    20 anonymous requests open no device (today's daemon opened and
    probed each device at each request), and the document is the same
    each time: every device of the host, with what it says of it."""
    d = rdmad(PROFILE)
    status, first = d.get("/v1/devices")
    assert status == 200
    docs = []

    def twenty():
        for _ in range(20):
            docs.append(d.request("GET", "/v1/devices", token=False))

    assert uverbs_opens(d.pid, twenty) == 0
    assert all(x == (200, first) for x in docs)
    names = {x["name"] for x in first}
    assert names == set(os.listdir("/sys/class/infiniband"))
    for dev in first:
        assert set(dev) >= {"name", "node_type", "transport_type", "index",
                            "node_guid", "used", "up", "import_capable"}
        assert dev["used"] == (dev["name"] == "rxe0"), dev
