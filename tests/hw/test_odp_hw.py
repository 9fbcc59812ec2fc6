# SPDX-License-Identifier: MIT
"""On-demand paging on hardware (mlx5; rxe has none): an mr declared
odp = true is registered with IBV_ACCESS_ON_DEMAND (the device's
odp_caps, as pyverbs reads them, say it pages on demand), shows
"odp": true, is in the kernel's list with its length, and a Python
client attached to the profile gets a working MR over the same memory
(registered on demand too in local mode; imported in shared mode). On a
device with implicit ODP, an mr with odp alone covers the daemon's whole
address space, and a client gets its own over its own (nums_client)."""

import json
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from hwdev import DEV, needs_mlx5  # noqa: E402
from pyclient_setup import one_mr_conf, rdmad  # noqa: E402

pytestmark = needs_mlx5

PORT = 8483


def get(path):
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{path}",
                                timeout=30) as r:
        return json.load(r)


def test_odp_mr_on_hardware():
    import pyverbs.enums as e
    from pyverbs.device import Context

    with Context(name=DEV) as ctx:
        caps = ctx.query_device_ex().odp_caps.general_caps
    assert caps & e.IBV_ODP_SUPPORT, f"{DEV} has no ODP: not this test's"
    run = Path("/run") / f"rdmad-hw-{secrets.token_hex(4)}"
    conf = run.with_suffix(".conf")
    conf.write_text(one_mr_conf(run, PORT, DEV, "64M", "odp = true;", """,
         { name = "all"; pd = "a"; odp = true;
           access = [ "local_write" ]; }"""))
    r = subprocess.run([str(ROOT / "build" / "rdmad"), "--check", "-c",
                        str(conf)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = subprocess.Popen([str(ROOT / "build" / "rdmad"), "-c", str(conf)])
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
        mr = get("/v1/profiles/p/mr/r")
        assert mr["odp"] is True and mr["length"] == 64 << 20, mr
        if caps & e.IBV_ODP_SUPPORT_IMPLICIT:
            imr = get("/v1/profiles/p/mr/all")
            assert imr["state"] == "ready" and imr["implicit"] is True, imr
            # A client registers its own, over its own address space.
            got = subprocess.run(
                [str(ROOT / "build" / "tests" / "nums_client"),
                 str(run / "rdmad.sock"), "p", "mr:all"],
                capture_output=True, text=True, timeout=60)
            assert got.returncode == 0, got.stderr
            line = got.stdout.splitlines()[0].split()
            assert line[:2] == ["mr", "all"] and line[3] == "0", line
            assert int(line[2]) != imr["lkey"], (line, imr)
        out = json.loads(subprocess.run(
            ["rdma", "-j", "resource", "show", "mr"], capture_output=True,
            text=True, check=True).stdout)
        assert any(m.get("pid") == d.pid and m.get("mrlen") == 64 << 20
                   for m in out), out
        with rdmad.connect(str(run / "rdmad.sock")) as conn:
            with conn.attach("p") as prof:
                cmr = prof.mr("r")
                cmr.write(b"odp!" * 16, 64)
                assert cmr.read(64, 0) == b"odp!" * 16
                assert bytes(prof.mr_map("r")[:4]) == b"odp!"
    finally:
        d.terminate()
        d.wait(60)
