# SPDX-License-Identifier: MIT
"""What the hardware tests share: the import-capable device they run on
(the first mlx5 one), and the skip mark where there is none."""

import os
from pathlib import Path

import pytest


def import_capable_device():
    """The first device driven by mlx5_core, or None."""
    for dev in sorted(os.listdir("/sys/class/infiniband")):
        drv = Path(f"/sys/class/infiniband/{dev}/device/driver")
        if drv.exists() and drv.resolve().name == "mlx5_core":
            return dev
    return None


DEV = import_capable_device() if os.path.isdir("/sys/class/infiniband") \
    else None
needs_mlx5 = pytest.mark.skipif(DEV is None, reason="no mlx5 device")
