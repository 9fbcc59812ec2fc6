# SPDX-License-Identifier: MIT
"""A tenant is exactly its allow list (issue 45, item 4; rdmad.conf(5),
*allow* and *admit_root*; rdmad(8), *CONTAINERS*; proto/PROTOCOL.md,
*Per-profile sockets*).

- uid 0 is admitted to a profile only where the allow list names it
  (uid 0, the user root, a group of root's), unless daemon.admit_root.
- Each profile has a socket of its own, <runtime_dir>/profiles/<name>/
  rdmad.sock, whose sessions see and attach that profile only and
  change nothing, root included: ATTACH of another profile is ERROR
  "forbidden", and a REQUEST outside the profile is a REPLY of status
  403 with the error code "forbidden".
- Those sockets come and go with the profiles on reload; their mode
  and owner follow the allow list.

The suite runs as root: these are root's refusals. The configurations
are taken as written (the word admit_root in them keeps conftest from
admitting root everywhere)."""

import grp
import os
import stat

from conftest import TOKEN, free_port
import rdmadproto as rp

PROFILES = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = (
  { name = "a"; device = "d0"; allow = { users = [ "root" ]; };
    memory = ( { name = "m"; size = "64K"; } );
    pd = ( { name = "pa"; } );
    mr = ( { name = "r"; pd = "pa"; memory = "m"; } );
    cq = ( { name = "c"; } );
    qp = ( { name = "q"; pd = "pa"; type = "rc"; send_cq = "c";
             recv_cq = "c"; } ); },
  { name = "b"; device = "d0"; allow = { uids = [ 0 ]; };
    pd = ( { name = "pb"; } ); },
  { name = "theirs"; device = "d0"; allow = { uids = [ 1000 ]; };
    pd = ( { name = "pt"; } ); }
);
"""


def daemon_section(tmp, port, extra=""):
    token = tmp / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    return (f'daemon = {{ runtime_dir = "{tmp}"; {extra} '
            f'http = {{ listen = [ "127.0.0.1:{port}" ]; '
            f'token_file = "{token}"; }}; }};\n'
            "# admit_root: as written here (conftest.root_everywhere)\n")


def start(rdmad, tmp, text=PROFILES, extra=""):
    d = rdmad(daemon_section(tmp, free_port(), extra) + text)
    d.token = TOKEN
    d.sock = str(tmp / "rdmad.sock")
    return d


def own_socket(tmp, name):
    return str(tmp / "profiles" / name / "rdmad.sock")


def attach(c, name):
    """(type, document) of ATTACH name; fds passed are closed."""
    t, doc, fds = c.call(rp.ATTACH, {"profile": name})
    for fd in fds:
        os.close(fd)
    return t, doc


def refused(answer):
    t, doc = answer
    return t == rp.ERROR and doc["error"]["code"] == "forbidden"


def test_root_is_admitted_only_where_allow_names_it(rdmad, tmp_path):
    """On the main socket, root attaches to a (users = [ "root" ]) and
    b (uids = [ 0 ]), not to theirs (uids = [ 1000 ]): ERROR forbidden.
    Root stays admin there (the operator): its reload is served."""
    d = start(rdmad, tmp_path)
    c = rp.Client(d.sock)
    try:
        assert attach(c, "a")[0] == rp.ATTACHED
        assert attach(c, "b")[0] == rp.ATTACHED
        answer = attach(c, "theirs")
        assert refused(answer), answer
        status, body = c.request("POST", "/v1/reload")
        assert status == 200, body
    finally:
        c.close()


def test_admit_root_admits_root_everywhere(rdmad, tmp_path):
    """daemon.admit_root = true: root is every tenant on the main
    socket, as the operator chose; a profile's own socket still serves
    its profile only."""
    d = start(rdmad, tmp_path, extra="admit_root = true;")
    assert d.get("/v1/config")[1]["daemon"]["admit_root"] is True
    c = rp.Client(d.sock)
    own = rp.Client(own_socket(tmp_path, "a"))
    try:
        assert attach(c, "theirs")[0] == rp.ATTACHED
        assert refused(attach(own, "theirs"))
    finally:
        c.close()
        own.close()


def test_default_is_no_root_everywhere(rdmad, tmp_path):
    d = start(rdmad, tmp_path)
    assert d.get("/v1/config")[1]["daemon"]["admit_root"] is False


OUTSIDE = [
    ("POST", "/v1/reload", None),
    ("GET", "/v1/profiles/b", None),
    ("GET", "/v1/profiles/b/pd/pb", None),
    ("GET", "/v1/profiles/b/orphans", None),
    ("GET", "/v1/profiles/no-such", None),
    ("GET", "/v1/config", None),
    ("GET", "/v1/sessions", None),
    ("GET", "/v1/events", None),
    ("GET", "/v1/devices", None),
    ("PATCH", "/v1/profiles/a/qp/q", {"state": "reset"}),
    ("POST", "/v1/profiles/a/selftest", {"a": "q", "b": "q", "mr": "r"}),
]


def test_profile_socket_serves_its_profile_only(rdmad, tmp_path):
    """Root on a's own socket (a and b both admit root): attaches a, not
    b nor a name no profile has (forbidden either way: nothing is said of
    other profiles); may read a and nothing else; changes nothing."""
    d = start(rdmad, tmp_path)
    main = rp.Client(d.sock)
    own = rp.Client(own_socket(tmp_path, "a"))
    try:
        # The main socket answers b's documents (cached, and answered
        # again from the same request bytes): a's socket must not.
        for _ in range(2):
            assert main.request("GET", "/v1/profiles/b")[0] == 200
        assert refused(attach(own, "b"))
        assert refused(attach(own, "no-such"))
        assert refused(attach(own, "theirs"))
        for method, path, body in OUTSIDE:
            for _ in range(2):
                status, doc = own.request(method, path, body)
                assert status == 403, (method, path, doc)
                assert doc["error"]["code"] == "forbidden", doc
        status, profiles = own.request("GET", "/v1/profiles")
        assert status == 200
        assert [p["name"] for p in profiles] == ["a"]
        assert own.request("GET", "/v1/profiles/a")[0] == 200
        assert own.request("GET", "/v1/profiles/a/pd/pa")[0] == 200
        assert own.request("GET", "/v1/health")[0] == 200
        assert attach(own, "a")[0] == rp.ATTACHED
        # The main socket's root is admin, a's socket's root is not.
        status, sessions = main.request("GET", "/v1/sessions")
        scoped = [s for s in sessions if s.get("socket_profile") == "a"]
        assert len(scoped) == 1 and scoped[0]["admin"] is False, sessions
    finally:
        main.close()
        own.close()
    # The refused PATCH changed nothing.
    assert d.get("/v1/profiles/a/qp/q")[1]["state"] == "ready"


def test_profile_sockets_follow_profiles_and_allow(rdmad, tmp_path):
    """A socket per profile, mode and owner from its allow list; a reload
    adds and removes them; a stop removes the sockets and keeps the
    directories (containers bind those)."""
    group = grp.getgrgid(100)  # "users" on Debian
    text = PROFILES.replace(
        '{ name = "theirs"; device = "d0"; allow = { uids = [ 1000 ]; };',
        f'{{ name = "grp"; device = "d0"; allow = {{ groups = '
        f'[ "{group.gr_name}" ]; }};\n    pd = ( {{ name = "pg"; }} ); }},\n'
        '  { name = "theirs"; device = "d0"; allow = { uids = [ 1000 ]; };')
    d = start(rdmad, tmp_path, text)

    def look(name):
        return os.stat(own_socket(tmp_path, name))

    st = look("a")
    assert stat.S_ISSOCK(st.st_mode)
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, 0)
    st = look("theirs")
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, 1000)
    st = look("grp")
    assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o660, group.gr_gid)

    head = d.conf.read_text().split("\ndevices")[0]
    d.conf.write_text(head + "\n" + PROFILES.replace(
        'name = "b"; device = "d0"; allow = { uids = [ 0 ]; };',
        'name = "c"; device = "d0"; allow = { uids = [ 0 ]; };'))
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    assert not os.path.exists(tmp_path / "profiles" / "b")
    assert not os.path.exists(tmp_path / "profiles" / "grp")
    assert stat.S_ISSOCK(look("c").st_mode)
    c = rp.Client(own_socket(tmp_path, "c"))
    try:
        assert attach(c, "c")[0] == rp.ATTACHED
        assert refused(attach(c, "a"))
    finally:
        c.close()

    assert d.stop() == 0
    for name in ("a", "c", "theirs"):
        assert os.path.isdir(tmp_path / "profiles" / name)
        assert not os.path.exists(own_socket(tmp_path, name))
