# SPDX-License-Identifier: MIT
"""deploy/kubernetes/: every manifest valid against the Kubernetes API's
schemas, offline (npm's kubernetes-models, fetched once into
.cache/k8s-validate; tests/deploy/validate.js), with no field the API
does not know; the ConfigMap's configuration passes `rdmad --check`; and
the DaemonSet says what rdmad needs, no more: the unit's capabilities,
the node's /run/rdmad and /run/cdi where the configuration puts the
socket and the CDI specification, liveness from /v1/health on the
configured port."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEPLOY = ROOT / "deploy" / "kubernetes"
CACHE = ROOT / ".cache" / "k8s-validate"
RDMAD = ROOT / "build" / "rdmad"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))


@pytest.fixture(scope="module")
def node_modules():
    """kubernetes-models and js-yaml, at the versions of package.json,
    installed once (the npm registry) and reused offline after."""
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.fail("node and npm are needed (tests/deps installs them)")
    want = (HERE / "package.json").read_text()
    stamp = CACHE / "package.json"
    if not (stamp.exists() and stamp.read_text() == want and
            (CACHE / "node_modules" / "kubernetes-models").is_dir()):
        CACHE.mkdir(parents=True, exist_ok=True)
        stamp.write_text(want)
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund",
                            "--no-package-lock", "--loglevel=error"],
                           cwd=CACHE, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
    return CACHE / "node_modules"


def validate(node_modules, *files):
    return subprocess.run(["node", str(HERE / "validate.js"), *map(str, files)],
                          env={**os.environ, "NODE_PATH": str(node_modules)},
                          capture_output=True, text=True, timeout=120)


def docs():
    out = {}
    for f in MANIFESTS:
        for d in yaml.safe_load_all(f.read_text()):
            if d:
                out[(d["kind"], d["metadata"]["name"])] = d
    return out


def test_manifests_are_valid(node_modules):
    assert MANIFESTS
    r = validate(node_modules, *MANIFESTS)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(docs())} passed, 0 failed" in r.stdout


def test_checker_catches_mistakes(node_modules):
    r = validate(node_modules, HERE / "bad" / "daemonset-typos.yaml")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "livenesProbe: no such field" in r.stdout
    assert "containerPort must be integer" in r.stdout
    assert "required property name" in r.stdout


def config_files(tmp_path):
    """The ConfigMaps' files under tmp_path, paths moved there."""
    d = docs()
    conf = d[("ConfigMap", "rdmad-config")]["data"]["rdmad.conf"]
    (tmp_path / "profiles.d").mkdir()
    for name, text in d[("ConfigMap", "rdmad-profiles")]["data"].items():
        assert name.endswith(".conf"), name
        (tmp_path / "profiles.d" / name).write_text(text)
    conf = conf.replace("/etc/rdmad/profiles.d", str(tmp_path / "profiles.d"))
    (tmp_path / "rdmad.conf").write_text(conf)
    return tmp_path / "rdmad.conf"


def test_configmap_passes_rdmad_check(tmp_path):
    path = config_files(tmp_path)
    r = subprocess.run([str(RDMAD), "--check", "-c", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    dump = subprocess.run([str(RDMAD), "--dump", "-c", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert dump.returncode == 0, dump.stderr
    assert "cdi_spec" in dump.stdout


def container(spec, name):
    (c,) = [c for c in spec["containers"] if c["name"] == name]
    return c


def unit_capabilities():
    unit = (ROOT / "systemd" / "rdmad.service").read_text()
    caps = re.search(r"^AmbientCapabilities=(.*)$", unit, re.M)[1].split()
    return {c.removeprefix("CAP_") for c in caps}


def test_daemonset_grants_what_rdmad_needs(tmp_path):
    d = docs()
    ds = d[("DaemonSet", "rdmad")]
    spec = ds["spec"]["template"]["spec"]
    c = container(spec, "rdmad")
    sc = c["securityContext"]
    assert sc["capabilities"]["drop"] == ["ALL"]
    # The unit's capabilities, and CHOWN for the socket's group (the unit
    # gets that from rdmad.socket's SocketGroup= instead).
    assert set(sc["capabilities"]["add"]) == unit_capabilities() | {"CHOWN"}
    assert not sc.get("privileged") and not sc["allowPrivilegeEscalation"]
    assert spec["automountServiceAccountToken"] is False

    conf = config_files(tmp_path).read_text()
    sock = re.search(r'control_socket = "([^"]+)"', conf)[1]
    cdi = re.search(r'cdi_spec = "([^"]+)"', conf)[1]
    listen = re.search(r'listen = \[ "127\.0\.0\.1:(\d+)" \]', conf)[1]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]
            if "hostPath" in v}
    # The node's directories, at the paths the configuration names.
    for path in (os.path.dirname(sock), os.path.dirname(cdi),
                 "/dev/infiniband"):
        names = [n for n, p in host.items() if p == path]
        assert names and mounts[names[0]] == path, path
    probe = c["livenessProbe"]["httpGet"]
    assert probe["path"] == "/v1/health"
    assert str(probe["port"]) == listen and probe["host"] == "127.0.0.1"
    assert spec["hostNetwork"] is True
    assert "rdmactl" in " ".join(c["readinessProbe"]["exec"]["command"])


def test_daemonset_needs_no_udevd():
    """rdmad in the pod hears of devices from the kernel (no udevd there,
    no /run/udev: daemon/verbs/devwatch.h): the node's network, where
    the kernel's uevents are sent, no user namespace (none are sent into
    one), the node's /dev/infiniband, and not the node's /run/udev
    (which would make rdmad wait for the node's udevd)."""
    ds = docs()[("DaemonSet", "rdmad")]
    spec = ds["spec"]["template"]["spec"]
    c = container(spec, "rdmad")
    assert spec["hostNetwork"] is True
    assert spec.get("hostUsers", True) is True
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]
            if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert not [p for p in list(host.values()) + list(mounts.values())
                if p.rstrip("/") in ("/run/udev", "/run")
                or p.startswith("/run/udev/")], (host, mounts)
    names = [n for n, p in host.items() if p == "/dev/infiniband"]
    assert names and mounts[names[0]] == "/dev/infiniband"
    readme = (DEPLOY / "README.md").read_text()
    assert "Devices without udevd" in readme
    assert '"device_events": "kernel"' in readme


def test_client_requests_a_profile_through_cdi():
    d = docs()
    pod = d[("Pod", "ingest-worker")]
    ann = pod["metadata"]["annotations"]
    assert "rdmad.io/profile=ingest" in ann.values()
    assert all(k.startswith("cdi.k8s.io/") for k in ann)
    profiles = d[("ConfigMap", "rdmad-profiles")]["data"]["ingest.conf"]
    assert 'name = "ingest"' in profiles
    uid = pod["spec"]["securityContext"]["runAsUser"]
    assert re.search(rf"uids = \[ {uid} \]", profiles)
    group = re.search(r'control_group = "(\d+)"',
                      d[("ConfigMap", "rdmad-config")]["data"]["rdmad.conf"])[1]
    assert int(group) in pod["spec"]["securityContext"]["supplementalGroups"]


def test_device_plugin_beside_rdmad(tmp_path):
    """rdmad-kubelet in the DaemonSet: the kubelet's device-plugins
    directory of the node, rdmad's control socket (as the configuration
    names it) and CDI specification read-only, no capability; its
    options are ones it takes. A pod asks for a profile's resource."""
    d = docs()
    spec = d[("DaemonSet", "rdmad")]["spec"]["template"]["spec"]
    c = container(spec, "rdmad-kubelet")
    sc = c["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert not sc["privileged"] and not sc["allowPrivilegeEscalation"]
    assert sc["readOnlyRootFilesystem"]
    conf = config_files(tmp_path).read_text()
    sock = re.search(r'control_socket = "([^"]+)"', conf)[1]
    cdi = re.search(r'cdi_spec = "([^"]+)"', conf)[1]
    argv = c["command"]
    assert argv[0] == "/usr/bin/rdmad-kubelet"
    opts = dict(a.split("=", 1) for a in argv[1:])
    assert opts["--socket"] == sock
    plugin_dir = "/var/lib/kubelet/device-plugins"
    assert opts["--plugin-dir"] == plugin_dir
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]
            if "hostPath" in v}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    for path, ro in ((plugin_dir, False), (os.path.dirname(sock), True),
                     (os.path.dirname(cdi), True)):
        (name,) = [n for n, p in host.items() if p == path]
        assert mounts[name]["mountPath"] == path
        assert mounts[name].get("readOnly", False) is ro, path
    # The options parse as rdmad-kubelet parses them.
    r = subprocess.run(["/usr/bin/python3", "-c", """
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("plugin", sys.argv[1])
spec = importlib.util.spec_from_loader("plugin", loader)
m = importlib.util.module_from_spec(spec)
loader.exec_module(m)
a = m.parse_args(sys.argv[2:])
print(a.shares, a.prefix)
""", str(ROOT / "kubelet" / "rdmad-kubelet"), *argv[1:]],
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [opts["--shares"], "rdmad.io"]
    # And pass its own --check (resource names as the kubelet takes
    # them, socket paths that fit), with the example's profile.
    r = subprocess.run(["/usr/bin/python3",
                        str(ROOT / "kubelet" / "rdmad-kubelet"), "--check",
                        "--profile", "ingest", *argv[1:]],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "options OK" in r.stdout, r.stderr

    pod = d[("Pod", "ingest-reader")]
    (w,) = pod["spec"]["containers"]
    assert w["resources"]["limits"]["rdmad.io/ingest"] == 1
    assert "annotations" not in pod["metadata"]
    assert "nodeSelector" not in pod["spec"]
