# SPDX-License-Identifier: MIT
"""A restart that keeps registrations, on a device that imports: the
daemon stores its device context's cmd_fd, a state document and its
memory in the fd store (fdstore.py stands in for systemd's), and the next
run takes every PD and MR back by handle: same handles and keys, the MR
once in the kernel, the memory's bytes intact. And what a previous run's
state may get wrong: a forged or stale handle, a context of another
device. Each is refused with a log line, nothing is imported wrongly,
and the object is made again. Under the real systemd:
tests/systemd/test_restart_shared.py."""

import ctypes
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import (SHARED_DEV, Daemon, daemon_section, free_port,
                      kernel_mrs, settle)
from fdstore import FdStore

pytestmark = pytest.mark.needs_import

CONFIG = f"""
devices = ( {{ name = "d"; match = {{ ibdev = "{SHARED_DEV}"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  memory = ( {{ name = "m"; size = "8M"; }}, {{ name = "n"; size = "1M"; }} );
  pd = ( {{ name = "a"; }}, {{ name = "b"; }} );
  cq = ( {{ name = "c"; }} );
  mr = ( {{ name = "r"; pd = "a"; memory = "m";
           access = [ "local_write", "remote_write", "remote_read" ]; }},
         {{ name = "s"; pd = "b"; memory = "n"; }} );
}} );
"""


class Run:
    """One run of the daemon on the store."""

    def __init__(self, store, tmp, port, n):
        conf = tmp / "rdmad.conf"
        if not conf.exists():
            conf.write_text(daemon_section(port, tmp) + CONFIG)
        self.log_path = tmp / f"run{n}.log"
        self.log_file = open(self.log_path, "w")
        self.proc = store.start(conf, self.log_file)
        self.store = store
        self.d = Daemon.__new__(Daemon)
        self.d.url = f"http://127.0.0.1:{port}"
        self.d.token = "rdmad-test-token-0123456789"
        self.d.proc = self.proc
        self.d.pid = self.proc.pid
        self.d.stderr_path = self.log_path
        self.d._err = self.log_file
        self.d.wait_ready()
        assert settle(lambda: store.drain().ready, 10), self.log()

    def objects(self):
        status, prof = self.d.get("/v1/profiles/p")
        assert status == 200 and prof["state"] == "ready", (prof, self.log())
        return {(o["kind"], o["name"]): o for o in prof["objects"]}

    def log(self):
        self.log_file.flush()
        return self.log_path.read_text()

    def crash(self, sig):
        """Ends the run as a crash would (SIGKILL, SIGABRT, ...): nothing
        of the daemon's runs after it."""
        self.proc.send_signal(sig)
        rc = self.proc.wait(60)
        self.log_file.close()
        self.store.drain()
        assert rc == -sig, (rc, self.log_path.read_text())

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(60)
        self.log_file.close()
        self.store.drain()
        log = self.log_path.read_text()
        assert "Sanitizer" not in log and "runtime error:" not in log, log
        assert rc == 0, log
        return log


@pytest.fixture
def store(tmp_path):
    s = FdStore(tmp_path)
    runs = []

    def run():
        r = Run(s, tmp_path, port, len(runs))
        runs.append(r)
        return r
    port = free_port()
    s.port = port
    s.run = run
    yield s
    for r in runs:
        if r.proc.poll() is None:
            r.stop()
    s.close()


def memfd_path(pid, name):
    """A path that opens process pid's memfd of memory object name."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if os.readlink(path).startswith(f"/memfd:{name} "):
                return path
        except OSError:
            continue
    raise AssertionError(f"no memfd {name} in {pid}")


def write_pattern(pid, name, data, at):
    with open(memfd_path(pid, name), "r+b") as f:
        f.seek(at)
        f.write(data)


def read_memory(pid, name, at, n):
    with open(memfd_path(pid, name), "rb") as f:
        f.seek(at)
        return f.read(n)


def test_restart_takes_back_every_pd_and_mr(store):
    a = store.run()
    before = a.objects()
    pattern = os.urandom(1 << 16)
    write_pattern(a.proc.pid, "m", pattern, 12345)
    assert {"ctx/p", "state/p"} <= set(store.fds), store.fds
    a.stop()

    b = store.run()
    after = b.objects()
    assert "took back the device context" in b.log()
    for key in (("pd", "a"), ("pd", "b"), ("mr", "r"), ("mr", "s")):
        assert after[key]["handle"] == before[key]["handle"], b.log()
    for key in (("mr", "r"), ("mr", "s")):
        assert after[key].get("restored") is True, after[key]
        for f in ("lkey", "rkey", "iova", "length"):
            assert after[key][f] == before[key][f], (key, f)
        assert len(kernel_mrs(after[key]["lkey"])) == 1
    assert "restored" not in after[("cq", "c")]
    assert read_memory(b.proc.pid, "m", 12345, len(pattern)) == pattern
    b.stop()


def forge(store, change):
    doc = store.state("p")
    for o in doc["objects"]:
        change(o)
    store.put_state("p", doc)


@pytest.mark.parametrize("what", ["mr", "pd"])
def test_forged_handle_is_refused_and_the_object_made_again(store, what):
    a = store.run()
    before = a.objects()
    a.stop()
    assert kernel_mrs(before[("mr", "r")]["lkey"])

    # A handle that names nothing in the context.
    def change(o):
        if o["kind"] == what and o["name"] == ("r" if what == "mr" else "a"):
            o["handle"] = 4000 + o["handle"]
    forge(store, change)
    b = store.run()
    after = b.objects()
    log = b.log()
    name = "r" if what == "mr" else "a"
    assert f"{what} {name}" in log and "previous run" in log, log
    r = after[("mr", "r")]
    # Made again: not the old registration.
    assert "restored" not in r, r
    assert r["lkey"] != before[("mr", "r")]["lkey"]
    assert kernel_mrs(r["lkey"])
    if what == "pd":
        # The MR over it went with the rest of what was not taken
        # back; the other PD's MR was.
        assert not kernel_mrs(before[("mr", "r")]["lkey"])
        assert after[("mr", "s")].get("restored") is True
    else:
        # The document no longer names the old MR: nothing can take it
        # back or destroy it by handle. It is counted as what the
        # previous run left in the context (an orphan), which alone does
        # not retire the context: the MR taken back stays.
        def counted():
            status, prof = b.d.get("/v1/profiles/p")
            return prof.get("orphans", 0) >= 1
        assert settle(counted, 30), b.log()
        assert "the previous run left" in b.log(), b.log()
        assert after[("mr", "s")].get("restored") is True
        assert kernel_mrs(after[("mr", "s")]["lkey"])
    b.stop()


def test_stale_handle_destroyed_meanwhile(store):
    """Between two runs something holding the context (here: this test,
    as an importer would) deregisters an MR the state names."""
    a = store.run()
    before = a.objects()
    a.stop()
    ibv = ctypes.CDLL("libibverbs.so.1", use_errno=True)
    for f in ("ibv_import_device", "ibv_import_pd", "ibv_import_mr"):
        getattr(ibv, f).restype = ctypes.c_void_p
    ibv.ibv_import_pd.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    ibv.ibv_import_mr.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    for f in ("ibv_dereg_mr", "ibv_unimport_pd", "ibv_close_device"):
        getattr(ibv, f).argtypes = [ctypes.c_void_p]
    ctx = ibv.ibv_import_device(os.dup(store.fds["ctx/p"]))
    assert ctx, os.strerror(ctypes.get_errno())
    pd = ibv.ibv_import_pd(ctx, before[("pd", "a")]["handle"])
    mr = ibv.ibv_import_mr(pd, before[("mr", "r")]["handle"])
    assert mr, os.strerror(ctypes.get_errno())
    assert ibv.ibv_dereg_mr(mr) == 0
    ibv.ibv_unimport_pd(pd)
    ibv.ibv_close_device(ctx)
    assert not kernel_mrs(before[("mr", "r")]["lkey"])

    b = store.run()
    after = b.objects()
    assert "mr r" in b.log() and "previous run" in b.log(), b.log()
    assert "restored" not in after[("mr", "r")]
    assert after[("mr", "s")].get("restored") is True
    assert after[("pd", "a")]["handle"] == before[("pd", "a")]["handle"]
    b.stop()


def test_context_of_another_device_is_refused(store):
    """The kept cmd_fd is another device's (the state says ours)."""
    other = "rxe1" if SHARED_DEV != "rxe1" else "rxe0"
    a = store.run()
    before = a.objects()
    a.stop()
    from pyverbs.device import Context
    ctx = Context(name=other)
    store.put("ctx/p", os.dup(ctx.cmd_fd))
    b = store.run()
    ctx.close()
    after = b.objects()
    log = b.log()
    assert "not taking back the device context" in log, log
    assert other in log or "another device" in log, log
    for key in (("mr", "r"), ("mr", "s")):
        assert "restored" not in after[key]
    # The previous run's context was dropped for the other: what it
    # held went with it, and the new MRs are the only ones.
    assert not kernel_mrs(before[("mr", "r")]["lkey"])
    assert len(kernel_mrs(after[("mr", "r")]["lkey"])) == 1
    b.stop()



# The configuration as the previous run loaded it comes back from the
# store (rdmad(8), RESTART): taken instead of parsing only while every
# file it was read from has the same bytes; anything else is parsed.

def declare_pd_c(tmp):
    """The configuration of the runs, with a third PD, c."""
    conf = tmp / "rdmad.conf"
    text = conf.read_text()
    more = text.replace('{ name = "b"; } );', '{ name = "b"; }, '
                        '{ name = "c"; } );')
    assert more != text
    conf.write_text(more)


def test_unchanged_configuration_is_not_parsed_again(store):
    a = store.run()
    before = a.objects()
    a.stop()
    assert "config" in store.fds, sorted(store.fds)
    stored = os.fstat(store.fds["config"]).st_ino
    b = store.run()
    after = b.objects()
    log = b.log()
    assert "not parsed again" in log, log
    assert set(after) == set(before)
    for key in (("mr", "r"), ("mr", "s")):
        assert after[key].get("restored") is True, after[key]
    b.stop()
    # The store had it already: the same memfd is left, not a copy.
    assert os.fstat(store.fds["config"]).st_ino == stored


def test_changed_configuration_is_parsed(store, tmp_path):
    a = store.run()
    a.stop()
    stored = os.fstat(store.fds["config"]).st_ino
    declare_pd_c(tmp_path)
    b = store.run()
    after = b.objects()
    log = b.log()
    assert "changed since the previous run" in log, log
    assert "not parsed again" not in log, log
    assert after[("pd", "c")]["state"] == "ready"
    assert after[("mr", "r")].get("restored") is True
    b.stop()
    # What the store holds now is the new configuration: a third run
    # takes it back.
    assert os.fstat(store.fds["config"]).st_ino != stored
    c = store.run()
    assert "not parsed again" in c.log(), c.log()
    assert c.objects()[("pd", "c")]["state"] == "ready"
    c.stop()


def test_a_reload_after_a_start_from_the_kept_configuration_is_stored(
        store, tmp_path):
    """A run that took its configuration back from the store does not
    store it again, but stores what a reload applies: the next run takes
    that one back, not the first."""
    a = store.run()
    a.stop()
    first = os.fstat(store.fds["config"]).st_ino
    b = store.run()
    assert "not parsed again" in b.log(), b.log()
    declare_pd_c(tmp_path)
    status, body = b.d.request("POST", "/v1/reload")
    assert status == 200, (body, b.log())
    assert b.objects()[("pd", "c")]["state"] == "ready"
    b.stop()
    assert os.fstat(store.fds["config"]).st_ino != first
    c = store.run()
    log = c.log()
    assert "not parsed again" in log, log
    assert c.objects()[("pd", "c")]["state"] == "ready"
    assert c.objects()[("mr", "r")].get("restored") is True
    c.stop()


def test_kept_configuration_that_is_not_one_is_parsed(store):
    a = store.run()
    a.stop()
    fd = os.memfd_create("junk")
    os.write(fd, b"not what config_keep() writes\0" + os.urandom(300))
    store.put("config", fd)
    b = store.run()
    log = b.log()
    assert "cannot be read: parsing" in log, log
    assert ("pd", "a") in b.objects()
    b.stop()


def test_more_pds_than_one_listing_holds_are_each_checked(store, tmp_path):
    """Past what one INFO_HANDLES call lists (16383 handles), the
    context's PDs are not known at once: each kept PD is checked with a
    memory window as it is taken back (rdmad(8): "on a kernel without
    that listing"). A forged handle is refused that way too."""
    n = 16400
    pds = ", ".join(f'{{ name = "q{i}"; }}' for i in range(n))
    (tmp_path / "rdmad.conf").write_text(
        daemon_section(store.port, tmp_path) + f"""
devices = ( {{ name = "d"; match = {{ ibdev = "{SHARED_DEV}"; }}; }} );
profiles = ( {{ name = "p"; device = "d"; pd = ( {pds} ); }} );
""")
    a = store.run()
    before = a.objects()
    a.stop()
    top = max(o["handle"] for o in before.values())

    def change(o):
        if o["name"] == "q1":
            o["handle"] = top + 1000
    forge(store, change)
    b = store.run()
    after = b.objects()
    log = b.log()
    assert "checked with a window" in log, log[-3000:]
    assert "pd q1" in log and "previous run" in log, log[-3000:]
    assert after[("pd", "q1")]["state"] == "ready"
    assert after[("pd", "q1")]["handle"] != top + 1000
    for name in ("q0", "q2", f"q{n // 2}", f"q{n - 1}"):
        assert after[("pd", name)]["handle"] == \
            before[("pd", name)]["handle"], name
    b.stop()


# A shared client of profile p that holds what it attached until its
# stdin closes: written from proto/PROTOCOL.md (rdmadproto.py), in a
# process of its own, so that it outlives a run and is killed at will.
HOLDER = """
import sys
sys.path.insert(0, sys.argv[2])
from rdmadproto import ATTACH, ATTACHED, Client
c = Client(sys.argv[1])
t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared"})
assert t == ATTACHED, doc
print("attached", flush=True)
sys.stdin.read()
"""


def holder(tmp):
    h = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp / "rdmad.sock"),
                          os.path.dirname(os.path.abspath(__file__))],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert h.stdout.readline().strip() == "attached"
    return h


def mrs_named(run, name):
    """{state: document} of the MRs of p named name."""
    status, prof = run.d.get("/v1/profiles/p")
    assert status == 200, prof
    out = {}
    for o in prof["objects"]:
        if o["kind"] == "mr" and o["name"] == name:
            assert o["state"] not in out, prof["objects"]
            out[o["state"]] = o
    return out


def gone_with(h, lkey, run):
    h.kill()
    h.wait()
    end = time.monotonic() + 20
    while kernel_mrs(lkey) and time.monotonic() < end:
        time.sleep(0.2)
    assert not kernel_mrs(lkey), run.log()


def test_restarts_while_an_mr_drains_keep_it_for_its_holder(store, tmp_path):
    """A reload drops an MR a live client holds: it drains. Each of two
    restarts hands it to the next run, which drains it on for the client
    it adopts; it goes when the client does."""
    a = store.run()
    lkey = a.objects()[("mr", "s")]["lkey"]
    h = holder(tmp_path)
    try:
        conf = tmp_path / "rdmad.conf"
        text = conf.read_text()
        dropped = text.replace(',\n         { name = "s"; pd = "b"; memory = "n"; }',
                               "")
        assert dropped != text
        conf.write_text(dropped)
        status, body = a.d.request("POST", "/v1/reload")
        assert status == 200, (body, a.log())
        assert mrs_named(a, "s").keys() == {"draining"}
        a.stop()
        for _ in range(2):
            run = store.run()
            drained = mrs_named(run, "s")
            assert drained.keys() == {"draining"}, (drained, run.log())
            assert drained["draining"]["lkey"] == lkey
            assert drained["draining"]["length"] == 1 << 20
            assert len(kernel_mrs(lkey)) == 1
            assert "adopted pid %d" % h.pid in run.log()
            run.stop()
        run = store.run()
        gone_with(h, lkey, run)
        assert not mrs_named(run, "s")
        assert run.objects()[("mr", "r")]["state"] == "ready"
        run.stop()
    finally:
        h.kill()
        h.wait()


def test_a_restart_that_changes_a_held_mr_drains_the_old_one(store, tmp_path):
    """A restart whose configuration declares a held MR otherwise: the
    new one is made beside it, the old one drains for its holder, across
    a second restart too (the holder's lease names the old one's handle,
    not its namesake); it goes when the holder does."""
    a = store.run()
    old = a.objects()[("mr", "s")]
    h = holder(tmp_path)
    try:
        a.stop()
        conf = tmp_path / "rdmad.conf"
        text = conf.read_text()
        changed = text.replace('{ name = "s"; pd = "b"; memory = "n"; }',
                               '{ name = "s"; pd = "b"; memory = "n"; '
                               'length = "512K"; }')
        assert changed != text
        conf.write_text(changed)
        new = None
        for _ in range(2):
            run = store.run()
            both = mrs_named(run, "s")
            assert both.keys() == {"ready", "draining"}, (both, run.log())
            assert both["draining"]["lkey"] == old["lkey"]
            assert both["ready"]["length"] == 512 << 10
            assert new is None or both["ready"]["lkey"] == new["lkey"]
            new = both["ready"]
            assert len(kernel_mrs(old["lkey"])) == 1
            run.stop()
        run = store.run()
        gone_with(h, old["lkey"], run)
        assert mrs_named(run, "s").keys() == {"ready"}
        assert mrs_named(run, "s")["ready"]["lkey"] == new["lkey"]
        run.stop()
    finally:
        h.kill()
        h.wait()


def drop_s(tmp_path):
    conf = tmp_path / "rdmad.conf"
    text = conf.read_text()
    dropped = text.replace(',\n         { name = "s"; pd = "b"; memory = "n"; }',
                           "")
    assert dropped != text
    conf.write_text(dropped)


def lease_of(store, pid):
    """What the lease record in the store says process pid holds:
    {(kind, name): handle}."""
    holders = store.drain().holders("p")
    mine = [h for h in holders if h["pid"] == pid]
    assert len(mine) == 1, holders
    return {(l["kind"], l["name"]): l.get("handle") for l in mine[0]["leases"]}


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGABRT])
def test_a_crash_keeps_who_holds_what(store, tmp_path, sig):
    """The daemon dies without a stop (no SIGTERM: nothing written at
    exit); the next run adopts the client all the same, so a reload
    that drops the MR it holds drains it instead of destroying it."""
    a = store.run()
    s = a.objects()[("mr", "s")]
    h = holder(tmp_path)
    try:
        # Written down as the lease was taken, not at a stop.
        assert lease_of(store, h.pid)[("mr", "s")] == s["handle"]
        a.crash(sig)
        b = store.run()
        assert "adopted pid %d" % h.pid in b.log(), b.log()
        drop_s(tmp_path)
        status, body = b.d.request("POST", "/v1/reload")
        assert status == 200, (body, b.log())
        drained = mrs_named(b, "s")
        assert drained.keys() == {"draining"}, (drained, b.log())
        assert drained["draining"]["lkey"] == s["lkey"]
        assert len(kernel_mrs(s["lkey"])) == 1
        gone_with(h, s["lkey"], b)
        b.stop()
    finally:
        h.kill()
        h.wait()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGABRT])
def test_a_crash_while_an_mr_drains_keeps_it(store, tmp_path, sig):
    """A reload drops an MR a client holds (it drains), then the daemon
    dies: the next run drains it on for the client, twice over."""
    a = store.run()
    s = a.objects()[("mr", "s")]
    h = holder(tmp_path)
    try:
        drop_s(tmp_path)
        status, body = a.d.request("POST", "/v1/reload")
        assert status == 200, (body, a.log())
        assert mrs_named(a, "s").keys() == {"draining"}
        a.crash(sig)
        for _ in range(2):
            run = store.run()
            drained = mrs_named(run, "s")
            assert drained.keys() == {"draining"}, (drained, run.log())
            assert drained["draining"]["lkey"] == s["lkey"]
            assert len(kernel_mrs(s["lkey"])) == 1
            assert "adopted pid %d" % h.pid in run.log()
            run.crash(signal.SIGKILL)
        run = store.run()
        gone_with(h, s["lkey"], run)
        assert not mrs_named(run, "s")
        run.stop()
    finally:
        h.kill()
        h.wait()


def test_a_handle_another_client_took_is_left_alone(store, tmp_path):
    """Between two runs a process holding the context deregisters MR r
    and registers one of its own, which the file gives r's freed handle
    (uverbs hands out the lowest free one): the state document now names
    another's MR by that handle. The next run makes r anew, and does not
    destroy the other MR under its maker."""
    a = store.run()
    before = a.objects()
    a.crash(signal.SIGKILL)
    ibv = ctypes.CDLL("libibverbs.so.1", use_errno=True)
    for f in ("ibv_import_device", "ibv_import_pd", "ibv_import_mr",
              "ibv_reg_mr"):
        getattr(ibv, f).restype = ctypes.c_void_p
    ibv.ibv_import_pd.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    ibv.ibv_import_mr.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    ibv.ibv_reg_mr.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_size_t, ctypes.c_int]
    for f in ("ibv_dereg_mr", "ibv_unimport_pd", "ibv_close_device"):
        getattr(ibv, f).argtypes = [ctypes.c_void_p]
    ctx = ibv.ibv_import_device(os.dup(store.fds["ctx/p"]))
    assert ctx, os.strerror(ctypes.get_errno())
    pd = ibv.ibv_import_pd(ctx, before[("pd", "a")]["handle"])
    mr = ibv.ibv_import_mr(pd, before[("mr", "r")]["handle"])
    assert mr and ibv.ibv_dereg_mr(mr) == 0
    buf = ctypes.create_string_buffer(1 << 16)
    mine = ibv.ibv_reg_mr(pd, buf, len(buf), 1)  # IBV_ACCESS_LOCAL_WRITE
    assert mine, os.strerror(ctypes.get_errno())
    # struct ibv_mr: context, pd, addr, length, then handle, lkey, rkey.
    handle, lkey = (ctypes.c_uint32 * 2).from_address(mine + 32)
    assert handle == before[("mr", "r")]["handle"]
    try:
        b = store.run()
        after = b.objects()
        log = b.log()
        assert "names another MR now" in log, log
        assert "restored" not in after[("mr", "r")]
        assert len(kernel_mrs(lkey)) == 1, log
        assert b.d.metrics()[
            'rdmad_stale_handles_total{source="restore"}'] == 1
        b.stop()
        # Still the other process's, and still in the kernel.
        assert len(kernel_mrs(lkey)) == 1
    finally:
        ibv.ibv_dereg_mr(ctypes.c_void_p(mine))
        ibv.ibv_unimport_pd(ctypes.c_void_p(pd))
        ibv.ibv_close_device(ctypes.c_void_p(ctx))


def set_inode(store, sid):
    return os.fstat(store.fds[f"leaseset/{sid}/p"]).st_ino


def test_lease_sets_are_stored_once_and_taken_out_once_unnamed(store,
                                                                tmp_path):
    """rdmad(8), SYSTEMD: the lease record (version 2) names each
    holder's lease sets by id; a set is a record of its own
    (leaseset/ID/p), stored once before a holder names it. Two attaches
    of one generation name one set, stored once; a reload's attach names
    a new one; a set no holder names leaves the store; and the next run,
    which adopts the holders, takes the previous run's sets out once its
    own lease record stands (the adopted holder's leases written in
    it). A set the next attach will name stays stored while nobody
    holds it: a worker attaching in a loop stores it once."""
    a = store.run()
    held = []
    try:
        held.append(holder(tmp_path))
        sets = store.drain().lease_sets("p")
        assert len(sets) == 1, sets
        (first,) = sets
        names = {(l["kind"], l["name"]) for l in sets[first]["leases"]}
        assert {("pd", "a"), ("pd", "b"), ("mr", "r"), ("mr", "s")} <= names
        ino = set_inode(store, first)
        held.append(holder(tmp_path))
        doc = store.drain().leases("p")
        assert doc["version"] == 2
        assert sorted(h["pid"] for h in doc["holders"]) == \
            sorted(h.pid for h in held)
        assert all(h["sets"] == [first] and h["leases"] == []
                   for h in doc["holders"]), doc
        assert store.lease_sets("p").keys() == {first}
        assert set_inode(store, first) == ino  # not stored again
        # A new generation: the next attach's set is another.
        drop_s(tmp_path)
        status, body = a.d.request("POST", "/v1/reload")
        assert status == 200, (body, a.log())
        held.append(holder(tmp_path))
        sets = store.drain().lease_sets("p")
        assert len(sets) == 2 and first in sets, sets
        (second,) = set(sets) - {first}
        assert ("mr", "s") not in {(l["kind"], l["name"])
                                   for l in sets[second]["leases"]}
        # The first set's holders go: so does its record, once the
        # lease record no longer names it.
        for h in held[:2]:
            h.kill()
            h.wait()
        assert settle(lambda: store.drain().lease_sets("p").keys()
                      == {second}, 10), store.lease_sets("p")
        assert [h["pid"] for h in store.holders("p")] == [held[2].pid]
        a.crash(signal.SIGKILL)
        b = store.run()
        assert "adopted pid %d" % held[2].pid in b.log(), b.log()
        held.append(holder(tmp_path))
        assert settle(lambda: second not in store.drain().lease_sets("p"),
                      10), store.lease_sets("p")
        (third,) = store.lease_sets("p")
        mine = {h["pid"]: h for h in store.holders("p")}
        assert mine[held[3].pid]["sets"] == [third]
        # The adopted holder's leases, in the record itself now.
        adopted = mine[held[2].pid]
        assert "sets" not in adopted
        assert ("mr", "r") in {(l["kind"], l["name"])
                               for l in adopted["leases"]}
        # Its last holder gone, the generation's set stays stored for
        # the next attach (which names it again, not a new one).
        ino = set_inode(store, third)
        held[3].kill()
        held[3].wait()
        assert settle(lambda: held[3].pid not in
                      {h["pid"] for h in store.drain().holders("p")}, 10)
        assert store.lease_sets("p").keys() == {third}
        held.append(holder(tmp_path))
        mine = {h["pid"]: h for h in store.drain().holders("p")}
        assert mine[held[4].pid]["sets"] == [third]
        assert set_inode(store, third) == ino
        b.stop()
    finally:
        for h in held:
            h.kill()
            h.wait()


def test_a_resumed_attachment_maps_its_memory_from_the_new_run(store,
                                                                tmp_path):
    """A Python client attaches without memory fds and maps nothing;
    the daemon restarts, the client resumes (event "resumed"): its first
    map of memory n asks the new run (MAP on the resumed attachment),
    which gives the memory the store kept, bytes and all."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                    "client", "python"))
    import rdmad as pyrdmad
    a = store.run()
    data = os.urandom(4096)
    write_pattern(a.proc.pid, "n", data, 8192)
    with pyrdmad.connect(str(tmp_path / "rdmad.sock")) as c:
        with c.attach("p", mode="shared") as p:
            a.stop()
            b = store.run()
            ev = None
            end = time.monotonic() + 60
            while time.monotonic() < end:
                ev = c.next_event(timeout=1)
                if ev and ev.get("event") == "resumed":
                    break
            assert ev and ev.get("event") == "resumed", (ev, b.log())
            assert bytes(p.mr_map("s")[8192:8192 + 4096]) == data
            # The same memory as the new run's, not a copy.
            p.mr_map("s")[0:4] = b"ping"
            assert read_memory(b.proc.pid, "n", 0, 4) == b"ping"
    b.stop()
