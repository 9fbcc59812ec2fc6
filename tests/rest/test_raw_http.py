# SPDX-License-Identifier: MIT
"""The REST front end on the wire (issue 38, item 5), over raw sockets
against the daemon on this host: pipelined requests are answered without
waiting for a later wake-up; a Content-Length over the limit, a request
line that is not HTTP and other malformed heads are answered at once,
with one response head; whatever the head says, one request gets one
answer: as a connection's first request, after requests answered, and
pipelined after good ones.

No speed is asserted: "at once" is an answer within 5 s, where
libmicrohttpd alone answered after the header timeout (10 s), the idle
timeout (60 s), or never, and 100 pipelined requests took 25-36 s; how
fast pipelining is, is measured by `make bench` (RATIO
rest_pipelined_100_vs_sequential)."""

import socket
import time

import pytest

from conftest import exchange

T = 5  # seconds: the socket timeout, far below the daemon's timeouts

GET = b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n"
HEALTH = {"status": "ok"}


def one_error(answers, closed, status, code=None):
    """Exactly one answer, the JSON error status (code), and the
    connection closed after it."""
    assert len(answers) == 1, answers
    st, headers, body = answers[0]
    assert st == status, answers
    assert headers.get("content-type") == "application/json", headers
    assert set(body) == {"error"}, body
    if code:
        assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    assert closed
    return body["error"]


def test_pipelined_requests_are_all_answered_in_order(rdmad):
    d = rdmad()
    paths = [b"/v1/health", b"/v1/profiles", b"/v1/profiles/p",
             b"/v1/nothing"] * 25
    data = b"".join(b"GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % p for p in paths)
    answers, closed = exchange(d, data, want=len(paths), timeout=T)
    assert not closed
    assert len(answers) == 100
    for p, (status, _, body) in zip(paths, answers):
        if p == b"/v1/health":
            assert status == 200 and body["status"] == "ok"
        elif p == b"/v1/profiles":
            assert status == 200 and [x["name"] for x in body] == ["p"]
        elif p == b"/v1/profiles/p":
            assert status == 200 and body["name"] == "p"
        else:
            assert status == 404 and body["error"]["code"] == "not_found"


def test_pipelined_after_a_first_request_and_in_pieces(rdmad):
    """Requests pipelined on a connection already served, and a batch
    whose last request comes in two pieces."""
    d = rdmad()
    s = d.connect(T)
    try:
        answers, _ = exchange(d, GET, want=1, sock=s)
        assert answers[0][0] == 200
        answers, _ = exchange(d, GET * 50, want=50, sock=s, timeout=T)
        assert [a[0] for a in answers] == [200] * 50
        s.sendall(GET * 10 + GET[:20])
        time.sleep(0.2)
        answers, closed = exchange(d, GET[20:], want=11, sock=s,
                                   timeout=T)
        assert [a[0] for a in answers] == [200] * 11 and not closed
    finally:
        s.close()


@pytest.mark.parametrize("length", [b"1000000000000", b"70000", b"65537",
                                    b"99999999999999999999999"])
def test_content_length_over_the_limit_is_413_at_once(rdmad, length):
    d = rdmad()
    head = (b"POST /v1/reload HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Length: %s\r\n\r\n" % length)
    one_error(*exchange(d, head, timeout=T), 413, "body_too_large")


def test_content_length_over_the_limit_later_on_a_connection(rdmad):
    """The first request of a connection is judged before libmicrohttpd
    has it; the ones after by the request handler, at their headers."""
    d = rdmad()
    s = d.connect(T)
    try:
        answers, _ = exchange(d, GET, want=1, sock=s)
        assert answers[0][0] == 200
        one_error(*exchange(d, b"POST /v1/reload HTTP/1.1\r\nHost: localhost\r\n"
                            b"Content-Length: 1000000000000\r\n\r\n",
                            sock=s), 413, "body_too_large")
    finally:
        s.close()


@pytest.mark.parametrize("kib", [300, 700, 1000])
def test_a_body_over_the_limit_sent_whole_is_read_and_refused(rdmad, kib):
    """The answer comes at the head; the connection lingers while the body
    comes, so that the client reads the answer, not a reset. Bodies far
    past one turn of the linger's reads (16 x 16 KiB), up to near its
    bound of 1 MiB, several times each: a linger that ends while bytes
    still come resets the connection only when the client's writes keep
    pace with the daemon's reads."""
    d = rdmad()
    big = kib * 1024
    for _ in range(4):
        for unix in (False, True):
            one_error(*exchange(d, b"POST /v1/reload HTTP/1.1\r\nHost: localhost\r\n"
                                b"Content-Length: %d\r\n\r\n" % big
                                + b"x" * big, timeout=T, unix=unix),
                      413, "body_too_large")


@pytest.mark.parametrize("data", [b"\x00\x01\x02\xff",
                                  b"\x00\x01\x02\xff\r\n\r\n",
                                  b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03",
                                  b"\xff" * 3000])
def test_a_request_line_that_is_not_http_is_400_at_once(rdmad, data):
    d = rdmad()
    for unix in (False, True):
        one_error(*exchange(d, data, timeout=T, unix=unix), 400,
                  "bad_request")


@pytest.mark.parametrize("value", [b"-1", b"abc", b"+5", b"", b"0x10",
                                   b"2, 2", b"1 2", b"\xff"])
def test_one_head_whatever_content_length_says(rdmad, value):
    d = rdmad()
    for method in (b"GET /v1/health", b"POST /v1/reload",
                   b"HEAD /v1/health"):
        answers, closed = exchange(
            d, method + b" HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + value +
            b"\r\n\r\n", timeout=T, head=method.startswith(b"HEAD"))
        assert len(answers) == 1, (method, value, answers)
        assert answers[0][0] == 400
        assert closed
        if method.startswith(b"HEAD"):
            assert answers[0][2] is None  # no body, however long it says
        else:
            assert answers[0][2]["error"]["code"] == "bad_request"


@pytest.mark.parametrize("value,status", [(b"-1", 400), (b"abc", 400),
                                          (b"99999999999999999999999", 413)])
def test_one_head_for_a_bad_content_length_later_on_a_connection(
        rdmad, value, status):
    """A later request is not judged before libmicrohttpd reads it: what
    it would answer twice is answered once (http_conn.c,
    bad_length_later), and the connection closed."""
    d = rdmad()
    for unix in (False, True):
        s = d.connect(T, unix)
        try:
            answers, _ = exchange(d, GET, want=1, sock=s, timeout=T)
            assert answers[0][0] == 200
            one_error(*exchange(d, b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\n"
                                b"Content-Length: " + value + b"\r\n\r\n",
                                sock=s, timeout=T), status)
        finally:
            s.close()
    assert d.get("/v1/health")[0] == 200


def test_one_head_for_a_bad_content_length_trickled_in(rdmad):
    """A first head that comes in more pieces than are judged goes to
    libmicrohttpd unjudged; its bad Content-Length still gets one
    answer."""
    d = rdmad()
    s = d.connect(T)
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for b in (b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Length: -1\r\n\r\n"):
            s.send(bytes([b]))
            time.sleep(0.002)
        one_error(*exchange(d, b"", sock=s, timeout=T), 400, "bad_request")
    finally:
        s.close()


@pytest.mark.parametrize("data,status", [
    (b"\x00\x01\x02\xff", 400),
    (b"GET /v1/health HTTP/1.1\r\n\r\n", 400),
    (b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip"
     b"\r\n\r\n", 501),
    (b"POST /v1/reload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 70000"
     b"\r\n\r\n", 413)])
def test_a_later_malformed_head_on_a_kept_alive_connection(rdmad, data,
                                                           status):
    """After requests that were answered (one with a body), the next
    head is judged too, where it is known where it starts: a client that
    waits for each answer."""
    d = rdmad()
    s = d.connect(T)
    try:
        for req in (GET, b"POST /v1/reload HTTP/1.1\r\nHost: localhost\r\n"
                    b"Content-Length: 2\r\n\r\n{}", GET):
            answers, closed = exchange(d, req, want=1, sock=s, timeout=T)
            assert answers[0][0] in (200, 403) and not closed
        one_error(*exchange(d, data, sock=s, timeout=T), status)
    finally:
        s.close()
    assert d.get("/v1/health")[0] == 200


def test_later_heads_of_a_pipelining_client_are_not_misjudged(rdmad):
    """Where libmicrohttpd holds bytes of the next request already, the
    next head is not judged from the middle: pipelined requests cut at
    every few bytes are all answered."""
    d = rdmad()
    s = d.connect(T)
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = GET * 20
        for i in range(0, len(data), 7):
            s.send(data[i:i + 7])
        answers, closed = exchange(d, b"", want=20, sock=s, timeout=T)
        assert [a[0] for a in answers] == [200] * 20 and not closed
    finally:
        s.close()


@pytest.mark.parametrize("bad,status", [
    (b"\x00\x01\x02\xff", 400),
    (b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n",
     400),
    (b"POST /v1/reload HTTP/1.1\r\n\r\n", 400),
    (b"GET /v1/health HTTP/2.0\r\nHost: localhost\r\n\r\n", 505)])
def test_a_malformed_request_pipelined_after_good_ones(rdmad, bad, status):
    """Sent in one go: the good requests before it are answered, it gets
    its one answer in its turn, and nothing after it is served."""
    d = rdmad()
    for unix in (False, True):
        answers, closed = exchange(
            d, GET + b"POST /v1/reload HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Length: 2\r\n\r\n{}" + GET + bad + GET,
            timeout=T, unix=unix)
        assert [a[0] for a in answers] == [200, 403, 200, status], answers
        assert answers[3][2]["error"]["message"]
        assert closed
    assert d.get("/v1/health")[0] == 200


MALFORMED = [
    # (name, bytes, status)
    ("no version", b"GET /v1/health\r\n\r\n", 400),
    ("lower-case protocol", b"GET / http/1.1\r\nHost: localhost\r\n\r\n", 400),
    ("method not a token", b"G(T /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n",
     400),
    ("two spaces", b"GET  /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n", 400),
    ("control byte in the target", b"GET /v1/he\x00alth HTTP/1.1\r\n"
     b"Host: localhost\r\n\r\n", 400),
    ("bad version", b"GET / HTTP/1.x\r\nHost: localhost\r\n\r\n", 400),
    ("HTTP/2.0", b"GET / HTTP/2.0\r\nHost: localhost\r\n\r\n", 505),
    ("HTTP/0.9", b"GET / HTTP/0.9\r\n\r\n", 505),
    ("no colon", b"GET / HTTP/1.1\r\nHost: localhost\r\nBogus header\r\n\r\n", 400),
    ("space before the colon", b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
    ("folded field", b"GET / HTTP/1.1\r\nHost: localhost\r\nX: a\r\n b\r\n\r\n",
     400),
    ("control byte in a field", b"GET / HTTP/1.1\r\nHost: x\x01y\r\n\r\n",
     400),
    ("a CR alone", b"GET / HTTP/1.1\rHost: localhost\r\n\r\n", 400),
    ("HTTP/1.1 without Host", b"GET /v1/health HTTP/1.1\r\n\r\n", 400),
    ("two Hosts", b"GET / HTTP/1.1\r\nHost: localhost\r\nHost: y\r\n\r\n", 400),
    ("Content-Length twice, differently", b"POST /v1/reload HTTP/1.1\r\n"
     b"Host: localhost\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400),
    ("Content-Length and chunked", b"POST /v1/reload HTTP/1.1\r\nHost: localhost\r\n"
     b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     400),
    ("a coding not taken", b"POST /v1/reload HTTP/1.1\r\nHost: localhost\r\n"
     b"Transfer-Encoding: gzip\r\n\r\n", 501),
    ("chunked in HTTP/1.0", b"POST /v1/reload HTTP/1.0\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("a head over 16 KiB", b"GET / HTTP/1.1\r\nHost: localhost\r\nX: " +
     b"a" * 20000 + b"\r\n\r\n", 431),
    ("a target over 16 KiB", b"GET /" + b"a" * 20000 +
     b" HTTP/1.1\r\nHost: localhost\r\n\r\n", 414),
]


@pytest.mark.parametrize("name,data,status", MALFORMED,
                         ids=[m[0] for m in MALFORMED])
def test_malformed_requests_get_one_answer_at_once(rdmad, name, data,
                                                   status):
    d = rdmad()
    one_error(*exchange(d, data, timeout=T), status)


def test_good_heads_still_pass(rdmad):
    """What is allowed stays allowed: HTTP/1.0 without Host, bare LF line
    ends, empty lines first, a head that comes a byte at a time, a
    chunked body."""
    d = rdmad()
    for data in (b"GET /v1/health HTTP/1.0\r\n\r\n",
                 b"GET /v1/health HTTP/1.0\nHost: localhost\n\n",
                 b"\r\n\r\nGET /v1/health HTTP/1.0\r\n\r\n"):
        answers, closed = exchange(d, data, timeout=T)
        assert [a[0] for a in answers] == [200] and closed, data
    s = d.connect(T)
    try:
        for b in GET:
            s.send(bytes([b]))
        answers, _ = exchange(d, b"", want=1, sock=s)
        assert answers[0][0] == 200
    finally:
        s.close()
    # No token configured: a change is refused, once its body is read.
    answers, _ = exchange(d, b"POST /v1/reload HTTP/1.1\r\nHost: localhost\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n"
                          b"2\r\n{}\r\n0\r\n\r\n", want=1, timeout=T)
    assert answers[0][0] == 403


def test_a_malformed_head_does_not_disturb_the_others(rdmad):
    """A connection refused early, one waiting for the rest of its head,
    and a served one, side by side; the daemon serves on after."""
    d = rdmad()
    slow = d.connect(T)
    try:
        slow.sendall(b"GET /v1/health HTTP/1.1\r\nHo")
        one_error(*exchange(d, b"\x00\x01\x02\xff", timeout=T), 400)
        answers, _ = exchange(d, GET, want=1, timeout=T)
        assert answers[0][0] == 200
        slow.sendall(b"st: localhost\r\n\r\n")
        answers, _ = exchange(d, b"", want=1, sock=slow)
        assert answers[0][0] == 200
    finally:
        slow.close()
    # A connection that goes away before a byte, or in the middle of
    # its head.
    for data in (b"", b"GET /v1/health HT"):
        s = d.connect(T)
        s.sendall(data)
        s.close()
    assert d.get("/v1/health")[0] == 200
    assert d.proc.poll() is None


def test_a_client_gone_before_reading_its_answer(rdmad):
    """The daemon answers a refused head and lingers; a client that resets
    the connection meanwhile leaves nothing behind."""
    d = rdmad()
    for _ in range(20):
        s = d.connect(T)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.sendall(b"POST /v1/reload HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Length: 70000\r\n\r\n" + b"x" * 1000)
        s.close()  # a reset
    assert d.get("/v1/health")[0] == 200
