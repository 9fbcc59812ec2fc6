# SPDX-License-Identifier: MIT
"""qp_modify() and selftest_run() on a real device, through the helper
build/tests/loopback (tests/integration/helpers/loopback.c): two QPs on one
device connected to each other (rxe moves no traffic between two devices;
within one it does, with the semantics of a remote peer). The kernel's own
view (`rdma resource show qp`) checks the connection while the helper holds
the QPs."""

import json
import select
import subprocess

import pytest

from conftest import BUILD, rdma_res

LOOPBACK = BUILD / "tests" / "loopback"
SLICE = 64 * 1024  # the helper's MR is 1 MiB: min(1 MiB / 4, 64 KiB)
STRAY_WR_ID = 0xDEADBEEF
EINVAL, EIO, ETIMEDOUT = 22, 5, 110


@pytest.fixture
def loopback():
    """loopback(*args) runs the helper and returns (exit status, JSON)."""
    if not LOOPBACK.exists():
        pytest.fail(f"{LOOPBACK} is missing: build it with "
                    "`make build/tests/loopback`")

    def run(*args, timeout=300):
        p = subprocess.run([str(LOOPBACK), *args], capture_output=True,
                           text=True, timeout=timeout)
        assert p.returncode in (0, 1), (
            f"loopback {' '.join(args)} failed to set up "
            f"(status {p.returncode}):\n{p.stderr}")
        return p.returncode, json.loads(p.stdout)
    return run


def assert_transfer_ok(t):
    assert t["ok"] is True, t
    assert t["bytes"] == SLICE
    assert isinstance(t["usec"], int) and t["usec"] >= 0
    assert "error" not in t


@pytest.mark.parametrize("opts", [
    [],
    ["--shared-cq"],
    ["--zero-based"],
    ["--mtu", "256"],
    ["--mtu", "4096"],
    ["--shared-cq", "--zero-based", "--mtu", "2048", "--repeat", "3"],
], ids=["separate-cqs", "shared-cq", "zero-based", "mtu256", "mtu4096",
        "combined-x3"])
def test_selftest_passes(loopback, opts):
    status, out = loopback("selftest", *opts)
    assert status == 0, out
    assert out["a"]["state"] == out["b"]["state"] == "RTS"
    assert out["a"]["peer"] == out["b"]["qp_num"]
    assert out["b"]["peer"] == out["a"]["qp_num"]
    for run in out["runs"]:
        assert run["rc"] == 0, run
        report = run["report"]
        assert set(report) == {"rdma_write", "send_recv"}, report
        assert_transfer_ok(report["rdma_write"])
        assert_transfer_ok(report["send_recv"])


def test_stray_completion_is_reported_not_lost(loopback):
    """A completion of someone else's WR on the shared CQ is listed in the
    report, once, and does not disturb the check."""
    status, out = loopback("selftest", "--shared-cq", "--stray",
                           "--repeat", "2")
    assert status == 0, out
    first, second = (r["report"] for r in out["runs"])
    assert first["n_stray_completions"] == 1
    (stray,) = first["stray_completions"]
    assert stray["wr_id"] == out["stray_wr_id"] == STRAY_WR_ID
    assert stray["qp_num"] == out["a"]["qp_num"]
    assert stray["status"] == "success"
    assert stray["byte_len"] == 64
    assert_transfer_ok(first["rdma_write"])
    assert_transfer_ok(first["send_recv"])
    assert "stray_completions" not in second
    assert_transfer_ok(second["rdma_write"])


def test_preconditions(loopback):
    status, out = loopback("precond")
    assert status == 0, out
    cases = {c["case"]: c for c in out["cases"]}
    want = {
        "init": ["is in state INIT, not RTS"],
        "mr_access": ["the MR lacks remote_write"],
        "not_connected": ["QP a (qpn", "is connected to qpn",
                          "not to the other end"],
        "no_remote_write": ["QP b (qpn", "does not allow remote_write"],
        "ud": ["QP a (qpn", "is UD, not RC", "QP b (qpn"],
    }
    assert set(cases) == set(want)
    for name, fragments in want.items():
        c = cases[name]
        assert c["rc"] == -EINVAL, c
        err = c["report"]["error"]
        assert err.startswith("preconditions not met: "), c
        for f in fragments:
            assert f in err, (name, err)
        # Nothing was attempted.
        assert "rdma_write" not in c["report"]
        assert "send_recv" not in c["report"]
    # Both ends are named when both are wrong.
    assert cases["init"]["report"]["error"].count("not RTS") == 2
    # A UD QP gets no advice about connections or access.
    assert "connected" not in cases["ud"]["report"]["error"]


def test_failures_are_reported(loopback):
    status, out = loopback("failure")
    assert status == 0, out
    cases = {c["case"]: c for c in out["cases"]}

    c = cases["bad_rkey"]
    assert c["rc"] == -EIO, c
    w = c["report"]["rdma_write"]
    assert w["ok"] is False and w["status"] == "remote access error"
    assert "vendor_err" in w
    assert c["report"]["error"].startswith(
        "rdma_write: the RDMA write on QP a completed with status "
        "'remote access error'")
    assert "send_recv" not in c["report"]
    assert c["state_a"] == "ERR"

    c = cases["wrong_mr"]
    assert c["rc"] == -EIO, c
    assert c["report"]["rdma_write"]["ok"] is False
    assert c["report"]["error"].startswith(
        f"rdma_write: data mismatch after the RDMA write: {SLICE} of "
        f"{SLICE} bytes differ, the first at offset 0")
    assert c["state_a"] == c["state_b"] == "RTS"

    c = cases["psn_retry_exceeded"]
    assert c["rc"] == -EIO, c
    assert c["report"]["rdma_write"]["status"] == \
        "transport retry counter exceeded"
    assert c["state_a"] == "ERR"

    c = cases["psn_timeout"]
    assert c["rc"] == -ETIMEDOUT, c
    assert c["report"]["error"] == (
        "rdma_write: no completion for the RDMA write on QP a within "
        "2000 ms (the WR is still outstanding)")
    assert c["state_a"] == "RTS"


def test_ud_pair_reaches_rts(loopback):
    status, out = loopback("ud")
    assert status == 0, out
    assert out["a"]["state"] == out["b"]["state"] == "RTS"
    # The qkey the path set is the one a send must carry to arrive.
    assert out["send"] == {"send_rc": 0, "recv_rc": 0, "data_ok": True,
                           "qkey": 0x11111111}


def test_transitions_back_and_forth(loopback):
    status, out = loopback("recover")
    assert status == 0, out
    assert out["before"]["rc"] == 0 and out["after"]["rc"] == 0, out
    steps = [(s["step"], s["rc"], s["failed_at"], s["state"])
             for s in out["steps"]]
    assert steps == [
        ("a RTS->RTS (no-op)", 0, None, "RTS"),
        ("a RTS->INIT", 0, None, "INIT"),
        ("b forced to ERR", 0, None, "ERR"),
        ("b ERR->RTS", 0, None, "RTS"),
        ("a INIT->RTS", 0, None, "RTS"),
        ("a RTS->ERR", 0, None, "ERR"),
        ("a ERR->RESET", 0, None, "RESET"),
        ("a RESET->RTS", 0, None, "RTS"),
    ]
    assert_transfer_ok(out["after"]["report"]["rdma_write"])
    assert_transfer_ok(out["after"]["report"]["send_recv"])


def test_refused_paths_name_the_failed_step(loopback):
    status, out = loopback("badpath")
    assert status == 0, out
    got = {c["case"]: (c["rc"] < 0, c["failed_at"], c["state"])
           for c in out["cases"]}
    assert got == {
        # No GID at that index.
        "rc_bad_sgid_index": (True, "INIT->RTR", "INIT"),
        # RoCE needs a GRH.
        "rc_no_grh": (True, "INIT->RTR", "INIT"),
        # The device has one port.
        "rc_port_2": (True, "RESET->INIT", "RESET"),
        "ud_port_2": (True, "RESET->INIT", "RESET"),
        # Above the device's max_qp_rd_atom.
        "rc_max_rd_atomic_255": (True, "RTR->RTS", "RTR"),
        "uc_good": (False, None, "RTS"),
        "rc_good": (False, None, "RTS"),
    }


def test_kernel_sees_connected_pair(loopback):
    """While the helper holds the pair, `rdma resource show qp` shows both
    QPs in RTS, each with the other as its remote QP."""
    proc = subprocess.Popen([str(LOOPBACK), "hold"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "the helper printed nothing in 120 s"
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        held = json.loads(line)
        assert held["pid"] == proc.pid
        a, b, path = held["a"], held["b"], held["path_a"]
        assert path["dqpn"] == b["qp_num"]
        assert path["has_grh"] is True and path["sgid_index"] == 1
        assert path["mtu"] == 1024

        qps = {q["lqpn"]: q for q in rdma_res("qp", proc.pid)}
        assert set(qps) == {a["qp_num"], b["qp_num"]}, qps
        for me, peer in ((a, b), (b, a)):
            q = qps[me["qp_num"]]
            assert q["type"] == "RC", q
            assert q["state"] == "RTS", q
            assert q["rqpn"] == peer["qp_num"], q
            assert q["sq-psn"] == path["sq_psn"], q
            assert q["rq-psn"] == path["rq_psn"], q
            assert q["ifname"] == "rxe0" and q["port"] == path["port_num"]
    finally:
        proc.stdin.close()
        rc = proc.wait(timeout=60)
        proc.stdout.close()
        proc.stderr.close()
    assert rc == 0
    assert rdma_res("qp", proc.pid) == []
