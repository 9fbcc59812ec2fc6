# SPDX-License-Identifier: MIT
"""What the Python client's tests share (tests/integration/
test_python_client.py and test_shared_python.py, tests/hw/test_odp_hw.py):
the package (client/python/rdmad) on the path, the configuration of a
daemon with one profile p of memory m, PD a and mr r (which
test_shared_orphans.py uses too), and RC QPs of a profile brought to RTS
on its port (a loopback pair, or two processes' QPs). Nothing here needs
pytest: the peer processes of test_python_client.py import it too."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client"
                       / "python"))
import rdmad  # noqa: E402,F401 (for the importers)


def one_mr_conf(run, port, dev, size, mr_keys="", more_mrs="", more=""):
    """The daemon (runtime_dir run, REST on 127.0.0.1:port) and profile
    p on device dev: memory m of size, pd a, mr r over m (read and
    written locally and remotely; mr_keys: more of its keys), more_mrs
    (", { ... }" each), and more of the profile's lines."""
    return f"""
daemon = {{ runtime_dir = "{run}";
           http = {{ listen = [ "127.0.0.1:{port}" ]; }}; }};
devices = ( {{ name = "d"; match = {{ ibdev = "{dev}"; }}; }} );
profiles = ( {{ name = "p"; device = "d";
  memory = ( {{ name = "m"; size = "{size}"; }} );
  pd = ( {{ name = "a"; }} );
  mr = ( {{ name = "r"; pd = "a"; memory = "m"; {mr_keys}
           access = [ "local_write", "remote_write", "remote_read" ]; }}{more_mrs} );
{more}}} );
"""


def rc_to_rts(prof, qp, dest_qp_num, access):
    """RC qp of the attached profile prof, connected to the QP
    dest_qp_num on the same port and GID (allowing access, remote
    IBV_ACCESS_* flags), through INIT and RTR to RTS."""
    import pyverbs.enums as e
    from pyverbs.addr import AHAttr, GlobalRoute
    from pyverbs.qp import QPAttr

    gid = prof.context.query_gid(prof.port, prof.gid_index)
    attr = QPAttr()
    attr.qp_access_flags = access
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = dest_qp_num
    attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
    attr.min_rnr_timer, attr.timeout = 12, 14
    attr.retry_cnt = attr.rnr_retry = 6
    attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=gid, sgid_index=prof.gid_index),
                          is_global=1, port_num=prof.port)
    qp.to_rts(attr)
