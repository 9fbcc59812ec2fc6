# SPDX-License-Identifier: MIT
"""A bad configuration stops rdmad before it touches a device: exit 78
(EX_CONFIG) and a file:line: message naming the problem. The detailed
table of bad inputs lives in the unit suite (tests/unit/test_config.c);
this checks the real binary end to end, on the machine with devices."""

import os
import subprocess

import pytest

from conftest import RDMAD, ROOT, rdma_res

GOOD_HEAD = """daemon = { http = { listen = [ "127.0.0.1:1" ]; }; };
devices = ( { name = "d"; match = { ibdev = "rxe0"; }; } );
"""

CASES = [
    ("syntax", GOOD_HEAD + "profiles = ( { name = ; } );",
     3, "syntax error"),
    ("unknown_key", GOOD_HEAD + """profiles = (
  { name = "p"; device = "d";
    pd = ( { name = "a"; colour = "red"; } ); } );""",
     5, "unknown key 'colour' in pd"),
    ("dangling", GOOD_HEAD + """profiles = (
  { name = "p"; device = "d";
    memory = ( { name = "m"; size = "1M"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "missing"; memory = "m"; } ); } );""",
     7, "pd 'missing' is not declared in profile 'p'"),
    ("bad_size", GOOD_HEAD + """profiles = (
  { name = "p"; device = "d";
    memory = ( { name = "m"; size = "12Q"; } ); } );""",
     5, "is not a size"),
    # Issue 45: a window over an MR with remote access of its own is no
    # limit (the MR's rkey reaches all of it): refused, at the expose.
    ("window_over_remote_mr", GOOD_HEAD + """profiles = (
  { name = "p"; device = "d";
    memory = ( { name = "m"; size = "1M"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m";
             access = [ "local_write", "remote_write", "mw_bind" ]; } );
    cq = ( { name = "c"; } );
    target = ( { name = "t"; listen = "192.0.2.1:7471"; pd = "a"; cq = "c";
                 allow = [ "192.0.2.0/24" ];
                 expose = ( { mr = "r"; access = [ "remote_write" ];
                              length = "4K"; } ); } ); } );""",
     12, "target 't': mr 'r' ({path}:7) has remote access of its own"),
]


@pytest.mark.parametrize("name,text,line,msg", CASES,
                         ids=[c[0] for c in CASES])
def test_bad_config_exits_78_with_location(write_conf, name, text, line, msg):
    path = write_conf(text, name=f"{name}.conf")
    before = len(rdma_res("pd"))
    r = subprocess.run([str(RDMAD), "-c", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 78, r.stderr
    assert f"{path}:{line}: " in r.stderr, r.stderr
    assert msg.replace("{path}", str(path)) in r.stderr, r.stderr
    assert len(rdma_res("pd")) == before


def test_check_mode_accepts_a_good_config(write_conf):
    path = write_conf(GOOD_HEAD + 'profiles = ( { name = "p"; device = "d";'
                      ' pd = ( { name = "a"; } ); } );')
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "configuration OK" in r.stdout


def test_shipped_example_passes_check():
    """conf/example.conf's target exposes an MR without remote access
    (issue 45): --check accepts it."""
    example = ROOT / "conf" / "example.conf"
    r = subprocess.run([str(RDMAD), "--check", "-c", str(example)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "configuration OK" in r.stdout


def test_missing_file_is_a_config_error(tmp_path):
    r = subprocess.run([str(RDMAD), "-c", str(tmp_path / "absent.conf")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78
    assert "absent.conf: cannot read: No such file" in r.stderr


def test_fifo_config_is_refused_not_waited_on(tmp_path):
    """Nothing writes to the FIFO: a blocking open would hang forever."""
    fifo = tmp_path / "fifo.conf"
    os.mkfifo(fifo)
    r = subprocess.run([str(RDMAD), "--check", "-c", str(fifo)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 78 or r.returncode == 1, r.stderr
    assert f"{fifo}: cannot read: is a FIFO, not a regular file" in r.stderr


def test_include_directive_and_include_dir_fifo(write_conf, tmp_path):
    inc = tmp_path / "conf.d"
    inc.mkdir()
    os.mkfifo(inc / "10-fifo.conf")
    path = write_conf(GOOD_HEAD.replace(
        "daemon = {", f'daemon = {{ include = "{inc}";') +
        '@include "/etc/passwd"\n', name="inc.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert f"{path}:3: @include is not supported" in r.stderr, r.stderr
    path = write_conf(GOOD_HEAD.replace(
        "daemon = {", f'daemon = {{ include = "{inc}";'), name="inc2.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert (f"{inc}/10-fifo.conf: cannot read: is a FIFO, not a regular "
            "file") in r.stderr, r.stderr


def test_file_of_16_mib_is_read(write_conf):
    text = GOOD_HEAD
    path = write_conf(text + "#" * (16 * 1024 * 1024 - len(text) - 1) + "\n",
                      name="big.conf")
    assert path.stat().st_size == 16 * 1024 * 1024
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    with open(path, "a") as f:
        f.write("\n")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "larger than the limit of 16 MiB" in r.stderr


def test_check_warns_about_users_and_groups_this_host_lacks(write_conf):
    """An allow list naming a user or group that does not exist here is
    a warning with file:line, not an error: --check still exits 0."""
    path = write_conf(GOOD_HEAD + """profiles = (
  { name = "p"; device = "d";
    allow = { users = [ "root", "no-such-user-rdmad" ];
              groups = [ "root", "4242", "no-such-group-rdmad" ]; };
    pd = ( { name = "a"; } ); } );""", name="who.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        f"{path}:5: warning: profile 'p': 'users': 'no-such-user-rdmad' is "
        "not a user on this host: it admits nobody until it exists and the "
        "configuration is reloaded",
        f"{path}:6: warning: profile 'p': 'groups': 'no-such-group-rdmad' "
        "is not a group on this host: it admits nobody until it exists and "
        "the configuration is reloaded"], r.stderr
    assert r.stdout == (f"{path}: configuration OK (1 device, 1 profile, "
                        "2 warnings)\n")
    # Warnings stay beside errors, and do not hide them.
    bad = write_conf(path.read_text().replace('name = "a";',
                                              'name = "a"; hue = 1;'),
                     name="who-bad.conf")
    r = subprocess.run([str(RDMAD), "--check", "-c", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78
    assert f"{bad}:7: " in r.stderr and "warning:" in r.stderr
