# SPDX-License-Identifier: MIT
"""What the target tests share: tests/integration/test_targets.py (one
guest, the peer in a context of its own) and
tests/twohost/test_target_two_hosts.py (the peer in another guest). The
profile p with a target kv, the target's document, the peer's pattern
written through its first window and read back, and a local client's
view of those bytes through rdmad_mr_map (build/examples/attach)."""

import secrets
import subprocess
from pathlib import Path

ATTACH = Path(__file__).resolve().parents[2] / "build" / "examples" / "attach"

# The ranges kv can expose of the mr pool: its first 64 KiB to read and
# write, and a read-only page at 512 KiB.
READ_WRITE_64K = ('{ mr = "pool"; access = [ "remote_read",\n'
                  '                               "remote_write" ]; '
                  'length = "64K"; }')
READ_ONLY_PAGE = ('{ mr = "pool"; access = [ "remote_read" ];\n'
                  '                               offset = "512K"; '
                  'length = 4096; }')


def target_conf(match, listen, allow, ranges=(READ_WRITE_64K,), max_conn=4,
                token=None):
    """Device d0 (its match keys, e.g. 'ibdev = "rxe0";'), profile p:
    memory m (1 MiB), pd pd, mr pool (mw_bind), CQ tcq, and target kv
    on listen ("ADDR:PORT") exposing ranges, admitting allow (the
    entries of its list, as written)."""
    tok = f'token = "{token}";' if token else ""
    expose = ",\n                            ".join(ranges)
    return f"""
devices = ( {{ name = "d0"; match = {{ {match} }}; }} );
profiles = (
  {{ name = "p"; device = "d0";
    memory = ( {{ name = "m"; size = "1M"; }} );
    pd = ( {{ name = "pd"; }} );
    mr = ( {{ name = "pool"; pd = "pd"; memory = "m";
             access = [ "local_write", "mw_bind" ]; }} );
    cq = ( {{ name = "tcq"; cqe = 64; }} );
    target = ( {{ name = "kv"; listen = "{listen}"; pd = "pd";
                 cq = "tcq";
                 expose = ( {expose} );
                 allow = [ {allow} ]; max_connections = {max_conn}; {tok}
               }} );
  }}
);
"""


def target_doc(d, name="kv"):
    """GET /v1/profiles/p/target/NAME of daemon d (conftest's Daemon)."""
    status, doc = d.get(f"/v1/profiles/p/target/{name}")
    assert status == 200, doc
    return doc


def peer_round_trip(peer, n=64):
    """n random bytes written through peer's first window and read back
    (cmpeer.Peer): the bytes."""
    import pyverbs.enums as e

    pattern = secrets.token_bytes(n)
    assert peer.write(pattern) == e.IBV_WC_SUCCESS
    status, back = peer.read(n)
    assert status == e.IBV_WC_SUCCESS and back == pattern, (status, back)
    return pattern


def attach_sees(sock, data):
    """A client attached to p sees data at the start of pool through
    rdmad_mr_map (attach prints the first 16 bytes of each MR): their
    hex."""
    out = subprocess.run([str(ATTACH), "-s", str(sock), "p"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first = " ".join(f"{b:02x}" for b in data[:16])
    assert f"first bytes: {first}" in out.stdout, out.stdout
    return first
