# SPDX-License-Identifier: MIT
"""XRC by number on hardware (mlx5; rxe has no XRC): a client attached
to a profile with an XRC domain (shared by its file), an XRC SRQ and an
XRC target QP opens the daemon's target QP in its own process
(rdmad_open_qp(): ibv_open_qp in the domain rdmad_xrcd() opened) and
reads the SRQ's srq_num; both numbers are the daemon's
(tests/integration/helpers/nums_client.c prints them)."""

import json
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from hwdev import DEV, needs_mlx5  # noqa: E402

pytestmark = needs_mlx5

PORT = 8482


def get(path):
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{path}",
                                timeout=30) as r:
        return json.load(r)


def test_xrc_target_qp_and_srq_by_number():
    run = Path("/run") / f"rdmad-hw-{secrets.token_hex(4)}"
    conf = run.with_suffix(".conf")
    conf.write_text(f"""
daemon = {{ admit_root = true; runtime_dir = "{run}"; http = {{ listen = [ "127.0.0.1:{PORT}" ]; }}; }};
devices = ( {{ name = "d"; match = {{ ibdev = "{DEV}"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  xrcd = ( {{ name = "x"; file = "{run}.xrcd"; }} );
  pd = ( {{ name = "a"; }} );
  cq = ( {{ name = "c"; }} );
  srq = ( {{ name = "xs"; pd = "a"; type = "xrc"; xrcd = "x"; cq = "c"; }} );
  qp = ( {{ name = "tgt"; type = "xrc_recv"; xrcd = "x"; }} );
}} );
""")
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
        tgt = get("/v1/profiles/p/qp/tgt")
        srq = get("/v1/profiles/p/srq/xs")
        r = subprocess.run([str(ROOT / "build" / "tests" / "nums_client"),
                            str(run / "rdmad.sock"), "p", "open:tgt",
                            "qp:tgt", "srq:xs"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == f"open tgt {tgt['qp_num']} 0 ", lines
        assert lines[1] == f"qp tgt {tgt['qp_num']} 0 ", lines
        assert lines[2].startswith("srq xs ") and \
            lines[2].split()[3] == "0", lines
        if "srq_num" in srq:
            assert int(lines[2].split()[2]) == srq["srq_num"], (lines, srq)
        assert lines[-1] == "detached 0"
    finally:
        d.send_signal(signal.SIGTERM)
        assert d.wait(60) == 0
        conf.unlink()
