# SPDX-License-Identifier: MIT
"""A restart under systemd takes the device context back (mlx5): the fd
store keeps the context's cmd_fd and a document of its PDs and MRs, and
the next run imports them by handle, so that an MR keeps its keys and
its contents across `systemctl restart`. rxe cannot import: there only
memory is kept (tests/systemd/test_systemd.py), and the unit test
tests/unit/test_restore.c covers what is dropped and why.

Needs mlx5 and systemd as PID 1 (the test runs rdmad as a transient
service with systemd-run)."""

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from hwdev import DEV, needs_mlx5  # noqa: E402

PORT = 8479
UNIT = f"rdmad-hw-restart-{secrets.token_hex(3)}"

pytestmark = [
    needs_mlx5,
    pytest.mark.skipif(not Path("/run/systemd/system").is_dir(),
                       reason="systemd is not PID 1"),
]


def get(path):
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{path}",
                                timeout=10) as r:
        return json.loads(r.read())


def wait_ready():
    for _ in range(300):
        try:
            p = get("/v1/profiles/p")
            if p["state"] == "ready":
                return p
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("profile p not ready")


def show(prop):
    return subprocess.run(["systemctl", "show", "-p", prop, "--value", UNIT],
                          capture_output=True, text=True).stdout.strip()


def rdma_mrs():
    """Every MR on the device (a worker thread's are under its tid)."""
    out = subprocess.run(["rdma", "-j", "-d", "resource", "show", "mr"],
                         capture_output=True, text=True, check=True).stdout
    return [m for m in json.loads(out) if m.get("ifname") == DEV]


def memfd_of(pid, name):
    """A path that opens the daemon's memfd of memory object name."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd).startswith(f"/memfd:{name} "):
                return str(fd)
        except OSError:
            continue
    raise AssertionError(f"no memfd {name} in {pid}")


def objects(doc):
    return {(o["kind"], o["name"]): o for o in doc["objects"]}


@pytest.fixture
def service(tmp_path):
    conf = tmp_path / "rdmad.conf"
    conf.write_text(f"""
daemon = {{ runtime_dir = "/run/{UNIT}";
           http = {{ listen = [ "127.0.0.1:{PORT}" ]; }}; }};
devices = ( {{ name = "d"; match = {{ ibdev = "{DEV}"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  memory = ( {{ name = "m"; size = "1M"; }}, {{ name = "n"; size = "1M"; }} );
  pd = ( {{ name = "a"; }} );
  cq = ( {{ name = "c"; }} );
  mr = ( {{ name = "r"; pd = "a"; memory = "m";
           access = [ "local_write", "remote_write", "remote_read" ]; }},
         {{ name = "s"; pd = "a"; memory = "n"; }} );
}} );
""")
    subprocess.run(["systemd-run", "--unit", UNIT, "-p", "Type=notify",
                    "-p", "NotifyAccess=main",
                    "-p", "FileDescriptorStoreMax=64",
                    str(ROOT / "build" / "rdmad"), "-c", str(conf)],
                   check=True)
    yield conf
    subprocess.run(["systemctl", "stop", UNIT])
    subprocess.run(["systemctl", "reset-failed", UNIT],
                   stderr=subprocess.DEVNULL)


def test_restart_keeps_keys_and_contents(service):
    before = objects(wait_ready())
    r = before[("mr", "r")]
    pid = int(show("MainPID"))
    # The pattern goes into the memory the MR covers.
    pattern = os.urandom(4096)
    fd = os.open(memfd_of(pid, "m"), os.O_RDWR)
    try:
        os.pwrite(fd, pattern, 8192)
    finally:
        os.close(fd)
    # Two memories and the context with its state document.
    assert int(show("NFileDescriptorStore")) == 4

    subprocess.run(["systemctl", "restart", UNIT], check=True)
    after = objects(wait_ready())
    new_pid = int(show("MainPID"))
    assert new_pid != pid
    for key in (("pd", "a"), ("mr", "r"), ("mr", "s")):
        assert after[key]["handle"] == before[key]["handle"]
    for key in (("mr", "r"), ("mr", "s")):
        assert after[key].get("restored") is True, after[key]
    for key in ("lkey", "rkey", "iova", "length"):
        assert after[("mr", "r")][key] == r[key]
    # A CQ cannot be imported: made again.
    assert "restored" not in after[("cq", "c")]
    # The kernel has each MR once: the old ones, not new copies.
    rkeys = [m.get("rkey") for m in rdma_mrs()]
    assert rkeys.count(r["rkey"]) == 1, rkeys
    fd = os.open(memfd_of(new_pid, "m"), os.O_RDONLY)
    try:
        assert os.pread(fd, len(pattern), 8192) == pattern
    finally:
        os.close(fd)


def test_changed_mr_is_made_again_and_the_old_one_goes(service):
    before = objects(wait_ready())
    text = service.read_text().replace(
        '{ name = "s"; pd = "a"; memory = "n"; }',
        '{ name = "s"; pd = "a"; memory = "n"; access = [ "local_write" ]; }')
    service.write_text(text)
    subprocess.run(["systemctl", "restart", UNIT], check=True)
    after = objects(wait_ready())
    assert after[("mr", "r")].get("restored") is True
    assert "restored" not in after[("mr", "s")]
    assert after[("mr", "s")]["rkey"] != before[("mr", "s")]["rkey"] or \
        after[("mr", "s")]["lkey"] != before[("mr", "s")]["lkey"]
    # The old registration of s is gone from the kernel.
    lkeys = [m.get("lkey") for m in rdma_mrs()]
    assert before[("mr", "s")]["lkey"] not in lkeys


def test_stop_lets_everything_go(service):
    wait_ready()
    subprocess.run(["systemctl", "stop", UNIT], check=True)
    assert show("NFileDescriptorStore") in ("", "0")
    assert not [m for m in rdma_mrs()
                if m.get("comm", "").startswith("rdmad")]
