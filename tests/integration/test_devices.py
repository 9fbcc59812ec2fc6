# SPDX-License-Identifier: MIT
"""The device documents of the REST API carry what pyverbs reads from the
same device, and rdmactl prints them as pyverbs does.

    GET /v1/devices                        every device (summary)
    GET /v1/devices/IBDEV                  ibv_query_device_ex()
    GET /v1/devices/IBDEV/ports/N          ibv_query_port()
    GET /v1/devices/IBDEV/ports/N/gids     the valid GIDs of port N

pyverbs (Debian's python3-pyverbs, rdma-core 44) is the judge. Every
attribute its objects expose is compared with our key for the same C field,
and every label its print() shows must belong to a compared attribute: a
field missing from our documents, or a label a newer pyverbs adds, fails
here instead of being skipped silently.
"""

import inspect
import re
import socket

import pytest

from conftest import rdmactl

pv = pytest.importorskip("pyverbs.device",
                         reason="python3-pyverbs is not installed")
import pyverbs.enums as e  # noqa: E402  (only after the importorskip)

IBDEV = "rxe0"
OTHER = "rxe1"
PORT = 1
INT64_MAX = 2**63 - 1

CONFIG = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; port = 1; } );
profiles = ( { name = "p"; device = "d0"; pd = ( { name = "pd0"; } ); } );
"""


def rdmactl_text(d, what, ibdev, port=PORT):
    """rdmactl's pyverbs-style text for a device or a port of daemon d.

    The only place that knows rdmactl's command line: adjust it here."""
    if what == "device":
        args = ("device", "show", ibdev)
    else:
        args = ("port", ibdev, str(port))
    p = rdmactl(d, *args)
    assert p.returncode == 0, f"rdmactl {' '.join(args)}: {p.stderr}"
    return p.stdout


# DeviceAttr.__str__: printed label -> the DeviceAttr property it shows.
DEVICE_LABELS = {
    "FW version": "fw_version",
    "Node guid": "node_guid",
    "Sys image GUID": "sys_image_guid",
    "Max MR size": "max_mr_size",
    "Page size cap": "page_size_cap",
    "Vendor ID": "vendor_id",
    "Vendor part ID": "vendor_part_id",
    "HW version": "hw_ver",
    "Max QP": "max_qp",
    "Max QP WR": "max_qp_wr",
    "Device cap flags": "device_cap_flags",
    "Max SGE": "max_sge",
    "Max SGE RD": "max_sge_rd",
    "MAX CQ": "max_cq",
    "Max CQE": "max_cqe",
    "Max MR": "max_mr",
    "Max PD": "max_pd",
    "Max QP RD atom": "max_qp_rd_atom",
    "Max EE RD atom": "max_ee_rd_atom",
    "Max res RD atom": "max_res_rd_atom",
    "Max QP init RD atom": "max_qp_init_rd_atom",
    "Max EE init RD atom": "max_ee_init_rd_atom",
    "Atomic caps": "atomic_caps",
    "Max EE": "max_ee",
    "Max RDD": "max_rdd",
    "Max MW": "max_mw",
    "Max raw IPv6 QPs": "max_raw_ipv6_qps",
    "Max raw ethy QP": "max_raw_ethy_qp",
    "Max mcast group": "max_mcast_grp",
    "Max mcast QP attach": "max_mcast_qp_attach",
    "Max AH": "max_ah",
    "Max FMR": "max_fmr",
    "Max map per FMR": "max_map_per_fmr",
    "Max SRQ": "max_srq",
    "Max SRQ WR": "max_srq_wr",
    "Max SRQ SGE": "max_srq_sge",
    "Max PKeys": "max_pkeys",
    "local CA ack delay": "local_ca_ack_delay",
    "Phys port count": "phys_port_cnt",
}

# DeviceAttr properties whose name is not the C field (our key).
DEVICE_KEYS = {
    "fw_version": "fw_ver",
    "atomic_caps": "atomic_cap",
    "max_raw_ipv6_qps": "max_raw_ipv6_qp",
}
GUIDS = {"node_guid", "sys_image_guid"}

# PortAttr.__str__: printed label -> PortAttr property (= our key).
PORT_LABELS = {
    "Port state": "state",
    "Max MTU": "max_mtu",
    "Active MTU": "active_mtu",
    "SM lid": "sm_lid",
    "Port lid": "lid",
    "lmc": "lmc",
    "Link layer": "link_layer",
    "Max message size": "max_msg_sz",
    "Port cap flags": "port_cap_flags",
    "Port cap flags 2": "port_cap_flags2",
    "max VL num": "max_vl_num",
    "Bad Pkey counter": "bad_pkey_cntr",
    "Qkey violations counter": "qkey_viol_cntr",
    "GID table len": "gid_tbl_len",
    "Pkey table len": "pkey_tbl_len",
    "SM sl": "sm_sl",
    "Subnet timeout": "subnet_timeout",
    "Init type reply": "init_type_reply",
    "Active width": "active_width",
    "Active speed": "active_speed",
    "Phys state": "phys_state",
    "Flags": "flags",
}

# DeviceAttrEx: a nested pyverbs object's property P.S is our key P.S (the
# C struct nesting), except where pyverbs flattens differently.
EX_PATHS = {
    "odp_caps.rc_odp_caps": "odp_caps.per_transport_caps.rc_odp_caps",
    "odp_caps.uc_odp_caps": "odp_caps.per_transport_caps.uc_odp_caps",
    "odp_caps.ud_odp_caps": "odp_caps.per_transport_caps.ud_odp_caps",
    "odp_caps.xrc_odp_caps": "xrc_odp_caps",
}

GID_TYPES = {e.IBV_GID_TYPE_IB: "ib", e.IBV_GID_TYPE_ROCE_V1: "roce_v1",
             e.IBV_GID_TYPE_ROCE_V2: "roce_v2"}


# ---- helpers ----

def props(obj):
    """The attributes a pyverbs object exposes: its class's properties."""
    return sorted(n for n, v in vars(type(obj)).items()
                  if inspect.isgetsetdescriptor(v) or isinstance(v, property))


def at(doc, path):
    """doc's value at a '.'-separated key path; KeyError names the path."""
    for k in path.split("."):
        if not isinstance(doc, dict) or k not in doc:
            raise KeyError(f"no key {path!r} in the document")
        doc = doc[k]
    return doc


def as_int(v):
    """An integer of our documents: a JSON number, or (only above
    INT64_MAX, which jansson cannot write) a decimal string."""
    if isinstance(v, str):
        if not re.fullmatch(r"[0-9]+", v) or int(v) <= INT64_MAX:
            raise ValueError(f"{v!r} is not an integer of the scheme")
        return int(v)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"{v!r} is not an integer")
    return v


def guid_str(host_order):
    """A GUID as a number in host order -> "xxxx:xxxx:xxxx:xxxx"."""
    h = f"{host_order:016x}"
    return ":".join(h[i:i + 4] for i in range(0, 16, 4))


def printed_labels(text):
    """The labels of a pyverbs print(): lines "LABEL<spaces>: value"; flag
    names follow on indented lines."""
    return re.findall(r"^(\S.*?) *: ", text, re.M)


def compare(doc, key, want, where, bad, kind="int"):
    """Append to bad a line for each difference between doc[key] and
    pyverbs' value want."""
    try:
        got = at(doc, key)
        if kind == "guid":
            ok = got == pv.guid_format(want)
        elif kind == "str":
            ok = got == want
        else:
            ok = as_int(got) == want
    except (KeyError, ValueError) as ex:
        bad.append(f"{key}: {ex} (pyverbs {where} = {want!r})")
        return
    if not ok:
        bad.append(f"{key}: rdmad {got!r}, pyverbs {where} = {want!r}")


# ---- the checks, also usable outside pytest: each returns
# (compared pyverbs attributes, differences) ----

def check_device_attr(doc, attr, where="query_device()"):
    done, bad = set(), []
    for p in props(attr):
        kind = "guid" if p in GUIDS else "str" if p == "fw_version" else "int"
        compare(doc, DEVICE_KEYS.get(p, p), getattr(attr, p), f"{where}.{p}",
                bad, kind)
        done.add(p)
    return done, bad


def check_device_ex(doc, ex):
    done, bad = set(), []
    for p in props(ex):
        val = getattr(ex, p)
        if p == "orig_attr":
            d, b = check_device_attr(doc, val, "query_device_ex().orig_attr")
            done |= {f"orig_attr.{x}" for x in d}
            bad += b
        elif isinstance(val, int):
            compare(doc, p, val, f"query_device_ex().{p}", bad)
            done.add(p)
        else:
            for s in props(val):
                name = f"{p}.{s}"
                compare(doc, EX_PATHS.get(name, name), getattr(val, s),
                        f"query_device_ex().{name}", bad)
                done.add(name)
    return done, bad


def check_port(doc, attr, port=PORT):
    done, bad = set(), []
    compare(doc, "port_num", port, "port number", bad)
    for p in props(attr):
        compare(doc, p, getattr(attr, p), f"query_port({port}).{p}", bad)
        done.add(p)
    return done, bad


def expected_gids(ctx, port=PORT):
    """{index: {index, gid, type, netdev}} of the port's valid GIDs, from
    query_gid() / query_gid_type(), cross-checked with query_gid_ex()."""
    pattr = ctx.query_port(port)
    out = {}
    for i in range(pattr.gid_tbl_len):
        gid = ctx.query_gid(port, i).gid
        if not gid.strip("0:"):
            continue  # an empty entry
        if ctx.query_gid_type(port, i) == e.IBV_GID_TYPE_SYSFS_ROCE_V2:
            gtype = "roce_v2"
        elif pattr.link_layer == e.IBV_LINK_LAYER_INFINIBAND:
            gtype = "ib"
        else:
            gtype = "roce_v1"
        ex = ctx.query_gid_ex(port, i)
        assert ex.gid_str() == gid and GID_TYPES[ex.gid_type] == gtype, \
            f"pyverbs disagrees with itself on GID {i}"
        netdev = (socket.if_indextoname(ex.ndev_ifindex)
                  if ex.ndev_ifindex else None)
        out[i] = {"index": i, "gid": gid, "type": gtype, "netdev": netdev}
    return out


def check_gids(gids, ctx, port=PORT):
    want = expected_gids(ctx, port)
    bad = []
    if not isinstance(gids, list):
        return set(), [f"not a list: {gids!r}"]
    got = {g.get("index"): {k: g.get(k) for k in
                            ("index", "gid", "type", "netdev")}
           for g in gids}
    if len(got) != len(gids):
        bad.append(f"duplicate indexes: {gids!r}")
    for i in sorted(set(want) | set(got), key=str):
        if got.get(i) != want.get(i):
            bad.append(f"GID {i}: rdmad {got.get(i)!r}, pyverbs "
                       f"{want.get(i)!r}")
    return set(want), bad


def norm(text):
    return " ".join(text.split())


# ---- fixtures ----

@pytest.fixture(scope="module")
def ctx():
    with pv.Context(name=IBDEV) as c:
        yield c


@pytest.fixture
def daemon(rdmad):
    return rdmad(CONFIG)


def get_ok(d, path):
    status, body = d.get(path)
    assert status == 200, f"GET {path}: {status} {body}"
    return body


def assert_not_found(d, path):
    status, body = d.get(path)
    assert status == 404, f"GET {path}: {status} {body}"
    err = body.get("error") if isinstance(body, dict) else None
    assert isinstance(err, dict), f"GET {path}: no error object: {body!r}"
    for k in ("code", "message"):
        assert isinstance(err.get(k), str) and err[k], \
            f"GET {path}: error.{k} missing or empty: {body!r}"


# ---- tests ----

def test_device_matches_query_device(daemon, ctx):
    doc = get_ok(daemon, f"/v1/devices/{IBDEV}")
    assert doc.get("name") == IBDEV
    attr = ctx.query_device()
    done, bad = check_device_attr(doc, attr)
    assert not bad, "\n".join(bad)

    labels = printed_labels(str(attr))
    assert labels, "no labels in pyverbs' print(query_device())"
    # Our table knows exactly the labels pyverbs prints ...
    assert set(labels) == set(DEVICE_LABELS), \
        f"pyverbs prints {sorted(set(labels) ^ set(DEVICE_LABELS))} " \
        "differently from DEVICE_LABELS"
    # ... and each was compared above.
    missing = set(DEVICE_LABELS.values()) - done
    assert not missing, f"printed but not compared: {sorted(missing)}"


def test_device_matches_query_device_ex(daemon, ctx):
    doc = get_ok(daemon, f"/v1/devices/{IBDEV}")
    done, bad = check_device_ex(doc, ctx.query_device_ex())
    assert not bad, "\n".join(bad)
    # All of DeviceAttrEx, nested objects included, and all of orig_attr.
    assert {"odp_caps.general_caps", "odp_caps.xrc_odp_caps",
            "tso_caps.max_tso", "rss_caps.rx_hash_fields_mask",
            "packet_pacing_caps.qp_rate_limit_max", "tm_caps.max_num_tags",
            "cq_mod_caps.max_cq_period", "pci_atomic_caps.compare_swap",
            "completion_timestamp_mask", "hca_core_clock",
            "device_cap_flags_ex", "raw_packet_caps", "max_dm_size",
            "phys_port_cnt_ex", "orig_attr.max_qp"} <= done
    assert len([x for x in done if x.startswith("orig_attr.")]) \
        == len(DEVICE_LABELS)


def test_port_matches_query_port(daemon, ctx):
    doc = get_ok(daemon, f"/v1/devices/{IBDEV}/ports/{PORT}")
    attr = ctx.query_port(PORT)
    done, bad = check_port(doc, attr)
    assert not bad, "\n".join(bad)

    labels = printed_labels(str(attr))
    assert labels, "no labels in pyverbs' print(query_port())"
    assert set(labels) == set(PORT_LABELS), \
        f"pyverbs prints {sorted(set(labels) ^ set(PORT_LABELS))} " \
        "differently from PORT_LABELS"
    missing = set(PORT_LABELS.values()) - done
    assert not missing, f"printed but not compared: {sorted(missing)}"


def test_gids_match_pyverbs(daemon, ctx):
    gids = get_ok(daemon, f"/v1/devices/{IBDEV}/ports/{PORT}/gids")
    done, bad = check_gids(gids, ctx)
    assert not bad, "\n".join(bad)
    assert done, f"{IBDEV} port {PORT} has no GID at all"


def test_device_list(daemon):
    devs = get_ok(daemon, "/v1/devices")
    assert isinstance(devs, list)
    names = [x.get("name") for x in devs]
    assert IBDEV in names and OTHER in names, names
    assert len(names) == len(set(names)), names
    by_name = {x["name"]: x for x in devs}
    for dev in pv.get_device_list():
        name = dev.name.decode()
        got = by_name.get(name)
        assert got is not None, f"{name} missing from {names}"
        assert got.get("node_type") == dev.node_type, got
        assert got.get("transport_type") == dev.transport_type, got
        assert got.get("index") == dev.index, got
        assert got.get("node_guid") == guid_str(dev.guid), got


def test_unknown_device_is_404(daemon):
    assert_not_found(daemon, "/v1/devices/nosuchdev0")
    assert_not_found(daemon, "/v1/devices/nosuchdev0/ports/1")
    assert_not_found(daemon, "/v1/devices/nosuchdev0/ports/1/gids")


@pytest.mark.parametrize("port", [0, 99])
@pytest.mark.parametrize("tail", ["", "/gids"])
def test_bad_port_is_404(daemon, port, tail):
    assert_not_found(daemon, f"/v1/devices/{IBDEV}/ports/{port}{tail}")


# NOTE: depends on rdmactl (its command line lives in rdmactl_text()).
@pytest.mark.parametrize("what", ["device", "port"])
def test_rdmactl_text_matches_pyverbs(daemon, ctx, what):
    if what == "device":
        want = str(ctx.query_device())
    else:
        want = str(ctx.query_port(PORT))
    got = rdmactl_text(daemon, what, IBDEV)
    assert norm(got) == norm(want), f"rdmactl:\n{got}\npyverbs:\n{want}"
