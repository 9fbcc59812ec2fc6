# SPDX-License-Identifier: MIT
"""A bad configuration stops rdmad before it touches a device: exit 78
(EX_CONFIG) and a file:line: message naming the problem. The detailed
table of bad inputs lives in the unit suite (tests/unit/test_config.c);
this checks the real binary end to end, on the machine with devices."""

import subprocess

import pytest

from conftest import RDMAD, rdma_res

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
    assert msg in r.stderr, r.stderr
    assert len(rdma_res("pd")) == before


def test_check_mode_accepts_a_good_config(write_conf):
    path = write_conf(GOOD_HEAD + 'profiles = ( { name = "p"; device = "d";'
                      ' pd = ( { name = "a"; } ); } );')
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "configuration OK" in r.stdout


def test_missing_file_is_a_config_error(tmp_path):
    r = subprocess.run([str(RDMAD), "-c", str(tmp_path / "absent.conf")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78
    assert "absent.conf: cannot read: No such file" in r.stderr
