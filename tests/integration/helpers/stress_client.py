# SPDX-License-Identifier: MIT
"""One process of the stress suite: SESSIONS sessions to rdmad, each
looping attach, write its own pattern into its own page of the shared
memory, check it is still there, detach; for SECONDS seconds.

  stress_client.py SOCKET PROFILE FIRST SESSIONS SECONDS [hold]

Session k (global index FIRST + k) owns page k of the MR named "ring".
While an attachment is held, its page must keep what was written: any
change is counted as "changed". With "hold", each session attaches once
and keeps the attachment until killed (for SIGKILL tests), printing
"held" when all are attached. Prints one JSON line of counts at the end:
cycles, refused (by code), broken (transport errors), changed.
"""

import json
import mmap
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rdmadproto import (ATTACH, ATTACHED, DETACH, DETACHED,  # noqa: E402
                        Client)

PAGE = 4096


def attach(c, profile):
    """(attachment, mmap of the ring MR's memory, offset) or raises."""
    t, doc, fds = c.call(ATTACH, {"profile": profile})
    if t != ATTACHED:
        for fd in fds:
            os.close(fd)
        raise LookupError(doc.get("error", {}).get("code", "?"))
    try:
        mr = [m for m in doc["mr"] if m["name"] == "ring"][0]
        mem = [m for m in doc["memory"] if m["name"] == mr["memory"]][0]
        buf = mmap.mmap(fds[mem["fd"]], mem["size"])
    finally:
        for fd in fds:
            os.close(fd)
    return doc["attachment"], buf, mr["offset"]


def main():
    sock, profile = sys.argv[1], sys.argv[2]
    first, n, seconds = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    hold = len(sys.argv) > 6 and sys.argv[6] == "hold"
    counts = {"cycles": 0, "refused": {}, "broken": 0, "changed": 0}
    clients = [None] * n
    deadline = time.monotonic() + seconds
    held = []
    while time.monotonic() < deadline:
        for k in range(n):
            page = first + k
            try:
                if clients[k] is None:
                    clients[k] = Client(sock, timeout=30)
                att, buf, off = attach(clients[k], profile)
                at = off + page * PAGE
                mine = os.urandom(16) * (PAGE // 16)
                buf[at:at + PAGE] = mine
                if hold:
                    held.append((att, buf, at, mine))
                    continue
                time.sleep(0.001)
                if buf[at:at + PAGE] != mine:
                    counts["changed"] += 1
                buf.close()
                t, _, _ = clients[k].call(DETACH, {"attachment": att})
                if t != DETACHED:
                    counts["broken"] += 1
                counts["cycles"] += 1
            except LookupError as e:
                code = str(e)
                counts["refused"][code] = counts["refused"].get(code, 0) + 1
                time.sleep(0.01)
            except OSError:
                counts["broken"] += 1
                if clients[k] is not None:
                    clients[k].close()
                clients[k] = None
                time.sleep(0.01)
        if hold:
            print("held", flush=True)
            while True:
                for _, buf, at, mine in held:
                    if buf[at:at + PAGE] != mine:
                        counts["changed"] += 1
                time.sleep(0.05)
    for c in clients:
        if c is not None:
            c.close()
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main()
