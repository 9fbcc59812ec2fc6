# SPDX-License-Identifier: MIT
"""The MR table of a shared attach, read as proto/PROTOCOL.md lays it
out ("mr_table"): a sealed memfd of fixed-size entries, a name index and
a name hash, mapped read-only; an MR is found by name (through the hash,
or a binary search of the index in a table without one) when it is
first asked for. Every offset and index followed is checked against the
table's size: it is another process's data."""

import fcntl
import mmap
import os
import struct

__all__ = ["Table", "BadTable"]

MAGIC = b"RDMADMRT"
HEAD = struct.Struct("=8sIIIIIIQ24x")   # 64 bytes
HASH = struct.Struct("=II")              # at 52: the hash's offset, slots
ENTRY = struct.Struct("=IIIIIIIIQQQII")  # 64 bytes
ZERO_BASED, ODP = 0x1, 0x2
SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


class BadTable(ValueError):
    """The table breaks PROTOCOL.md's layout or its own bounds."""


class Table:
    """The table in fd (size bytes, count entries, as ATTACHED says):
    checked, then mapped. The fd is the caller's to close."""

    def __init__(self, fd, size, count):
        if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS != SEALS:
            raise BadTable("it is not sealed")
        if os.fstat(fd).st_size != size:
            raise BadTable("its size is not the one said")
        self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        self.size = size
        (magic, version, self.count, esize, self._entries, self._index,
         self._names, self._names_len) = HEAD.unpack_from(self._map, 0)
        if magic != MAGIC or version != 1 or esize != ENTRY.size or \
                self.count != count or \
                self._entries + self.count * ENTRY.size > size or \
                self._index + self.count * 4 > size or \
                self._names_len > size or \
                self._names > size - self._names_len:
            self.close()
            raise BadTable("it is not one this client reads")
        # The hash, if there is one within the table (0, 0: none).
        self._hash, self._slots = HASH.unpack_from(self._map, 52)
        n = self._slots
        if not n or n & (n - 1) or self._hash % 4 or \
                self._hash + n * 4 > size:
            self._slots = 0

    def close(self):
        if self._map is not None:
            self._map.close()
            self._map = None

    def _name(self, name_off, name_len):
        if name_len == 0 or name_off + name_len + 1 > self._names_len:
            raise BadTable("a name is out of its bounds")
        at = self._names + name_off
        raw = self._map[at:at + name_len + 1]
        if raw[-1] != 0 or 0 in raw[:-1]:
            raise BadTable("a name is not NUL-terminated")
        return raw[:-1].decode("utf-8", "strict")

    def entry(self, i):
        """Entry i (in ATTACHED's order) as a dict of the "mr" list's
        fields but names: pd and memory are indexes into ATTACHED's
        "pd" and "memory" lists."""
        if not 0 <= i < self.count:
            raise BadTable(f"no entry {i}")
        (name_off, name_len, pd, memory, handle, lkey, rkey, access,
         offset, length, iova, flags, _) = ENTRY.unpack_from(
            self._map, self._entries + i * ENTRY.size)
        return dict(name=self._name(name_off, name_len), pd=pd,
                    memory=memory, handle=handle, lkey=lkey, rkey=rkey,
                    access_bits=access, offset=offset, length=length,
                    iova=iova, zero_based=bool(flags & ZERO_BASED),
                    odp=bool(flags & ODP))

    def _named(self, i):
        """Entry i's name, the bytes, checked to lie within the names."""
        if not 0 <= i < self.count:
            raise BadTable("its index or hash is out of its bounds")
        name_off, name_len = ENTRY.unpack_from(
            self._map, self._entries + i * ENTRY.size)[:2]
        if name_off + name_len + 1 > self._names_len:
            raise BadTable("a name is out of its bounds")
        at = self._names + name_off
        return self._map[at:at + name_len]

    @staticmethod
    def hash(raw):
        """FNV-1a, 32 bits, of a name's bytes (PROTOCOL.md)."""
        h = 2166136261
        for b in raw:
            h = ((h ^ b) * 16777619) & 0xFFFFFFFF
        return h

    def find(self, name):
        """The number of the entry called name, or None."""
        want = name.encode()
        if self._slots:
            mask = self._slots - 1
            s = self.hash(want) & mask
            for _ in range(self._slots):
                (v,) = struct.unpack_from("=I", self._map, self._hash + s * 4)
                if not v:
                    return None
                if self._named(v - 1) == want:
                    return v - 1
                s = (s + 1) & mask
            return None
        lo, hi = 0, self.count
        while lo < hi:
            mid = (lo + hi) // 2
            (i,) = struct.unpack_from("=I", self._map, self._index + mid * 4)
            have = self._named(i)
            if want == have:
                return i
            if want < have:
                hi = mid
            else:
                lo = mid + 1
        return None

    def names(self):
        return [self.entry(i)["name"] for i in range(self.count)]
