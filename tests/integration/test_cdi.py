# SPDX-License-Identifier: MIT
"""The CDI specification (daemon.cdi_spec): valid against the CDI
project's own JSON schema (a copy in cdi-schema/), one device per profile
whose device is open, naming that device's uverbs node as the kernel
lists it in sysfs; rewritten on reload and when a device goes and comes
back; removed on stop. A client given only the spec's environment
attaches to its profile, through the profile's own socket (the only one
a container is given: never the daemon's main socket), and a container
given p0, running as root, can neither attach p1, reload, nor read p1.

The tests run as root, and attach as root: the profiles' allow lists
name root (a tenant is exactly its allow list, rdmad.conf(5))."""

import json
import os
import shlex
import stat
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

import podman
from conftest import BUILD, TOKEN, free_port

SCHEMA_DIR = Path(__file__).resolve().parent / "cdi-schema"
ATTACH = BUILD / "examples" / "attach"

PROFILES = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; },
            { name = "d1"; match = { ibdev = "rxe1"; }; },
            { name = "absent"; match = { ibdev = "rxe9"; }; } );
profiles = (
  { name = "p0"; device = "d0"; allow = { users = [ "root" ]; };
    memory = ( { name = "m"; size = "64K"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m"; } ); },
  { name = "p1"; device = "d1"; allow = { users = [ "root" ]; };
    pd = ( { name = "b"; } ); },
  { name = "waits"; device = "absent"; pd = ( { name = "c"; } ); }
);
"""

RELOADED = """
devices = ( { name = "d0"; match = { ibdev = "rxe0"; }; },
            { name = "d1"; match = { ibdev = "rxe1"; }; } );
profiles = (
  { name = "p0"; device = "d0"; allow = { users = [ "root" ]; };
    memory = ( { name = "m"; size = "64K"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m"; } ); },
  { name = "new.one"; device = "d1"; pd = ( { name = "b"; } ); }
);
"""


def validator():
    schema = json.loads((SCHEMA_DIR / "schema.json").read_text())
    # schema.json refers to defs.json beside it.
    resolver = jsonschema.RefResolver(
        base_uri=SCHEMA_DIR.as_uri() + "/", referrer=schema)
    return jsonschema.Draft7Validator(schema, resolver=resolver)


def uverbs_of(ibdev):
    """The uverbs node of ibdev, as the kernel's sysfs says."""
    root = Path("/sys/class/infiniband_verbs")
    for u in root.iterdir():
        f = u / "ibdev"
        if f.exists() and f.read_text().strip() == ibdev:
            return f"/dev/infiniband/{u.name}"
    raise AssertionError(f"no uverbs device for {ibdev}")


def daemon_section(tmp, port, cdi):
    token = tmp / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    cdi_line = f'cdi_spec = "{cdi}";' if cdi is not None else ""
    # admit_root: unset (conftest.root_everywhere), the allow lists say.
    return (f'daemon = {{ runtime_dir = "{tmp}"; {cdi_line} '
            f'http = {{ listen = [ "127.0.0.1:{port}" ]; '
            f'token_file = "{token}"; }}; }};\n'
            '# admit_root: the allow lists name root\n')


def start(rdmad, tmp_path, text, cdi):
    port = free_port()
    d = rdmad(daemon_section(tmp_path, port, cdi) + text)
    d.token = TOKEN
    d.sock = str(tmp_path / "rdmad.sock")  # runtime_dir's
    d.rt = tmp_path
    return d


def own_dir(d, name):
    """The directory of the profile's own socket (rdmad(8), CONTAINERS)."""
    return os.path.join(str(d.rt), "profiles", name)


def wait_spec(path, pred, timeout=30):
    """The spec at path once pred(spec or None) holds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            spec = json.loads(Path(path).read_text())
        except FileNotFoundError:
            spec = None
        except json.JSONDecodeError:
            # Never: the file is replaced by a rename, whole.
            raise
        if pred(spec):
            return spec
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: {spec}")
        time.sleep(0.05)


def names(spec):
    return sorted(dev["name"] for dev in spec["devices"]) if spec else []


def check_spec(spec, d, expected):
    """spec is schema-valid and says, for each profile: ibdev, exactly
    what a container needs."""
    validator().validate(spec)
    assert spec["kind"] == "rdmad.io/profile"
    assert names(spec) == sorted(expected)
    for dev in spec["devices"]:
        sockdir = own_dir(d, dev["name"])
        ibdev = expected[dev["name"]]
        edits = dev["containerEdits"]
        nodes = [n["path"] for n in edits["deviceNodes"]]
        assert nodes[0] == uverbs_of(ibdev)
        assert "/dev/infiniband/rdma_cm" in nodes
        for n in nodes:
            assert stat.S_ISCHR(os.stat(n).st_mode), n
        upper = "".join(c.upper() if c.isascii() and c.isalnum() else "_"
                        for c in dev["name"])
        sock = f"{sockdir}/rdmad.sock"
        assert sorted(edits["env"]) == sorted([
            f"RDMAD_SOCKET={sock}", f"RDMAD_PROFILE={dev['name']}",
            f"RDMAD_PROFILE_{upper}={dev['name']}",
            f"RDMAD_SOCKET_{upper}={sock}"])
        # The profile's own socket, never the main one (nor its
        # directory, where the main socket is).
        (mount,) = edits["mounts"]
        assert mount["hostPath"] == mount["containerPath"] == sockdir
        assert stat.S_ISSOCK(os.stat(sock).st_mode)
        assert sockdir != os.path.dirname(d.sock)
        assert "bind" in mount["options"] and "ro" in mount["options"]


def leftovers(path):
    """Temporary files the atomic rewrites left in the spec's directory."""
    return [f for f in os.listdir(os.path.dirname(path))
            if f != os.path.basename(path)]


def rewrite(d, text):
    head = d.conf.read_text().split("\ndevices")[0]
    d.conf.write_text(head + "\n" + text.lstrip())


def test_schema_copy_rejects_a_broken_spec():
    """The shipped schema is the real thing: it catches what CDI
    requires (a device needs containerEdits, a spec needs a kind)."""
    v = validator()
    good = {"cdiVersion": "0.5.0", "kind": "rdmad.io/profile",
            "devices": [{"name": "p", "containerEdits": {}}]}
    v.validate(good)
    for bad in ({"cdiVersion": "0.5.0", "devices": []},
                {**good, "devices": [{"name": "p"}]},
                {**good, "devices": [{"name": "p", "containerEdits": {
                    "deviceNodes": [{"hostPath": "/dev/x"}]}}]}):
        with pytest.raises(jsonschema.ValidationError):
            v.validate(bad)


def test_spec_follows_profiles_reload_devices_and_stop(rdmad, tmp_path):
    cdi = tmp_path / "cdi" / "rdmad.json"
    d = start(rdmad, tmp_path, PROFILES, cdi)

    # p0 and p1 have their devices; "waits" (rxe9 absent) has none.
    spec = wait_spec(cdi, lambda s: names(s) == ["p0", "p1"])
    check_spec(spec, d, {"p0": "rxe0", "p1": "rxe1"})
    # The oldest version that can say it (CDI's MinimumRequiredVersion:
    # nothing here is newer than 0.3.0).
    assert spec["cdiVersion"] == "0.3.0"
    assert stat.S_IMODE(os.stat(cdi).st_mode) == 0o644
    assert leftovers(cdi) == []

    # What the container gets is enough: RDMAD_SOCKET and RDMAD_PROFILE,
    # no argument, and the client attaches to its profile.
    env = dict(os.environ)
    env.update(e.split("=", 1) for e in next(
        dev for dev in spec["devices"]
        if dev["name"] == "p0")["containerEdits"]["env"])
    r = subprocess.run([str(ATTACH)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("profile p0: local mode, device rxe0"), \
        r.stdout

    # Reload: p1 and waits go, new.one comes (a dot in a device name
    # needs no newer CDI: 0.6.0 allowed dots in the kind's class).
    rewrite(d, RELOADED)
    status, body = d.request("POST", "/v1/reload")
    assert status == 200, body
    spec = wait_spec(cdi, lambda s: names(s) == ["new.one", "p0"])
    check_spec(spec, d, {"p0": "rxe0", "new.one": "rxe1"})
    assert spec["cdiVersion"] == "0.3.0"

    # rxe1 goes: new.one has no device, and no CDI device.
    def rdma(*args):
        return subprocess.run(["rdma", *args], capture_output=True,
                              text=True, timeout=60)
    try:
        r = rdma("link", "del", "rxe1")
        assert r.returncode == 0, r.stderr
        spec = wait_spec(cdi, lambda s: names(s) == ["p0"])
        check_spec(spec, d, {"p0": "rxe0"})
    finally:
        r = rdma("link", "add", "rxe1", "type", "rxe", "netdev", "veth1")
    assert r.returncode == 0, r.stderr
    spec = wait_spec(cdi, lambda s: names(s) == ["new.one", "p0"])
    check_spec(spec, d, {"p0": "rxe0", "new.one": "rxe1"})
    assert leftovers(cdi) == []

    # Stop: removed.
    assert d.stop() == 0
    assert not cdi.exists()
    assert leftovers(cdi) == []


def test_no_device_no_file_and_off(rdmad, tmp_path):
    """Without a profile that has its device, no spec (CDI refuses one
    without devices); cdi_spec = "" writes none at all."""
    cdi = tmp_path / "cdi" / "rdmad.json"
    d = start(rdmad, tmp_path, """
devices = ( { name = "absent"; match = { ibdev = "rxe9"; }; } );
profiles = ( { name = "waits"; device = "absent"; } );
""", cdi)
    time.sleep(1)
    assert not cdi.exists()
    assert d.stop() == 0

    d = start(rdmad, tmp_path, PROFILES, "")
    assert d.get("/v1/profiles/p0")[1]["state"] == "ready"
    assert not cdi.exists()
    assert d.get("/v1/config")[1]["daemon"]["cdi_spec"] == ""


def test_default_path(rdmad, tmp_path):
    """Every daemon of this suite without cdi_spec writes there too (in
    the VM harness, the guest's own /run)."""
    default = Path("/run/cdi/rdmad.json")
    d = start(rdmad, tmp_path, PROFILES, None)
    spec = wait_spec(default, lambda s: names(s) == ["p0", "p1"])
    check_spec(spec, d, {"p0": "rxe0", "p1": "rxe1"})
    assert d.get("/v1/config")[1]["daemon"]["cdi_spec"] == str(default)
    assert d.stop() == 0
    assert not default.exists()


@pytest.mark.container
def test_container_attaches_through_cdi(rdmad):
    """podman applies rdmad's CDI device to a container whose root is
    this machine's own (no image): the container sees the profile
    device's uverbs node and rdma_cm and no other RDMA device, has
    RDMAD_SOCKET (p0's own socket), RDMAD_PROFILE, RDMAD_PROFILE_P0 and
    RDMAD_SOCKET_P0, and the
    unmodified client attaches
    with no argument."""
    podman.need_podman()
    tmp = podman.workdir()
    try:
        d = start(rdmad, tmp, PROFILES, None)  # the default: /run/cdi
        wait_spec("/run/cdi/rdmad.json", lambda s: names(s) == ["p0", "p1"])
        uverbs = uverbs_of("rxe0")
        script = ("ls /dev/infiniband; env | grep ^RDMAD_ | sort; "
                  f"exec {shlex.quote(str(ATTACH))}")
        r = subprocess.run(
            podman.run_argv(tmp, ["--network", "none",
                                  "--device", "rdmad.io/profile=p0"],
                            ["sh", "-c", script]),
            capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        assert sorted(lines[:2]) == sorted(
            [os.path.basename(uverbs), "rdma_cm"]), r.stdout
        sock = own_dir(d, "p0") + "/rdmad.sock"
        assert lines[2:6] == ["RDMAD_PROFILE=p0", "RDMAD_PROFILE_P0=p0",
                              f"RDMAD_SOCKET={sock}",
                              f"RDMAD_SOCKET_P0={sock}"], r.stdout
        assert lines[6].startswith("profile p0: local mode, device rxe0"), \
            r.stdout
        assert "attached to p0" in d.log()
        assert d.stop() == 0
        assert not Path("/run/cdi/rdmad.json").exists()
    finally:
        podman.remove(tmp)


# Run in the container, as root, with what the CDI device gave it: the
# protocol client of the tests (rdmadproto.py, on the machine's root that
# is the container's) on $RDMAD_SOCKET.
TENANT = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import rdmadproto as rp
c = rp.Client(os.environ["RDMAD_SOCKET"])
out = {"uid": os.getuid()}
for name in ("p0", "p1"):
    t, doc, fds = c.call(rp.ATTACH, {"profile": name})
    for fd in fds:
        os.close(fd)
    out["attach " + name] = "ATTACHED" if t == rp.ATTACHED else \
        doc["error"]["code"]
for method, path in (("POST", "/v1/reload"), ("GET", "/v1/profiles/p1"),
                     ("GET", "/v1/profiles/p1/pd/b"), ("GET", "/v1/config"),
                     ("GET", "/v1/sessions"), ("GET", "/v1/profiles")):
    status, body = c.request(method, path)
    out[method + " " + path] = [status, body["error"]["code"]
                                if status >= 400 else
                                sorted(p["name"] for p in body)
                                if path == "/v1/profiles" else "ok"]
print(json.dumps(out))
"""


@pytest.mark.container
def test_container_as_root_gets_its_profile_only(rdmad):
    """A container given p0 through CDI, running as root (uid 0, which
    both p0's and p1's allow lists name): it attaches p0, and gets
    "forbidden" for an ATTACH of p1, a reload and p1's documents (REPLY
    status 403); GET /v1/profiles lists p0 alone. The daemon's log shows
    no reload and no attachment to p1."""
    podman.need_podman()
    tmp = podman.workdir()
    try:
        d = start(rdmad, tmp, PROFILES, None)  # the default: /run/cdi
        wait_spec("/run/cdi/rdmad.json", lambda s: names(s) == ["p0", "p1"])
        here = str(Path(__file__).resolve().parent)
        r = subprocess.run(
            podman.run_argv(tmp, ["--network", "none", "--user", "0",
                                  "--device", "rdmad.io/profile=p0"],
                            ["python3", "-c", TENANT, here]),
            capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout.splitlines()[-1])
        assert out == {
            "uid": 0, "attach p0": "ATTACHED", "attach p1": "forbidden",
            "POST /v1/reload": [403, "forbidden"],
            "GET /v1/profiles/p1": [403, "forbidden"],
            "GET /v1/profiles/p1/pd/b": [403, "forbidden"],
            "GET /v1/config": [403, "forbidden"],
            "GET /v1/sessions": [403, "forbidden"],
            "GET /v1/profiles": [200, ["p0"]]}, out
        log = d.log()
        assert "attached to p0" in log and "attached to p1" not in log
        assert "reloaded" not in log, log
        assert d.stop() == 0
    finally:
        podman.remove(tmp)
