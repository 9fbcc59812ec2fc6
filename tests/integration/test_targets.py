# SPDX-License-Identifier: MIT
"""Targets: a remote peer (pyverbs' own rdma_cm, tests/integration/
cmpeer.py) connects to a declared target, gets one type-2 memory window
per exposed range in the accept private data, and RDMA-writes and reads
through them; a client attached to the profile sees the bytes through
rdmad_mr_map. Access ends when it should (revoke, disconnect, reload,
stop) and admission refuses what it should (address, token, count), each
checked with `rdma resource show` as well as with the peer's own
completions.

One guest: rxe0 and rxe1 do not carry traffic to each other, so the peer
connects from the target's own address on rxe0, in a context of its own
(its QP and rkeys are its own: the semantics of a remote host)."""

import secrets
import subprocess
import time

import pytest

from conftest import BUILD, free_port, rdma_res, rdmactl, settle

pytest.importorskip("pyverbs.cmid")
import pyverbs.enums as e  # noqa: E402

from cmpeer import (REJECT_ADDRESS, REJECT_FULL, REJECT_TOKEN,  # noqa: E402
                    Peer, Rejected)
from target_setup import (ATTACH, READ_ONLY_PAGE, READ_WRITE_64K,  # noqa: E402
                          attach_sees, peer_round_trip, target_conf,
                          target_doc)

ADDR = "192.0.2.1"


def conf(port, allow='"192.0.2.0/24"', token=None, max_conn=4):
    return target_conf('ibdev = "rxe0";', f"{ADDR}:{port}", allow,
                       (READ_WRITE_64K, READ_ONLY_PAGE), max_conn, token)


def kernel_qps(pid=None):
    """QP numbers on rxe0 as `rdma resource show` lists them (pid's
    only, when given)."""
    return {r["lqpn"] for r in rdma_res("qp", pid)
            if r.get("ifname") == "rxe0"}


def cm_ids(pid, port):
    """The daemon's rdma_cm ids on port, as `rdma resource show cm_id`
    lists them. (iproute2 lists no memory windows: that they are gone
    shows in the peer's remote access error.)"""
    return [r for r in rdma_res("cm_id", pid)
            if r.get("src-addr", "").endswith(f":{port}")]


def established(d, n=1):
    ok = settle(lambda: sum(c["state"] == "established"
                            for c in target_doc(d)["connections"]) == n,
                10)
    assert ok, target_doc(d)
    return target_doc(d)["connections"]


@pytest.fixture
def port():
    return free_port()


def test_peer_writes_and_reads_through_its_windows(rdmad, port):
    d = rdmad(conf(port))
    doc = target_doc(d)
    assert doc["state"] == "ready" and doc["listening"] is True, doc
    assert doc["connections"] == []
    ids = cm_ids(d.pid, port)
    assert [r.get("state") for r in ids] == ["LISTEN"], ids
    peer = Peer(ADDR, port)
    try:
        assert len(peer.ranges) == 2
        (a0, k0, l0), (a1, k1, l1) = peer.ranges
        mr = next(o for o in d.get("/v1/profiles/p")[1]["objects"]
                  if o["name"] == "pool")
        assert (a0, l0) == (mr["iova"], 65536)
        assert (a1, l1) == (mr["iova"] + 512 * 1024, 4096)
        # Windows, not the MR: rkeys of their own, one per range.
        assert len({k0, k1, mr["rkey"]}) == 3

        conns = established(d)
        c = conns[0]
        assert c["qp_num"] in kernel_qps()
        assert c["peer"].startswith(ADDR + ":")
        assert [r["rkey"] for r in c["ranges"]] == [k0, k1]

        pattern = peer_round_trip(peer)
        # The second range is read-only, and ends where it is declared.
        assert peer.read(16, i=1)[0] == e.IBV_WC_SUCCESS
    finally:
        peer.close()

    # A client attached to the profile sees the bytes in the shared
    # memory (the first range starts at the MR's start).
    attach_sees(d.sock, pattern)


def test_windows_allow_what_is_declared(rdmad, port):
    """A window allows the access declared and no other: a write into the
    read-only range fails with a remote access error, and the MR's own
    rkey was never given out. (Past a window's end, rxe in Linux 6.1
    checks the access against the MR's bounds, not the window's: a
    device that enforces window bounds is covered in tests/hw.)"""
    d = rdmad(conf(port))
    peer = Peer(ADDR, port)
    try:
        assert peer.read(8, i=1)[0] == e.IBV_WC_SUCCESS
        assert peer.write(b"x" * 8, i=1) == e.IBV_WC_REM_ACCESS_ERR
    finally:
        peer.close()
    assert settle(lambda: target_doc(d)["connections"] == [], 10)


def test_mr_rkey_opens_nothing(rdmad, port):
    """Issue 45: the window is the only way in. The exposed MR has no
    remote access (rdmad --check insists), so its own rkey, which GET
    /v1/profiles/p shows to anyone, is refused by the device: outside
    the windows, and inside them too. (rxe enforces a window's access
    flags, not its bounds, so this refusal is the decisive check.) Each
    refused access breaks that peer's QP: one peer per attempt."""
    d = rdmad(conf(port))
    mr = next(o for o in d.get("/v1/profiles/p")[1]["objects"]
              if o["name"] == "pool")
    assert not {"remote_read", "remote_write",
                "remote_atomic"} & set(mr["access"]), mr
    outside = [mr["iova"] + 256 * 1024, mr["rkey"]]   # in no range
    inside = [mr["iova"] + 64, mr["rkey"]]            # in range 0
    for at, op in ((outside, "write"), (outside, "read"),
                   (inside, "write"), (inside, "read")):
        peer = Peer(ADDR, port)
        try:
            if op == "write":
                st = peer.write(b"sneak in", at=at)
            else:
                st = peer.read(8, at=at)[0]
            assert st == e.IBV_WC_REM_ACCESS_ERR, (at, op, st)
        finally:
            peer.close()
        assert settle(lambda: target_doc(d)["connections"] == [], 10)
    # The memory under the window is untouched by all of it.
    peer = Peer(ADDR, port)
    try:
        status, back = peer.read(16, offset=64)
        assert status == e.IBV_WC_SUCCESS and back == bytes(16), back
        # Through the window: in; revoked: out, inside it too.
        assert peer.write(b"through", offset=64) == e.IBV_WC_SUCCESS
        c = established(d)[0]
        r = rdmactl(d, "target", "revoke", "p", "kv", str(c["id"]))
        assert r.returncode == 0, r.stderr
        assert peer.write(b"again!!", offset=64) == e.IBV_WC_REM_ACCESS_ERR
    finally:
        peer.close()


def test_revoke_ends_access_at_once(rdmad, port):
    d = rdmad(conf(port))
    peer = Peer(ADDR, port)
    try:
        assert peer.write(b"before") == e.IBV_WC_SUCCESS
        c = established(d)[0]
        qps_before = kernel_qps()
        assert c["qp_num"] in qps_before
        r = rdmactl(d, "target", "revoke", "p", "kv", str(c["id"]))
        assert r.returncode == 0, r.stderr
        assert target_doc(d)["connections"][0]["state"] == "revoked"
        # The windows are gone before the connection: the next write
        # meets the daemon's live QP with an invalid rkey.
        assert peer.write(b"after!") == e.IBV_WC_REM_ACCESS_ERR
        assert settle(lambda: c["qp_num"] not in kernel_qps(), 10)
        assert target_doc(d)["connections"] == []
        assert [r.get("state") for r in cm_ids(d.pid, port)] == ["LISTEN"]
        # Revoking it again: it is not there.
        r = rdmactl(d, "target", "revoke", "p", "kv", str(c["id"]))
        assert r.returncode != 0 and "no connection" in r.stderr, r
    finally:
        peer.close()
    status, body = d.request(
        "DELETE", f"/v1/profiles/p/target/kv/connections/{c['id']}")
    assert status == 404, body


def test_revoke_over_rest(rdmad, port):
    d = rdmad(conf(port))
    peer = Peer(ADDR, port)
    try:
        c = established(d)[0]
        status, body = d.request(
            "DELETE", f"/v1/profiles/p/target/kv/connections/{c['id']}")
        assert status == 200, body
        assert peer.write(b"after") == e.IBV_WC_REM_ACCESS_ERR
    finally:
        peer.close()


def test_peer_disconnect_tears_down(rdmad, port):
    d = rdmad(conf(port))
    peer = Peer(ADDR, port)
    c = established(d)[0]
    peer.close()
    assert settle(lambda: target_doc(d)["connections"] == [], 10)
    assert c["qp_num"] not in kernel_qps()
    m = d.metrics()
    assert m['rdmad_target_connections{profile="p",target="kv"}'] == 0
    assert m['rdmad_target_connections_total{profile="p",target="kv",'
             'result="disconnected"}'] == 1


@pytest.mark.parametrize("how", ["reload", "sigterm"])
def test_target_going_away_ends_access(rdmad, port, how):
    d = rdmad(conf(port))
    peer = Peer(ADDR, port)
    try:
        c = established(d)[0]
        if how == "reload":
            d.conf.write_text(d.conf.read_text().replace(
                d.conf.read_text()[d.conf.read_text().index("    target"):
                                   d.conf.read_text().index("  }\n);")],
                ""))
            status, body = d.request("POST", "/v1/reload")
            assert status == 200, body
            status, _ = d.get("/v1/profiles/p/target/kv")
            assert status == 404
        else:
            d.stop()
        assert c["qp_num"] not in kernel_qps()
        # The daemon's QP is gone: the peer's write cannot succeed.
        assert peer.write(b"late") != e.IBV_WC_SUCCESS
    finally:
        peer.close()


def test_admission(rdmad, port, tmp_path):
    tok = tmp_path / "kv.token"
    tok.write_text("s3cret\n")
    d = rdmad(conf(port, token=f"@{tok}", max_conn=1))
    qps = kernel_qps(d.pid)
    with pytest.raises(Rejected) as r:
        Peer(ADDR, port)
    assert r.value.reason == REJECT_TOKEN and "token" in r.value.text
    with pytest.raises(Rejected) as r:
        Peer(ADDR, port, token=b"wrong")
    assert r.value.reason == REJECT_TOKEN
    first = Peer(ADDR, port, token=b"s3cret")
    try:
        established(d)
        with pytest.raises(Rejected) as r:
            Peer(ADDR, port, token=b"s3cret")
        assert r.value.reason == REJECT_FULL
        assert "max_connections" in r.value.text
    finally:
        first.close()
    assert settle(lambda: target_doc(d)["connections"] == [], 10)
    assert kernel_qps(d.pid) == qps
    m = d.metrics()
    for result, n in (("rejected_token", 2), ("rejected_full", 1),
                      ("accepted", 1)):
        assert m[f'rdmad_target_connections_total{{profile="p",'
                 f'target="kv",result="{result}"}}'] == n, m


def test_address_outside_allow(rdmad, port):
    d = rdmad(conf(port, allow='"10.0.0.0/8", "fd00::/8"'))
    with pytest.raises(Rejected) as r:
        Peer(ADDR, port)
    assert r.value.reason == REJECT_ADDRESS
    assert ADDR in r.value.text
    assert target_doc(d)["connections"] == []


def test_check_listen_not_on_the_device(write_conf):
    path = write_conf(conf(free_port()).replace(f'"{ADDR}:', '"127.0.0.1:'))
    r = subprocess.run([str(BUILD / "rdmad"), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78, r
    assert "target 'kv': listen 127.0.0.1:" in r.stderr, r.stderr
    assert f"{path}:" in r.stderr


PEER = BUILD / "examples" / "target_peer"


def test_librdmad_helper_connects_a_clients_own_qp(rdmad, port, tmp_path):
    """examples/target_peer: a librdmad client attached to the profile
    connects a QP of its own with rdmad_target_connect(), writes through
    the window and reads back; `attach` sees the bytes in the MR."""
    d = rdmad(conf(port, token="tok-1"))
    text = "hello-" + secrets.token_hex(4)
    r = subprocess.run([str(PEER), "-s", str(d.sock), "-t", "tok-1", "p",
                        "pd", f"{ADDR}:{port}", text],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr, d.log())
    assert f"read back: {text}" in r.stdout
    assert r.stdout.count("range ") == 2
    out = subprocess.run([str(ATTACH), "-s", str(d.sock), "p"],
                         capture_output=True, text=True, timeout=60)
    assert text[:16] in out.stdout, out.stdout
    # Refused: the reason reaches the client's message.
    r = subprocess.run([str(PEER), "-s", str(d.sock), "-t", "nope", "p",
                        "pd", f"{ADDR}:{port}", text],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "token" in r.stderr, r
    assert settle(lambda: target_doc(d)["connections"] == [], 10)


def test_events_of_a_target(rdmad, port):
    """The event stream tells connect, revoke and reject, with the same
    fields as the connections document."""
    import threading
    from conftest import RDMACTL
    from test_events import Collector, monitor_reader
    d = rdmad(conf(port, token="tok-2"))
    col = Collector("rdmactl monitor")
    proc = subprocess.Popen([str(RDMACTL), "--socket", str(d.sock),
                             "monitor", "--json", "target"],
                            stdout=subprocess.PIPE, text=True)
    threading.Thread(target=monitor_reader, args=(proc, col),
                     daemon=True).start()
    try:
        time.sleep(1)
        with pytest.raises(Rejected):
            Peer(ADDR, port, token=b"bad")
        rej = col.wait_for(lambda ev: ev["event"] == "target_reject")
        assert rej["profile"] == "p" and rej["name"] == "kv"
        assert "token" in rej["reason"] and rej["peer"].startswith(ADDR)
        peer = Peer(ADDR, port, token=b"tok-2")
        try:
            c = established(d)[0]
            ev = col.wait_for(lambda ev: ev["event"] == "target_connect")
            assert (ev["id"], ev["qp_num"], ev["peer"]) == \
                (c["id"], c["qp_num"], c["peer"])
            rdmactl(d, "target", "revoke", "p", "kv", str(c["id"]))
            ev = col.wait_for(lambda ev: ev["event"] == "target_revoke")
            assert ev["id"] == c["id"] and ev["reason"] == "revoked"
        finally:
            peer.close()
    finally:
        proc.terminate()
        proc.wait(60)
    assert [e["seq"] for e in col.snapshot()] == \
        sorted(e["seq"] for e in col.snapshot())


def test_cq_with_a_channel_is_waited_on(rdmad, port):
    """channel = true on the target's CQ: the daemon waits on the CQ's
    completion channel for the window binds (ack, arm again, poll)
    instead of polling every millisecond. Connection after connection
    is accepted (each needs the channel armed again) and moves data."""
    d = rdmad(conf(port).replace('cqe = 64;', 'cqe = 64; channel = true;'))
    status, cq = d.get("/v1/profiles/p/cq/tcq")
    assert status == 200 and cq["channel"] is True, cq
    for n in range(3):
        peer = Peer(ADDR, port)
        try:
            established(d)
            peer_round_trip(peer, 32)
        finally:
            peer.close()
        assert settle(lambda: target_doc(d)["connections"] == [], 10), \
            target_doc(d)
    # Two at once: both binds complete through one channel.
    peers = [Peer(ADDR, port), Peer(ADDR, port)]
    try:
        established(d, 2)
    finally:
        for p in peers:
            p.close()
