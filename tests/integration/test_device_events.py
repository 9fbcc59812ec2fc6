# SPDX-License-Identifier: MIT
"""A device that goes away while rdmad runs: the daemon stays up, lets go
of the device (on rxe, `rdma link del` waits until every context on it is
closed), reports its profiles pending, and creates everything again when
the device comes back. No crash, no leak."""

import os
import subprocess
import time

from conftest import daemon_fds as fds, memfd, rdma_res

CONFIG = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; },
            { name = "d1"; match = { ibdev = "rxe1"; }; } );
profiles = (
  { name = "p"; device = "d0";
    memory = ( { name = "m"; size = "1M"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m";
             access = [ "local_write", "remote_write" ]; } );
    cq = ( { name = "c"; } );
    qp = ( { name = "q0"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "q1";
             access = [ "remote_write" ]; },
           { name = "q1"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "q0";
             access = [ "remote_write" ]; } ); },
  { name = "other"; device = "d1"; pd = ( { name = "b"; } ); }
);
"""


def rdma(*args, timeout=60):
    return subprocess.run(["rdma", *args], capture_output=True, text=True,
                          timeout=timeout)


def wait_for(pred, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def state(d, name):
    status, p = d.get(f"/v1/profiles/{name}")
    assert status == 200
    return p


def test_device_goes_and_comes_back(rdmad):
    d = rdmad(CONFIG)
    assert state(d, "p")["state"] == "ready"
    fds_before = fds(d.pid)
    # Memory does not depend on the device: it must outlive it.
    path, ino = memfd(d.pid, "m")
    pattern = os.urandom(4096)
    with open(path, "r+b") as f:
        f.seek(8192)
        f.write(pattern)
    try:
        # Blocks in the kernel until rdmad has closed its context.
        r = rdma("link", "del", "rxe0", timeout=60)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: state(d, "p")["state"] == "pending",
                 "profile p to go pending")
        p = state(d, "p")
        assert "rxe0 was removed" in p["reason"]
        assert all(o["state"] == ("ready" if o["kind"] == "memory"
                                  else "pending") for o in p["objects"])
        assert rdma_res("pd", d.pid) == rdma_res("pd", d.pid)  # readable
        assert [o for o in rdma_res("pd", d.pid)
                if o["ifname"] == "rxe0"] == []
        # The other profile, on rxe1, is untouched and the daemon serves.
        assert state(d, "other")["state"] == "ready"
    finally:
        r = rdma("link", "add", "rxe0", "type", "rxe", "netdev", "veth0")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: state(d, "p")["state"] == "ready",
             "profile p to come back")
    assert len([o for o in rdma_res("qp", d.pid)
                if o["ifname"] == "rxe0"]) == 2
    # The same memory, contents kept, under the new registration.
    path, ino_after = memfd(d.pid, "m")
    assert ino_after == ino
    with open(path, "rb") as f:
        f.seek(8192)
        assert f.read(len(pattern)) == pattern
    # The data path works again on the new device.
    status, body = d.request("POST", "/v1/profiles/p/selftest",
                             {"a": "q0", "b": "q1"})
    assert status == 200, body
    wait_for(lambda: fds(d.pid) == fds_before, "the fds to settle", 5)
    assert d.proc.poll() is None
    assert "device rxe0 appeared" in d.log()
