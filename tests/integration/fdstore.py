# SPDX-License-Identifier: MIT
"""systemd's fd store, as the daemon sees it, without systemd: a
NOTIFY_SOCKET that keeps the fds sent with FDSTORE=1 under their FDNAME
(and drops them on FDSTOREREMOVE=1), and a start that hands them back in
LISTEN_FDS/LISTEN_FDNAMES, as systemd does after a restart. With it, the
restart paths (restore.c) run in the plain VM and under the sanitized
daemon; tests/systemd/test_restart_shared.py runs them under the real
systemd."""

import array
import fcntl
import json
import os
import select
import socket
import struct
import subprocess
import threading

from conftest import RDMAD


class FdStore:
    def __init__(self, tmp):
        self.path = str(tmp / "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setblocking(False)
        self.fds = {}
        self.ready = False
        # Read all the time, as systemd does: a sender blocks once the
        # socket's queue is full (net.unix.max_dgram_qlen messages).
        self.lock = threading.Lock()
        self.stopping = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while not self.stopping:
            select.select([self.sock], [], [], 0.05)
            with self.lock:
                if not self.stopping:
                    self._take()

    def drain(self):
        """Take every message sent so far."""
        with self.lock:
            self._take()
        return self

    def _take(self):
        fdsize = array.array("i").itemsize
        while True:
            try:
                msg, anc, _, _ = self.sock.recvmsg(
                    65536, socket.CMSG_SPACE(253 * fdsize))
            except BlockingIOError:
                return
            fds = array.array("i")
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[:len(data) - len(data) % fdsize])
            tags = dict(line.split("=", 1) for line in
                        msg.decode().splitlines() if "=" in line)
            # systemd reads the first FDNAME= of a message.
            name = next((line[7:] for line in msg.decode().splitlines()
                         if line.startswith("FDNAME=")), "stored")
            if tags.get("READY") == "1":
                self.ready = True
            if tags.get("FDSTOREREMOVE") == "1":
                self.drop(name)
            if tags.get("FDSTORE") == "1":
                for fd in fds:
                    self.drop(name)
                    self.fds[name] = fd
            else:
                for fd in fds:
                    os.close(fd)

    def drop(self, name):
        fd = self.fds.pop(name, None)
        if fd is not None:
            os.close(fd)

    def record(self, name):
        """The document the daemon keeps under name: a durable record
        (rdmad(8), SYSTEMD: a 48-byte header, "RDMADREC", generation,
        offset and length of the version it names, its XXH64 and the
        header's), or plain JSON (an older run's; a test's forgery)."""
        fd = self.fds[name]
        head = os.pread(fd, 48, 0)
        if head[:8] != b"RDMADREC":
            return json.loads(os.pread(fd, os.fstat(fd).st_size, 0))
        _, gen, off, length, _, _ = struct.unpack("<8s5Q", head)
        assert gen > 0 and off >= 4096, (gen, off)
        return json.loads(os.pread(fd, length, off))

    def state(self, profile):
        """The state document the daemon stored for profile."""
        return self.record(f"state/{profile}")

    def leases(self, profile):
        """Who holds what of profile, as the daemon wrote it down."""
        return self.record(f"lease/{profile}")

    def lease_sets(self, profile):
        """The lease sets stored for profile (rdmad(8), SYSTEMD: records
        named leaseset/ID/PROFILE): {ID: document}."""
        out = {}
        for name in self.fds:
            part = name.split("/", 2)
            if len(part) == 3 and part[0] == "leaseset" and \
                    part[2] == profile:
                out[part[1]] = self.record(name)
        return out

    def holders(self, profile):
        """The lease record's holders, each with the leases of the sets
        it names (version 2) joined to its own: [{pid, ..., leases}]."""
        doc = self.leases(profile)
        sets = self.lease_sets(profile)
        out = []
        for h in doc["holders"]:
            leases = list(h.get("leases", []))
            for sid in h.get("sets", []):
                assert sid in sets, (sid, sorted(sets))
                assert sets[sid]["id"] == sid and \
                    sets[sid]["version"] == 2, sets[sid]
                leases += sets[sid]["leases"]
            out.append(dict(h, leases=leases))
        return out

    def put_state(self, profile, doc):
        """Replace profile's state document (a test's forgery)."""
        fd = os.memfd_create("forged-state")
        os.write(fd, json.dumps(doc).encode())
        self.drop(f"state/{profile}")
        self.fds[f"state/{profile}"] = fd

    def put(self, name, fd):
        self.drop(name)
        self.fds[name] = fd

    def env(self):
        return {"NOTIFY_SOCKET": self.path}

    def start(self, conf, log, log_level="debug"):
        """rdmad -c conf with what the store holds passed as systemd
        passes it (fds from 3, LISTEN_PID its own pid)."""
        names = list(self.fds)
        fds = [self.fds[n] for n in names]
        n = len(fds)

        def place():
            # Above every target first, then to 3, 4, ...: no clobbering.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 1000)
                    for fd in fds]
            for i, fd in enumerate(high):
                os.dup2(fd, 3 + i)
                os.close(fd)

        env = dict(os.environ, **self.env())
        if n:
            env.update(LISTEN_FDS=str(n), LISTEN_FDNAMES=":".join(names))
        # LISTEN_PID must be the daemon's: the shell's own, exec'd.
        cmd = ["/bin/sh", "-c",
               'LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"'
               if n else 'exec "$0" "$@"',
               str(RDMAD), "-c", str(conf), "--log-level", log_level]
        # close_fds=False: subprocess closes what is not in pass_fds
        # after preexec_fn, which would take the placed fds; Python's own
        # fds are close-on-exec anyway, the placed ones are not.
        return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=place, close_fds=False)

    def close(self):
        with self.lock:
            self.stopping = True
            for name in list(self.fds):
                self.drop(name)
        self.reader.join()
        self.sock.close()
