"""What the systemd tests share: run only under tests/vm/run --systemd
(make systemd-check), where the host's systemd is PID 1 in a throwaway
overlay root (a tmpfs over the host's root).

The shipped unit hides most of the file system from rdmad
(ProtectHome=yes hides /home and /root, PrivateTmp=yes the host's /tmp,
ProtectSystem=strict makes the rest read-only), so a checkout under
/home, /root or /tmp is out of its sight. Instead of relaxing the unit,
the build tree's programs are installed into the overlay's /usr/local
(fixture `installed`: gone with the guest, nothing of the host's is
written) and a drop-in points ExecStart at /usr/local/sbin/rdmad
(fixture `units`). Clients run from there too: rdmactl, librdmad.so.0
(through the loader's cache), the example and helper programs, the
Python package, where every user and every unit can reach them.

A test module uses them like this:

    pytestmark = pytest.mark.usefixtures("units")

    @pytest.fixture(scope="module")
    def unit_env(unit_env):        # more Environment= for rdmad.service
        return {**unit_env, "RDMAD_SOMETHING": "1"}

    @pytest.fixture(scope="module")
    def unit_settings(unit_settings):   # more [Service] lines
        return {**unit_settings, "TimeoutStopSec": "5s"}

and the helpers below (sh, show, wait_for, journal, write_config).
"""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUILD = ROOT / "build"
# The daemon to test: RDMAD_BIN (e.g. build/rdmad-asan, relative to the
# checkout's root, where tests/check runs), by default build/rdmad.
RDMAD_BIN = Path(os.environ.get("RDMAD_BIN", BUILD / "rdmad")).resolve()
# Where the fixture `installed` puts the programs, in the overlay.
PREFIX = Path("/usr/local")
RDMAD = PREFIX / "sbin" / "rdmad"
RDMACTL = PREFIX / "bin" / "rdmactl"
LIBDIR = PREFIX / "lib"
# build/examples/* and the integration suite's client helpers.
LIBEXEC = PREFIX / "libexec" / "rdmad-tests"
PYTHONDIR = (PREFIX / "lib" / f"python{sys.version_info[0]}."
             f"{sys.version_info[1]}" / "dist-packages")

UNIT_DIR = Path("/etc/systemd/system")
DROPIN = UNIT_DIR / "rdmad.service.d" / "test.conf"
CONF = Path("/etc/rdmad/rdmad.conf")
SOCK = "/run/rdmad/rdmad.sock"
# Passed on from the tests' environment to rdmad.service when set: a
# test-only verbs provider (RDMAV_DRIVERS, e.g. tests/vm/run --import),
# a sanitized daemon's options (RDMAD_BIN=build/rdmad-asan or -tsan).
PASSED_ENV = ("RDMAV_DRIVERS", "ASAN_OPTIONS", "UBSAN_OPTIONS",
              "TSAN_OPTIONS", "LSAN_OPTIONS")

CONFIG = """
daemon = {{
  # The tests' clients run as root, and attach to profiles whose allow
  # lists do not name it (rdmad.conf(5), admit_root).
  admit_root = true;
  runtime_dir = "/run/rdmad";
  control_socket = "{sock}";
  http = {{ listen = [ "127.0.0.1:8470" ]; }};
  log_level = "info";
}};
devices = ( {{ name = "fabric0"; match = {{ ibdev = "rxe0"; }}; port = 1; }} );
profiles = (
  {{ name = "app";
    device = "fabric0";
    memory = ( {{ name = "buf"; size = "1M"; backing = "memfd"; }} );
    pd = ( {{ name = "main"; }}{extra_pd} );
    mr = ( {{ name = "buf"; pd = "main"; memory = "buf";
             access = [ "local_write" ]; }} );
  }}
);
"""


def in_systemd_vm():
    return (os.environ.get("RDMAD_VM_SYSTEMD") == "1"
            and os.path.isdir("/run/systemd/system"))


def pytest_collection_modifyitems(config, items):
    """Every test under tests/systemd skips outside the systemd VM."""
    if in_systemd_vm():
        return
    skip = pytest.mark.skip(reason="needs systemd as PID 1: tests/vm/run "
                            "--systemd (make systemd-check)")
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(skip)


def root_is_throwaway():
    """True if / is an overlay (tests/vm/run --systemd's): writing /usr
    or /etc there touches nothing of the host's."""
    fstype = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if left.split()[4] == "/":
                fstype = right.split()[0]
    return fstype == "overlay"


# --- Helpers -----------------------------------------------------------------

def sh(*args, check=True, timeout=120, **kw):
    """Run a command, its output captured; with check, a non-zero exit
    fails the test with that output."""
    r = subprocess.run([str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout, **kw)
    if check and r.returncode:
        raise AssertionError(f"{args}: {r.returncode}\n{r.stdout}{r.stderr}")
    return r


def show(*props, unit="rdmad.service"):
    """systemctl show's properties of unit, as a dict."""
    out = sh("systemctl", "show", unit,
             *[f"--property={p}" for p in props]).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def wait_for(pred, timeout=60, what="condition", unit="rdmad.service"):
    """pred()'s first true value; fails with unit's status on time out."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}: "
                         + sh("systemctl", "status", "--no-pager", "-l",
                              unit, check=False).stdout)


def journal(*args):
    """journalctl's records (JSON) for args, e.g. ("-u", "rdmad.service")
    or ("--after-cursor", c)."""
    out = sh("journalctl", "--no-pager", "-o", "json", *args).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def write_config(extra_pd="", text=None):
    """The daemon's configuration (CONF): text as it is, or CONFIG (one
    profile "app" on rxe0) with extra_pd appended to its pd list."""
    CONF.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        text = CONFIG.format(sock=SOCK, extra_pd=extra_pd)
    CONF.write_text(text)


def unit_quote(value):
    """value as one word of a unit file's line, in double quotes: systemd
    unescapes \\\\ and \\", and expands % specifiers (%% is one %)."""
    return '"' + (str(value).replace("\\", "\\\\").replace('"', '\\"')
                  .replace("%", "%%")) + '"'


def write_dropin(environment=None, settings=None):
    """rdmad.service's test drop-in (DROPIN): ExecStart at the installed
    daemon with CONF, one Environment= line per entry of environment,
    one line per entry of settings ([Service] key: value); then
    systemctl daemon-reload."""
    # (RDMAD and CONF have no space, no quote, no %: as they are.)
    lines = ["[Service]", "ExecStart=", f"ExecStart={RDMAD} -c {CONF}"]
    for k, v in (settings or {}).items():
        lines.append(f"{k}={v}")
    for k, v in (environment or {}).items():
        lines.append(f"Environment={unit_quote(f'{k}={v}')}")
    DROPIN.parent.mkdir(parents=True, exist_ok=True)
    DROPIN.write_text("\n".join(lines) + "\n")
    sh("systemctl", "daemon-reload")


# --- Fixtures ----------------------------------------------------------------

def _copy(src, dst, mode):
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".new")
    shutil.copyfile(src, tmp)
    os.chmod(tmp, mode)
    os.replace(tmp, dst)


def _link(target, name):
    tmp = name.with_name(name.name + ".new")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(target)
    os.replace(tmp, name)


@pytest.fixture(scope="session")
def installed():
    """The build tree's programs in the overlay's /usr/local, where the
    unit's sandbox and every user see them: RDMAD_BIN as sbin/rdmad,
    build/dist/rdmactl as bin/rdmactl, librdmad.so.0 in lib (ldconfig
    run), build/examples/* and the client helpers of build/tests/ in
    libexec/rdmad-tests (their $ORIGIN/.. RUNPATH finds nothing there:
    the loader's cache finds librdmad.so.0 in lib), client/python/rdmad
    in PYTHONDIR. A sanitized daemon needs nothing more: its runtime
    (libasan, libubsan, libtsan) is the system's, found by the loader.
    Returns their paths: rdmad, rdmactl, libdir, pythondir, programs (a
    dict: name -> path)."""
    assert root_is_throwaway(), (
        "/ is not the systemd VM's overlay: refusing to install into "
        f"{PREFIX} (run through tests/systemd/run)")
    assert RDMAD_BIN.is_file(), f"{RDMAD_BIN} is not built (make all)"
    _copy(RDMAD_BIN, RDMAD, 0o755)
    # The library by its real name (librdmad.so.0.N), its soname and the
    # link name, as make install lays them.
    real = sorted(BUILD.glob("librdmad.so.0.*"))
    assert real, f"no {BUILD}/librdmad.so.0.N (make all)"
    _copy(real[-1], LIBDIR / real[-1].name, 0o644)
    _link(real[-1].name, LIBDIR / "librdmad.so.0")
    _link("librdmad.so.0", LIBDIR / "librdmad.so")
    sh("ldconfig")
    # rdmactl as installed (no RUNPATH); build/rdmactl if that is all
    # there is (its $ORIGIN RUNPATH finds nothing: the cache then does).
    ctl = BUILD / "dist" / "rdmactl"
    _copy(ctl if ctl.is_file() else BUILD / "rdmactl", RDMACTL, 0o755)
    progs = {}
    # The client helpers of the integration suite (build/tests/, but its
    # unit tests test_*).
    for src in [*sorted((BUILD / "examples").glob("*")),
                *sorted(p for p in (BUILD / "tests").glob("*")
                        if not p.name.startswith("test_"))]:
        if src.is_file() and os.access(src, os.X_OK):
            _copy(src, LIBEXEC / src.name, 0o755)
            progs[src.name] = LIBEXEC / src.name
    pkg = PYTHONDIR / "rdmad"
    pkg.mkdir(parents=True, exist_ok=True)
    for src in (ROOT / "client" / "python" / "rdmad").glob("*.py"):
        _copy(src, pkg / src.name, 0o644)
    return SimpleNamespace(rdmad=RDMAD, rdmactl=RDMACTL, libdir=LIBDIR,
                           programs=progs, pythondir=PYTHONDIR)


def is_asan(path):
    """Was the daemon at path built with AddressSanitizer?"""
    return b"libasan.so" in Path(path).read_bytes()


@pytest.fixture(scope="module")
def unit_env():
    """Environment= entries of rdmad.service's test drop-in (a dict):
    PASSED_ENV's variables that are set here. A module adds its own by
    overriding this fixture (see the top of this file)."""
    env = {k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)}
    if is_asan(RDMAD_BIN):
        # LeakSanitizer stops the threads it scans with ptrace, which the
        # unit's SystemCallFilter= denies (~@debug): its exit would fail
        # every stop. Leaks are the integration suite's to find (tests/check
        # runs it with the ASan daemon and detect_leaks=1).
        opts = env.get("ASAN_OPTIONS")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "detect_leaks=0"
    return env


@pytest.fixture(scope="module")
def unit_settings():
    """More [Service] lines of the drop-in (a dict: key -> value), none by
    default: the shipped unit's settings hold (WatchdogSec=30s...). A
    module overrides it to change them (test_systemd.py: a short
    watchdog)."""
    return {}


@pytest.fixture(scope="module")
def units(installed, unit_env, unit_settings):
    """The shipped rdmad.service and rdmad.socket in /etc/systemd/system
    with the test drop-in (write_dropin(unit_env, unit_settings)), the
    rdmad user made by the shipped sysusers.d entry (in the overlay's
    /etc/passwd), CONFIG in CONF. Both units stopped afterwards."""
    sh("systemd-sysusers", ROOT / "systemd" / "sysusers.conf")
    for name in ("rdmad.service", "rdmad.socket"):
        shutil.copy(ROOT / "systemd" / name, UNIT_DIR / name)
    write_config()
    write_dropin(unit_env, unit_settings)
    yield installed
    sh("systemctl", "stop", "rdmad.socket", "rdmad.service", check=False)
    sh("systemctl", "reset-failed", "rdmad.socket", "rdmad.service",
       check=False)
