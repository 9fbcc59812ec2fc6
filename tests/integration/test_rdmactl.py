# SPDX-License-Identifier: MIT
"""rdmactl's text, over the control socket: no line ends in a space,
keys and addresses in hex as `rdma resource show` prints them (QP
numbers in decimal, as its lqpn), `show PROFILE KIND`, a suggestion for a
name the daemon does not know, and each error said once."""

import json
import re
import subprocess

from conftest import rdmactl

CONF = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; } );
profiles = (
  { name = "ingest"; device = "d0";
    memory = ( { name = "ring"; size = "1M"; } );
    xrcd = ( { name = "x"; } );
    pd = ( { name = "main"; } );
    mr = ( { name = "ring"; pd = "main"; memory = "ring";
             access = [ "local_write", "remote_write", "remote_read",
                        "mw_bind" ]; } );
    mw = ( { name = "w"; pd = "main"; type = 2; } );
    cq = ( { name = "c"; } );
    qp = ( { name = "q0"; pd = "main"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "q1";
             access = [ "remote_write" ]; },
           { name = "q1"; pd = "main"; type = "rc"; send_cq = "c";
             recv_cq = "c"; state = "rts"; peer = "q0";
             access = [ "remote_write" ]; },
           { name = "spare"; pd = "main"; type = "ud"; send_cq = "c";
             recv_cq = "c"; } );
    ah = ( { name = "h"; pd = "main"; dgid = "192.0.2.1"; } );
  }
);
"""

# Every command, in text. The last ones change things (in an order
# that keeps the earlier ones meaningful).
TEXT_COMMANDS = [
    ["devices"], ["device", "show", "rxe0"], ["port", "rxe0", "1"],
    ["gids", "rxe0"], ["gids", "rxe0", "1"], ["profiles"],
    ["show", "ingest"], ["show", "ingest", "mr"], ["show", "ingest", "xrcd"],
    ["show", "ingest", "mr", "ring"], ["show", "ingest", "xrcd", "x"],
    ["health"], ["version"], ["config"], ["sessions"],
    ["endpoint", "ingest", "q0"],
    ["selftest", "ingest", "q0", "q1", "ring"],
    ["qp", "ingest", "spare", "--state", "rts"],
    ["reload"],
]


def no_trailing_space(text):
    return [line for line in text.splitlines() if line.endswith((" ", "\t"))]


def test_text_output_has_no_trailing_spaces(rdmad):
    d = rdmad(CONF)
    for args in TEXT_COMMANDS:
        r = rdmactl(d, *args)
        assert r.returncode == 0, (args, r.stderr)
        assert r.stdout.strip(), args
        assert not no_trailing_space(r.stdout), (args, r.stdout)
        assert not no_trailing_space(r.stderr), (args, r.stderr)
    # The failed xrcd (rxe has no XRC) shows its errno and reason.
    r = rdmactl(d, "show", "ingest", "xrcd", "x")
    assert "failed" in r.stdout and "errno=" in r.stdout
    # Errors and help too.
    for args in (["show", "ingset"], ["shwo"], ["--help"], [],
                 ["show", "ingest", "mr", "nothing"]):
        r = rdmactl(d, *args)
        assert not no_trailing_space(r.stdout + r.stderr), (args, r)


def test_keys_in_hex_qp_numbers_in_decimal(rdmad):
    d = rdmad(CONF)
    status, mr = d.get("/v1/profiles/ingest/mr/ring")
    assert status == 200
    r = rdmactl(d, "show", "ingest", "mr", "ring")
    assert r.returncode == 0, r.stderr
    for key in ("lkey", "rkey", "iova"):
        assert f" {key}={mr[key]:#x}" in r.stdout, (key, r.stdout)
    assert f" length={mr['length']} " in r.stdout + " "
    # The kernel's view prints the same keys the same way.
    kernel = subprocess.run(["rdma", "resource", "show", "mr"], check=True,
                            capture_output=True, text=True).stdout
    assert f"rkey {mr['rkey']:#x}" in kernel, kernel
    assert f"lkey {mr['lkey']:#x}" in kernel, kernel
    # An mw's rkey too.
    status, mw = d.get("/v1/profiles/ingest/mw/w")
    r = rdmactl(d, "show", "ingest", "mw", "w")
    assert f" rkey={mw['rkey']:#x}" in r.stdout, r.stdout
    # QP numbers: decimal, as rdma's lqpn.
    status, qp = d.get("/v1/profiles/ingest/qp/q0")
    r = rdmactl(d, "show", "ingest", "qp", "q0")
    assert f" qp_num={qp['qp_num']} " in r.stdout + " ", r.stdout
    kernel = subprocess.run(["rdma", "resource", "show", "qp"], check=True,
                            capture_output=True, text=True).stdout
    assert f"lqpn {qp['qp_num']} " in kernel, kernel
    # JSON keeps numbers.
    r = rdmactl(d, "--json", "show", "ingest", "mr", "ring")
    assert json.loads(r.stdout) == mr


def test_qp_document_shows_the_declaration_in_config_words(rdmad):
    d = rdmad(CONF)
    status, qp = d.get("/v1/profiles/ingest/qp/q0")
    assert status == 200
    assert "target_state" not in qp
    assert qp["state"] == "ready"            # the object's
    assert qp["config"]["state"] == "rts"    # the file's key
    assert qp["qp_state"] == "rts"           # the device's
    status, conf = d.get("/v1/config")
    declared = [q for q in conf["profiles"][0]["qp"] if q["name"] == "q0"]
    assert declared == [qp["config"]]


def test_show_profile_kind(rdmad):
    d = rdmad(CONF)
    r = rdmactl(d, "show", "ingest", "qp")
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()[2:]
    assert [row.split()[:2] for row in rows] == [
        ["qp", "q0"], ["qp", "q1"], ["qp", "spare"]], r.stdout
    status, prof = d.get("/v1/profiles/ingest")
    r = rdmactl(d, "--json", "show", "ingest", "qp")
    assert json.loads(r.stdout) == [o for o in prof["objects"]
                                    if o["kind"] == "qp"]
    r = rdmactl(d, "show", "ingest", "ah")
    assert [row.split()[:2] for row in r.stdout.splitlines()[2:]] == [
        ["ah", "h"]]


def one_line(r):
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_did_you_mean(rdmad):
    d = rdmad(CONF)
    r = rdmactl(d, "show", "ingset")
    assert r.returncode == 1
    assert one_line(r) == ("rdmactl: no profile 'ingset'; "
                           "did you mean 'ingest'?")
    r = rdmactl(d, "show", "ingest", "mx", "ring")
    assert r.returncode == 1
    assert one_line(r) == ("rdmactl: no object kind 'mx'; "
                           "did you mean 'mr'?")
    r = rdmactl(d, "show", "ingest", "mx")
    assert r.returncode == 1
    assert one_line(r) == ("rdmactl: no object kind 'mx'; "
                           "did you mean 'mr'?")
    r = rdmactl(d, "show", "ingest", "mr", "rign")
    assert one_line(r) == "rdmactl: no mr 'rign'; did you mean 'ring'?"
    r = rdmactl(d, "qp", "ingest", "q2", "--state", "rts")
    assert one_line(r) == "rdmactl: no qp 'q2'; did you mean 'q0'?"
    r = rdmactl(d, "device", "show", "rxe9")
    assert re.fullmatch(r"rdmactl: no device 'rxe9'; did you mean "
                        r"'rxe[01]'\?", one_line(r)), r.stderr
    # Nothing close: no guess.
    r = rdmactl(d, "show", "ingest", "mr", "zzzzzzzz")
    assert one_line(r) == "rdmactl: no mr 'zzzzzzzz'"
    r = rdmactl(d, "show", "elsewhere")
    assert one_line(r) == "rdmactl: no profile 'elsewhere'"
    # Commands, from rdmactl's own table.
    r = rdmactl(d, "shwo", "ingest")
    assert r.returncode == 64
    assert one_line(r) == ("rdmactl: unknown command 'shwo'; did you mean "
                           "'show'? (see --help)")
    r = rdmactl(d, "frobnicate")
    assert r.returncode == 64
    assert one_line(r) == "rdmactl: unknown command 'frobnicate' (see --help)"


def test_reload_errors_said_once(rdmad):
    d = rdmad(CONF)
    head = d.conf.read_text().split("\ndevices")[0]
    text = head + "\nprofiles = ( { name = ; } );\n"
    d.conf.write_text(text)
    line = text.splitlines().index("profiles = ( { name = ; } );") + 1
    r = rdmactl(d, "reload")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "rdmactl: the new configuration has 1 error; nothing was changed",
        f"{d.conf}:{line}: syntax error"], r.stderr
    d.conf.write_text(head + CONF.replace('cq = ( { name = "c"; } );',
                                          'cq = ( { name = "c"; hue = 1; '
                                          'tint = 2; } );'))
    r = rdmactl(d, "reload")
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert lines[0] == ("rdmactl: the new configuration has 2 errors; "
                        "nothing was changed"), r.stderr
    assert len(lines) == 3
    assert "unknown key 'hue'" in lines[1] and "unknown key 'tint'" in lines[2]
    # Fixed: the summary's words agree with its numbers (the failed
    # xrcd is retried: "1 change").
    d.conf.write_text(head + CONF)
    r = rdmactl(d, "reload")
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"(\d+) (changes?), (\d+) (objects?) kept",
                     r.stdout.splitlines()[-1])
    assert m, r.stdout
    assert (m[2] == "change") == (m[1] == "1"), r.stdout
    assert (m[4] == "object") == (m[3] == "1"), r.stdout
