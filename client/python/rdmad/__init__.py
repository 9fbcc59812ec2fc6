# SPDX-License-Identifier: MIT
"""rdmad's Python client: attach to a profile, get pyverbs objects.

    import rdmad

    with rdmad.connect() as conn, conn.attach("ingest") as prof:
        mr = prof.mr("ring")          # a pyverbs MR
        buf = prof.mr_map("ring")     # its bytes, a memoryview
        qp = QP(prof.pd("main"), ...) # on prof.context, prof.port

The package speaks the attach protocol of proto/PROTOCOL.md itself over
the daemon's unix socket (no compiled code of its own); the verbs
objects are Debian's python3-pyverbs. In shared mode the context, PDs
and MRs are the daemon's, imported (ibv_import_device, _pd, _mr); in
local mode (devices that cannot import, such as Debian's rxe; mlx5 and
rxe with rdmad's test provider tests/rxe-import can) this process opens
the device and registers its own MRs over the same memory.

Every failure is an rdmad.Error carrying a code: the daemon's own
("not_found", "forbidden", "not_ready", ...) or one of this package's
("daemon_gone", "timeout", "protocol_error", "setup_failed",
"not_connected").

Constants: DEFAULT_SOCKET, the socket connect() uses when neither its
argument nor $RDMAD_SOCKET names one; MODE_SHARED and MODE_LOCAL, the
values of Profile.mode; TIMEOUT, the seconds an answer is awaited by
default. The protocol's own numbers are in rdmad.proto.
"""

import ctypes
import errno
import json
import math
import mmap
import os
import select
import resource
import socket
import stat
import threading
import time

from . import attached, mrtable, proto

__all__ = ["Error", "Connection", "Profile", "Group", "connect",
           "DEFAULT_SOCKET", "MODE_SHARED", "MODE_LOCAL"]

#: Where connect() goes when neither its path nor $RDMAD_SOCKET says.
DEFAULT_SOCKET = proto.RDMAD_DEFAULT_SOCKET
#: Profile.mode values: the objects are the daemon's (imported) or this
#: process's own, over the same memory.
MODE_SHARED = "shared"
MODE_LOCAL = "local"

#: How long an answer is awaited, in seconds; a waiting attach adds its
#: wait (librdmad's 30 s).
TIMEOUT = 30.0

# The access names of the configuration and their ibv_access_flags bits
# (<infiniband/verbs.h>, stable ABI).
_ACCESS = {
    "local_write": 1 << 0,
    "remote_write": 1 << 1,
    "remote_read": 1 << 2,
    "remote_atomic": 1 << 3,
    "mw_bind": 1 << 4,
    "relaxed_ordering": 1 << 20,
}
_ACCESS_ON_DEMAND = 1 << 6  # IBV_ACCESS_ON_DEMAND: an mr with odp = true


#: The most memories a profile may have for their fds to come with a
#: shared attach (more: each memory's fd is asked for, MAP, when first
#: mapped), as librdmad's: $RDMAD_MEMORY_FDS if it is a number.
MEMORY_FDS = 128


def _memory_fds_max():
    """$RDMAD_MEMORY_FDS or MEMORY_FDS, at most a quarter of what this
    process may open (RLIMIT_NOFILE): the fds never fail an attach that
    would work without them."""
    try:
        v = int(os.environ.get("RDMAD_MEMORY_FDS", ""), 10)
        if not 0 <= v <= proto.PROTO_MAX_MESSAGE_FDS:
            v = MEMORY_FDS
    except ValueError:
        v = MEMORY_FDS
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY:
        v = min(v, soft // 4)
    return v


#: Objects per MADE message (the daemon takes at most 1024 in one).
MADE_PER_MESSAGE = 1024
# MRs per REPORT: a few hundred fit one frame (about 100 bytes each).
REPORT_MRS_PER_PART = 256


class Error(Exception):
    """A failure of rdmad or of this client.

    code: the daemon's error code, as REST gives it ("not_found",
    "forbidden", "not_ready", "not_supported", "too_many_sessions", ...),
    or this package's: "daemon_gone" (the daemon closed the connection:
    it stopped or restarted; connect again), "timeout" (no answer in
    time), "protocol_error" (an answer that breaks the protocol),
    "setup_failed" (this process could not map, open, import or
    register what the daemon gave; errno says why when known), "stale"
    (an MR a reload removed after the attach, before it was first
    imported, or one the kernel no longer has under its handle: errno
    ESTALE; attach again).
    message: a sentence for people. status: the HTTP-style status of a
    refused request(), else None. document: the refusal's JSON document,
    else None. errno: an errno number when one is known, else None.
    """

    def __init__(self, code, message, status=None, document=None,
                 errno=None):
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.status = status
        self.document = document
        self.errno = errno


def _errno_of(e):
    """The errno of a pyverbs error (PyverbsRDMAError.error_code), or
    None."""
    code = getattr(e, "error_code", None)
    return code if isinstance(code, int) and code > 0 else None


def _close_fds(fds):
    for fd in fds:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


def connect(path=None, timeout=TIMEOUT):
    """Connect to rdmad and say HELLO; returns a Connection.

    path: the daemon's socket; None means $RDMAD_SOCKET when set and
    not empty, else DEFAULT_SOCKET (/run/rdmad/rdmad.sock), as
    librdmad's rdmad_connect(NULL). timeout: seconds an answer is
    awaited. Raises Error ("daemon_gone" when nothing listens there,
    "forbidden" when this user may not connect, the daemon's code when
    it refuses the session).
    """
    return Connection(path, timeout)


# Resuming (Connection.next_event): the first try after RESUME_FIRST
# seconds, each next one twice as late, at most RESUME_MAX apart; given
# up after RESUME_LIMIT. A resumed ATTACH may wait that long for its
# profile.
RESUME_FIRST = 0.1
RESUME_MAX = 5.0
RESUME_LIMIT = 120.0
RESUME_ATTACH_WAIT = 30.0


class Connection:
    """A session with rdmad over its control socket.

    Made by connect(); a context manager that close()s on exit. Use it
    from one thread at a time (a lock guards each exchange, so misuse
    cannot interleave messages, but answers are still awaited in turn).
    EVENT messages the daemon sends unasked (device_removed,
    profile_removed, ...) are kept, in order, in the list `events`.
    """

    def __init__(self, path=None, timeout=TIMEOUT):
        if path is None:
            path = os.environ.get("RDMAD_SOCKET") or DEFAULT_SOCKET
        self.path = str(path)
        self.timeout = timeout
        self.events = []
        self.version = None
        self._next_id = 0
        # Reentrant: resuming (in next_event) exchanges messages.
        self._lock = threading.RLock()
        self._broken = None  # why no more requests may be sent
        self._gone_flag = False  # the daemon closed the connection
        self._profiles = []
        self._resume_since = None  # resuming since (time.monotonic())
        self._resume_next = 0.0
        self._resume_backoff = RESUME_FIRST
        self._open()

    def _open(self):
        """Connect to self.path and say HELLO (its answer read)."""
        self._sock = socket.socket(socket.AF_UNIX,
                                   socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        timeout = self.timeout
        try:
            self._sock.settimeout(timeout)
            try:
                self._sock.connect(self.path)
            except (FileNotFoundError, ConnectionRefusedError) as e:
                raise Error("daemon_gone",
                            f"cannot connect to rdmad at {self.path}: "
                            f"{e.strerror} (is rdmad running?)",
                            errno=e.errno) from None
            except PermissionError as e:
                raise Error("forbidden",
                            f"cannot connect to rdmad at {self.path}: "
                            f"{e.strerror} (is this user in rdmad's "
                            f"control group?)", errno=e.errno) from None
            except OSError as e:
                raise Error("daemon_gone",
                            f"cannot connect to rdmad at {self.path}: "
                            f"{e.strerror or e}", errno=e.errno) from None
            t, doc, _ = self._exchange(
                proto.PROTO_HELLO,
                {"versions": [proto.PROTO_VERSION_MIN,
                              proto.PROTO_VERSION_MAX]})
            if t != proto.PROTO_WELCOME:
                self._protocol(f"rdmad answered HELLO with "
                               f"{proto.type_name(t)}")
            v = doc.get("version")
            if not isinstance(v, int) or not (
                    proto.PROTO_VERSION_MIN <= v <= proto.PROTO_VERSION_MAX):
                self._protocol(f"rdmad chose protocol version {v!r}; this "
                               f"client speaks {proto.PROTO_VERSION_MIN} to "
                               f"{proto.PROTO_VERSION_MAX}")
            self.version = v
        except BaseException:
            self._sock.close()
            raise

    # ---- framing ----

    def _protocol(self, message):
        self._broken = message
        raise Error("protocol_error", message)

    def _send(self, mtype, payload):
        if self._sock.fileno() < 0:
            raise Error("not_connected", "the connection is closed")
        if self._broken:
            raise Error("not_connected",
                        f"the connection to rdmad failed earlier "
                        f"({self._broken}): connect again")
        self._next_id = self._next_id % 0xFFFFFFFF + 1
        body = json.dumps(payload, separators=(",", ":")).encode()
        head = proto.HEADER.pack(proto.PROTO_MAGIC, proto.PROTO_VERSION_MIN,
                                 mtype, 0, 0, self._next_id, len(body))
        try:
            self._sock.send(head + body)
        except (BrokenPipeError, ConnectionResetError):
            self._gone(proto.type_name(mtype))
        except socket.timeout:
            self._broken = "a send timed out"
            raise Error("timeout", "rdmad did not take a request in time")
        return self._next_id

    def _gone(self, what):
        self._broken = "rdmad closed the connection"
        self._gone_flag = True
        raise Error("daemon_gone",
                    f"rdmad went away (stopped or restarted) before it "
                    f"answered {what}; connect again",
                    errno=errno.ECONNRESET)

    def _recv_frame(self, what):
        """One frame: (data, fds); the fds are the caller's. Every fd
        received is closed on any failure."""
        cmsg_space = socket.CMSG_SPACE(proto.PROTO_MAX_FDS *
                                       ctypes.sizeof(ctypes.c_int))
        try:
            data, anc, flags, _ = self._sock.recvmsg(
                proto.PROTO_MAX_FRAME + 1, cmsg_space,
                socket.MSG_CMSG_CLOEXEC)
        except ConnectionResetError:
            self._gone(what)
        except socket.timeout:
            self._broken = f"no answer to {what} in time"
            raise Error("timeout", f"rdmad did not answer {what} within "
                        f"{self._sock.gettimeout()} s",
                        errno=errno.ETIMEDOUT) from None
        fds = []
        other = False
        for level, ctype, cdata in anc:
            if level == socket.SOL_SOCKET and ctype == socket.SCM_RIGHTS:
                n = len(cdata) // ctypes.sizeof(ctypes.c_int)
                fds.extend(memoryview(cdata)[:n * 4].cast("i"))
            else:
                other = True
        try:
            if not data and not fds:
                self._gone(what)
            if flags & socket.MSG_CTRUNC and not other:
                # The kernel cuts the fds short when this process may
                # open no more: a big profile's memories can be more.
                soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
                self._protocol(f"rdmad's answer to {what} carried more "
                               f"fds than this process may still open: "
                               f"raise RLIMIT_NOFILE (the soft limit is "
                               f"{soft})")
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or other:
                self._protocol(f"rdmad's answer to {what} was truncated "
                               f"or carried unexpected control data")
            if len(data) < proto.PROTO_HDR_SIZE:
                self._protocol(f"rdmad's answer to {what} is shorter "
                               f"than a header")
        except BaseException:
            _close_fds(fds)
            raise
        return data, fds

    def _recv(self, what):
        """One message, of one frame or several (PROTO_FLAG_MORE):
        (type, id, payload, fds); the fds are the caller's. Every fd
        received is closed on any failure."""
        data, fds = self._recv_frame(what)
        try:
            magic, version, mtype, mflags, n_fds, mid, length = \
                proto.HEADER.unpack_from(data)
            more = mflags & proto.PROTO_FLAG_MORE and \
                version >= proto.PROTO_VERSION_FRAMES
            if magic != proto.PROTO_MAGIC or \
                    length != len(data) - proto.PROTO_HDR_SIZE or \
                    n_fds != len(fds) or (mflags and not more) or \
                    mflags & ~proto.PROTO_FLAG_MORE:
                self._protocol(f"bad frame from rdmad answering {what}")
            # Single frames may be framed as version 1 in any session.
            if self.version is not None and \
                    not proto.PROTO_VERSION_MIN <= version <= self.version:
                self._protocol(f"rdmad framed its answer to {what} as "
                               f"version {version}")
            body = [data[proto.PROTO_HDR_SIZE:]]
            size = len(body[0])
            while more:
                data, more_fds = self._recv_frame(what)
                fds.extend(more_fds)
                h = proto.HEADER.unpack_from(data)
                more = h[3] & proto.PROTO_FLAG_MORE
                size += len(data) - proto.PROTO_HDR_SIZE
                if h[0] != proto.PROTO_MAGIC or h[1] != version or \
                        h[2] != mtype or h[5] != mid or \
                        h[6] != len(data) - proto.PROTO_HDR_SIZE or \
                        h[4] != len(more_fds) or \
                        h[3] & ~proto.PROTO_FLAG_MORE or \
                        size > proto.PROTO_MAX_MESSAGE or \
                        len(fds) > proto.PROTO_MAX_MESSAGE_FDS:
                    self._protocol(f"bad continuation frame from rdmad "
                                   f"answering {what}")
                body.append(data[proto.PROTO_HDR_SIZE:])
            if fds and mtype not in (proto.PROTO_ATTACHED,
                                     proto.PROTO_MAPPED):
                self._protocol(f"rdmad sent fds with "
                               f"{proto.type_name(mtype)}")
            try:
                doc = json.loads(b"".join(body))
            except ValueError:
                doc = None
            if not isinstance(doc, dict):
                self._protocol(f"rdmad's answer to {what} is not a JSON "
                               f"object")
        except BaseException:
            _close_fds(fds)
            raise
        return mtype, mid, doc, fds

    def _await(self, mid, what, timeout):
        """Read up to the answer to request mid, setting EVENTs aside;
        an ERROR answer is raised as Error."""
        self._sock.settimeout(timeout)
        while True:
            mtype, rid, doc, fds = self._recv(what)
            if mtype == proto.PROTO_EVENT:
                self._heard(doc)
                self.events.append(doc)
                continue
            if mtype == proto.PROTO_ERROR:
                err = doc.get("error") or {}
                code = err.get("code") or "error"
                msg = err.get("message") or f"rdmad refused {what}"
                if rid == 0:  # the daemon is ending the session
                    self._broken = msg
                if rid in (0, mid):
                    raise Error(code, msg)
            if rid != mid:
                _close_fds(fds)
                self._protocol(f"rdmad answered request {rid} while "
                               f"{mid} was expected")
            return mtype, doc, fds

    def _exchange(self, mtype, payload, timeout=None):
        with self._lock:
            mid = self._send(mtype, payload)
            return self._await(mid, proto.type_name(mtype),
                               self.timeout if timeout is None else timeout)

    # ---- public ----

    def fileno(self):
        """The socket's fd, to poll for the daemon's EVENTs; read
        nothing from it yourself."""
        return self._sock.fileno()

    def request(self, method, path, body=None):
        """A control request, as REST takes it; returns the reply
        document (the same JSON REST returns).

        method: "GET", "POST", "PATCH", "DELETE"; path: "/v1/...";
        body: a dict or None. A refusal (status >= 400) raises Error
        with the document's code and message, .status and .document.
        """
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError("path must start with /v1/")
        req = {"method": method, "path": path}
        if body is not None:
            if not isinstance(body, dict):
                raise ValueError("body must be a dict (a JSON object)")
            req["body"] = body
        t, doc, _ = self._exchange(proto.PROTO_REQUEST, req)
        status = doc.get("status")
        if t != proto.PROTO_REPLY or not isinstance(status, int):
            self._protocol(f"rdmad's answer to {method} {path} is not a "
                           f"REPLY with a status")
        reply = doc.get("body")
        if status >= 400:
            err = reply.get("error", {}) if isinstance(reply, dict) else {}
            raise Error(err.get("code") or str(status),
                        err.get("message") or f"{method} {path}: "
                        f"status {status}", status=status, document=reply)
        return reply

    def attach(self, profile=None, wait=None, mode="auto",
               map_memory=False):
        """Attach to profile; returns a Profile (a context manager that
        detaches on exit). profile None: $RDMAD_PROFILE (what a container
        given a profile through CDI has), as librdmad does.

        wait: what to do when the profile is not ready yet (its objects
        are still being created): None or 0 fail at once with code
        "not_ready"; a number of seconds to wait for it (then
        "not_ready" saying it timed out, like librdmad's
        RDMAD_ATTACH_WAIT); a negative number or math.inf, as long as it
        takes. mode: "auto" (the daemon picks: shared where the device
        can import), "shared" or "local". map_memory: in shared mode,
        every memory's fd comes with the answer and is mapped before
        attach() returns (librdmad's RDMAD_ATTACH_MAP), so that no later
        mr_map() or mr_addr() asks the daemon for one; without it, the
        fds come unmapped when the profile has at most MEMORY_FDS
        memories ($RDMAD_MEMORY_FDS), and otherwise none does and the
        first use of each memory asks (MAP). Local mode maps every memory
        at the attach anyway.

        Either it succeeds or it leaves nothing behind: no fd, mapping,
        verbs object or lease. Raises Error: "not_found" no such profile,
        "forbidden" this user is not allowed, "not_ready",
        "not_supported" (shared mode asked where import is not possible),
        "daemon_gone", "setup_failed", ...
        """
        if mode not in ("auto", MODE_SHARED, MODE_LOCAL):
            raise ValueError("mode must be 'auto', 'shared' or 'local'")
        if profile is None:
            profile = os.environ.get("RDMAD_PROFILE")
            if not profile:
                raise ValueError("no profile given and RDMAD_PROFILE is "
                                 "not set")
        # In shared mode the MRs come as a table read when asked for
        # (PROTOCOL.md, mr_table), not as a list in the message, and
        # the memories' fds with it if there are few, else each is
        # asked for (MAP) when it is first mapped; with map_memory,
        # every fd comes with the answer.
        req = {"profile": profile, "mode": mode, "mr_table": True,
               "memory_fds": True if map_memory else _memory_fds_max()}
        timeout = self.timeout
        if wait is not None and wait != 0:
            if wait < 0 or math.isinf(wait):
                req["wait_ms"] = -1
                timeout = None
            else:
                req["wait_ms"] = max(1, int(wait * 1000))
                timeout += wait
        t, doc, fds = self._exchange(proto.PROTO_ATTACH, req, timeout)
        if t != proto.PROTO_ATTACHED:
            _close_fds(fds)
            self._protocol(f"rdmad answered ATTACH with "
                           f"{proto.type_name(t)}")
        p = Profile(self, profile, doc, fds)
        try:
            p._setup(mode)
            if map_memory:
                p._map_all()
        except BaseException:
            p._abort()
            raise
        self._profiles.append(p)
        return p

    def subscribe(self):
        """Subscribe this session to the daemon's event stream (REQUEST
        GET /v1/events); returns the seq of the last event published
        before it. Read the events with next_event()."""
        reply = self.request("GET", "/v1/events")
        return reply.get("last_seq") if isinstance(reply, dict) else None

    def next_event(self, timeout=None):
        """The next EVENT the daemon sent (a dict, the JSON of GET
        /v1/events; events set aside while awaiting an answer first),
        or None when none came within timeout seconds (None: wait for
        one). {"event": "overflow", ...} ends a subscription. Raises
        Error("daemon_gone") when the daemon closed the connection.

        When the daemon goes away (a stop, a restart, a crash) while
        shared attachments are granted, the connection resumes by
        itself, as librdmad's does: here, with backoff (0.1 s, then
        twice as long after each failed try, at most 5 s apart), it
        connects again and sends ATTACH with "resume" for each of them,
        whose leases the new run kept for this process all along; each
        one taken back is the event {"event": "resumed", "profile":
        name}, and the Profile goes on as before (detach() works). A
        try may wait for the daemon's answers. One not taken back, or a
        daemon not back within two minutes, raises "daemon_gone" as
        before. RDMAD_RESUME=0 in the environment turns this off."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                if self.events:
                    return self.events.pop(0)
                if self._resume_since is not None:
                    self._resume_try()
                    if self.events:
                        continue
                    if self._resume_since is not None:
                        left = (None if end is None
                                else end - time.monotonic())
                        if left is not None and left <= 0:
                            return None
                        wait = self._resume_next - time.monotonic()
                        time.sleep(max(0.0, min(wait, left)
                                       if left is not None else wait))
                        continue
                if self._broken:
                    raise Error("daemon_gone" if self._gone_flag
                                else "not_connected",
                                f"the connection to rdmad failed earlier "
                                f"({self._broken}): connect again")
                left = None if end is None else max(0.0,
                                                    end - time.monotonic())
                r, _, _ = select.select([self._sock], [], [], left)
                if not r:
                    return None
                try:
                    mtype, _, doc, fds = self._recv("an event")
                except Error as e:
                    if e.code == "daemon_gone" and self._resume_start():
                        continue
                    raise
                _close_fds(fds)
                if mtype != proto.PROTO_EVENT:
                    self._protocol(f"rdmad sent {proto.type_name(mtype)} "
                                   f"unasked")
                self._heard(doc)
                return doc

    def _heard(self, doc):
        """An EVENT read: an MR a reload removed that an attachment has
        not imported yet is not imported any more (Profile.mr())."""
        if not isinstance(doc, dict) or \
                doc.get("event") != "object_draining" or \
                doc.get("kind") != "mr":
            return
        for p in self._profiles:
            if p.attachment == doc.get("attachment"):
                p._drained(doc.get("name"))

    # ---- resuming after the daemon went ----

    def _shared_granted(self):
        return [p for p in self._profiles
                if p._granted and p.mode == MODE_SHARED]

    def _resume_start(self):
        if os.environ.get("RDMAD_RESUME") == "0" or \
                not self._shared_granted():
            return False
        self._resume_since = time.monotonic()
        self._resume_backoff = RESUME_FIRST
        self._resume_next = self._resume_since + RESUME_FIRST
        return True

    def _resume_try(self):
        now = time.monotonic()
        if now < self._resume_next:
            return
        old = self._sock
        # A new connection: nothing of the old one's failure holds it.
        self._broken = None
        self._gone_flag = False
        try:
            self._open()
        except Error:
            # The old one stays in place (its fd number with it).
            self._sock = old
            self._broken = "rdmad closed the connection"
            self._gone_flag = True
            if now - self._resume_since >= RESUME_LIMIT:
                self._resume_since = None
                for p in self._profiles:
                    p._granted = False
                return
            self._resume_backoff = min(self._resume_backoff * 2,
                                       RESUME_MAX)
            self._resume_next = now + self._resume_backoff
            return
        # The new connection on the old one's fd number: fileno() stays
        # what a program polls.
        try:
            os.dup2(self._sock.fileno(), old.fileno())
            self._sock.close()
            self._sock = old
        except OSError:
            old.close()
        self._resume_since = None
        for p in self._shared_granted():
            try:
                t, doc, fds = self._exchange(
                    proto.PROTO_ATTACH,
                    {"profile": p.name, "mode": MODE_SHARED,
                     "resume": True, "memory_fds": False,
                     "wait_ms": int(RESUME_ATTACH_WAIT * 1000)},
                    self.timeout + RESUME_ATTACH_WAIT)
                _close_fds(fds)
                aid = doc.get("attachment") if t == proto.PROTO_ATTACHED \
                    else None
            except Error as e:
                # The daemon went again meanwhile: resume again later,
                # nothing given up.
                if e.code == "daemon_gone" and self._resume_start():
                    return
                aid = None
            if isinstance(aid, int) and doc.get("mode") == MODE_SHARED:
                p.attachment = aid
                self.events.append({"event": "resumed", "profile": p.name,
                                    "attachment": aid})
            else:
                p._granted = False
                self.events.append({"event": "daemon_gone",
                                    "profile": p.name})

    def close(self):
        """Detach every profile still attached, then close the
        connection. Safe to call twice."""
        for p in list(self._profiles):
            try:
                p.detach()
            except Error:
                pass
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class _MemoryMap:
    """One memory of the profile, mapped here when first used (shared
    mode: an attach does not grow with the profile's memories): the
    mmap and its address. ask: where no fd came with ATTACHED, a
    callable that gets it from the daemon (MAP)."""

    def __init__(self, name, fd, size, ask=None):
        self.name = name
        self.size = size
        self._fd = fd  # ours until mapped
        self._ask = ask
        self._map = None
        self._addr = 0
        self.views = []

    def _mapped(self):
        if self._map is not None:
            return self._map
        if self._fd < 0 and self._ask is not None:
            self._fd = self._ask(self.name, self.size)
            self._ask = None
        if self._fd < 0:
            raise Error("setup_failed", f"memory '{self.name}' is closed")
        try:
            st = os.fstat(self._fd)
            # Mapping past the end of a file would SIGBUS on first
            # touch.
            if stat.S_ISREG(st.st_mode) and st.st_size < self.size:
                raise Error("protocol_error",
                            f"memory '{self.name}' has {st.st_size} "
                            f"bytes, rdmad said {self.size}")
            m = mmap.mmap(self._fd, self.size, mmap.MAP_SHARED,
                          mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            raise Error("setup_failed", f"cannot map memory '{self.name}' "
                        f"({self.size} bytes): {e.strerror or e}",
                        errno=e.errno) from None
        anchor = ctypes.c_char.from_buffer(m)
        self._addr = ctypes.addressof(anchor)
        del anchor  # the address stays valid while the map is open
        self._map = m
        os.close(self._fd)  # the mapping keeps the memory alive
        self._fd = -1
        return m

    @property
    def map(self):
        return self._mapped()

    @property
    def addr(self):
        self._mapped()
        return self._addr

    def view(self, offset, length):
        v = memoryview(self._mapped())[offset:offset + length]
        self.views.append(v)
        return v

    def close(self):
        for v in self.views:
            try:
                v.release()
            except (BufferError, ValueError):
                pass
        self.views = []
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._map is None:
            return
        try:
            self._map.close()
        except BufferError:
            # Something still exports its bytes (a numpy array made
            # from a view): the mapping goes when that does.
            pass


class Profile:
    """One attachment to a profile and the pyverbs objects it gives.

    Made by Connection.attach(); a context manager that detach()es on
    exit. Attributes: name, attachment (the daemon's id), mode
    (MODE_SHARED or MODE_LOCAL), ibdev, port, gid_index (to build QPs
    and address handles), import_capable, context (a pyverbs Context:
    imported from the daemon's cmd_fd in shared mode, opened by name in
    local mode), document (the ATTACHED JSON as the daemon sent it).
    """

    def __init__(self, conn, name, doc, fds):
        self._conn = conn
        self.name = name
        self.document = doc
        self._fds = list(fds)  # received, not yet owned by anything
        self._maps = {}
        self._pds = {}
        self._mrs = {}  # name -> (pyverbs MR, description)
        # Shared mode: what the program may ask for, imported when it
        # first does (the "mr" list's, or the MR table's as read).
        self._descs = {}
        self._table = None
        self._mem_order = []
        self._stale = set()  # removed by a reload before imported
        self.context = None
        self.attachment = doc.get("attachment")
        self._granted = isinstance(self.attachment, int)
        self.mode = doc.get("mode")
        self.ibdev = doc.get("ibdev")
        self.port = doc.get("port")
        self.gid_index = doc.get("gid_index")
        self.import_capable = doc.get("import_capable")

    # ---- setting up ----

    def _malformed(self, why):
        raise Error("protocol_error",
                    f"rdmad's ATTACHED for profile '{self.name}' is "
                    f"malformed: {why}")

    def _take_fd(self, index, what):
        if not isinstance(index, int) or not 0 <= index < len(self._fds):
            self._malformed(f"{what}: fd {index!r} of {len(self._fds)}")
        fd = self._fds[index]
        if fd < 0:
            self._malformed(f"{what}: fd {index} given twice")
        self._fds[index] = -1
        return fd

    def _ask_memory(self, name, size):
        """The fd of memory name, from the daemon (MAP), checked: that
        memory, of the size announced, one fd."""
        if not self._granted:
            raise Error("setup_failed", f"memory '{name}' of profile "
                        f"'{self.name}' is not mapped yet and the "
                        f"attachment is gone: attach again")
        t, doc, fds = self._conn._exchange(
            proto.PROTO_MAP, {"attachment": self.attachment,
                              "memory": name})
        fd = doc.get("fd")
        if t != proto.PROTO_MAPPED or len(fds) != 1 or fd != 0 or \
                doc.get("memory") != name or doc.get("size") != size or \
                isinstance(doc.get("size"), bool):
            _close_fds(fds)
            self._conn._protocol(f"rdmad's MAPPED for memory '{name}' of "
                                 f"profile '{self.name}' is malformed")
        return fds[0]

    def _map_all(self):
        """Every memory mapped now (attach(map_memory=True))."""
        for m in self._maps.values():
            m._mapped()

    def _setup(self, asked):
        doc = self.document
        if not self._granted:
            self._malformed("no attachment id")
        try:  # every check of PROTOCOL.md's tables, before any use
            attached.decode(doc, len(self._fds))
        except attached.Malformed as e:
            self._malformed(str(e))
        if self.mode not in (MODE_SHARED, MODE_LOCAL):
            self._malformed(f"mode {self.mode!r}")
        if asked != "auto" and self.mode != asked:
            raise Error("protocol_error",
                        f"rdmad attached profile '{self.name}' in "
                        f"{self.mode} mode, not in the mode asked")
        if not isinstance(self.ibdev, str) or not self.ibdev:
            self._malformed("no ibdev")
        if not isinstance(self.port, int) or not 1 <= self.port <= 255:
            self._malformed("no port")
        if not isinstance(self.gid_index, int) or self.gid_index < 0:
            self._malformed("no gid_index")
        cmd_fd = -1
        if self.mode == MODE_SHARED:
            cmd_fd = self._take_fd(doc.get("cmd_fd"), "cmd_fd")
            self._fds.append(cmd_fd)  # closed with the rest on failure
        for m in doc.get("memory") or []:
            name, size = m.get("name"), m.get("size")
            if not isinstance(name, str) or name in self._maps or \
                    not isinstance(size, int) or size <= 0:
                self._malformed(f"memory {m!r}")
            # Mapped when first used (closed with the rest on failure);
            # without an fd here, its fd is asked for then.
            if "fd" in m:
                self._maps[name] = _MemoryMap(
                    name, self._take_fd(m.get("fd"), name), size)
            else:
                self._maps[name] = _MemoryMap(name, -1, size,
                                              self._ask_memory)
        self._mem_order = [m["name"] for m in doc.get("memory") or []]
        t = doc.get("mr_table")
        if t is not None:
            fd = self._take_fd(t.get("fd"), "mr_table")
            try:
                self._table = mrtable.Table(fd, t.get("size"),
                                            t.get("count"))
            except (mrtable.BadTable, OSError, ValueError) as e:
                self._malformed(f"its MR table: {e}")
            finally:
                os.close(fd)
        descs = self._parse_mrs(doc)
        # Only the fds used are needed: the rest (XRC domains' files,
        # which pyverbs cannot open over a file) are closed now.
        _close_fds([fd for fd in self._fds if fd != cmd_fd])
        self._fds = [cmd_fd] if cmd_fd >= 0 else []
        try:
            if self.mode == MODE_SHARED:
                self._setup_shared(cmd_fd, descs)
            else:
                self._setup_local(descs)
        except Error:
            raise
        except Exception as e:  # pyverbs' errors
            raise Error("setup_failed",
                        f"profile '{self.name}' on {self.ibdev}: {e}",
                        errno=_errno_of(e)) from None

    def _parse_mrs(self, doc):
        pds = doc.get("pd") or []
        names = [p.get("name") for p in pds]
        for p in pds:
            if not isinstance(p.get("name"), str) or \
                    not isinstance(p.get("handle"), int) or \
                    names.count(p["name"]) > 1:
                self._malformed(f"pd {p!r}")
        descs = []
        seen = set()
        for m in doc.get("mr") or []:
            name = m.get("name")
            mem = self._maps.get(m.get("memory"))
            off, length = m.get("offset"), m.get("length")
            if not isinstance(name, str) or name in seen:
                self._malformed(f"mr {name!r}")
            seen.add(name)
            if m.get("pd") not in names or mem is None:
                self._malformed(f"mr '{name}': no pd {m.get('pd')!r} or "
                                f"memory {m.get('memory')!r}")
            if not isinstance(off, int) or not isinstance(length, int) or \
                    off < 0 or length <= 0 or off + length > mem.size:
                self._malformed(f"mr '{name}': offset and length do not "
                                f"fit memory '{mem.name}'")
            access = 0
            for a in m.get("access") or []:
                if a not in _ACCESS:
                    self._malformed(f"mr '{name}': unknown access {a!r}")
                access |= _ACCESS[a]
            if m.get("odp") is True:
                access |= _ACCESS_ON_DEMAND  # registered as the daemon did
            iova = 0 if m.get("zero_based") else m.get("iova")
            if not isinstance(iova, int) or \
                    not isinstance(m.get("handle"), int) or \
                    not isinstance(m.get("rkey"), int):
                self._malformed(f"mr '{name}': no iova, handle or rkey")
            descs.append(dict(m, iova=iova, access_flags=access))
        return descs

    def _setup_shared(self, cmd_fd, descs):
        from pyverbs.device import Context

        before = os.fstat(cmd_fd)
        try:
            self.context = Context(cmd_fd=cmd_fd)
        except Exception as e:
            # Some of libibverbs' failure paths close the fd, some do
            # not: close it only if it still is the same file.
            try:
                after = os.fstat(cmd_fd)
                if (after.st_dev, after.st_ino, after.st_rdev) == \
                        (before.st_dev, before.st_ino, before.st_rdev):
                    os.close(cmd_fd)
            except OSError:
                pass
            self._fds = []
            raise Error("setup_failed", f"cannot import the context of "
                        f"{self.ibdev}: {e}",
                        errno=_errno_of(e)) from None
        self._fds = []  # the context's now: closed with it
        # Each PD and MR is imported when first asked for (pd(), mr()):
        # an attach costs the same whatever the profile holds.
        self._descs = {d["name"]: d for d in descs}

    def _table_desc(self, name):
        """The MR called name from the MR table, checked as the list's
        are, or None."""
        try:
            i = self._table.find(name)
            if i is None:
                return None
            e = self._table.entry(i)
        except mrtable.BadTable as err:
            self._malformed(f"its MR table: {err}")
        pds = self.document.get("pd") or []
        if e["pd"] >= len(pds) or e["memory"] >= len(self._mem_order):
            self._malformed(f"its MR table: mr '{name}' names no pd or "
                            f"memory")
        mem = self._maps[self._mem_order[e["memory"]]]
        if e["offset"] + e["length"] > mem.size:
            self._malformed(f"mr '{name}': offset and length do not fit "
                            f"memory '{mem.name}'")
        access = e["access_bits"] | (_ACCESS_ON_DEMAND if e["odp"] else 0)
        return dict(name=name, pd=pds[e["pd"]]["name"], memory=mem.name,
                    handle=e["handle"], lkey=e["lkey"], rkey=e["rkey"],
                    length=e["length"], offset=e["offset"],
                    iova=0 if e["zero_based"] else e["iova"],
                    zero_based=e["zero_based"], access_flags=access)

    def _desc(self, name):
        """What rdmad said of the MR called name, without importing it."""
        if self.mode != MODE_SHARED:
            return self._mr(name)[1]
        d = self._descs.get(name)
        if d is None and self._table is not None:
            d = self._table_desc(name)
            if d is not None:
                self._descs[name] = d
        if d is None:
            raise Error("not_found",
                        f"profile '{self.name}' has no mr '{name}' that "
                        f"can be shared (MRs on anonymous memory "
                        f"cannot)")
        return d

    def _drained(self, name):
        if isinstance(name, str) and name not in self._mrs:
            self._stale.add(name)

    def _import_mr(self, name):
        from pyverbs.mr import MR

        d = self._desc(name)
        if name in self._stale:
            raise Error("stale", f"mr '{name}' was removed or changed by "
                        f"a reload after the attach: attach again for "
                        f"what rdmad has now", errno=errno.ESTALE)
        pd = self.pd(d["pd"])
        try:
            mr = MR(pd, handle=d["handle"])
        except Exception as e:  # pyverbs' errors
            if _errno_of(e) == errno.ENOENT:
                # Destroyed through the shared context since rdmad
                # last looked: it is made again, under a new handle.
                raise Error("stale", f"mr '{name}' (handle "
                            f"{d['handle']}) is gone from the kernel: "
                            f"rdmad makes it again; attach again",
                            errno=errno.ESTALE) from None
            raise Error("setup_failed", f"cannot import mr '{name}' "
                        f"(handle {d['handle']}): {e}",
                        errno=_errno_of(e)) from None
        if mr.rkey != d["rkey"] or mr.length != d["length"]:
            mr.close()
            raise Error("protocol_error",
                        f"mr '{name}' (handle {d['handle']}) imports "
                        f"with rkey {mr.rkey} and {mr.length} bytes; "
                        f"rdmad announced rkey {d['rkey']} and "
                        f"{d['length']} bytes")
        self._mrs[name] = (mr, d)
        return self._mrs[name]

    def _setup_local(self, descs):
        from pyverbs.device import Context
        from pyverbs.mr import MR
        from pyverbs.pd import PD

        self.context = Context(name=self.ibdev)
        for p in self.document.get("pd") or []:
            self._pds[p["name"]] = PD(self.context)
        report = []
        for d in descs:
            addr = self._maps[d["memory"]].addr + d["offset"]
            # pyverbs' MR registers at IOVA == address (ibv_reg_mr): it
            # cannot take the daemon's IOVA (ibv_reg_mr_iova).
            try:
                mr = MR(self._pds[d["pd"]], d["length"], d["access_flags"],
                        address=addr)
            except Exception as e:
                hint = ""
                if _errno_of(e) == errno.ENOMEM:
                    hint = (" (local mode pins the MR: is RLIMIT_MEMLOCK, "
                            "ulimit -l, large enough?)")
                raise Error("setup_failed",
                            f"cannot register mr '{d['name']}' "
                            f"({d['length']} bytes) on {self.ibdev}: "
                            f"{e}{hint}",
                            errno=_errno_of(e)) from None
            self._mrs[d["name"]] = (mr, d)
            report.append({"name": d["name"], "lkey": mr.lkey,
                           "rkey": mr.rkey, "iova": addr,
                           "length": d["length"]})
        # The daemon shows the keys in GET /v1/sessions; its answer
        # carries nothing needed here, and a refusal changes nothing.
        # A list over one frame goes in parts of REPORT_MRS_PER_PART,
        # each after the first with "append" (PROTOCOL.md, REPORT).
        try:
            for i in range(0, max(len(report), 1), REPORT_MRS_PER_PART):
                self._conn._exchange(
                    proto.PROTO_REPORT,
                    {"attachment": self.attachment,
                     "mr": report[i:i + REPORT_MRS_PER_PART],
                     "append": i > 0})
        except Error as e:
            if e.code in ("daemon_gone", "timeout", "protocol_error",
                          "not_connected"):
                raise

    # ---- tearing down ----

    def _release(self):
        """Close every object here, MRs before PDs before the context
        (pyverbs also closes what the caller made on them)."""
        first = None
        for objs in ([m for m, _ in self._mrs.values()],
                     list(self._pds.values()),
                     [self.context] if self.context else []):
            for o in objs:
                try:
                    o.close()
                except Exception as e:
                    first = first or e
        self._mrs, self._pds, self.context = {}, {}, None
        self._descs = {}
        if self._table is not None:
            self._table.close()
            self._table = None
        for m in self._maps.values():
            m.close()
        self._maps = {}
        _close_fds(self._fds)
        self._fds = []
        return first

    def _abort(self):
        self._release()
        if self._granted and not self._conn._broken:
            try:
                self._conn._exchange(proto.PROTO_DETACH,
                                     {"attachment": self.attachment})
            except Error:
                pass
        self._granted = False

    def detach(self):
        """Release the profile's objects in this process (MRs, PDs, the
        context and whatever was created on them: destroy your QPs and
        CQs first, or pyverbs closes them), unmap the memory (views from
        mr_map() are released), and tell the daemon. After a
        "daemon_gone" connection only the release here is done. Safe to
        call twice. Raises Error when a release or the daemon fails."""
        if self in self._conn._profiles:
            self._conn._profiles.remove(self)
        err = self._release()
        granted, self._granted = self._granted, False
        if granted and not self._conn._gone_flag:
            try:
                self._conn._exchange(proto.PROTO_DETACH,
                                     {"attachment": self.attachment})
            except Error as e:
                if e.code != "daemon_gone":
                    raise
        if err is not None:
            raise Error("setup_failed", f"releasing profile "
                        f"'{self.name}': {err}")

    def made(self, objects, undo=False):
        """Say this process made (undo=True: is about to destroy) these
        objects in the profile's shared context, so that the daemon
        destroys them by handle once the process is gone, however it
        ends (PROTOCOL.md, MADE). objects: a list of dicts {"kind": "qp"
        | "cq" | "srq", "handle": H} (a QP's with "qp_num": N, not
        needed with undo), or a single one. The handle is the uverbs
        one (struct ibv_qp/ibv_cq/ibv_srq .handle): objects made through
        libibverbs with ctypes or a C extension have it; pyverbs (rdma-
        core 44) does not show it, so its objects cannot be handed over.
        Returns how many the daemon took; raises Error on a refusal
        ("conflict": another live process said a handle is its own)."""
        if self.mode != MODE_SHARED:
            raise Error("bad_request", "made(): the profile is attached "
                        "in local mode; what this process makes there "
                        "dies with it")
        if isinstance(objects, dict):
            objects = [objects]
        n = 0
        for i in range(0, max(len(objects), 1), MADE_PER_MESSAGE):
            req = {"attachment": self.attachment,
                   "made": list(objects[i:i + MADE_PER_MESSAGE])}
            if undo:
                req["undo"] = True
            t, doc, _ = self._conn._exchange(proto.PROTO_MADE, req)
            if t != proto.PROTO_REPLY:
                self._conn._protocol("rdmad's answer to MADE is not a "
                                     "REPLY")
            n += (doc.get("body") or {}).get("made", 0)
        return n

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()
        return False

    # ---- accessors ----

    def _mr(self, name):
        if name in self._mrs:
            return self._mrs[name]
        if self.mode == MODE_SHARED and self.context is not None:
            return self._import_mr(name)
        raise Error("not_found",
                    f"profile '{self.name}' has no mr '{name}' that "
                    f"can be shared (MRs on anonymous memory "
                    f"cannot)")

    @property
    def pd_names(self):
        """The names of the profile's PDs."""
        return [p["name"] for p in self.document.get("pd") or []]

    @property
    def mr_names(self):
        """The names of the profile's MRs this attachment gives."""
        if self.mode != MODE_SHARED:
            return list(self._mrs)
        if self._table is not None:
            try:
                return self._table.names()
            except mrtable.BadTable as e:
                self._malformed(f"its MR table: {e}")
        return list(self._descs)

    def pd(self, name):
        """The PD called name: a pyverbs PD (shared mode: imported the
        first time it is asked for; local mode: this process's own).
        Error "not_found" if none; in shared mode "setup_failed" when
        the import fails."""
        if name in self._pds:
            return self._pds[name]
        handle = next((p["handle"] for p in self.document.get("pd") or []
                       if p.get("name") == name), None)
        if self.mode != MODE_SHARED or handle is None or \
                self.context is None:
            raise Error("not_found", f"profile '{self.name}' has no pd "
                        f"'{name}'")
        from pyverbs.pd import PD
        try:
            self._pds[name] = PD(self.context, handle=handle)
        except Exception as e:  # pyverbs' errors
            raise Error("setup_failed", f"cannot import pd '{name}' "
                        f"(handle {handle}): {e}",
                        errno=_errno_of(e)) from None
        return self._pds[name]

    def mr(self, name):
        """The MR called name: a pyverbs MR. Shared mode: the daemon's
        registration, imported by handle the first time it is asked for
        (its lkey and rkey are the daemon's; an imported MR carries no
        address in this process, so pyverbs' MR.read()/write() do not
        work on it: use mr_map()); Error "stale" (errno ESTALE) for one
        a reload removed after the attach and before it was first asked
        for, once this connection has read the object_draining event
        that says so; "setup_failed" or "protocol_error" when the import
        fails. One imported before stays usable, draining, until
        detach(). Local mode: this process's registration over the same
        memory with the same access, at IOVA mr_iova(name). Error
        "not_found" if none."""
        return self._mr(name)[0]

    def mr_map(self, name):
        """The MR's bytes in this process: a writable memoryview of the
        shared mapping (the same bytes the daemon and every other
        client see). Released by detach(). Shared mode: the first call
        for an MR of a memory not mapped yet (or of mr_addr()) maps it;
        in a profile of more than MEMORY_FDS memories
        ($RDMAD_MEMORY_FDS) it asks the daemon for that memory's fd
        first (one round trip, MAP: such an attach carries none, unless
        it was made with map_memory=True), and may raise
        what a request does: "forbidden" when a reload since the attach
        took this user off the profile's allow list, "daemon_gone" or
        "timeout", "protocol_error" for a malformed answer,
        "setup_failed" when the mapping fails. The memory is the one the
        attach was given, draining if a reload changed or removed it."""
        d = self._desc(name)
        return self._maps[d["memory"]].view(d["offset"], d["length"])

    def mr_addr(self, name):
        """The address of the MR's first byte in this process."""
        d = self._desc(name)
        return self._maps[d["memory"]].addr + d["offset"]

    def mr_iova(self, name):
        """The MR's first byte in the IOVA space of mr(name)'s keys: the
        address for work requests with its lkey, and for a remote peer
        with its rkey. Shared mode: the daemon's (0 when zero-based).
        Local mode: this process's address (pyverbs registers at IOVA ==
        address; see daemon_iova())."""
        d = self._desc(name)
        if self.mode == MODE_SHARED:
            return d["iova"]
        return self.mr_addr(name)

    def daemon_iova(self, name):
        """The IOVA of the daemon's own registration of the MR (0 when
        zero-based): for peers that use daemon_rkey()."""
        return self._desc(name)["iova"]

    def daemon_rkey(self, name):
        """The rkey of the daemon's own registration of the MR (the same
        as mr(name).rkey in shared mode)."""
        return self._desc(name)["rkey"]

    def _numbered(self, kind, name):
        for d in self.document.get(kind) or []:
            if isinstance(d, dict) and d.get("name") == name:
                return d
        raise Error("not_found", f"profile '{self.name}' has no ready "
                    f"{kind} '{name}'")

    def qp_num(self, name):
        """The number of the profile's ready QP called name (any type):
        what a remote sender names, and what ibv_open_qp() takes for an
        XRC target QP. Error "not_found" if none."""
        return self._numbered("qp", name)["qp_num"]

    def srq_num(self, name):
        """The srq_num of the profile's XRC SRQ called name (what XRC
        senders name). Error "not_found" if none, "bad_request" for an
        SRQ that is not XRC (it has no srq_num)."""
        d = self._numbered("srq", name)
        if "srq_num" not in d:
            raise Error("bad_request", f"srq '{name}' is not an XRC SRQ: "
                        f"it has no srq_num")
        return d["srq_num"]

    def mcast(self, name):
        """The profile's multicast group called name, as the daemon
        joined it (kind mcast): a Group. Error "not_found" if there is
        none, or it was not joined when the profile was attached."""
        d = self._numbered("mcast", name)
        if d.get("join_state") != "joined":
            raise Error("not_found", f"profile '{self.name}' has no "
                        f"joined mcast group '{name}'")
        try:
            return Group(d)
        except (KeyError, TypeError, ValueError):
            self._malformed(f"mcast {name!r}")

    def __repr__(self):
        return (f"<rdmad.Profile {self.name!r} {self.mode} on "
                f"{self.ibdev} port {self.port}>")


class Group:
    """A multicast group the daemon joined (Profile.mcast()): what a
    client needs to use it from its own UD QPs. Attributes: name, group
    (the declared address), mgid (text, eight groups of four hex
    digits), mlid, qkey (receiving QPs use it; senders name it),
    remote_qpn (what a send to the group names: 0xffffff), send_only,
    ah_attributes (the document's "ah": the address vector to the
    group). Receiving QPs are attached with ibv_attach_mcast(qp, mgid,
    mlid); senders go through ah(pd)."""

    def __init__(self, doc):
        self.document = doc
        self.name = doc["name"]
        self.group = doc.get("group")
        self.mgid = doc["mgid"]
        self.mlid = int(doc["mlid"])
        self.qkey = int(doc["qkey"])
        self.remote_qpn = int(doc["remote_qpn"])
        self.send_only = doc.get("join") == "send_only"
        self.ah_attributes = dict(doc["ah"])

    def ah_attr(self):
        """A pyverbs AHAttr to the group."""
        from pyverbs.addr import AHAttr, GID, GlobalRoute
        a = self.ah_attributes
        gr = GlobalRoute(dgid=GID(self.mgid), sgid_index=a["sgid_index"],
                         hop_limit=a["hop_limit"],
                         traffic_class=a["traffic_class"],
                         flow_label=a["flow_label"])
        return AHAttr(gr=gr, is_global=1, port_num=a["port_num"],
                      dlid=a["dlid"], sl=a["sl"],
                      src_path_bits=a["src_path_bits"],
                      static_rate=a["static_rate"])

    def ah(self, pd):
        """A pyverbs AH to the group on pd (the caller's own PD)."""
        from pyverbs.addr import AH
        return AH(pd, attr=self.ah_attr())

    def __repr__(self):
        return f"<rdmad.Group {self.name!r} {self.mgid} mlid {self.mlid}>"

