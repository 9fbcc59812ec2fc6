# SPDX-License-Identifier: MIT
"""Fixtures of the host-side device-plugin tests (tests/kubelet/):
rdmad on this machine, no RDMA device needed (its profiles wait for
devices that are not here: every share Unhealthy, which is enough for
registration, names, sockets and the wire), the test kubelet in a
temporary device-plugins directory, and rdmad-kubelet against both."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUILD = ROOT / "build"
RDMAD = Path(os.environ.get("RDMAD_BIN", BUILD / "rdmad")).resolve()
# RDMAD_KUBELET_BIN: another rdmad-kubelet (an installed one).
PLUGIN = Path(os.environ.get("RDMAD_KUBELET_BIN",
                             ROOT / "kubelet" / "rdmad-kubelet")).resolve()
TIMEOUT = 60

sys.path.insert(0, str(HERE))
from testkubelet import Kubelet  # noqa: E402


class HostDaemon:
    def __init__(self, tmp, profiles):
        self.dir = tmp / "rdmad"
        self.dir.mkdir()
        self.sock = str(self.dir / "rdmad.sock")
        devices = ", ".join(
            f'{{ name = "d{i}"; match = {{ ibdev = "absent{i}"; }}; }}'
            for i in range(2))
        body = ",\n".join(
            f'{{ name = "{p}"; device = "d{i % 2}"; '
            f'pd = ( {{ name = "a"; }} ); }}'
            for i, p in enumerate(profiles))
        self.conf = self.dir / "rdmad.conf"
        self.conf.write_text(
            f'daemon = {{ runtime_dir = "{self.dir}"; '
            f'cdi_spec = "{self.dir}/cdi.json"; }};\n'
            f"devices = ( {devices} );\nprofiles = (\n{body}\n);\n")
        self.log_path = self.dir / "rdmad.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(RDMAD), "-c", str(self.conf)], stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(self.sock):
            assert self.proc.poll() is None, self.log_path.read_text()
            assert time.monotonic() < deadline, "rdmad did not start"
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(TIMEOUT)
        finally:
            self._log.close()


class Plugin:
    def __init__(self, sock, plugin_dir, log, *args):
        self.log_path = log
        self._log = open(log, "w")
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", str(PLUGIN), "--socket", str(sock),
             "--plugin-dir", str(plugin_dir), "--verbose", *args],
            stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT)

    def log(self):
        if not self._log.closed:
            self._log.flush()
        return Path(self.log_path).read_text()

    def wait_log(self, text, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not logged:\n{self.log()}")
            time.sleep(0.1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(TIMEOUT)
        finally:
            self._log.close()


@pytest.fixture
def rdmad(tmp_path):
    started = []

    def start(*profiles):
        d = HostDaemon(tmp_path, profiles or ("p0", "p1"))
        started.append(d)
        return d
    yield start
    for d in started:
        assert d.stop() == 0, d.log_path.read_text()


@pytest.fixture
def kubelet(tmp_path):
    k = Kubelet(tmp_path / "device-plugins").start()
    yield k
    k.stop()
    k.check()


@pytest.fixture
def plugin(tmp_path, kubelet):
    started = []

    def start(d, *args, plugin_dir=None):
        p = Plugin(d.sock, plugin_dir or kubelet.dir,
                   tmp_path / f"plugin{len(started)}.log", *args)
        started.append(p)
        return p
    yield start
    for p in started:
        rc = p.stop()
        log = p.log()
        assert rc == 0, log
        assert "Traceback" not in log, log
