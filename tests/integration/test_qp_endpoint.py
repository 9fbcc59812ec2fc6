# SPDX-License-Identifier: MIT
"""QP bring-up without rdma_cm, on rxe: a QP's endpoint document (GET
/v1/profiles/{p}/qp/{q}/endpoint) checked against the kernel's view
(`rdma resource show qp`) and the device's GID table. Two QPs of one
device stand for the two hosts (rxe moves data between QPs of one
device as between remote peers)."""

import json
import os
import subprocess

from conftest import RDMAD, rdma_res, rdmactl

CONF = """
devices = ( { name = "d0"; match = { netdev = "veth0"; };
              gid = { type = "roce_v2"; family = "ipv4"; }; } );
profiles = (
  { name = "p"; device = "d0";
    memory = ( { name = "m"; size = "1M"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m";
             access = [ "local_write", "remote_write", "remote_read" ]; } );
    cq = ( { name = "c"; cqe = 128; } );
    qp = ( { name = "q0"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "q1";
             access = [ "remote_write", "remote_read" ]; },
           { name = "q1"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "q0";
             access = [ "remote_write", "remote_read" ]; },
           { name = "ea"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "init";
             access = [ "remote_write", "remote_read" ]; },
           { name = "eb"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "init";
             access = [ "remote_write", "remote_read" ]; },
           { name = "r"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rtr";
             path = { dqpn = 17; sq_psn = 4242; }; },
           { name = "u"; pd = "a"; type = "ud"; send_cq = "c";
             recv_cq = "c"; state = "rts"; } );
  }
);
"""

KEYS = {"qp_num", "port", "lid", "gid", "gid_index", "psn", "mtu", "type"}


def get(d, path):
    status, doc = d.get(path)
    assert status == 200, (path, status, doc)
    return doc


def test_endpoint_matches_kernel_and_gid_table(rdmad):
    d = rdmad(CONF).settle()
    port = get(d, "/v1/devices/rxe0/ports/1")
    gids = {g["index"]: g for g in get(d, "/v1/devices/rxe0/ports/1/gids")}
    kernel = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
    for name, state, psn in (("q0", "RTS", 0), ("q1", "RTS", 0),
                             ("ea", "INIT", 0), ("r", "RTR", 4242),
                             ("u", "RTS", 0)):
        qp = get(d, f"/v1/profiles/p/qp/{name}")
        ep = get(d, f"/v1/profiles/p/qp/{name}/endpoint")
        assert set(ep) == KEYS, ep
        assert ep["qp_num"] == qp["qp_num"]
        k = kernel[ep["qp_num"]]
        assert k["state"] == state and k["port"] == ep["port"] == 1, k
        # The PSN the QP sends with: the kernel's sq-psn once in RTS,
        # before, what the move to RTS would set (path sq_psn, or 0).
        assert ep["psn"] == psn, (name, ep)
        if state == "RTS":
            assert ep["psn"] == k["sq-psn"], (ep, k)
        assert ep["type"] == ("ud" if name == "u" else "rc")
        # The GID is the table's entry at gid_index: the selected
        # RoCE v2 IPv4 one, in the table's text form.
        g = gids[ep["gid_index"]]
        assert ep["gid"] == g["gid"] and g["type"] == "roce_v2", (ep, g)
        assert ep["gid_index"] == get(d, "/v1/profiles/p")["gid_index"]
        assert ep["gid"].startswith("0000:0000:0000:0000:0000:ffff:"), \
            (name, ep)
        assert ep["lid"] == port["lid"] == 0  # RoCE
        assert ep["mtu"] == int(port["active_mtu_name"])

    # rdmactl: text, one "key: value" a line, and --json the same doc.
    r = rdmactl(d, "endpoint", "p", "r")
    assert r.returncode == 0, r.stderr
    ep = get(d, "/v1/profiles/p/qp/r/endpoint")
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines())
    assert lines["qp_num"] == str(ep["qp_num"])
    assert lines["gid"] == ep["gid"] and lines["psn"] == "4242"
    r = rdmactl(d, "--json", "endpoint", "p", "r")
    assert r.returncode == 0 and json.loads(r.stdout) == ep, r

    # Not found: the profile, the QP; not a QP kind's path.
    assert d.get("/v1/profiles/p/qp/nope/endpoint")[0] == 404
    assert d.get("/v1/profiles/nope/qp/q0/endpoint")[0] == 404
    assert d.get("/v1/profiles/p/mr/r/endpoint")[0] == 404
    r = rdmactl(d, "endpoint", "p", "nope")
    assert r.returncode == 1 and "nope" in r.stderr


def patch(d, name, body):
    return d.request("PATCH", f"/v1/profiles/p/qp/{name}", body)


def test_bring_up_from_endpoints(rdmad, tmp_path):
    """Two QPs connected from each other's endpoint documents alone, as
    two hosts would exchange them (here: two QPs of one device, as a
    loopback), then data moves between them."""
    d = rdmad(CONF).settle()
    ep_a = get(d, "/v1/profiles/p/qp/ea/endpoint")
    # B from A's document, with a PSN of its own to tell them apart.
    status, qb = patch(d, "eb", {"state": "rts", "endpoint": ep_a,
                                 "path": {"sq_psn": 555}})
    assert status == 200, qb
    assert qb["qp_state"] == "rts" and qb["dqpn"] == ep_a["qp_num"]
    assert qb["dgid"] == ep_a["gid"] and qb["mtu"] == ep_a["mtu"]
    ep_b = get(d, "/v1/profiles/p/qp/eb/endpoint")
    assert ep_b["psn"] == 555
    # A from B's document, through rdmactl and a file.
    f = tmp_path / "eb.json"
    f.write_text(json.dumps(ep_b))
    r = rdmactl(d, "qp", "p", "ea", "--state", "rts", "--endpoint", str(f))
    assert r.returncode == 0, r.stderr
    assert "qp_state=rts" in r.stdout

    kernel = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
    ka, kb = kernel[ep_a["qp_num"]], kernel[ep_b["qp_num"]]
    assert ka["state"] == kb["state"] == "RTS"
    assert ka["rqpn"] == ep_b["qp_num"] and kb["rqpn"] == ep_a["qp_num"]
    assert ka["rq-psn"] == kb["sq-psn"] == 555
    assert kb["rq-psn"] == ka["sq-psn"] == ep_a["psn"] == 0

    status, rep = d.request("POST", "/v1/profiles/p/selftest",
                            {"a": "ea", "b": "eb", "mr": "r"})
    assert status == 200 and rep["ok"] is True, rep
    status, rep = d.request("POST", "/v1/profiles/p/selftest",
                            {"a": "eb", "b": "ea", "mr": "r"})
    assert status == 200 and rep["ok"] is True, rep

    # Documents that do not fit: refused before anything changes.
    for body, msg in (
            ({"qp_num": 1, "type": "ud"},
             "endpoint: the endpoint is of a ud QP, this one is rc"),
            ({"psn": 1}, "endpoint: 'qp_num' is missing"),
            ({"qp_num": 1, "gid": "nope"}, "endpoint: 'gid' = \"nope\""),
            ([1], "endpoint: an endpoint must be an object")):
        status, err = patch(d, "ea", {"state": "rts", "endpoint": body})
        assert status == 400, err
        assert err["error"]["message"].startswith(msg), err
    assert get(d, "/v1/profiles/p/qp/ea")["dqpn"] == ep_b["qp_num"]
    r = rdmactl(d, "qp", "p", "ea", "--state", "rts", "--endpoint",
                str(tmp_path / "missing.json"))
    assert r.returncode == 64 and "missing.json" in r.stderr, r


def test_rts_to_rts_changes_in_place(rdmad):
    """PATCH state rts on a QP in RTS changes what IB lets change there
    (min_rnr_timer, access: RTS->RTS; timeout, retry_cnt, rnr_retry,
    max_rd_atomic: through SQD) on the same QP: qp_num and the kernel's
    object stay, data still moves."""
    d = rdmad(CONF).settle()
    before = get(d, "/v1/profiles/p/qp/q0")
    kernel0 = {q["lqpn"] for q in rdma_res("qp", d.pid)}
    assert before["qp_state"] == "rts" and before["min_rnr_timer"] == 12
    assert (before["timeout"], before["retry_cnt"],
            before["rnr_retry"]) == (14, 7, 7)

    def same_qp(doc):
        assert doc["qp_num"] == before["qp_num"]
        assert doc["qp_state"] == "rts" and doc["dqpn"] == before["dqpn"]
        k = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
        assert set(k) == kernel0
        assert k[before["qp_num"]]["state"] == "RTS"
        assert k[before["qp_num"]]["rqpn"] == before["dqpn"]

    def data_moves():
        status, rep = d.request("POST", "/v1/profiles/p/selftest",
                                {"a": "q0", "b": "q1", "mr": "r"})
        assert status == 200 and rep["ok"] is True, rep

    status, q = patch(d, "q0", {"state": "rts",
                                "path": {"min_rnr_timer": 20}})
    assert status == 200, q
    same_qp(q)
    assert q["min_rnr_timer"] == 20
    data_moves()

    status, q = patch(d, "q0", {"state": "rts", "path": {
        "timeout": 18, "retry_cnt": 5, "rnr_retry": 6}})
    assert status == 200, q
    same_qp(q)
    assert (q["timeout"], q["retry_cnt"], q["rnr_retry"]) == (18, 5, 6)
    data_moves()

    # The access flags (RTS->RTS) and max_rd_atomic (through SQD)
    # together; q1 still lets q0 write.
    status, q = patch(d, "q0", {"state": "rts", "path": {
        "access": ["remote_write", "remote_read", "remote_atomic"],
        "max_rd_atomic": 4, "min_rnr_timer": 3}})
    assert status == 200, q
    same_qp(q)
    assert q["min_rnr_timer"] == 3 and q["timeout"] == 18
    data_moves()

    # What RTS cannot change: refused, the QP as it was.
    status, err = patch(d, "q0", {"state": "rts", "path": {"dqpn": 5}})
    assert status == 400
    assert "'dqpn' cannot change while the QP is in RTS" in \
        err["error"]["message"], err
    status, err = patch(d, "q0", {"state": "rts",
                                  "endpoint": {"qp_num": 5}})
    assert status == 400 and "move it to reset" in err["error"]["message"]
    same_qp(get(d, "/v1/profiles/p/qp/q0"))
    # Without a path: nothing to change, nothing changes.
    status, q = patch(d, "q0", {"state": "rts"})
    assert status == 200
    same_qp(q)
    data_moves()


APM = """
devices = ( { name = "d0"; match = { netdev = "veth0"; };
              gid = { type = "roce_v2"; family = "ipv4"; }; } );
profiles = (
  { name = "p"; device = "d0";
    memory = ( { name = "m"; size = "1M"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m";
             access = [ "local_write", "remote_write" ]; } );
    cq = ( { name = "c"; cqe = 128; } );
    qp = ( { name = "m0"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "m1";
             access = [ "remote_write" ];
             alt_path = { timeout = 16; }; },
           { name = "m1"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "m0";
             access = [ "remote_write" ];
             alt_path = { timeout = 17; hop_limit = 32; }; },
           { name = "plain"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "plain2"; },
           { name = "plain2"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "plain"; } );
  }
);
"""


def test_alternate_path_refused_on_roce(rdmad, tmp_path):
    """Linux loads alternate paths (APM) on InfiniBand ports only (the
    core refuses them on RoCE), so on rxe a QP with alt_path is refused
    clearly: at --check, with file:line, and at start (before anything is
    made). A QP without an armed alternate path cannot migrate. The
    migration itself: tests/hw/test_apm_hw.py."""
    conf = tmp_path / "apm.conf"
    conf.write_text(APM)
    r = subprocess.run([str(RDMAD), "--check", "-c", str(conf)],
                       capture_output=True, text=True)
    assert r.returncode == 78, r  # EX_CONFIG
    lines = [line for line in r.stderr.splitlines() if "alt_path" in line]
    assert len(lines) == 2, r.stderr
    line = APM.splitlines().index(next(x for x in APM.splitlines()
                                       if 'name = "m0"' in x)) + 1
    assert lines[0].startswith(f"{conf}:{line}: qp 'm0': alt_path: Linux "
                               "loads alternate paths (APM) on InfiniBand "
                               "ports only"), lines

    # Starting with it: the same refusal, before anything is made.
    r = subprocess.run([str(RDMAD), "-c", str(conf)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 78 and lines[0] in r.stderr, r

    # Without them, the rest serves.
    d = rdmad(APM.replace("alt_path = { timeout = 16; };", "")
              .replace("alt_path = { timeout = 17; hop_limit = 32; };", "")
              ).settle()
    plain = get(d, "/v1/profiles/p/qp/plain")
    assert plain["state"] == "ready" and plain["qp_state"] == "rts"
    # A QP starts migrated: nothing armed to move to.
    assert plain["path_mig_state"] == "migrated" and "alt_path" not in plain
    kernel = {q["lqpn"]: q for q in rdma_res("qp", d.pid)}
    assert kernel[plain["qp_num"]]["path-mig-state"] == "MIGRATED"
    status, err = d.request("POST", "/v1/profiles/p/qp/plain/migrate", {})
    assert status == 409 and err["error"]["code"] == "conflict", err
    assert "no alternate path armed" in err["error"]["message"], err
    r = rdmactl(d, "qp", "migrate", "p", "plain")
    assert r.returncode == 1 and "cannot migrate" in r.stderr, r
    assert d.request("POST", "/v1/profiles/p/qp/nope/migrate", {})[0] == 404


PKEY = """
devices = ( { name = "d0"; match = { netdev = "veth0"; }; } );
profiles = (
  { name = "p"; device = "d0";
    pd = ( { name = "a"; } );
    cq = ( { name = "c"; } );
    qp = ( { name = "k"; pd = "a"; type = "rc"; send_cq = "c";
             recv_cq = "c"; pkey = %s; },
           { name = "u"; pd = "a"; type = "ud"; send_cq = "c";
             recv_cq = "c"; state = "rts"; pkey = 0xffff; } );
  }
);
"""


def pkey_table():
    """Port 1 of rxe0's P_Key table, as sysfs gives it."""
    base = "/sys/class/infiniband/rxe0/ports/1/pkeys"
    table = {}
    for name in os.listdir(base):
        try:
            with open(f"{base}/{name}") as f:
                table[int(name)] = int(f.read(), 16)
        except OSError:
            continue
    return table


def test_pkey_by_value(rdmad, tmp_path):
    """pkey = VALUE is looked up in the port's P_Key table: the QP gets
    that entry's index (the device's own answer, ibv_query_qp), and a
    value not in the table is refused at --check with file:line."""
    table = pkey_table()
    assert table.get(0) == 0xffff, table  # rxe's one entry
    d = rdmad(PKEY % "0xffff").settle()
    for name in ("k", "u"):
        q = get(d, f"/v1/profiles/p/qp/{name}")
        assert q["state"] == "ready", q
        assert q["pkey"] == 0xffff and q["pkey_index"] == 0, q
        assert q["config"]["pkey"] == 0xffff, q

    conf = tmp_path / "pkey.conf"
    absent = next(v for v in (0x8001, 0x7fff, 0x1234)
                  if v not in table.values())
    conf.write_text(PKEY % hex(absent))
    r = subprocess.run([str(RDMAD), "--check", "-c", str(conf)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78, r
    assert f"{conf}:7: qp 'k': pkey 0x{absent:04x} is not in the P_Key " \
        "table of rxe0 port 1" in r.stderr, r.stderr
