# SPDX-License-Identifier: MIT
"""ATTACHED read and checked as proto/PROTOCOL.md fixes it.

The same description as proto/attached_fields.c (the C codec's), in
Python: the lists, their fields, types and ranges, what is required,
which names refer to which list. decode() checks a payload whole and
returns it in canonical form (the form the C encoder writes: fields in
table order, absent optional fields and empty lists left out, booleans
written, access names in table order, GIDs as eight groups of four hex
digits, unknown keys dropped). tests/vectors/attached/ holds payloads
and what a correct decoder yields, checked against both codecs.
"""

import socket

__all__ = ["Malformed", "decode", "ACCESS_NAMES"]

#: The access names, in the order documents list them (proto/access.h).
ACCESS_NAMES = ("local_write", "remote_write", "remote_read",
                "remote_atomic", "mw_bind", "relaxed_ordering")

INT64_MAX = (1 << 63) - 1
U32 = 0xFFFFFFFF
U8 = 0xFF


class Malformed(ValueError):
    """The payload is not an ATTACHED PROTOCOL.md allows; str() says
    which field."""


def F(key, kind, required=False, nonempty=False, lo=0, hi=INT64_MAX,
      has=False, ref=None, sub=None):
    return dict(key=key, kind=kind, required=required, nonempty=nonempty,
                lo=lo, hi=hi, has=has, ref=ref, sub=sub)


def NAME():
    return F("name", "str", required=True, nonempty=True)


def REF(key, lst):
    return F(key, "str", required=True, nonempty=True, ref=lst)


def MR_KEYS():
    return [F("handle", "u64", True, hi=U32), F("lkey", "u64", True, hi=U32),
            F("rkey", "u64", True, hi=U32),
            F("length", "u64", True, lo=1), F("offset", "u64", True),
            F("iova", "u64", True), F("zero_based", "bool"),
            F("odp", "bool"), F("access", "access", True)]


def S(what, fields, ns=0):
    return dict(what=what, fields=fields, ns=ns)


MEMORY = S("memory", [NAME(), F("size", "u64", True, lo=1),
                      F("backing", "str"),
                      # absent when the ATTACH asked "memory_fds": false
                      F("fd", "fd")], 1)
XRCD = S("xrcd", [NAME(), F("file", "str"), F("fd", "fd", True)], 2)
PD = S("pd", [NAME(), F("handle", "u64", True, hi=U32)], 3)
QP = S("qp", [NAME(), F("type", "str"),
              F("qp_num", "u64", hi=0xFFFFFF, has=True),
              F("xrcd", "str", nonempty=True)], 4)
SRQ = S("srq", [NAME(), F("type", "str"),
                F("srq_num", "u64", hi=U32, has=True)], 5)
DM = S("dm", [NAME(), F("handle", "u64", True, hi=U32),
              F("size", "u64", True, lo=1)], 6)
MR = S("mr", [NAME(), REF("pd", "pd"), REF("memory", "memory")] +
       MR_KEYS(), 7)
DM_MR = S("dm_mr", [NAME(), REF("pd", "pd"), REF("dm", "dm")] + MR_KEYS(), 7)
IMR = S("implicit_mr", [NAME(), REF("pd", "pd"),
                        F("access", "access", True)], 7)
AH = S("mcast ah", [
    F("handle", "u64", hi=U32, has=True),
    F("port_num", "u64", True, lo=1, hi=U8),
    F("dlid", "u64", True, hi=0xFFFF), F("sl", "u64", True, hi=U8),
    F("src_path_bits", "u64", True, hi=U8),
    F("static_rate", "u64", True, hi=U8), F("is_global", "bool", True),
    F("dgid", "gid", has=True), F("sgid_index", "u64", True, hi=U8),
    F("hop_limit", "u64", True, hi=U8),
    F("traffic_class", "u64", True, hi=U8),
    F("flow_label", "u64", True, hi=0xFFFFF)])
MCAST_QP = S("mcast qp", [NAME(), F("qp_num", "u64", True, hi=0xFFFFFF),
                          F("attached", "bool")])
MCAST = S("mcast", [
    NAME(), F("group", "str"), F("join", "str"), F("join_state", "str"),
    F("join_error", "str"), F("rejoins", "u64", has=True),
    F("qps", "list", sub=MCAST_QP), F("mgid", "gid", has=True),
    F("mlid", "u64", hi=0xFFFF, has=True),
    F("qkey", "u64", hi=U32, has=True),
    F("remote_qpn", "u64", hi=0xFFFFFF, has=True),
    F("ah", "obj", has=True, sub=AH)], 8)
#: A shared attach's MRs as a table in a sealed memfd (PROTOCOL.md,
#: mr_table; rdmad.mrtable reads it).
#: "memories": the memories are in the table too ("memory_table"), how
#: many, and not in the "memory" list; "memory_fd": their fds came too,
#: memory i's the message's fd memory_fd + i.
MR_TABLE = S("mr_table", [F("fd", "fd", True), F("count", "u64", True, hi=U32),
                          F("size", "u64", True, lo=64, hi=U32),
                          F("memories", "u64", hi=U32),
                          F("memory_fd", "u64", hi=U32)])
TOP = S("ATTACHED", [
    F("attachment", "u64", True, hi=U32, has=True), F("profile", "str"),
    F("mode", "mode", True), F("ibdev", "str", True, nonempty=True),
    F("port", "u64", True, lo=1, hi=U8),
    F("gid_index", "u64", True, hi=(1 << 31) - 1),
    F("import_capable", "bool", has=True), F("import_error", "str"),
    F("cmd_fd", "fd", has=True),
    F("memory", "list", sub=MEMORY), F("xrcd", "list", sub=XRCD),
    F("pd", "list", sub=PD), F("qp", "list", sub=QP),
    F("srq", "list", sub=SRQ), F("dm", "list", sub=DM),
    F("dm_mr", "list", sub=DM_MR), F("implicit_mr", "list", sub=IMR),
    F("mcast", "list", sub=MCAST), F("mr", "list", sub=MR),
    F("mr_table", "obj", has=True, sub=MR_TABLE)])
LISTS = [f["key"] for f in TOP["fields"] if f["kind"] == "list"]


def _is_int(v):
    return type(v) is int  # not bool


def _gid_text(b):
    return ":".join(b[i:i + 2].hex() for i in range(0, 16, 2))


class _Decoder:
    def __init__(self, n_fds):
        self.n_fds = n_fds
        self.used = set()

    def field(self, f, v, where):
        k, kind = f["key"], f["kind"]
        if kind == "str":
            if not isinstance(v, str) or (f["nonempty"] and not v):
                raise Malformed(f"{where}{k} is not a string")
            return v
        if kind == "u64":
            if not _is_int(v) or not f["lo"] <= v <= f["hi"]:
                raise Malformed(f"{where}{k} is not an integer in "
                                f"[{f['lo']}, {f['hi']}]")
            return v
        if kind == "bool":
            if not isinstance(v, bool):
                raise Malformed(f"{where}{k} is not true or false")
            return v
        if kind == "access":
            if not isinstance(v, list) or \
                    any(a not in ACCESS_NAMES for a in v):
                raise Malformed(f"{where}unknown access in {v!r}")
            return [a for a in ACCESS_NAMES if a in v]
        if kind == "fd":
            if not _is_int(v) or not 0 <= v < self.n_fds:
                raise Malformed(f"{where}{k} {v!r} of {self.n_fds}")
            if v in self.used:
                raise Malformed(f"{where}{k}: fd {v} given twice")
            self.used.add(v)
            return v
        if kind == "gid":
            try:
                return _gid_text(socket.inet_pton(socket.AF_INET6, v))
            except (OSError, TypeError, ValueError):
                raise Malformed(f"{where}{k} is not a GID") from None
        if kind == "mode":
            if v not in ("shared", "local"):
                raise Malformed(f"{where}{k} {v!r}")
            return v
        if kind == "obj":
            if not isinstance(v, dict):
                raise Malformed(f"{where}{k} is not an object")
            return self.struct(f["sub"], v, where)
        if not isinstance(v, list):  # list
            raise Malformed(f"{where}\"{k}\" is not an array")
        out = []
        for i, o in enumerate(v):
            name = o.get("name") if isinstance(o, dict) else None
            label = f"{where}{f['sub']['what']} " + \
                (f"'{name}': " if isinstance(name, str) and name
                 else f"{i}: ")
            if not isinstance(o, dict):
                raise Malformed(f"{label}is not an object")
            out.append(self.struct(f["sub"], o, label))
        return out

    def struct(self, s, o, where):
        out = {}
        for f in s["fields"]:
            k = f["key"]
            if k not in o:
                if f["required"]:
                    raise Malformed(f"{where}no {k}")
                if f["kind"] == "bool" and not f["has"]:
                    out[k] = False  # the C struct's default, written
                continue
            v = self.field(f, o[k], where)
            if f["kind"] == "list" and not v:
                continue  # an empty list is written as none
            out[k] = v
        return out


def _check_memory_fds(doc, decoder):
    t = doc.get("mr_table", {})
    if "memory_fd" not in t:
        return
    if "memories" not in t:
        raise Malformed("mr_table: memory_fd without memories")
    first, n = t["memory_fd"], t["memories"]
    if first > decoder.n_fds or n > decoder.n_fds - first:
        raise Malformed(f"mr_table: memory_fd {first} and {n} memories, "
                        f"of {decoder.n_fds} fds")
    for fd in range(first, first + n):
        if fd in decoder.used:
            raise Malformed(f"mr_table: memory_fd: fd {fd} given twice")
        decoder.used.add(fd)


def _check(doc):
    by_ns = {}
    for key, s in ((f["key"], f["sub"]) for f in TOP["fields"]
                   if f["kind"] == "list"):
        for o in doc.get(key, []):
            seen = by_ns.setdefault(s["ns"], set())
            if o["name"] in seen:
                raise Malformed(f"{s['what']} '{o['name']}' twice")
            seen.add(o["name"])
    names = {k: {o["name"]: o for o in doc.get(k, [])} for k in LISTS}
    for key, s in ((f["key"], f["sub"]) for f in TOP["fields"]
                   if f["kind"] == "list"):
        for o in doc.get(key, []):
            for f in s["fields"]:
                if f["ref"] and o[f["key"]] not in names[f["ref"]]:
                    raise Malformed(f"{s['what']} '{o['name']}': no "
                                    f"{f['key']} '{o[f['key']]}'")
    for key, over in (("mr", "memory"), ("dm_mr", "dm")):
        for o in doc.get(key, []):
            size = names[over][o[over]]["size"]
            if o["offset"] >= size or o["length"] > size - o["offset"]:
                raise Malformed(f"{key} '{o['name']}': offset and length "
                                f"do not fit {over} '{o[over]}'")
    if doc["mode"] == "shared" and "cmd_fd" not in doc:
        raise Malformed("shared mode without cmd_fd")
    if "mr_table" in doc and doc["mode"] != "shared":
        raise Malformed("mr_table in local mode")
    if "mr_table" in doc and doc.get("mr"):
        raise Malformed("both mr and mr_table")
    if "memories" in doc.get("mr_table", {}) and doc.get("memory"):
        raise Malformed("both memory and mr_table's memories")
    for g in doc.get("mcast", []):
        if g.get("join_state") == "joined" and not all(
                k in g for k in ("mgid", "mlid", "qkey", "remote_qpn",
                                 "ah")):
            raise Malformed(f"mcast '{g['name']}' is joined without mgid, "
                            f"mlid, qkey, remote_qpn and ah")


def decode(payload, n_fds):
    """payload (a parsed JSON object) checked as an ATTACHED that came
    with n_fds fds: its canonical form, or Malformed."""
    if not isinstance(payload, dict):
        raise Malformed("not an object")
    decoder = _Decoder(n_fds)
    doc = decoder.struct(TOP, payload, "")
    _check(doc)
    _check_memory_fds(doc, decoder)
    return doc
