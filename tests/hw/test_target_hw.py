# SPDX-License-Identifier: MIT
"""Targets on hardware (mlx5): a window's bounds hold. rxe (Linux 6.1)
checks a remote access through a type-2 window against the MR's bounds,
not the window's (tests/integration/test_targets.py says so); a device
that enforces them must refuse a read one byte past a range's end. The
peer (tests/integration/cmpeer.py) connects from the same address, in a
context of its own. Needs an IPv4 address on the mlx5 device's netdev;
skipped (saying why) otherwise."""

import json
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from hwdev import DEV, needs_mlx5  # noqa: E402

pytestmark = needs_mlx5

PORT = 8479
TARGET_PORT = 7479
IBV_WC_SUCCESS, IBV_WC_REM_ACCESS_ERR = 0, 10


def device_ipv4(dev):
    """An IPv4 address of dev's network device, or None."""
    nets = Path(f"/sys/class/infiniband/{dev}/device/net")
    for net in sorted(nets.iterdir()) if nets.is_dir() else []:
        out = subprocess.run(["ip", "-j", "-4", "addr", "show", net.name],
                             capture_output=True, text=True).stdout
        for link in json.loads(out or "[]"):
            for a in link.get("addr_info", []):
                return a["local"]
    return None


def test_window_bounds_hold():
    addr = device_ipv4(DEV)
    if not addr:
        pytest.skip(f"{DEV}'s netdev has no IPv4 address")
    from cmpeer import Peer
    run = Path("/run") / f"rdmad-hw-{secrets.token_hex(4)}"
    conf = run.with_suffix(".conf")
    conf.write_text(f"""
daemon = {{ admit_root = true; runtime_dir = "{run}"; http = {{ listen = [ "127.0.0.1:{PORT}" ]; }}; }};
devices = ( {{ name = "d"; match = {{ ibdev = "{DEV}"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  memory = ( {{ name = "m"; size = "1M"; }} );
  pd = ( {{ name = "pd"; }} );
  mr = ( {{ name = "r"; pd = "pd"; memory = "m";
           access = [ "local_write", "mw_bind" ]; }} );
  cq = ( {{ name = "c"; }} );
  target = ( {{ name = "t"; listen = "{addr}:{TARGET_PORT}"; pd = "pd";
               cq = "c"; allow = [ "{addr}" ];
               expose = ( {{ mr = "r"; access = [ "remote_read" ];
                            offset = 4096; length = 4096; }} ); }} ); }} );
""")
    d = subprocess.Popen([str(ROOT / "build" / "rdmad"), "-c", str(conf)])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{PORT}/v1/profiles/p/target/t") \
                        as r:
                    if json.load(r).get("listening"):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "target never listened"
            time.sleep(0.2)
        peer = Peer(addr, TARGET_PORT, src=addr)
        try:
            assert peer.read(4096)[0] == IBV_WC_SUCCESS
        finally:
            peer.close()
        peer = Peer(addr, TARGET_PORT, src=addr)
        try:
            assert peer.read(1, offset=4096)[0] == IBV_WC_REM_ACCESS_ERR
        finally:
            peer.close()
    finally:
        d.send_signal(signal.SIGTERM)
        assert d.wait(60) == 0
        conf.unlink()
