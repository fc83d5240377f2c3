"""
Rehearsal clouds are cut off from each other and from this machine's networks; a master of
masters links the top's cloud with each syndic's, and only those. Three stand-in clouds
here: a namespace behind a veth named as a cloud's uplink, with an address of 100.64.0.0/10.
"""

import subprocess

import pytest

from kos_local import net
from tests.netlab import can_use_netns

pytestmark = pytest.mark.skipif(not can_use_netns(), reason="needs root for namespaces")

CLOUDS = {"kospeer-top": "100.127.241", "kospeer-dev": "100.127.242", "kospeer-prd": "100.127.243"}


def ns(name):
    return f"kos-{name}-cloud"


def gateway(name):
    return f"{CLOUDS[name]}.1"


def inside(name):
    return f"{CLOUDS[name]}.2"


@pytest.fixture
def clouds():
    for name, prefix in CLOUDS.items():
        link = net.uplink(name)
        net.ip("netns", "add", ns(name))
        net.ip("link", "add", link, "type", "veth", "peer", "name", "ext0", "netns", ns(name))
        net.ip("addr", "add", f"{prefix}.1/24", "dev", link)
        net.ip("link", "set", link, "up")
        net.ip("-n", ns(name), "addr", "add", f"{prefix}.2/24", "dev", "ext0")
        net.ip("-n", ns(name), "link", "set", "ext0", "up")
        net.ip("-n", ns(name), "route", "add", "default", "via", f"{prefix}.1")
    try:
        yield CLOUDS
    finally:
        for name in CLOUDS:
            net.unpeer(net.uplink(name))
            net.ip("netns", "del", ns(name), check=False)
            net.ip("link", "del", net.uplink(name), check=False)


def reaches(src, dst, port=4506):
    """Whether a TCP connection from cloud ``src`` opens to a listener in cloud ``dst``."""
    listener = subprocess.Popen(
        ["ip", "netns", "exec", ns(dst), "python3", "-c",
         "import socket; s = socket.socket(); "
         "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
         f"s.bind(('{inside(dst)}', {port})); s.listen(); s.settimeout(5); s.accept()"],
        stderr=subprocess.DEVNULL)
    try:
        probe = subprocess.run(
            ["ip", "netns", "exec", ns(src), "python3", "-c",
             "import socket, time\n"
             "for _ in range(20):\n"
             f" try: socket.create_connection(('{inside(dst)}', {port}), timeout=1).close(); break\n"
             " except ConnectionRefusedError: time.sleep(0.1)\n"],
            capture_output=True, timeout=30)
        return probe.returncode == 0
    finally:
        listener.kill()
        listener.wait()


def forwarding(name):
    with open(f"/proc/sys/net/ipv4/conf/{net.uplink(name)}/forwarding") as f:
        return f.read().strip() == "1"


def test_a_top_and_its_syndics_reach_each_other_and_nothing_else(clouds):
    top, dev, prd = clouds
    assert not reaches(dev, top), "clouds are cut off before any peering"
    assert net.uplink_towards(inside(top)) == net.uplink(top)
    assert net.uplink_towards("192.0.2.7") is None and net.uplink_towards("salt.example") is None

    net.peer(net.uplink(dev), net.uplink(top))
    net.peer(net.uplink(prd), net.uplink(top))
    net.peer(net.uplink(prd), net.uplink(top))  # a re-run adds nothing
    assert net.peerings() == {(net.uplink(a), net.uplink(b))
                              for a, b in ((dev, top), (top, dev), (prd, top), (top, prd))}
    assert reaches(dev, top) and reaches(top, dev) and reaches(prd, top)
    # the two syndic environments never see each other
    assert not reaches(dev, prd) and not reaches(prd, dev)
    # and nothing of a peered cloud leaves through this machine's own networks
    rules = net.iptables("-S", "FORWARD").stdout
    assert rules.count(f"-j {net.PEERS_CHAIN}") == 3
    assert net.iptables("-S", net.PEERS_CHAIN).stdout.strip().endswith(
        f"-A {net.PEERS_CHAIN} -j DROP")

    # dev goes away: top and prod still reach each other, dev no longer forwards
    assert net.unpeer(net.uplink(dev)) == sorted([(net.uplink(dev), net.uplink(top)),
                                                  (net.uplink(top), net.uplink(dev))])
    assert not forwarding(dev) and forwarding(top) and forwarding(prd)
    assert not reaches(dev, top) and reaches(prd, top)

    # the last peering ends: no forwarding, no rule, no chain left
    net.unpeer(net.uplink(top))
    assert not forwarding(top) and not forwarding(prd)
    assert net.peerings() == set()
    assert net.PEERS_CHAIN not in net.iptables("-S").stdout
