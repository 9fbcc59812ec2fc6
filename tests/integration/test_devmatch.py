# SPDX-License-Identifier: MIT
"""Device matching (daemon/verbs/devmatch.c, through sd-device) on rxe:
each matcher of a device section picks the device the kernel says it
should, and what matches no device leaves its profile pending with the
matchers in the reason. rxe has no parent device: pci and driver match
nothing."""

from pathlib import Path

SYS_IB = Path("/sys/class/infiniband")


def profile(d, name):
    status, p = d.get(f"/v1/profiles/{name}")
    assert status == 200, p
    return p


def test_matchers(rdmad):
    guid = (SYS_IB / "rxe1" / "node_guid").read_text().strip()
    # The matchers, and the device each must pick (None: no device).
    cases = {
        "by_ibdev": ('ibdev = "rxe1";', "rxe1"),
        "by_guid": (f'guid = "{guid.upper()}";', "rxe1"),
        "by_netdev": ('netdev = "veth1";', "rxe1"),
        "by_netdev0": ('netdev = "veth0";', "rxe0"),
        "all_of": (f'ibdev = "rxe1"; netdev = "veth1"; guid = "{guid}";',
                   "rxe1"),
        "conflict": ('ibdev = "rxe0"; netdev = "veth1";', None),
        "other_netdev": ('netdev = "lo";', None),
        "no_netdev": ('netdev = "nosuch0";', None),
        "no_guid": ('guid = "0000:0000:0000:0001";', None),
        "pci": ('pci = "0000:00:02.0";', None),
        "driver": ('driver = "rdma_rxe";', None),
    }
    devices = ",\n".join(f'{{ name = "{n}"; match = {{ {m} }}; }}'
                         for n, (m, _) in cases.items())
    profiles = ",\n".join(
        f'{{ name = "{n}"; device = "{n}"; pd = ( {{ name = "a"; }} ); }}'
        for n in cases)
    d = rdmad(f"devices = ( {devices} );\nprofiles = ( {profiles} );\n")
    for name, (match, want) in cases.items():
        p = profile(d, name)
        if want:
            assert p["state"] == "ready", (name, p)
            assert p["ibdev"] == want, (name, p)
        else:
            assert p["state"] == "pending", (name, p)
            assert "no RDMA device matches" in p["reason"], (name, p)
