# SPDX-License-Identifier: MIT
"""The engine at work: objects are created on worker threads while REST and
the control socket keep answering; objects show `creating` and profiles
their progress; attaching to a profile that is not ready answers
`not_ready`, or waits when asked; a reload or SIGTERM in the middle of a
large registration ends in the right state; creation in parallel keeps
dependency order; a 10k-object configuration starts, reloads one change
and stops with the kernel agreeing at each step."""

import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import rdma_res, settle
from rdmadproto import ATTACH, ATTACHED, ERROR, Client

MIB = 1 << 20
# Large enough that registering it takes a while under TCG, small enough
# for the VM (3 GiB).
# Big enough that its registration is seen under way (seconds in the VM).
BIG = "512M"
BIG_BYTES = 512 * MIB
# How long the big registration may take: seconds in an idle guest,
# several times that where two guests share two CPUs with more.
BIG_SETTLE = 300


@pytest.fixture
def run_dir():
    run = Path("/run") / f"rdmad-engine-{secrets.token_hex(4)}"
    run.mkdir(mode=0o755)
    yield run
    subprocess.run(["rm", "-rf", str(run)])


def daemon(run, port):
    return (f'daemon = {{ runtime_dir = "{run}"; '
            f'http = {{ listen = [ "127.0.0.1:{port}" ]; '
            f'token_file = "{run}/token"; }}; }};\n')


def big_conf(run, port, big=BIG, extra=""):
    return daemon(run, port) + f"""
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = (
  {{ name = "p"; device = "d0";
    memory = ( {{ name = "big"; size = "{big}"; }},
               {{ name = "small"; size = "4K"; }} );
    pd = ( {{ name = "pd"; }} );
    mr = ( {{ name = "big"; pd = "pd"; memory = "big";
             access = [ "local_write", "remote_write" ]; }},
           {{ name = "small"; pd = "pd"; memory = "small"; }} );
    {extra}
  }}
);
"""


def start(rdmad, run, text):
    from conftest import TOKEN
    (run / "token").write_text(TOKEN + "\n")
    (run / "token").chmod(0o600)
    d = rdmad(text, wait=False)
    d.token = TOKEN
    d.sock = str(run / "rdmad.sock")
    return d


def answers(d):
    try:
        status, _ = d.request("GET", "/v1/health", settle=False)
        return status == 200
    except OSError:
        return False


def creating(d):
    """The profile document while it is being created, else None."""
    if not answers(d):
        return None
    status, p = d.request("GET", "/v1/profiles/p", settle=False)
    return p if status == 200 and p["state"] == "creating" else None


def kernel_mrs(pid):
    return sorted(r["mrlen"] for r in rdma_res("mr", pid))


def test_progress_while_registering(rdmad, run_dir):
    from conftest import free_port
    port = free_port()
    d = start(rdmad, run_dir, big_conf(run_dir, port))
    assert settle(lambda: creating(d) is not None, 60), d.log()
    p = creating(d)
    assert p is not None, "the registration ended before it was seen"
    pr = p["progress"]
    assert pr["objects_total"] == 5
    assert pr["bytes_total"] == BIG_BYTES + 4096
    assert 0 <= pr["objects"] < 5 and pr["bytes"] < pr["bytes_total"]
    big = [o for o in p["objects"] if o["name"] == "big" and o["kind"] == "mr"]
    assert big[0]["state"] == "creating"
    assert "lkey" not in big[0]
    # The list of profiles and the control socket say the same.
    status, profiles = d.request("GET", "/v1/profiles", settle=False)
    assert status == 200 and profiles[0]["state"] in ("creating", "ready")
    c = Client(d.sock)
    status, doc = c.request("GET", "/v1/profiles/p")
    assert status == 200 and doc["state"] in ("creating", "ready")
    if doc["state"] == "creating":
        assert doc["progress"]["objects_total"] == 5
    c.close()
    d.settle(BIG_SETTLE)
    status, p = d.get("/v1/profiles/p")
    assert p["state"] == "ready" and "progress" not in p
    assert all(o["state"] == "ready" for o in p["objects"])
    assert kernel_mrs(d.pid) == [4096, BIG_BYTES]


def test_attach_not_ready_then_waiting_attach(rdmad, run_dir):
    from conftest import free_port
    port = free_port()
    d = start(rdmad, run_dir, big_conf(run_dir, port))
    assert settle(lambda: creating(d) is not None, 60), d.log()
    # The socket waits as long as the waiting attach below may (the big
    # registration took over 30 s on a busy emulated machine).
    c = Client(d.sock, timeout=130)
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "local"})
    if creating(d) is not None:
        assert t == ERROR, doc
        assert doc["error"]["code"] == "not_ready"
        assert "creating" in doc["error"]["message"]
        assert fds == []
    # A bad wait is refused at once.
    t, doc, _ = c.call(ATTACH, {"profile": "p", "wait_ms": "soon"})
    if creating(d) is not None:
        assert t == ERROR and doc["error"]["code"] == "bad_request", doc
    # Waiting: the answer comes once the profile is ready.
    t, doc, fds = c.call(ATTACH, {"profile": "p", "mode": "local",
                                  "wait_ms": 120000})
    assert t == ATTACHED, doc
    assert {m["name"] for m in doc["memory"]} == {"big", "small"}
    for fd in fds:
        import os
        os.close(fd)
    status, p = d.get("/v1/profiles/p")
    assert p["state"] == "ready"
    c.close()


def test_waiting_attach_times_out(rdmad, run_dir):
    from conftest import free_port
    port = free_port()
    d = start(rdmad, run_dir, big_conf(run_dir, port))
    assert settle(lambda: creating(d) is not None, 60), d.log()
    c = Client(d.sock)
    t, doc, _ = c.call(ATTACH, {"profile": "p", "wait_ms": 1})
    if creating(d) is not None:
        assert t == ERROR, doc
        assert doc["error"]["code"] == "not_ready"
        assert "timed out after 1 ms" in doc["error"]["message"]
    c.close()
    d.settle(BIG_SETTLE)


def test_reload_in_the_middle_of_a_registration(rdmad, run_dir):
    from conftest import free_port
    port = free_port()
    d = start(rdmad, run_dir, big_conf(run_dir, port))
    assert settle(lambda: creating(d) is not None, 60), d.log()
    # The big region goes, another comes.
    d.conf.write_text(big_conf(run_dir, port, big="64M", extra="""
    cq = ( { name = "c"; } );"""))
    status, body = d.request("POST", "/v1/reload", settle=False)
    assert status == 200, body
    d.settle(BIG_SETTLE)
    status, p = d.get("/v1/profiles/p")
    assert p["state"] == "ready", p
    ready = {(o["kind"], o["name"]): o for o in p["objects"]}
    assert all(o["state"] == "ready" for o in ready.values())
    assert ready[("mr", "big")]["length"] == 64 * MIB
    # The kernel holds exactly what the daemon claims.
    assert kernel_mrs(d.pid) == [4096, 64 * MIB]
    assert len(rdma_res("cq", d.pid)) == 1
    assert len(rdma_res("pd", d.pid)) == 1
    assert d.stop() == 0
    assert rdma_res("mr", d.pid) == []


def test_sigterm_in_the_middle_of_a_registration(rdmad, run_dir):
    from conftest import free_port
    port = free_port()
    d = start(rdmad, run_dir, big_conf(run_dir, port))
    assert settle(lambda: creating(d) is not None, 60), d.log()
    assert d.stop(signal.SIGTERM, timeout=BIG_SETTLE) == 0, d.log()
    for kind in ("mr", "pd", "cq", "qp"):
        assert rdma_res(kind, d.pid) == [], kind
    assert not Path(d.sock).exists()


def chains_conf(run, port, n):
    """n chains: PD -> MR (over its memory), CQ -> SRQ? no: CQ -> QP,
    SRQ -> QP, every QP on its own PD, CQ and SRQ, QP pairs connected."""
    mem, pd, mr, cq, srq, qp = [], [], [], [], [], []
    for i in range(n):
        mem.append(f'{{ name = "m{i}"; size = "4K"; }}')
        pd.append(f'{{ name = "pd{i}"; }}')
        mr.append(f'{{ name = "mr{i}"; pd = "pd{i}"; memory = "m{i}"; '
                  f'access = [ "local_write" ]; }}')
        cq.append(f'{{ name = "cq{i}"; cqe = 16; }}')
        srq.append(f'{{ name = "srq{i}"; pd = "pd{i}"; max_wr = 16; }}')
        peer = i ^ 1
        qp.append(f'{{ name = "qp{i}"; pd = "pd{i}"; type = "rc"; '
                  f'send_cq = "cq{i}"; recv_cq = "cq{i}"; srq = "srq{i}"; '
                  f'state = "rts"; peer = "qp{peer}"; }}')
    j = ",\n".join
    return daemon(run, port) + f"""
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "p"; device = "d0";
  memory = ( {j(mem)} );
  pd = ( {j(pd)} );
  mr = ( {j(mr)} );
  cq = ( {j(cq)} );
  srq = ( {j(srq)} );
  qp = ( {j(qp)} );
}} );
"""


def test_parallel_creation_keeps_dependency_order(rdmad, run_dir):
    from conftest import free_port
    port = free_port()
    n = 64
    d = start(rdmad, run_dir, chains_conf(run_dir, port, n))
    d.wait_ready(180)
    status, p = d.get("/v1/profiles/p")
    assert p["state"] == "ready", [o for o in p["objects"]
                                   if o["state"] != "ready"][:3]
    objs = {(o["kind"], o["name"]): o for o in p["objects"]}
    for i in range(n):
        q = objs[("qp", f"qp{i}")]
        assert q["qp_state"] == "rts"
        assert q["dqpn"] == objs[("qp", f"qp{i ^ 1}")]["qp_num"]
    assert len(rdma_res("pd", d.pid)) == n
    assert len(rdma_res("mr", d.pid)) == n
    assert len(rdma_res("srq", d.pid)) == n
    assert len(rdma_res("qp", d.pid)) == n


def large_conf(run, port, n_pd, n_mr, changed=None):
    mem = ",\n".join(f'{{ name = "m{i}"; size = "4K"; }}' for i in range(n_mr))
    pd = ",\n".join(f'{{ name = "pd{i}"; }}' for i in range(n_pd))
    extra = ', "remote_read"'
    mr = ",\n".join(
        f'{{ name = "mr{i}"; pd = "pd{i % n_pd}"; memory = "m{i}"; '
        f'access = [ "local_write"{extra if i == changed else ""} ]; }}'
        for i in range(n_mr))
    return daemon(run, port) + f"""
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = ( {{ name = "p"; device = "d0";
  memory = ( {mem} );
  pd = ( {pd} );
  mr = ( {mr} );
}} );
"""


def daemon_view(d):
    status, p = d.get("/v1/profiles/p")
    assert status == 200 and p["state"] == "ready", p.get("reason")
    return {(o["kind"], o["name"]): o for o in p["objects"]}


def kernel_view(pid):
    pds = sorted(r["pdn"] for r in rdma_res("pd", pid))
    mrs = sorted((int(r["rkey"], 16), r["mrlen"])
                 for r in rdma_res("mr", pid))
    return pds, mrs


def test_10k_objects_start_reload_one_change_stop(rdmad, run_dir):
    from conftest import free_port
    port = free_port()
    n_pd, n_mr = 5000, 2500   # + 2500 memory objects: 10k objects
    d = start(rdmad, run_dir, large_conf(run_dir, port, n_pd, n_mr))
    d.wait_ready(600)
    before = daemon_view(d)
    assert len(before) == n_pd + 2 * n_mr
    pds, mrs = kernel_view(d.pid)
    assert len(pds) == n_pd
    assert mrs == sorted((o["rkey"], o["length"]) for (k, _), o in
                         before.items() if k == "mr")

    d.conf.write_text(large_conf(run_dir, port, n_pd, n_mr, changed=7))
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    assert body["changes"] == [{"profile": "p", "kind": "mr", "name": "mr7",
                                "action": "recreate"}]
    assert body["kept"] == n_pd + 2 * n_mr - 1
    after = daemon_view(d)
    # Exactly one object was touched: the others keep handles and keys.
    for key, o in before.items():
        if key == ("mr", "mr7"):
            assert after[key]["access"] == ["local_write", "remote_read"]
            continue
        for field in ("handle", "lkey", "rkey"):
            assert after[key].get(field) == o.get(field), key
    pds2, mrs2 = kernel_view(d.pid)
    assert pds2 == pds
    assert mrs2 == sorted((o["rkey"], o["length"]) for (k, _), o in
                          after.items() if k == "mr")
    assert d.stop(timeout=300) == 0
    assert kernel_view(d.pid) == ([], [])
