# SPDX-License-Identifier: MIT
"""rdmad-kubelet against the test kubelet on this machine, no RDMA
device needed (tests/check runs this file on the host): what the
kubelet's device manager does with a plugin, written from its
behaviour (testkubelet.py), not from the plugin.

- A ListAndWatch stream the kubelet ends (its socket untouched) is
  followed by a new Register; so is a kubelet that was away (its socket
  left behind, unanswered), and a new kubelet while the old one hangs
  in Register.
- A refused Register is tried again less and less often, and says so.
- A kubelet that answers Register after 12 s gets one Register.
- Resource names: a table whose answers are the upstream rules
  (IsExtendedResourceName), checked against the test kubelet and the
  plugin's --check; a name that can never register stops the plugin at
  start.
- A resource whose socket cannot be made is left out alone: the others
  stay registered, without flapping; a long profile name still gets a
  socket path that fits.
- The options the kubelet keeps are GetDevicePluginOptions' answer;
  GetPreferredAllocation is not advertised (every share is the same).
- The Go client (tests/kubelet/goclient, Debian's grpc-go) dials the
  plugin as the kubelet does and reads the same options and list.
"""

import json
import os
import socket
import subprocess
import time
from pathlib import Path


from conftest import BUILD, PLUGIN, TIMEOUT
from testkubelet import Kubelet, is_extended_resource_name

U = "Unhealthy"
GOCLIENT = BUILD / "tests" / "kubelet" / "goclient"

# Resource names and whether the kubelet takes them as extended
# resources (k8s.io/kubernetes IsExtendedResourceName: no '/' or
# "kubernetes.io/" anywhere: a native resource; "requests." at the
# start: quota's; and "requests." + name must pass IsQualifiedName,
# whose prefix is a DNS-1123 subdomain of at most 253 characters and
# whose name part has at most 63).
NAMES = [
    ("example.com/x", True),
    ("rdmad.io/p0", True),
    ("a/b", True),
    ("example.com/X_y.z-1", True),
    ("example.com/" + "n" * 63, True),
    ("example.com/" + "n" * 64, False),
    # "requests." (9) + domain: 244 characters is the most a domain has.
    ("d" * 240 + ".com/x", True),
    ("d" * 241 + ".com/x", False),
    ("d" * 249 + ".com/x", False),  # a 253-character domain
    ("l" * 100 + ".example.com/x", True),  # labels have no limit of their own
    ("x", False),
    ("kubernetes.io/x", False),
    ("notkubernetes.io/x", False),
    ("sub.kubernetes.io/x", False),
    ("example.com/kubernetes.io/x", False),
    ("kubernetes.iox/y", True),
    ("requests.example.com/x", False),
    ("requestsexample.com/x", True),
    ("Example.com/x", False),
    ("example.com/-x", False),
    ("example.com/x-", False),
    ("example.com/x y", False),
    ("example.com/a/b", False),
    ("/x", False),
    ("example.com/", False),
    ("example..com/x", False),
    ("-example.com/x", False),
    ("example.com./x", False),
]


def test_test_kubelet_takes_the_upstream_names():
    """The test kubelet's rules are the table's (the table is the
    oracle: written from the upstream rules)."""
    for name, ok in NAMES:
        assert is_extended_resource_name(name) == ok, name


def test_plugin_check_takes_the_upstream_names(tmp_path):
    for name, ok in NAMES:
        r = subprocess.run(["/usr/bin/python3", str(PLUGIN), "--check",
                            "--plugin-dir", str(tmp_path),
                            "--resource", f"p={name}"],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert (r.returncode == 0) == ok, (name, r.stdout, r.stderr)
        if not ok:
            assert r.returncode == 2 and "--resource" in r.stderr, r.stderr


def test_names_that_never_register_stop_the_plugin(tmp_path):
    """A prefix no profile can register under is an error at start,
    not a Register tried forever."""
    for prefix in ("kubernetes.io", "notkubernetes.io", "requests.rdmad.io",
                   "Rdmad.io"):
        r = subprocess.run(["/usr/bin/python3", str(PLUGIN), "--plugin-dir",
                            str(tmp_path), "--prefix", prefix],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 2 and "--prefix" in r.stderr, (prefix,
                                                             r.stderr)
    # A directory too long for any socket path.
    long_dir = tmp_path / ("d" * 100)
    long_dir.mkdir()
    r = subprocess.run(["/usr/bin/python3", str(PLUGIN), "--check",
                        "--plugin-dir", str(long_dir)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 2 and "107 bytes" in r.stderr, r.stderr


def test_profile_names_refused_alone(rdmad, kubelet, plugin):
    """A profile whose resource name the kubelet would refuse (a name
    part over 63 characters) is left out, said once; the others
    register."""
    long = "q" * 64
    d = rdmad("p0", long)
    p = plugin(d, "--shares", "1")
    kubelet.wait(lambda: kubelet.health("rdmad.io/p0") == {"p0-0": U},
                 "p0 to be listed")
    p.wait_log(f"profile {long}: resource name 'rdmad.io/{long}' is not one "
               "the kubelet accepts")
    time.sleep(1)
    assert kubelet.register_calls == ["rdmad.io/p0"]
    assert p.log().count(f"profile {long}:") == 1


def test_register_again_when_the_stream_ends(rdmad, kubelet, plugin):
    d = rdmad("p0", "p1")
    p = plugin(d, "--shares", "2")
    for r in ("rdmad.io/p0", "rdmad.io/p1"):
        kubelet.wait(lambda r=r: kubelet.registered(r) and
                     kubelet.health(r), f"{r} to be listed")
    sock = os.stat(kubelet.sock)
    kubelet.drop_stream("rdmad.io/p0")
    # Nothing was touched on disk: the plugin must see the stream end.
    kubelet.wait(lambda: kubelet.registrations.count("rdmad.io/p0") == 2,
                 "p0 to register again")
    c = kubelet.listed("rdmad.io/p0")
    assert kubelet.health("rdmad.io/p0") == {"p0-0": U, "p0-1": U}
    assert c.options is not None
    st = os.stat(kubelet.sock)
    assert (st.st_ino, st.st_ctime_ns) == (sock.st_ino, sock.st_ctime_ns)
    # p1 was left alone.
    assert kubelet.registrations.count("rdmad.io/p1") == 1
    # Again, twice: each end brings one Register.
    for n in (3, 4):
        kubelet.drop_stream("rdmad.io/p0")
        kubelet.wait(lambda n=n: kubelet.registrations.count(
            "rdmad.io/p0") == n, f"registration {n} of p0")
    time.sleep(2)
    assert kubelet.register_calls.count("rdmad.io/p0") == 4
    assert "ListAndWatch stream ended; registering again" in p.log()


def test_kubelet_away_and_back(rdmad, kubelet, plugin):
    """The kubelet stops, leaving its socket behind with nobody on it
    (unreachable: a Register fails at once), and comes back later: the
    plugin registers again at once, once."""
    d = rdmad("p0")
    p = plugin(d, "--shares", "1")
    kubelet.wait(lambda: kubelet.registrations == ["rdmad.io/p0"],
                 "p0 to register")
    kubelet.stop()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(kubelet.sock)
    dead.close()
    p.wait_log("rdmad.io/p0: the kubelet refused or did not answer "
               "Register (UNAVAILABLE")
    # Tries at 0, 0.5, 1.5, 3.5 and 7.5 s; the next would be at 15.5 s.
    time.sleep(8)
    t0 = time.monotonic()
    kubelet.start()
    kubelet.wait(lambda: kubelet.registered("rdmad.io/p0") is not None,
                 "p0 to register with the kubelet back")
    # Not at the backoff's next turn: the kubelet's socket is new.
    assert time.monotonic() - t0 < 5, p.log()
    time.sleep(1)
    assert kubelet.register_calls == ["rdmad.io/p0"] * 2, p.log()


def test_refused_register_backs_off(rdmad, kubelet, plugin):
    kubelet.refuse = "the kubelet is not ready for plugins"
    d = rdmad("p0")
    p = plugin(d, "--shares", "1")
    kubelet.wait(lambda: kubelet.register_calls, "a first Register")
    t0 = time.monotonic()
    time.sleep(6)
    n = kubelet.register_calls.count("rdmad.io/p0")
    # Every 0.5 s would be 12 more; doubling from 0.5 s: at 0.5, 1.5,
    # 3.5 (and 7.5) s.
    assert 2 <= n <= 5, (n, p.log())
    log = p.log()
    assert "the kubelet refused or did not answer Register (UNKNOWN: the " \
        "kubelet is not ready for plugins); trying again in" in log, log
    kubelet.refuse = None
    kubelet.wait(lambda: kubelet.registrations == ["rdmad.io/p0"],
                 "p0 to register once refusals stop", 40)
    assert time.monotonic() - t0 < 40


def test_a_slow_register_is_sent_once(rdmad, kubelet, plugin):
    """The kubelet answers after 12 s (it connects to the plugin and
    asks its options first): the plugin waits, and registers once."""
    kubelet.register_delay = 12
    d = rdmad("p0")
    p = plugin(d, "--shares", "1")
    kubelet.wait(lambda: kubelet.registrations == ["rdmad.io/p0"],
                 "the slow registration", 30)
    time.sleep(3)
    assert kubelet.register_calls == ["rdmad.io/p0"], p.log()
    assert kubelet.health("rdmad.io/p0") == {"p0-0": U}
    assert not kubelet.stale


def test_kubelet_replaced_while_register_hangs(rdmad, kubelet, plugin):
    """A kubelet that never answers Register is replaced by a new one (a
    restart that left the old process hanging): the plugin gives up the
    Register under way, serves its socket again (the new kubelet removed
    it) and registers with the new kubelet at once."""
    kubelet.register_delay = 300
    d = rdmad("p0")
    p = plugin(d, "--shares", "1")
    kubelet.wait(lambda: kubelet.register_calls, "a first Register")
    new = Kubelet(kubelet.dir).start()
    try:
        new.wait(lambda: new.registered("rdmad.io/p0") is not None and
                 new.health("rdmad.io/p0") == {"p0-0": U},
                 "p0 to register with the new kubelet", 20)
        assert new.register_calls == ["rdmad.io/p0"], p.log()
        new.check()
    finally:
        new.stop()
        kubelet.stopped.set()


def test_one_bad_socket_stays_its_own(rdmad, kubelet, plugin, tmp_path):
    """p1's socket cannot be made (a directory is in its way): p1 is
    left out, its reason logged; p0 and the long-named profile register
    once and are not disturbed."""
    long = "l" * 63
    d = rdmad("p0", "p1", long)
    (Path(kubelet.dir) / "rdmad-p1.sock").mkdir()
    p = plugin(d, "--shares", "1", "--resource", f"{long}=example.com/long")
    kubelet.wait(lambda: kubelet.health("rdmad.io/p0") == {"p0-0": U},
                 "p0 to be listed")
    kubelet.wait(lambda: kubelet.health("example.com/long") ==
                 {"share-0": U}, "the long-named profile to be listed")
    p.wait_log("rdmad.io/p1: cannot remove")
    n0 = kubelet.n_updates("rdmad.io/p0")
    time.sleep(3)
    assert kubelet.n_updates("rdmad.io/p0") == n0
    assert sorted(kubelet.register_calls) == [
        "example.com/long", "rdmad.io/p0"], p.log()
    log = p.log()
    assert "every share is Unhealthy" not in log, log
    # Its socket name fits: not rdmad-<63 l>.sock past 107 bytes.
    ep = kubelet.registered("example.com/long").endpoint
    assert len(os.fsencode(ep)) <= 107 and os.path.exists(ep)


def test_options_from_get_device_plugin_options(rdmad, kubelet, plugin):
    d = rdmad("p0")
    plugin(d, "--shares", "1")
    c = kubelet.listed("rdmad.io/p0")
    assert c.options is not None
    assert not c.options.get_preferred_allocation_available
    assert not c.options.pre_start_required


def test_go_client_dials_as_the_kubelet(rdmad, kubelet, plugin):
    """A second wire stack (grpc-go): a blocking dial of the endpoint
    with authority localhost, GetDevicePluginOptions, ListAndWatch's
    first list; an Allocate of a share that cannot attach is refused
    with FailedPrecondition."""
    assert GOCLIENT.exists(), "make helpers builds the Go client"
    d = rdmad("p0")
    plugin(d, "--shares", "2")
    kubelet.wait(lambda: kubelet.registered("rdmad.io/p0") and
                 kubelet.health("rdmad.io/p0"), "p0 to be listed")
    ep = kubelet.registered("rdmad.io/p0").endpoint
    r = subprocess.run([str(GOCLIENT), ep, "p0-1"], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["options"] == {"pre_start_required": False,
                              "get_preferred_allocation_available": False}
    assert out["devices"] == [{"ID": "p0-0", "health": U, "numa": None},
                              {"ID": "p0-1", "health": U, "numa": None}]
    assert out["allocate_error"]["code"] == "FailedPrecondition", out
