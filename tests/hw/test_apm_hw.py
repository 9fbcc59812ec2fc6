# SPDX-License-Identifier: MIT
"""Automatic path migration on an InfiniBand port: Linux loads alternate
paths on IB ports only (the core refuses them on RoCE, so rxe cannot run
this: tests/integration/test_qp_endpoint.py covers the refusal there).
Two QPs of the device connected to each other (a loopback through the
port's own LID) with alt_path declared: the alternate path is loaded
with RTR->RTS and armed, `rdmactl qp migrate` moves the QP to it, the
kernel shows MIGRATED, and data still moves. Skipped without an mlx5
device whose port 1 is InfiniBand and active."""

import json
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from hwdev import DEV, needs_mlx5  # noqa: E402

pytestmark = needs_mlx5

PORT = 8481
TOKEN = "rdmad-hw-apm-token-0123456789"


def link_layer(dev, port=1):
    p = Path(f"/sys/class/infiniband/{dev}/ports/{port}/link_layer")
    return p.read_text().strip() if p.exists() else None


def request(method, path, body=None):
    req = urllib.request.Request(
        f"http://127.0.0.1:{PORT}{path}", method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {TOKEN}",
                 "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def kernel_qps():
    out = subprocess.run(["rdma", "-d", "-j", "resource", "show", "qp"],
                         check=True, capture_output=True, text=True).stdout
    return {q["lqpn"]: q for q in json.loads(out or "[]")}


def test_alternate_path_armed_and_migrated():
    if link_layer(DEV) != "InfiniBand":
        pytest.skip(f"{DEV} port 1 is not InfiniBand (APM is IB only)")
    run = Path("/run") / f"rdmad-hw-{secrets.token_hex(4)}"
    token = run.with_suffix(".token")
    token.write_text(TOKEN)
    token.chmod(0o600)
    conf = run.with_suffix(".conf")
    conf.write_text(f"""
daemon = {{ admit_root = true; runtime_dir = "{run}";
  http = {{ listen = [ "127.0.0.1:{PORT}" ]; token_file = "{token}"; }}; }};
devices = ( {{ name = "d"; match = {{ ibdev = "{DEV}"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  memory = ( {{ name = "m"; size = "1M"; }} );
  pd = ( {{ name = "a"; }} );
  mr = ( {{ name = "r"; pd = "a"; memory = "m";
           access = [ "local_write", "remote_write" ]; }} );
  cq = ( {{ name = "c"; cqe = 128; }} );
  qp = ( {{ name = "m0"; pd = "a"; type = "rc"; send_cq = "c";
            recv_cq = "c"; state = "rts"; peer = "m1";
            access = [ "remote_write" ]; alt_path = {{ timeout = 16; }}; }},
         {{ name = "m1"; pd = "a"; type = "rc"; send_cq = "c";
            recv_cq = "c"; state = "rts"; peer = "m0";
            access = [ "remote_write" ]; alt_path = {{ timeout = 17; }}; }} );
}} );
""")
    d = subprocess.Popen([str(ROOT / "build" / "rdmad"), "-c", str(conf)])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, m0 = request("GET", "/v1/profiles/p/qp/m0")
                if status == 200 and m0["state"] != "creating":
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "rdmad never came up"
            time.sleep(0.2)
        assert m0["state"] == "ready", m0
        assert m0["path_mig_state"] in ("rearm", "armed"), m0
        assert m0["alt_path"]["timeout"] == 16, m0
        assert m0["alt_path"]["port_num"] == 1, m0
        k = kernel_qps()[m0["qp_num"]]
        assert k["path-mig-state"] in ("REARM", "ARMED"), k

        # The device arms what was loaded with REARM.
        deadline = time.monotonic() + 10
        while request("GET", "/v1/profiles/p/qp/m0")[1][
                "path_mig_state"] != "armed":
            assert time.monotonic() < deadline, "never armed"
            time.sleep(0.1)
        r = subprocess.run([str(ROOT / "build" / "rdmactl"), "--socket",
                            str(run / "rdmad.sock"), "qp", "migrate", "p",
                            "m0"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        status, after = request("GET", "/v1/profiles/p/qp/m0")
        assert after["path_mig_state"] == "migrated", after
        assert after["qp_num"] == m0["qp_num"]
        assert kernel_qps()[m0["qp_num"]]["path-mig-state"] == "MIGRATED"
        status, rep = request("POST", "/v1/profiles/p/selftest",
                              {"a": "m0", "b": "m1", "mr": "r"})
        assert status == 200 and rep["ok"] is True, rep
        # Migrated: nothing armed any more.
        status, err = request("POST", "/v1/profiles/p/qp/m0/migrate", {})
        assert status == 409 and err["error"]["code"] == "conflict", err
    finally:
        d.send_signal(signal.SIGTERM)
        assert d.wait(60) == 0
        conf.unlink()
        token.unlink()
