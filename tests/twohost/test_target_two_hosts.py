#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A target across two real kernels: rdmad in one guest, the pyverbs peer
(tests/integration/cmpeer.py) in the other, over rxe on each guest's
virtio NIC (tests/vm/run --two; the guests' own network, 10.99.0.0/24).

    tests/twohost/test_target_two_hosts.py      (on the host; exit status)

On the host it makes a directory build/twohost-<random suffix> (the guests see
the host's root over 9p: they coordinate through files there) and runs
itself in both guests:

- guest A (10.99.0.1), role "target": starts build/rdmad with a target on
  10.99.0.1, checks it listens, writes `ready`;
- guest B (10.99.0.2), role "peer": connects to it with pyverbs' rdma_cm,
  RDMA-writes a pattern and reads it back, writes `wrote`;
- A checks the connection (REST: established, peer 10.99.0.2, its QP in
  `rdma resource show`) and the pattern in the MR through rdmad_mr_map
  (build/examples/attach), revokes it (`rdmactl target revoke`), checks
  it is gone, writes `revoked`;
- B writes again: the completion must be IBV_WC_REM_ACCESS_ERR; it writes
  `peer.json` (its results) and disconnects;
- A checks the QP is gone and the metrics (accepted 1, revoked 1), stops
  the daemon (exit status 0).

Either side writes `abort-<role>` when it fails, so that the other stops
waiting. Exit status: 0 if both sides passed."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
TARGET_ADDR, PEER_ADDR = "10.99.0.1", "10.99.0.2"
TPORT = 7471
# Waits for the other guest: boots differ by seconds, TCG under load by
# more; the harness's own timeout (RDMAD_VM_TIMEOUT) is above these.
WAIT = 150


def log(role, msg):
    print(f"[{role} {time.monotonic():8.2f}] {msg}", flush=True)


def put(d, name, text=""):
    """Write-then-rename: the other guest never reads half a file."""
    tmp = d / f".{name}.tmp"
    tmp.write_text(text)
    tmp.rename(d / name)


def wait_for(d, name, other, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (d / name).exists():
            return (d / name).read_text()
        if (d / f"abort-{other}").exists():
            raise SystemExit(f"the {other} side failed: "
                             + (d / f"abort-{other}").read_text())
        time.sleep(0.2)
    raise AssertionError(f"no {name} from the {other} side in {timeout}s")


def target(d, port):
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from conftest import (RDMACTL, TOKEN, Daemon, daemon_section, rdma_res,
                          settle)
    from target_setup import attach_sees, target_conf, target_doc

    tmp = Path(tempfile.mkdtemp(prefix="twohost.", dir="/tmp"))
    conf = tmp / "rdmad.conf"
    conf.write_text(daemon_section(8080, tmp) + target_conf(
        'netdev = "eth0";', f"{TARGET_ADDR}:{port}", '"10.99.0.0/24"'))
    dm = Daemon(conf, 8080, tmp, TOKEN)
    ok = False
    try:
        dm.wait_ready()

        def doc():
            return target_doc(dm)

        assert settle(lambda: doc()["listening"] is True, 30), doc()
        assert doc()["state"] == "ready", doc()
        log("A", f"target listening on {TARGET_ADDR}:{port}")
        put(d, "ready")

        pattern = bytes.fromhex(wait_for(d, "wrote", "peer"))
        conns = doc()["connections"]
        assert len(conns) == 1 and conns[0]["state"] == "established", conns
        c = conns[0]
        assert c["peer"].startswith(PEER_ADDR + ":"), c
        qps = {r["lqpn"] for r in rdma_res("qp")}
        assert c["qp_num"] in qps, (c, qps)
        log("A", f"connection {c['id']} from {c['peer']}, qp {c['qp_num']}")

        # The bytes B wrote, seen through rdmad_mr_map by a local client.
        first = attach_sees(dm.sock, pattern)
        log("A", f"attach sees the pattern: {first}")

        r = subprocess.run([str(RDMACTL), "--socket", dm.sock, "target",
                            "revoke", "p", "kv", str(c["id"])],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        log("A", "revoked")
        put(d, "revoked")

        res = json.loads(wait_for(d, "peer.json", "peer"))
        log("A", f"peer results: {res}")
        import pyverbs.enums as e
        assert res["write_after_revoke"] == e.IBV_WC_REM_ACCESS_ERR, res
        assert settle(lambda: doc()["connections"] == [], 30), doc()
        assert settle(lambda: c["qp_num"] not in
                      {r["lqpn"] for r in rdma_res("qp")}, 30)
        m = dm.metrics()
        key = 'rdmad_target_connections_total{profile="p",target="kv",'
        assert m[key + 'result="accepted"}'] == 1, m
        assert m[key + 'result="revoked"}'] == 1, m
        assert m['rdmad_target_connections{profile="p",target="kv"}'] == 0
        ok = True
    finally:
        rc = dm.stop()
        if not ok or rc != 0:
            print(dm.log()[-4000:], flush=True)
    assert rc == 0, f"rdmad exited with {rc}"
    log("A", "passed")


def peer(d, port):
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    import pyverbs.enums as e
    from cmpeer import Peer
    from target_setup import peer_round_trip

    wait_for(d, "ready", "target")
    p = Peer(TARGET_ADDR, port, src=PEER_ADDR)
    try:
        (addr, rkey, length), = p.ranges
        log("B", f"connected: window at {addr:#x} rkey {rkey:#x} "
            f"length {length}")
        assert length == 65536
        pattern = peer_round_trip(p)
        log("B", "wrote and read back the pattern")
        put(d, "wrote", pattern.hex())

        wait_for(d, "revoked", "target")
        after = p.write(b"after revoke")
        log("B", f"write after revoke: status {after}")
        put(d, "peer.json", json.dumps({"write_after_revoke": after}))
        assert after == e.IBV_WC_REM_ACCESS_ERR, after
    finally:
        p.close()
    log("B", "passed")


def host():
    d = Path(tempfile.mkdtemp(prefix="twohost-", dir=BUILD))
    me = str(Path(__file__).resolve())
    env = dict(os.environ)
    env.setdefault("RDMAD_VM_TIMEOUT", "300")
    cmd = [str(ROOT / "tests" / "vm" / "run"), "--two",
           "/usr/bin/python3", me, "target", str(d), str(TPORT), "--",
           "/usr/bin/python3", me, "peer", str(d), str(TPORT)]
    t0 = time.monotonic()
    rc = subprocess.run(cmd, env=env).returncode
    took = time.monotonic() - t0
    if rc == 0:
        subprocess.run(["rm", "-rf", "--", str(d)])
        print(f"twohost: target across two guests: passed ({took:.0f}s)")
    else:
        print(f"twohost: target across two guests: FAILED, exit status {rc}"
              f" ({took:.0f}s); files in {d}")
    return rc


def main():
    if len(sys.argv) == 1:
        return host()
    role, d, port = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    try:
        {"target": target, "peer": peer}[role](d, port)
    except BaseException as ex:
        put(d, f"abort-{role}", f"{type(ex).__name__}: {ex}")
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
