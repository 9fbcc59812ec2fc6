# SPDX-License-Identifier: MIT
"""daemon/devwatch.c on a real device: build/tests/devwatch_probe
(tests/integration/helpers/devwatch_probe.c) watches devices and rxe0's
async events on one sd-event loop, and does what the daemon must: on REMOVE
of rxe0 it frees its objects and closes the context, on ADD it opens rxe0
again. One line per event on its stdout.

What the kernel (6.1, rxe) does, and these tests hold it to:
- `rdma link del rxe0` removes the uverbs char device at once (REMOVE), then
  waits, uninterruptibly, until every context on rxe0 is closed; the open
  context gets nothing on its async fd.
- `rdma link add` creates the uverbs device, then announces rxe0 (ADD).
- `rdma dev set rxe0 name X` moves the device: REMOVE rxe0, ADD X.

The probe hears of devices as the daemon does: from udevd where it runs,
from the kernel's own uevents where it does not (tests/vm/run --no-udev
runs these without udevd).
- Port state changes of the netdev arrive as PORT_ERR / PORT_ACTIVE.

Every test leaves rxe0 as it found it: on veth0, port active, even when it
fails half-way.
"""

import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import BUILD

PROBE = BUILD / "tests" / "devwatch_probe"
IBDEV = "rxe0"
NETDEV = "veth0"
OTHER = "rxe1"
RENAMED = "rxe0r"
SYS_IB = Path("/sys/class/infiniband")
SYS_UVERBS = Path("/sys/class/infiniband_verbs")

# libibverbs keeps every device it ever listed for the life of the process
# (its device cache, reached through pointers into the middle of its list
# nodes: "possibly lost" to valgrind). Ours is everything else.
VALGRIND_SUPP = """{
   libibverbs-device-cache
   Memcheck:Leak
   match-leak-kinds: possible
   ...
   fun:ibv_get_device_list
}
"""

# Under TCG everything is slow, valgrind more so.
TIMEOUT = 60
VALGRIND_TIMEOUT = 300


def run(*cmd, timeout=TIMEOUT):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (
        f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r.stdout


def uverbs_of(ibdev):
    """The uverbs devices sysfs says belong to ibdev."""
    found = []
    for d in SYS_UVERBS.glob("uverbs*"):
        try:
            if (d / "ibdev").read_text().strip() == ibdev:
                found.append(d.name)
        except OSError:
            pass
    return found


def port_ready(ibdev):
    """Port 1 active with its IPv4-mapped RoCE GID (index 1) in place,
    as the other tests expect rxe0 to be."""
    port = SYS_IB / ibdev / "ports" / "1"
    try:
        state = (port / "state").read_text()
        gid = (port / "gids" / "1").read_text().strip()
    except OSError:
        return False
    return "ACTIVE" in state and gid.startswith("0000:0000:0000:0000:0000:ffff")


class Probe:
    def __init__(self, tmp_path, *args, valgrind=False):
        self.timeout = VALGRIND_TIMEOUT if valgrind else TIMEOUT
        cmd = [str(PROBE), *args, IBDEV]
        if valgrind:
            supp = tmp_path / "libibverbs.supp"
            supp.write_text(VALGRIND_SUPP)
            cmd = ["valgrind", "--leak-check=full", "--error-exitcode=1",
                   f"--suppressions={supp}",
                   "--errors-for-leak-kinds=definite,indirect,possible",
                   "--show-leak-kinds=definite,indirect,possible",
                   "--track-fds=yes", *cmd]
        self.stderr_path = tmp_path / "probe.stderr"
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, bufsize=1)
        self.lines = []
        self._pos = 0
        self._q = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def output(self):
        if not self._err.closed:
            self._err.flush()
        return ("stdout:\n  " + "\n  ".join(self.lines) + "\nstderr:\n"
                + self.stderr_path.read_text())

    def _next(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            line = self._q.get(timeout=left)
        except queue.Empty:
            return False
        if line is None:
            self._q.put(None)
            return False
        self.lines.append(line)
        return True

    def expect(self, *wanted, timeout=None):
        """Wait for every line in wanted, in any order, after what the last
        expect() consumed; returns the lines that came meanwhile."""
        deadline = time.monotonic() + (timeout or self.timeout)
        missing = list(wanted)
        start = self._pos
        while True:
            while self._pos < len(self.lines) and missing:
                if self.lines[self._pos] in missing:
                    missing.remove(self.lines[self._pos])
                self._pos += 1
            if not missing:
                return self.lines[start:self._pos]
            if not self._next(deadline):
                raise AssertionError(
                    f"devwatch_probe: no {missing} (exit "
                    f"{self.proc.poll()})\n{self.output()}")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self):
        """SIGTERM; the exit status (valgrind's on errors or leaks)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(self.timeout)
        finally:
            self._reader.join(10)
            self._err.close()
            while self._next(time.monotonic() + 0.1):
                pass

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(TIMEOUT)
        if not self._err.closed:
            self._err.close()


@pytest.fixture
def rdma_state():
    """Puts rxe0 back (on veth0, port active) whatever the test did.

    yields a dict: probes to kill and `rdma link del` processes to reap
    before that (a del waits for every context on the device to close, in
    uninterruptible sleep: killing the probes is what ends it)."""
    if not PROBE.exists():
        pytest.fail(f"{PROBE} is missing: build it (make check does)")
    if not (SYS_IB / IBDEV).exists():
        pytest.skip(f"no {IBDEV} here (tests/vm/run sets it up)")
    parent = (SYS_IB / IBDEV / "parent").read_text().strip()
    if parent != NETDEV:
        pytest.skip(f"{IBDEV} is on {parent}, not {NETDEV}")
    st = {"probes": [], "procs": []}
    try:
        yield st
    finally:
        for p in st["probes"]:
            p.kill()
        for proc in st["procs"]:
            proc.wait(TIMEOUT)
        subprocess.run(["ip", "link", "set", NETDEV, "up"], timeout=TIMEOUT)
        if (SYS_IB / RENAMED).exists():
            subprocess.run(["rdma", "dev", "set", RENAMED, "name", IBDEV],
                           timeout=TIMEOUT)
        if not (SYS_IB / IBDEV).exists():
            subprocess.run(["rdma", "link", "add", IBDEV, "type", "rxe",
                            "netdev", NETDEV], timeout=TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while not port_ready(IBDEV) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert port_ready(IBDEV), f"{IBDEV} did not come back"


def start_probe(st, tmp_path, *args, valgrind=False):
    p = Probe(tmp_path, *args, valgrind=valgrind)
    st["probes"].append(p)
    p.expect(f"OPENED {IBDEV}", "READY")
    return p


def del_link(st):
    proc = subprocess.Popen(["rdma", "link", "del", IBDEV],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    st["procs"].append(proc)
    return proc


def port_cycle(p):
    """The context's async events, for real: the netdev down and up."""
    run("ip", "link", "set", NETDEV, "down")
    p.expect(f"ASYNC {IBDEV} PORT_ERR port 1")
    run("ip", "link", "set", NETDEV, "up")
    p.expect(f"ASYNC {IBDEV} PORT_ACTIVE port 1")


def add_link(p):
    run("rdma", "link", "add", IBDEV, "type", "rxe", "netdev", NETDEV)
    # ADD only once the uverbs device exists: the probe opens at once.
    p.expect(f"DEVWATCH ADD {IBDEV}", f"OPENED {IBDEV}")
    assert uverbs_of(IBDEV)


@pytest.mark.parametrize("valgrind", [False, True],
                         ids=["plain", "valgrind"])
def test_remove_and_add(rdma_state, tmp_path, valgrind):
    if valgrind and not shutil.which("valgrind"):
        pytest.skip("valgrind is not installed")
    p = start_probe(rdma_state, tmp_path, valgrind=valgrind)
    port_cycle(p)

    d = del_link(rdma_state)
    seen = p.expect(f"DEVWATCH REMOVE {IBDEV}", f"CLOSED {IBDEV} 0")
    out, _ = d.communicate(timeout=p.timeout)
    assert d.returncode == 0, f"rdma link del: {out}\n{p.output()}"
    assert not (SYS_IB / IBDEV).exists()
    # rxe has no disassociate: the context heard nothing before closing.
    assert not any("DEVICE_FATAL" in line for line in seen), p.output()

    add_link(p)
    port_cycle(p)
    assert f"DEVWATCH REMOVE {OTHER}" not in p.lines
    assert f"DEVWATCH ADD {OTHER}" not in p.lines

    rc = p.stop()
    assert p.lines[-1] == "EXIT", p.output()
    assert rc == 0, f"exit status {rc}\n{p.output()}"
    if valgrind:
        # Every fd closed: the monitor's socket, the contexts' fds.
        m = re.search(r"FILE DESCRIPTORS: (\d+) open", p.output())
        assert m and m.group(1) == "3", p.output()


def test_removal_waits_for_close(rdma_state, tmp_path):
    """Why REMOVE must close everything at once: the kernel cannot finish
    removing a device without disassociate support while a context on it is
    open. If this fails because the del returned early, the driver now
    disassociates (and contexts get DEVICE_FATAL instead)."""
    p = start_probe(rdma_state, tmp_path, "--hold")
    d = del_link(rdma_state)
    p.expect(f"DEVWATCH REMOVE {IBDEV}", f"HOLDING {IBDEV}")
    time.sleep(3)
    assert d.poll() is None, "rdma link del returned with a context open"
    # The char device is gone, the device itself not yet.
    assert (SYS_IB / IBDEV).exists()
    assert not uverbs_of(IBDEV)
    assert not any("DEVICE_FATAL" in line for line in p.lines), p.output()

    p.signal(signal.SIGUSR1)
    p.expect(f"CLOSED {IBDEV} 0")
    out, _ = d.communicate(timeout=TIMEOUT)
    assert d.returncode == 0, f"rdma link del: {out}"
    assert not (SYS_IB / IBDEV).exists()

    add_link(p)
    rc = p.stop()
    assert rc == 0, f"exit status {rc}\n{p.output()}"


def test_exit_while_removed(rdma_state, tmp_path):
    """SIGTERM with the device gone and nothing open: a clean exit."""
    p = start_probe(rdma_state, tmp_path)
    d = del_link(rdma_state)
    p.expect(f"DEVWATCH REMOVE {IBDEV}", f"CLOSED {IBDEV} 0")
    d.communicate(timeout=TIMEOUT)
    assert d.returncode == 0
    rc = p.stop()
    assert p.lines[-1] == "EXIT" and rc == 0, p.output()


def test_rename(rdma_state, tmp_path):
    """`rdma dev set rxe0 name X` (a move of the infiniband device, with
    DEVPATH_OLD; its uverbs device stays): REMOVE rxe0, ADD X, and the
    same back; with udevd, or from the kernel's own events without it
    (tests/vm/run --no-udev)."""
    p = start_probe(rdma_state, tmp_path)
    run("rdma", "dev", "set", IBDEV, "name", RENAMED)
    p.expect(f"DEVWATCH REMOVE {IBDEV}", f"CLOSED {IBDEV} 0",
             f"DEVWATCH ADD {RENAMED}")
    assert uverbs_of(RENAMED)
    run("rdma", "dev", "set", RENAMED, "name", IBDEV)
    p.expect(f"DEVWATCH REMOVE {RENAMED}", f"DEVWATCH ADD {IBDEV}",
             f"OPENED {IBDEV}")
    assert f"DEVWATCH REMOVE {OTHER}" not in p.lines
    rc = p.stop()
    assert p.lines[-1] == "EXIT" and rc == 0, p.output()
