# SPDX-License-Identifier: MIT
"""The attach protocol's framing, as proto/proto.h fixes it.

These numbers are wire ABI. They are written out here (the package is
pure Python and installed without the C header); tests/integration/
test_python_client.py compares every one with proto/proto.h, so a change
there that is not made here fails the suite.
"""

import struct

#: "RDMD" on the wire (little-endian).
PROTO_MAGIC = 0x444D4452
#: The protocol versions this package speaks.
PROTO_VERSION_MIN = 1
PROTO_VERSION_MAX = 2
#: The first version with messages of several frames.
PROTO_VERSION_FRAMES = 2
#: Header flag: this frame is not its message's last (version >= 2).
PROTO_FLAG_MORE = 0x0001
#: A whole message of several frames: payload bytes and fds, at most.
PROTO_MAX_MESSAGE = 64 * 1024 * 1024
PROTO_MAX_MESSAGE_FDS = 4096
#: Header bytes, and the largest datagram (header and payload).
PROTO_HDR_SIZE = 20
PROTO_MAX_FRAME = 64 * 1024
#: The most fds one datagram carries.
PROTO_MAX_FDS = 32

#: Message types (enum proto_type).
PROTO_HELLO = 1
PROTO_WELCOME = 2
PROTO_ERROR = 3
PROTO_REQUEST = 4
PROTO_REPLY = 5
PROTO_ATTACH = 6
PROTO_ATTACHED = 7
PROTO_DETACH = 8
PROTO_DETACHED = 9
PROTO_REPORT = 10
PROTO_EVENT = 11
PROTO_MADE = 12
PROTO_MAP = 13
PROTO_MAPPED = 14

#: magic, version, type, flags, n_fds, id, length: little-endian.
HEADER = struct.Struct("<IHHHHII")
assert HEADER.size == PROTO_HDR_SIZE

#: Where connect() goes unless told or $RDMAD_SOCKET says otherwise
#: (RDMAD_DEFAULT_SOCKET of client/rdmad.h).
RDMAD_DEFAULT_SOCKET = "/run/rdmad/rdmad.sock"

TYPE_NAMES = {v: k[len("PROTO_"):] for k, v in dict(globals()).items()
              if k.startswith("PROTO_") and k[6:] in (
                  "HELLO", "WELCOME", "ERROR", "REQUEST", "REPLY",
                  "ATTACH", "ATTACHED", "DETACH", "DETACHED", "REPORT",
                  "EVENT", "MADE", "MAP", "MAPPED")}


def type_name(t):
    """The name of message type t ("ATTACHED"), or "UNKNOWN"."""
    return TYPE_NAMES.get(t, "UNKNOWN")
