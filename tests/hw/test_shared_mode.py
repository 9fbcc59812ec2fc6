# SPDX-License-Identifier: MIT
"""Shared mode on an import-capable device (mlx5): the client imports the
profile's context, PD and MR by handle and uses the daemon's one
registration. Runs only where such a device exists (tests/hw/run says
clearly when it is skipped); rxe refuses import (EOPNOTSUPP)."""

import json
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
from rdmadproto import ATTACH, ATTACHED, DETACH, DETACHED, Client  # noqa

MIB = 1 << 20

pytestmark = needs_mlx5


@pytest.fixture
def daemon(tmp_path):
    run = Path("/run") / f"rdmad-hw-{secrets.token_hex(4)}"
    conf = tmp_path / "rdmad.conf"
    conf.write_text(f"""
daemon = {{ runtime_dir = "{run}";
           http = {{ listen = [ "127.0.0.1:8477" ]; }}; }};
devices = ( {{ name = "d"; match = {{ ibdev = "{DEV}"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  memory = ( {{ name = "m"; size = "16M"; }} );
  pd = ( {{ name = "a"; }} );
  mr = ( {{ name = "r"; pd = "a"; memory = "m";
           access = [ "local_write", "remote_write", "remote_read" ]; }} );
}} );
""")
    p = subprocess.Popen([str(ROOT / "build" / "rdmad"), "-c", str(conf)])
    for _ in range(100):
        try:
            urllib.request.urlopen("http://127.0.0.1:8477/v1/health")
            break
        except OSError:
            time.sleep(0.1)
    yield str(run / "rdmad.sock")
    p.terminate()
    assert p.wait(30) == 0


def get(path):
    with urllib.request.urlopen("http://127.0.0.1:8477" + path) as r:
        return json.loads(r.read())


def test_import_probe_says_capable(daemon):
    prof = get("/v1/profiles/p")
    assert prof["import_capable"] is True


def test_shared_attach_imports_the_same_keys_and_moves_data(daemon):
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD

    daemon_mr = get("/v1/profiles/p/mr/r")
    c = Client(daemon)
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "shared"})
    assert t == ATTACHED, doc
    assert doc["mode"] == "shared"
    ctx = Context(cmd_fd=fds[doc["cmd_fd"]])          # ibv_import_device
    pd = PD(ctx, handle=doc["pd"][0]["handle"])       # ibv_import_pd
    mr = MR(pd, handle=doc["mr"][0]["handle"])        # ibv_import_mr
    assert mr.lkey == daemon_mr["lkey"] and mr.rkey == daemon_mr["rkey"]
    assert mr.length == 16 * MIB
    # An imported MR has the daemon's address, not one mapped here:
    # pyverbs' mr.read() cannot be used. That the MR covers the shared
    # memory is shown by an RDMA write into it (test_python_shared_hw.py).
    sessions = get("/v1/sessions")
    assert sessions[0]["attachments"][0]["mode"] == "shared"
    for o in (mr, pd):
        o.unimport()
    t, _, _ = c.call(DETACH, {"attachment": doc["attachment"]})
    assert t == DETACHED
