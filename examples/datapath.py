#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The data path through a profile, seen from a remote peer.

A peer process (another context on the same device, standing for a remote
host) connects its own RC QP to a QP the profile declares (PATCH
/v1/profiles/P/qp/Q with a path), then RDMA-writes into, or reads from,
the daemon's MR with the rkey and IOVA the daemon publishes. An attached
client sees the same bytes through its mapping (examples/attach).

  datapath.py write PROFILE QP MR OFFSET TEXT
  datapath.py read  PROFILE QP MR OFFSET LENGTH

Environment: RDMAD_URL (default http://127.0.0.1:8470), RDMAD_TOKEN_FILE
(default /etc/rdmad/token), RDMAD_IBDEV (default rxe0), RDMAD_GID (the
peer's GID, default ::ffff:192.0.2.1).
"""

import json
import os
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer import Peer  # noqa: E402

URL = os.environ.get("RDMAD_URL", "http://127.0.0.1:8470")
TOKEN = os.environ.get("RDMAD_TOKEN_FILE", "/etc/rdmad/token")


def rest(method, path, body=None):
    req = urllib.request.Request(
        URL + path, method=method,
        data=json.dumps(body).encode() if body is not None else None)
    if body is not None:
        token = Path(TOKEN).read_text().splitlines()[0]
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def main(argv):
    if len(argv) != 6 or argv[0] not in ("write", "read"):
        print(__doc__.strip(), file=sys.stderr)
        return 64
    op, profile, qp, mr_name, offset, arg = argv
    mr = rest("GET", f"/v1/profiles/{profile}/mr/{mr_name}")
    peer = Peer(os.environ.get("RDMAD_IBDEV", "rxe0"))
    try:
        q = rest("PATCH", f"/v1/profiles/{profile}/qp/{qp}",
                 {"state": "rts",
                  "path": {"dqpn": peer.qp_num,
                           "dgid": os.environ.get("RDMAD_GID",
                                                  "::ffff:192.0.2.1")}})
        peer.connect(q["qp_num"])
        addr = mr["iova"] + int(offset)
        print(f"peer QP {peer.qp_num} <-> {profile}/{qp} QP {q['qp_num']}; "
              f"mr {mr_name}: rkey {mr['rkey']:#x}, address {addr:#x}")
        if op == "write":
            peer.write(arg.encode(), mr["rkey"], addr)
            print(f"RDMA-wrote {len(arg)} bytes: {arg!r}")
        else:
            data = peer.read(int(arg), mr["rkey"], addr)
            print(f"RDMA-read {len(data)} bytes: {data!r}")
    finally:
        peer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
