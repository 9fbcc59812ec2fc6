# SPDX-License-Identifier: MIT
"""Fixtures for the REST front end's host suite: the real daemon on this
machine, with or without RDMA devices (its profile's device is absent
here, so the profile stays pending: REST answers all the same), spoken to
over raw sockets, so that what goes on the wire is exactly what the test
wrote. RDMAD_BIN picks the daemon (make check: build/rdmad-asan)."""

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RDMAD = Path(os.environ.get("RDMAD_BIN", ROOT / "build" / "rdmad")).resolve()

PROFILE = """
devices = ( { name = "d0"; match = { ibdev = "rdmad-rest-none0"; }; } );
profiles = ( { name = "p"; device = "d0";
               memory = ( { name = "m"; size = "1M"; } );
               pd = ( { name = "a"; } ); } );
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, tmp, extra=""):
        self.port = free_port()
        self.unix = tmp / "http.sock"
        self.conf = tmp / "rdmad.conf"
        self.conf.write_text(
            f'daemon = {{ runtime_dir = "{tmp}"; http = {{ listen = '
            f'[ "127.0.0.1:{self.port}", "unix:{self.unix}" ]; {extra} }}; '
            f'}};\n' + PROFILE)
        self.log_path = tmp / "rdmad.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(RDMAD), "-c", str(self.conf), "--log-level", "debug"],
            stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()
            try:
                status, _ = self.get("/v1/health")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("rdmad did not answer:\n" + self.log())

    def connect(self, timeout=10, unix=False):
        if unix:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(str(self.unix))
            return s
        return socket.create_connection(("127.0.0.1", self.port),
                                        timeout=timeout)

    def get(self, path):
        answers, _ = exchange(self, b"GET %s HTTP/1.0\r\n\r\n" %
                              path.encode())
        return answers[0][0], answers[0][2]

    def log(self):
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        finally:
            self._log.close()


def parse(data, is_head=False):
    """The responses in data, in order: [(status, headers, body)], headers
    a dict of lower-case names; and the bytes after the last whole one.
    is_head: answers to HEAD, whose Content-Length has no body after it."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.split(b"\r\n")
        m = re.match(rb"HTTP/1\.[01] (\d{3}) ", lines[0])
        assert m, f"not a status line: {lines[0]!r}"
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower().decode()] = v.strip().decode()
        n = 0 if is_head else int(headers.get("content-length", "0"))
        if len(rest) < n:
            break
        body = rest[:n]
        try:
            body = json.loads(body) if body else None
        except ValueError:
            pass
        out.append((int(m.group(1)), headers, body))
        data = rest[n:]
    return out, data


def exchange(d, data, want=None, timeout=10, unix=False, sock=None,
             head=False):
    """Send data as it is; read until the daemon closes, or until want
    responses are in, all within timeout seconds (not a measure of speed:
    a bound far above what it takes, far below the daemon's own timeouts
    and the stalls of issue 38). [(status, headers, body)], and whether
    the connection was closed. Any byte that is not part of a whole
    response fails the test (two heads for one request show up so)."""
    s = sock or d.connect(timeout, unix)
    deadline = time.monotonic() + timeout
    try:
        if data:
            s.settimeout(timeout)
            s.sendall(data)
        got, closed = b"", False
        while True:
            answers, rest = parse(got, head)
            if want is not None and len(answers) >= want and not rest:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{len(answers)} answers within "
                                     f"{timeout} s, not {want}")
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            got += chunk
    finally:
        if sock is None:
            s.close()
    answers, rest = parse(got, head)
    assert rest == b"", f"bytes beyond the responses: {rest!r}"
    return answers, closed


@pytest.fixture
def rdmad(tmp_path):
    started = []

    def start(extra=""):
        d = Daemon(tmp_path, extra)
        started.append(d)
        return d
    yield start
    for d in started:
        rc = d.stop()
        log = d.log()
        assert "Sanitizer" not in log and "runtime error:" not in log, log
        assert rc == 0, f"rdmad exited {rc}:\n{log}"
