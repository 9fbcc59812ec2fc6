"""rdmad as a systemd service: run only under tests/vm/run --systemd
(make systemd-check), where the host's systemd is PID 1 in a throwaway
overlay root. The unit files are the shipped ones (systemd/), the daemon
the build tree's installed into the overlay's /usr/local, with a drop-in
that points ExecStart at it and shortens the watchdog (conftest.py); the
config is written to the overlay's /etc/rdmad.

The tests run in file order and share the one guest: start, reload,
journal, watchdog, socket activation, the fd store, a device going away.
"""
import os
import pwd
import re
import socket
from pathlib import Path

import pytest

from conftest import RDMAD, SOCK, journal, sh, show, wait_for, write_config

# daemon/log.h
MSGID_READY = "82b92ff884d84fcda4f8b05275c2c21e"
MSGID_RELOADED = "4cc6e80021b04fd6a56b78ac6e3ec7fd"
MSGID_DEVICE_GONE = "8e30371028524b2c84dc06fc179954fa"

# The drop-in's watchdog: a stalled daemon is killed within seconds.
WATCHDOG_SEC = 4

pytestmark = pytest.mark.usefixtures("units")


@pytest.fixture(scope="module")
def unit_env(unit_env):
    # SIGUSR2 stalls the loop (the watchdog test).
    return {**unit_env, "RDMAD_TEST_STALL_ON_SIGNAL": "1"}


@pytest.fixture(scope="module")
def unit_settings(unit_settings):
    return {**unit_settings, "WatchdogSec": f"{WATCHDOG_SEC}s",
            # The watchdog test's stall must not be taken for a crash loop.
            "RestartSec": "100ms"}


def test_start_reaches_ready():
    sh("systemctl", "start", "rdmad.service")
    p = show("ActiveState", "SubState", "StatusText", "Type", "MainPID")
    assert p["ActiveState"] == "active", p
    assert p["SubState"] == "running", p
    assert p["StatusText"] == "running", p
    assert int(p["MainPID"]) > 0
    # The installed copy (conftest.py), which the unit's sandbox sees.
    assert os.readlink(f"/proc/{p['MainPID']}/exe") == str(RDMAD)
    # As its own user, with nothing of root's but locking memory.
    status = Path(f"/proc/{p['MainPID']}/status").read_text()
    uid = pwd.getpwnam("rdmad").pw_uid
    assert f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}" in status, status
    eff = int(re.search(r"^CapEff:\s*([0-9a-f]+)", status, re.M)[1], 16)
    assert eff == 1 << 14, hex(eff)  # CAP_IPC_LOCK


def test_installed_clients(units):
    """Clients run the installed copies too, which every user reaches (a
    checkout under a 0700 home is out of other users' reach): rdmactl
    with librdmad.so.0 from the loader's cache, the Python package where
    Debian's python3 looks under /usr/local."""
    assert "app" in sh(units.rdmactl, "profiles").stdout
    libs = sh("ldd", units.rdmactl).stdout
    assert f"librdmad.so.0 => {units.libdir}/librdmad.so.0" in libs, libs
    nobody = ("setpriv", "--reuid", "nobody", "--regid", "nogroup",
              "--clear-groups")
    sh(*nobody, units.rdmactl, "--version", cwd="/")
    r = sh(*nobody, "/usr/bin/python3", "-c",
           "import rdmad; print(rdmad.__file__)", cwd="/")
    assert r.stdout.strip() == str(units.pythondir / "rdmad" /
                                   "__init__.py"), r.stdout


def test_security_exposure():
    # systemd's own rating of the shipped unit (and the test drop-in,
    # which changes nothing it rates).
    out = sh("systemd-analyze", "security", "--no-pager",
             "rdmad.service").stdout
    m = re.search(r"Overall exposure level for rdmad.service: ([0-9.]+)",
                  out)
    assert m, out
    assert float(m[1]) <= 1.5, out


def test_journal_has_structured_fields():
    recs = journal("-u", "rdmad.service")
    ready = [r for r in recs if r.get("MESSAGE_ID") == MSGID_READY]
    assert ready, [r.get("MESSAGE") for r in recs]
    assert ready[0]["MESSAGE"].startswith("ready:")
    assert ready[0]["SYSLOG_IDENTIFIER"] == "rdmad"
    # "profile app: running", about the profile.
    prof = [r for r in recs if r.get("RDMAD_PROFILE") == "app"
            and r.get("RDMAD_KIND") == "profile"]
    assert prof, [r.get("MESSAGE") for r in recs]
    # Written through sd_journal_send, not the stderr stream.
    assert all(r.get("_TRANSPORT") == "journal" for r in recs
               if r.get("SYSLOG_IDENTIFIER") == "rdmad"), recs


def test_reload_shows_reloading_and_applies():
    cursor = journal("-n", "1")[-1]["__CURSOR"]
    write_config(extra_pd=', { name = "second"; }')
    sh("systemctl", "reload", "rdmad.service")
    assert show("ActiveState")["ActiveState"] == "active"
    recs = journal("--after-cursor", cursor)
    msgs = [r.get("MESSAGE", "") for r in recs]
    # systemd's own records of the reload job, which waits for READY=1
    # after RELOADING=1 (Type=notify).
    assert any(m.startswith("Reloading") for m in msgs), msgs
    assert any(m.startswith("Reloaded") for m in msgs), msgs
    done = [r for r in recs if r.get("MESSAGE_ID") == MSGID_RELOADED]
    assert done, msgs
    created = [r for r in recs if r.get("RDMAD_OBJECT") == "second"]
    assert created and created[0]["RDMAD_KIND"] == "pd", msgs
    assert show("StatusText")["StatusText"] == "running"


def test_watchdog_restarts_stalled_daemon():
    pid = int(show("MainPID")["MainPID"])
    # (kill(0, ...) would signal this test's own process group.)
    assert pid > 0, "rdmad.service has no main process"
    cursor = journal("-n", "1")[-1]["__CURSOR"]
    os.kill(pid, 10 + 2)  # SIGUSR2: RDMAD_TEST_STALL_ON_SIGNAL=1
    wait_for(lambda: int(show("MainPID")["MainPID"]) not in (0, pid)
             and show("ActiveState")["ActiveState"] == "active",
             timeout=WATCHDOG_SEC * 10, what="a new main process")
    msgs = [r.get("MESSAGE", "") for r in journal("--after-cursor", cursor)]
    assert any("Watchdog timeout" in m for m in msgs), msgs
    assert int(show("NRestarts")["NRestarts"]) >= 1


def test_socket_activation():
    sh("systemctl", "stop", "rdmad.service")
    sh("systemctl", "start", "rdmad.socket")
    assert show("ActiveState")["ActiveState"] == "inactive"
    cursor = journal("-n", "1")[-1]["__CURSOR"]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(SOCK)
    try:
        wait_for(lambda: show("ActiveState")["ActiveState"] == "active",
                 what="rdmad started by its socket")
    finally:
        s.close()
    msgs = [r.get("MESSAGE", "") for r in journal("--after-cursor", cursor,
                                                   "-u", "rdmad.service")]
    assert any("socket systemd passed (control)" in m for m in msgs), msgs
    # A restart keeps the socket: systemd holds it meanwhile.
    sh("systemctl", "restart", "rdmad.service")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(SOCK)
    s.close()
    assert os.stat(SOCK).st_mode & 0o777 == 0o660


def memfd_of(pid, name):
    """A path that opens the daemon's memfd of memory object name."""
    d = Path(f"/proc/{pid}/fd")
    for fd in d.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(f"/memfd:{name} "):
            return fd
    raise AssertionError(f"no memfd {name} in rdmad ({pid})")


def test_fd_store_keeps_memory_across_restart():
    pattern = os.urandom(4096)
    pid = int(show("MainPID")["MainPID"])
    fd = os.open(memfd_of(pid, "buf"), os.O_RDWR)
    try:
        os.pwrite(fd, pattern, 65536)
    finally:
        os.close(fd)
    # The memory's fd, and the configuration as it was loaded (sent
    # right after READY=1: rdmad(8), SYSTEMD).
    wait_for(lambda: show("NFileDescriptorStore")["NFileDescriptorStore"]
             == "2", what="the memory and the configuration in the store")
    cursor = journal("-n", "1")[-1]["__CURSOR"]
    sh("systemctl", "restart", "rdmad.service")
    new = int(show("MainPID")["MainPID"])
    assert new != pid
    fd = os.open(memfd_of(new, "buf"), os.O_RDONLY)
    try:
        assert os.pread(fd, len(pattern), 65536) == pattern
    finally:
        os.close(fd)
    assert any("not parsed again" in r.get("MESSAGE", "")
               for r in journal("--after-cursor", cursor)), \
        [r.get("MESSAGE") for r in journal("--after-cursor", cursor)]
    # A stop (not a restart) lets the memory go.
    sh("systemctl", "stop", "rdmad.socket", "rdmad.service")
    assert show("NFileDescriptorStore")["NFileDescriptorStore"] == "0"


def test_device_gone_has_message_id():
    sh("systemctl", "start", "rdmad.service")
    cursor = journal("-n", "1")[-1]["__CURSOR"]
    sh("rdma", "link", "delete", "rxe0")
    try:
        wait_for(lambda: any("went away" in r.get("MESSAGE", "") for r in
                             journal("--after-cursor", cursor)),
                 what="device gone")
        recs = journal("--after-cursor", cursor)
        gone = [r for r in recs if r.get("MESSAGE_ID") == MSGID_DEVICE_GONE]
        assert gone, [(r.get("MESSAGE"), r.get("MESSAGE_ID"),
                       r.get("_TRANSPORT")) for r in recs]
    finally:
        sh("rdma", "link", "add", "rxe0", "type", "rxe", "netdev", "veth0")
    assert any("rxe0" in r["MESSAGE"] for r in gone), gone
    sh("systemctl", "stop", "rdmad.service")
