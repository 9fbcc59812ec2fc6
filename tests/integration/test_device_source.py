# SPDX-License-Identifier: MIT
"""Where rdmad hears of RDMA devices coming and going
(daemon/verbs/devwatch.h): from systemd-udevd where it runs, from the
kernel's own uevents and sysfs where it does not (a container without
/run/udev, an initrd; here `tests/vm/run --no-udev`). Either way a
profile follows its device: ready, pending with the reason when
`rdma link delete` removes it, ready again when `rdma link add` brings
it back, with the events and the CDI specification following; and
`GET /v1/devices` never disagrees with the profiles: a device listed
there is `up` exactly when a profile matching it opens it.

These run in both modes: `GET /v1/health` must say "udev" with udevd and
"kernel" without."""

import json
import os
import subprocess
import threading
import time
from pathlib import Path

from conftest import DEVICE_EVENTS, HEALTH, TOKEN, UDEV_CONTROL, free_port
from test_events import Collector, sse_reader

IN_VM = os.environ.get("RDMAD_VM") == "1"
NO_UDEV = os.environ.get("RDMAD_VM_NO_UDEV") == "1"
SYS_IB = Path("/sys/class/infiniband")
SYS_UVERBS = Path("/sys/class/infiniband_verbs")
TIMEOUT = 60  # TCG is slow

PROFILES = """
devices = ( { name = "e"; match = { ibdev = "rxe0"; }; },
            { name = "f"; match = { ibdev = "rxe1"; }; } );
profiles = (
  { name = "keep"; device = "e"; pd = ( { name = "a"; } ); },
  { name = "p"; device = "f";
    memory = ( { name = "m"; size = "64K"; } );
    pd = ( { name = "a"; } );
    mr = ( { name = "r"; pd = "a"; memory = "m"; } ); }
);
"""


def start(rdmad, tmp_path, cdi):
    port = free_port()
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    d = rdmad(f'daemon = {{ runtime_dir = "{tmp_path}"; '
              f'cdi_spec = "{cdi}"; '
              f'http = {{ listen = [ "127.0.0.1:{port}" ]; '
              f'token_file = "{token}"; }}; }};\n' + PROFILES)
    d.token = TOKEN
    return d


def rdma(*args):
    return subprocess.run(["rdma", *args], capture_output=True, text=True,
                          timeout=TIMEOUT)


def wait_for(pred, what, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def profile(d, name):
    status, p = d.get(f"/v1/profiles/{name}")
    assert status == 200, p
    return p


def devices(d):
    status, devs = d.get("/v1/devices")
    assert status == 200, devs
    return {x["name"]: x for x in devs}


def uverbs_of(ibdev):
    for u in SYS_UVERBS.glob("uverbs*"):
        try:
            if (u / "ibdev").read_text().strip() == ibdev:
                return u
        except OSError:
            pass
    return None


def spec_nodes(cdi):
    """{CDI device name: its first device node} of the spec, {} without
    one."""
    try:
        spec = json.loads(Path(cdi).read_text())
    except FileNotFoundError:
        return {}
    return {dev["name"]: dev["containerEdits"]["deviceNodes"][0]["path"]
            for dev in spec["devices"]}


def assert_agree(d):
    """What /v1/devices says is up, the profiles see: each profile with
    an up device matching it has it open, and none has a device that is
    not up."""
    devs = devices(d)
    for name, dev in (("keep", "rxe0"), ("p", "rxe1")):
        p = profile(d, name)
        up = devs.get(dev, {}).get("up", False)
        if p["state"] == "creating":
            continue
        assert (p["state"] != "pending") == up, (name, p, devs)
        assert devs.get(dev, {}).get("used", False) == (p["state"] != "pending")


def test_health_says_where_device_events_come_from(rdmad, tmp_path):
    d = start(rdmad, tmp_path, tmp_path / "cdi" / "rdmad.json")
    status, health = d.get("/v1/health")
    assert status == 200
    assert health == HEALTH, health
    if IN_VM:
        # tests/vm/run starts udevd unless --no-udev.
        assert health["device_events"] == ("kernel" if NO_UDEV else "udev")
        assert UDEV_CONTROL.exists() != NO_UDEV
    assert f"device events: {DEVICE_EVENTS} " in d.log(), d.log()


def test_profile_follows_rdma_link_delete_and_add(rdmad, tmp_path):
    """The acceptance case of issue 28, in either mode: a profile on rxe1
    is ready; `rdma link delete rxe1` makes it pending with the reason
    (event device_removed, no CDI device), `rdma link add` brings it
    back (event device_added, its CDI device naming rxe1's new uverbs
    node)."""
    cdi = tmp_path / "cdi" / "rdmad.json"
    d = start(rdmad, tmp_path, cdi)
    assert profile(d, "p")["state"] == "ready", profile(d, "p")
    assert profile(d, "keep")["state"] == "ready"
    devs = devices(d)
    assert devs["rxe1"]["up"] and devs["rxe1"]["used"], devs
    assert devs["rxe0"]["up"] and devs["rxe0"]["used"], devs
    assert_agree(d)
    wait_for(lambda: spec_nodes(cdi) == {
        "keep": f"/dev/infiniband/{uverbs_of('rxe0').name}",
        "p": f"/dev/infiniband/{uverbs_of('rxe1').name}"}, "the CDI spec")

    stop = threading.Event()
    events = Collector("GET /v1/events")
    t = threading.Thread(target=sse_reader, args=(d.port, events, stop),
                         daemon=True)
    t.start()
    try:
        events.wait_for(lambda e: e["event"] == "subscribed")
        try:
            # Blocks in the kernel until rdmad has closed its context.
            r = rdma("link", "delete", "rxe1")
            assert r.returncode == 0, r.stderr
            wait_for(lambda: profile(d, "p")["state"] == "pending",
                     "profile p to go pending")
            p = profile(d, "p")
            assert p["reason"] == "device rxe1 was removed", p
            gone = events.wait_for(lambda e: e["event"] == "device_removed")
            assert gone["device"] == "rxe1", gone
            wait_for(lambda: list(spec_nodes(cdi)) == ["keep"],
                     "p's CDI device to go")
            assert "rxe1" not in devices(d)
            assert profile(d, "keep")["state"] == "ready"
            assert_agree(d)
        finally:
            r = rdma("link", "add", "rxe1", "type", "rxe", "netdev", "veth1")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: profile(d, "p")["state"] == "ready",
                 "profile p to come back")
        came = events.wait_for(lambda e: e["event"] == "device_added")
        assert came["device"] == "rxe1" and came["seq"] > gone["seq"], came
        wait_for(lambda: spec_nodes(cdi).get("p") ==
                 f"/dev/infiniband/{uverbs_of('rxe1').name}",
                 "p's CDI device to come back")
        devs = devices(d)
        assert devs["rxe1"]["up"] and devs["rxe1"]["used"], devs
        assert_agree(d)
        assert events.error is None, events.error
    finally:
        stop.set()
        t.join(10)
    assert "device rxe1 appeared" in d.log()
    assert d.stop() == 0


def test_device_udevd_has_not_seen(rdmad, tmp_path):
    """Where udevd runs, a device it has no record of (its database entry
    gone: as if it came before udevd started and nothing replayed it) is
    listed by /v1/devices but not up, and no profile takes it; once
    udevd has processed it (an add written to its uevent file, as udevadm
    trigger does), it is up and the profile
    ready. Without udevd, nothing of udev's matters: listed, up, ready."""
    uverbs = uverbs_of("rxe1")
    assert uverbs is not None
    dev = (uverbs / "dev").read_text().strip()
    db = Path(f"/run/udev/data/c{dev}")
    hidden = db.with_name(db.name + ".hidden")
    cdi = tmp_path / "cdi" / "rdmad.json"
    if NO_UDEV or not UDEV_CONTROL.exists():
        assert not db.exists()
        d = start(rdmad, tmp_path, cdi)
        assert devices(d)["rxe1"]["up"]
        assert profile(d, "p")["state"] == "ready"
        assert_agree(d)
        return
    # (udevadm settle does nothing in the VM's chroot: udevd may still
    # be at it.)
    wait_for(db.exists, f"udevd's record of {uverbs.name}")
    os.rename(db, hidden)
    try:
        d = start(rdmad, tmp_path, cdi)
        devs = devices(d)
        assert "rxe1" in devs and not devs["rxe1"]["up"], devs
        p = profile(d, "p")
        assert p["state"] == "pending", p
        assert "no RDMA device matches device 'f'" in p["reason"], p
        assert_agree(d)
        # What udevadm trigger does (which refuses to in the VM's
        # chroot): the kernel sends the add again, udevd handles it.
        (uverbs / "uevent").write_text("add\n")
        wait_for(db.exists, "udevd to record rxe1's uverbs device again")
        wait_for(lambda: profile(d, "p")["state"] == "ready",
                 "profile p once udevd has seen rxe1")
        assert devices(d)["rxe1"]["up"]
        assert_agree(d)
    finally:
        if hidden.exists() and not db.exists():
            os.rename(hidden, db)
        elif hidden.exists():
            hidden.unlink()
