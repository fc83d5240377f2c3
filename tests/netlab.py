"""
Network namespaces for tests: one bridge on the host, one namespace per test host
attached by a veth pair. Everything is named with a ``kos`` prefix and removed by name.
"""

import ipaddress
import os
import subprocess
from dataclasses import dataclass, field


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def can_use_netns():
    if os.geteuid() != 0:
        return False
    # per process: test processes running side by side (pytest -n) probe at the same time
    probe = f"kos-probe-{os.getpid()}"
    ok = ip("netns", "add", probe, check=False).returncode == 0
    ip("netns", "del", probe, check=False)
    return ok


@dataclass
class Host:
    name: str
    netns: str
    address: str


@dataclass
class NetLab:
    """A /24 on a bridge: .1 is the host side, hosts get .10 upwards."""

    prefix: str
    cidr: str
    hosts: dict = field(default_factory=dict)

    @property
    def bridge(self):
        return f"{self.prefix}-br"

    @property
    def gateway(self):
        return str(ipaddress.ip_network(self.cidr)[1])

    def up(self):
        self.down()
        net = ipaddress.ip_network(self.cidr)
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.gateway}/{net.prefixlen}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        return self

    def add_host(self, name, default_route=True):
        """
        A namespace with one address on the bridge. Without a default route a DNS
        lookup (Salt's grains do some) fails at once instead of timing out.
        """
        net = ipaddress.ip_network(self.cidr)
        index = len(self.hosts)
        address = str(net[10 + index])
        netns = f"{self.prefix}-{index}"
        outside, inside = f"{self.prefix}v{index}", f"{self.prefix}i{index}"
        ip("netns", "add", netns)
        ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        ip("link", "set", inside, "netns", netns)
        ip("link", "set", outside, "master", self.bridge, "up")
        ip("-n", netns, "link", "set", "lo", "up")
        ip("-n", netns, "link", "set", inside, "name", "eth0")
        ip("-n", netns, "addr", "add", f"{address}/{net.prefixlen}", "dev", "eth0")
        ip("-n", netns, "link", "set", "eth0", "up")
        if default_route:
            ip("-n", netns, "route", "add", "default", "via", self.gateway)
        host = Host(name=name, netns=netns, address=address)
        self.hosts[name] = host
        return host

    def down(self):
        for line in ip("netns", "list", check=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(f"{self.prefix}-"):
                ip("netns", "del", name, check=False)
        for line in ip("-o", "link", "show", check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith(self.prefix):
                ip("link", "del", name, check=False)
        self.hosts.clear()
