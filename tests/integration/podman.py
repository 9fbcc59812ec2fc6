# SPDX-License-Identifier: MIT
"""podman without an image registry: a container whose root file system
is this machine's own (the same binaries and libraries; no image to
pull or build), for test_cdi.py (a client in a container) and
test_container.py (rdmad in one)."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

PODMAN = shutil.which("podman")


def need_podman():
    """Skip without podman; under CI=true (tests/deps installs it), fail."""
    if PODMAN:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but podman is not installed (tests/deps)")
    pytest.skip("podman is not installed (tests/deps installs it)")


def workdir():
    """A directory for podman's storage and the container's root, under
    /tmp, not the suite's tmp_path: in the VM that is /dev/shm, which the
    container's own /dev hides from crun's bind mounts. Remove it with
    remove()."""
    return Path(tempfile.mkdtemp(prefix="rdmad-podman-", dir="/tmp"))


def remove(tmp):
    subprocess.run(["rm", "-rf", "--one-file-system", str(tmp)])


def run_argv(tmp, run_args, cmd):
    """The command line of `podman run --rm RUN_ARGS... CMD...` with this
    machine's root as the container's: bound beside it in a mount
    namespace of our own (crun cannot pivot_root to / itself), where the
    cgroup2 file system crun looks for is mounted too (the VM's guest,
    without systemd, has not). No cgroups of its own, storage under tmp."""
    rootfs = tmp / "rootfs"
    rootfs.mkdir(exist_ok=True)
    podman = [PODMAN, "--root", str(tmp / "storage"),
              "--runroot", str(tmp / "runroot"),
              "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs",
              "--events-backend", "none"]
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            '{ mountpoint -q /sys/fs/cgroup || '
            'mount -t cgroup2 cgroup2 /sys/fs/cgroup; } && '
            'mount --rbind / "$0" && exec "$@"', str(rootfs), *podman,
            "run", "--rm", "--cgroups", "disabled", *run_args,
            "--rootfs", str(rootfs), *cmd]
