# SPDX-License-Identifier: MIT
"""Restarts that keep registrations, under the real systemd, on a device
that imports (rxe with the test-only provider: tests/vm/run --systemd
--import; mlx5 where there is one). The shipped unit with the fd store:
the context's cmd_fd, a state document and the memory go there at
READY, and the next run takes every PD and MR back by handle.

One profile of about 10k objects (PDs, MRs over a small memory, CQs)
and another with a 1 GiB MR over memory holding a pattern. Checked: same handles,
lkey, rkey and IOVA for every PD and MR, each MR once in the kernel, the
pattern intact; a client that imported the MR before keeps moving data
through it during and after the restart without attaching again; a
changed MR is made again and its old registration goes; SIGKILL
(Restart=on-failure) comes back the same way; stop lets everything go.
The tests run in file order on one daemon."""

import collections
import json
import os
import subprocess
import time

import pytest

from conftest import sh, show, wait_for, write_config

pytestmark = [
    pytest.mark.usefixtures("units"),
    pytest.mark.skipif(os.environ.get("RDMAD_VM_IMPORT") != "1",
                       reason="needs a device that imports: "
                       "tests/vm/run --systemd --import"),
]

PORT = 8470
N_PD, N_MR, N_CQ = 2000, 4000, 3998
BIG = 1 << 30
PATTERN_AT = 700 << 20


def config(changed=False):
    """About 10k objects; changed: m0 asks for one more access right."""
    def access(i):
        return '"local_write", "remote_read"' if changed and i == 0 \
            else '"local_write"'
    pds = ", ".join(f'{{ name = "p{i}"; }}' for i in range(N_PD))
    mrs = ", ".join(
        f'{{ name = "m{i}"; pd = "p{i % N_PD}"; memory = "small"; '
        f'offset = {(i % 1024) * 4096}; length = 4096; '
        f'access = [ {access(i)} ]; }}' for i in range(N_MR))
    cqs = ", ".join(f'{{ name = "c{i}"; }}' for i in range(N_CQ))
    return f"""
daemon = {{ admit_root = true; runtime_dir = "/run/rdmad"; control_socket = "/run/rdmad/rdmad.sock";
           http = {{ listen = [ "127.0.0.1:{PORT}" ]; }}; }};
devices = ( {{ name = "d"; match = {{ ibdev = "rxe0"; }}; port = 1; }} );
profiles = (
 {{ name = "p"; device = "d";
  memory = ( {{ name = "small"; size = "4M"; }} );
  pd = ( {pds} );
  mr = ( {mrs} );
  cq = ( {cqs} );
 }},
 {{ name = "io"; device = "d";
  memory = ( {{ name = "big"; size = "1G"; }} );
  pd = ( {{ name = "main"; }} );
  mr = ( {{ name = "big"; pd = "main"; memory = "big";
           access = [ "local_write", "remote_write", "remote_read" ]; }} );
 }} );
"""


def get(path):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{path}",
                                timeout=30) as r:
        return json.loads(r.read())


def ready_objects(timeout=900):
    """Both profiles' objects once both are ready, by (kind, name): the
    10k of p, and io's 1 GiB MR (a profile of its own: an ATTACHED of
    p's thousands of MRs would not fit a frame of the protocol)."""
    def ready():
        try:
            ps = [get(f"/v1/profiles/{n}") for n in ("p", "io")]
        except OSError:
            return None
        return ps if all(p["state"] == "ready" for p in ps) else None
    profs = wait_for(ready, timeout, "profiles p and io ready")
    return {(o["kind"], o["name"]): o for p in profs for o in p["objects"]}


def kernel_lkeys():
    out = sh("rdma", "-j", "-d", "resource", "show", "mr").stdout
    rows = json.loads(out) if out.strip() else []
    return collections.Counter(int(r["lkey"], 16) if isinstance(r["lkey"], str)
                               else r["lkey"] for r in rows
                               if r.get("ifname") == "rxe0")


def memfd_path(pid, name):
    for fd in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if os.readlink(path).startswith(f"/memfd:{name} "):
                return path
        except OSError:
            continue
    raise AssertionError(f"no memfd {name} in {pid}")


def main_pid():
    return int(show("MainPID")["MainPID"])


def same_registrations(before, after):
    """Every PD and MR taken back by handle, with its keys."""
    kinds = collections.Counter()
    for key, o in before.items():
        if key[0] not in ("pd", "mr"):
            continue
        a = after[key]
        assert a["handle"] == o["handle"], (key, o, a)
        if key[0] == "mr":
            assert a.get("restored") is True, (key, a)
            for f in ("lkey", "rkey", "iova", "length"):
                assert a[f] == o[f], (key, f, o, a)
        kinds[key[0]] += 1
    assert kinds == {"pd": N_PD + 1, "mr": N_MR + 1}, kinds
    # Made again, not kept: a CQ cannot be imported.
    assert "restored" not in after[("cq", "c0")]


def each_mr_once(objects):
    lkeys = kernel_lkeys()
    for key, o in objects.items():
        if key[0] == "mr":
            assert lkeys[o["lkey"]] == 1, (key, o["lkey"], lkeys[o["lkey"]])


@pytest.fixture(scope="module")
def unit_settings(unit_settings):
    """The shipped unit's watchdog, not the 4 s of test_systemd.py's
    stall test: a start of 10k objects under TCG with a client busy on
    the other CPU is not a stall."""
    return {k: v for k, v in unit_settings.items() if k != "WatchdogSec"}


@pytest.fixture(scope="module")
def started(units):
    write_config(text=config())
    sh("systemctl", "start", "rdmad.service", timeout=900)
    objects = ready_objects()
    yield objects
    sh("systemctl", "stop", "rdmad.service", check=False, timeout=300)


def progress(client, timeout=60):
    """The client's next "n=K" line: K."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = client.stdout.readline()
        assert line, "the client ended: " + client.stdout.read()
        if line.startswith("n="):
            return int(line[2:])
        assert not line.startswith("error"), line
    raise AssertionError("no progress from the client")


def test_restart_takes_back_every_registration_while_a_client_works(
        started, units):
    before = started
    pid = main_pid()
    pattern = os.urandom(1 << 20)
    with open(memfd_path(pid, "big"), "r+b") as f:
        f.seek(PATTERN_AT)
        f.write(pattern)
    each_mr_once(before)
    # A client imports the 1 GiB MR and writes and reads through it.
    client = subprocess.Popen(
        [str(units.programs["shared_rdma"]), "/run/rdmad/rdmad.sock", "io",
         "shared", "stream", "big"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert client.stdout.readline().strip() == "streaming"
        progress(client)
        sh("systemctl", "restart", "rdmad.service", timeout=900)
        new_pid = main_pid()
        assert new_pid != pid
        after = ready_objects()
        same_registrations(before, after)
        each_mr_once(after)
        with open(memfd_path(new_pid, "big"), "rb") as f:
            f.seek(PATTERN_AT)
            assert f.read(len(pattern)) == pattern
        # The client went on, through the restart and after it, on the
        # registration it imported before: it attached once.
        k = progress(client)
        assert progress(client) > k
        assert client.poll() is None
        # Its objects in the context are a live client's, not orphans:
        # the context was not retired.
        time.sleep(1)
        orphans = get("/v1/profiles/io/orphans")
        assert orphans["orphans"] == [], orphans
        log = sh("journalctl", "--no-pager", "-u", "rdmad.service",
                 "_PID=" + str(new_pid)).stdout
        assert "took back the device context" in log, log
        assert "context retired" not in log, log
        # The same files: their configuration came back from the store,
        # not parsed again.
        assert "not parsed again" in log, log
    finally:
        client.kill()
        client.wait()


def test_changed_mr_is_made_again_and_its_old_registration_goes(started):
    before = ready_objects()
    write_config(text=config(changed=True))
    sh("systemctl", "restart", "rdmad.service", timeout=900)
    after = ready_objects()
    m0 = after[("mr", "m0")]
    assert "restored" not in m0, m0
    assert m0["lkey"] != before[("mr", "m0")]["lkey"]
    lkeys = kernel_lkeys()
    assert lkeys[before[("mr", "m0")]["lkey"]] == 0
    assert lkeys[m0["lkey"]] == 1
    for key in (("mr", "big"), ("mr", "m1"), ("mr", f"m{N_MR - 1}")):
        assert after[key].get("restored") is True, after[key]
        assert after[key]["lkey"] == before[key]["lkey"]
    log = sh("journalctl", "--no-pager", "-u", "rdmad.service",
             "_PID=" + str(main_pid())).stdout
    assert "changed since the previous run" in log, log


def test_sigkill_comes_back_the_same_way(started):
    before = ready_objects()
    pid = main_pid()
    sh("systemctl", "kill", "-s", "KILL", "rdmad.service")
    wait_for(lambda: main_pid() not in (0, pid), 120, "a new rdmad")
    after = ready_objects()
    same_registrations(before, after)
    each_mr_once(after)
    # What the killed run had made besides (CQs) stays as its leftovers,
    # counted, but does not cost the registrations.
    time.sleep(1)
    assert get("/v1/profiles/p")["state"] == "ready"
    assert get("/v1/profiles/io")["state"] == "ready"
    log = sh("journalctl", "--no-pager", "-u", "rdmad.service",
             "_PID=" + str(main_pid())).stdout
    assert "context retired" not in log, log


def test_stop_lets_everything_go(started):
    ready_objects()
    sh("systemctl", "stop", "rdmad.service", timeout=300)
    assert show("NFileDescriptorStore")["NFileDescriptorStore"] in ("", "0")
    wait_for(lambda: not kernel_lkeys(), 60, "no MR left on rxe0")
