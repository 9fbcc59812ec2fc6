# SPDX-License-Identifier: MIT
"""Device memory on hardware (mlx5 with MEMIC; rxe has none): the
daemon allocates it and registers an MR over it (ibv_reg_dm_mr); a
shared-mode client imports the DM by handle (rdmad_dm(): ibv_import_dm)
and writes a pattern into it, another client process imports it too and
reads the same bytes back, and both reach the MR over it (rdmad_mr(),
its lkey the daemon's). tests/integration/helpers/nums_client.c does
the client side."""

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

pytestmark = needs_mlx5

PORT = 8484
HELPER = ROOT / "build" / "tests" / "nums_client"


def get(path):
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{path}",
                                timeout=30) as r:
        return json.load(r)


def client(sock, *args):
    r = subprocess.run([str(HELPER), sock, "p", *args], capture_output=True,
                       text=True, timeout=60,
                       env=dict(os.environ, NUMS_MODE="shared"))
    assert r.returncode == 0, r.stderr
    return {tuple(line.split()[:2]): line.split(" ", 4)
            for line in r.stdout.splitlines()[:-1]}


def test_device_memory_imported_by_clients():
    from pyverbs.device import Context

    with Context(name=DEV) as ctx:
        if ctx.query_device_ex().max_dm_size < 65536:
            pytest.skip(f"{DEV} has no device memory (MEMIC)")
    run = Path("/run") / f"rdmad-hw-{secrets.token_hex(4)}"
    conf = run.with_suffix(".conf")
    conf.write_text(f"""
daemon = {{ admit_root = true; runtime_dir = "{run}"; http = {{ listen = [ "127.0.0.1:{PORT}" ]; }}; }};
devices = ( {{ name = "d"; match = {{ ibdev = "{DEV}"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  pd = ( {{ name = "a"; }} );
  dm = ( {{ name = "dev"; size = "64K"; }} );
  mr = ( {{ name = "dr"; pd = "a"; dm = "dev"; length = "4K";
            access = [ "local_write", "remote_read" ]; }} );
}} );
""")
    d = subprocess.Popen([str(ROOT / "build" / "rdmad"), "-c", str(conf)])
    sock = str(run / "rdmad.sock")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if get("/v1/profiles/p")["state"] == "ready":
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "never ready"
            time.sleep(0.2)
        dm = get("/v1/profiles/p/dm/dev")
        mr = get("/v1/profiles/p/mr/dr")
        assert mr["zero_based"] is True and mr["length"] == 4096, mr
        got = client(sock, "dm:dev", "dmput:dev", "mr:dr")
        assert got[("dm", "dev")][2] == str(dm["handle"] + 1), got
        assert got[("dmput", "dev")][2] == "1", got
        assert got[("mr", "dr")][2] == str(mr["lkey"]), got
        # Another process: the same device memory, the same bytes.
        got = client(sock, "dmget:dev")
        assert got[("dmget", "dev")][2] == "1", got
    finally:
        d.terminate()
        d.wait(60)
