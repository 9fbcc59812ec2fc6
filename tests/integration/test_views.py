# SPDX-License-Identifier: MIT
"""What each read-only route shows to whom (issue 45, item 3; rdmad(8),
"What each read-only route shows to whom"), from the specification:
secrets (tokens) are never shown, other users' pids, uids and endpoints
only to admins. Secrets: a target's token is "token": true in GET
/v1/config, over REST with or without the bearer token, on the control
socket (rdmactl --json config) and in rdmad --dump. Processes: an
anonymous REST caller sees sessions without pid, uid, gid, admin or
report, in GET /v1/sessions and on GET /v1/events; a socket user sees
its own sessions whole and others' without them; the token holder and a
socket admin see all. PSNs: a QP's endpoint document has its psn for
admins only."""

import http.client
import json
import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import RDMAD, free_port, rdmactl

HERE = Path(__file__).resolve().parent
USER, OTHER = 1000, 1001
SECRET = "s3cret-" + secrets.token_hex(8)
HIDDEN = ("pid", "uid", "gid", "admin", "report")


def conf(run, port, tport):
    return f"""
daemon = {{ runtime_dir = "{run}"; control_group = "{USER}";
           http = {{ listen = [ "127.0.0.1:{port}" ];
                    token_file = "{run}/token"; }}; }};
devices = ( {{ name = "d0"; match = {{ ibdev = "rxe0"; }}; }} );
profiles = (
  {{ name = "p"; device = "d0";
    allow = {{ uids = [ {USER}, {OTHER} ]; }};
    memory = ( {{ name = "m"; size = "1M"; }} );
    pd = ( {{ name = "pd"; }} );
    mr = ( {{ name = "w"; pd = "pd"; memory = "m";
             access = [ "local_write", "mw_bind" ]; }} );
    cq = ( {{ name = "c"; }}, {{ name = "tcq"; }} );
    qp = ( {{ name = "q0"; pd = "pd"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "init"; }} );
    target = ( {{ name = "kv"; listen = "192.0.2.1:{tport}"; pd = "pd";
                 cq = "tcq"; allow = [ "192.0.2.0/24" ];
                 token = "{SECRET}";
                 expose = ( {{ mr = "w"; access = [ "remote_read" ]; }} ); }} );
  }}
);
"""


@pytest.fixture
def views(rdmad):
    run = Path("/run") / f"rdmad-views-{secrets.token_hex(4)}"
    run.mkdir(mode=0o755)
    (run / "token").write_text("rdmad-test-token-0123456789\n")
    (run / "token").chmod(0o600)
    d = rdmad(conf(run, free_port(), free_port()))
    d.token = "rdmad-test-token-0123456789"
    d.sock = str(run / "rdmad.sock")
    d.code = run / "code"
    d.code.mkdir(mode=0o755)
    (d.code / "rdmadproto.py").write_text(
        (HERE / "rdmadproto.py").read_text())
    yield d
    d.stop()
    subprocess.run(["rm", "-rf", str(run)])


HOLD = """
import json, sys, time
from rdmadproto import *
c = Client(sys.argv[1])
t, doc, fds = c.call(ATTACH, {"profile": "p"})
assert t == ATTACHED, doc
print("attached", flush=True)
for line in sys.stdin:           # "sessions": what this uid sees
    print(json.dumps(c.request("GET", "/v1/sessions")), flush=True)
"""


def hold(d, uid):
    """A client of uid attached to p, asked on stdin for GET /v1/sessions
    over its own session."""
    path = d.code / "hold.py"
    path.write_text(textwrap.dedent(HOLD))
    path.chmod(0o644)
    p = subprocess.Popen([sys.executable, str(path), d.sock], user=uid,
                         group=USER, extra_groups=[], cwd=str(d.code),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "attached"
    return p


def ask(p):
    p.stdin.write("sessions\n")
    p.stdin.flush()
    status, body = json.loads(p.stdout.readline())
    assert status == 200, body
    return body


def keys_anywhere(doc):
    """Every key of every object in doc."""
    if isinstance(doc, dict):
        return set(doc) | {k for v in doc.values() for k in keys_anywhere(v)}
    if isinstance(doc, list):
        return {k for v in doc for k in keys_anywhere(v)}
    return set()


def test_config_shows_a_token_as_set_only(views, tmp_path):
    d = views
    for token in (False, True):
        status, doc = d.request("GET", "/v1/config", token=token)
        assert status == 200, doc
        assert SECRET not in json.dumps(doc)
        t = doc["profiles"][0]["target"][0]
        assert t["token"] is True, t
    r = rdmactl(d, "--json", "config")
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout
    assert json.loads(r.stdout)["profiles"][0]["target"][0]["token"] is True
    r = subprocess.run([str(RDMAD), "--dump", "-c", str(d.conf)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout and "token = true;" in r.stdout
    # The profile document says the same, as it did.
    status, t = d.request("GET", "/v1/profiles/p/target/kv", token=False)
    assert status == 200 and t["config"]["token"] is True, t
    assert SECRET not in json.dumps(t)


def test_sessions_show_processes_to_whom_they_concern(views):
    d = views
    mine, theirs = hold(d, USER), hold(d, OTHER)
    try:
        # Anonymous REST: who is attached where, no process at all.
        status, anon = d.request("GET", "/v1/sessions", token=False)
        assert status == 200, anon
        assert len(anon) == 2 and not keys_anywhere(anon) & set(HIDDEN), anon
        assert {a["profile"] for s in anon for a in s["attachments"]} == {"p"}
        # The token holder: everything.
        status, full = d.request("GET", "/v1/sessions")
        assert {s["pid"] for s in full} == {mine.pid, theirs.pid}, full
        assert {s["uid"] for s in full} == {USER, OTHER}
        # rdmactl as root (an admin) on the socket: everything too (and
        # its own session).
        r = rdmactl(d, "--json", "sessions")
        assert r.returncode == 0, r.stderr
        assert {mine.pid, theirs.pid} <= \
            {s["pid"] for s in json.loads(r.stdout)}, r.stdout
        # A socket user: its own session whole, the other's without.
        seen = ask(mine)
        own = [s for s in seen if s.get("uid") == USER]
        assert len(own) == 1 and own[0]["pid"] == mine.pid, seen
        other = [s for s in seen if s is not own[0]]
        assert len(other) == 1 and not keys_anywhere(other) & set(HIDDEN)
        assert str(theirs.pid) not in json.dumps(other)
    finally:
        for p in (mine, theirs):
            p.kill()
            p.wait()


def sse(d, token):
    """An open GET /v1/events stream: a function giving its next event."""
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    headers = {"Authorization": f"Bearer {d.token}"} if token else {}
    c.request("GET", "/v1/events", headers=headers)
    r = c.getresponse()
    assert r.status == 200

    def next_event(name):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = r.fp.readline().decode()
            if line.startswith("data: "):
                ev = json.loads(line[6:])
                if ev.get("event") == name:
                    return ev
        raise AssertionError(f"no {name} event")
    return c, next_event


def test_event_stream_shows_processes_to_admins(views):
    d = views
    anon_c, anon = sse(d, token=False)
    admin_c, admin = sse(d, token=True)
    p = hold(d, USER)
    try:
        ev = anon("session_attach")
        assert ev["profile"] == "p" and "session" in ev, ev
        assert not set(ev) & set(HIDDEN), ev
        ev = admin("session_attach")
        assert ev["pid"] == p.pid and ev["uid"] == USER, ev
    finally:
        p.kill()
        p.wait()
        anon_c.close()
        admin_c.close()


def test_endpoint_psn_to_admins_only(views):
    d = views
    status, anon = d.request("GET", "/v1/profiles/p/qp/q0/endpoint",
                             token=False)
    assert status == 200, anon
    assert "psn" not in anon and "qp_num" in anon, anon
    status, full = d.request("GET", "/v1/profiles/p/qp/q0/endpoint")
    assert status == 200 and isinstance(full["psn"], int), full
