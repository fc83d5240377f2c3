"""
The rehearsal cloud's wiring on this machine. One cloud (named ``local`` unless told
otherwise) serves every cluster on this machine, each in a project of its own:

- netns ``kos-<cloud>-cloud`` holds the cloud (its services, Neutron's bridges, router
  and DHCP namespaces);
- the machine itself is the outside world: veth ``kos<id>x`` in the root namespace is
  the gateway of the cloud's external network (the flat provider network floating IPs
  come from), its peer ``ext0`` is that network's interface in the cloud, on bridge
  ``brext``;
- the cloud's public endpoints answer on ``brext``'s address on the external network, as
  a real cloud's do on a network its tenants' routers reach: a cluster's
  cloud-controller-manager and CSI driver call them from the nodes;
- veth ``kos<id>m`` leads to the cloud's management address, where the same endpoints
  answer, reachable from this machine only (Keystone for kos's own clouds.yaml);
- every server's host, whichever project it is in, gets a netns
  ``kos-<cloud>-<first 8 of the server id>``; each of
  its NICs is a veth whose cloud end is named as Neutron names a VM's tap device
  (``tap`` + the port id's first 11 characters), so Neutron's Linux bridge agent plugs it.

Addresses come from 100.64.0.0/10 (shared address space, which no LAN uses): one /24 per
cloud, chosen from the cloud's name and moved on when this machine already routes it.
This machine forwards nothing: the cloud's external network ends at its uplink, and the
clusters meet only where any cloud's tenants meet, on their floating IPs. Everything is
found again by name, so a cloud is removed without any record.
"""

import hashlib
import ipaddress
import re
import subprocess
from dataclasses import dataclass

from kos.errors import CleanupError, ConvergeError

SPACE = ipaddress.ip_network("100.64.0.0/10")
EXT_BRIDGE = "brext"


def ip(*args, check=True):
    res = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise ConvergeError(f"ip {' '.join(args)}: {res.stderr.strip()}")
    return res


def short_id(cloud):
    return hashlib.sha1(cloud.encode()).hexdigest()[:8]


def uplink(cloud):
    return f"kos{short_id(cloud)}x"  # 12 characters: interface names stop at 15


def mgmt_link(cloud):
    return f"kos{short_id(cloud)}m"


def cloud_ns(cloud):
    return f"kos-{cloud}-cloud"


def host_ns(cloud, server_id):
    return f"kos-{cloud}-{server_id[:8]}"


def cloud_pattern(cloud):
    """Every namespace and machine name of this cloud, exactly: cloud ``kos`` never
    matches those of a cloud ``kos-a``."""
    return rf"kos-{re.escape(cloud)}-(cloud|[0-9a-f]{{8}})"


def tap_name(port_id):
    return f"tap{port_id[:11]}"


def namespaces(prefix=""):
    out = ip("netns", "list", check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.split()]
    return [n for n in names if n.startswith(prefix)]


def links(prefix, netns=None):
    args = ["-o", "link", "show"] if netns is None else ["-n", netns, "-o", "link", "show"]
    names = []
    for line in ip(*args, check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith(prefix):
                names.append(name)
    return names


def routes():
    found = []
    for line in ip("-4", "route", "show", check=False).stdout.splitlines():
        parts = line.split()
        if not parts or parts[0] == "default":
            continue
        try:
            found.append((ipaddress.ip_network(parts[0], strict=False), line.strip()))
        except ValueError:
            continue
    return found


@dataclass(frozen=True)
class Plan:
    """The addresses of one cloud on this machine."""

    block: ipaddress.IPv4Network

    @property
    def external(self):
        return ipaddress.ip_network(f"{self.block.network_address}/25")

    @property
    def gateway(self):
        return str(self.block[1])

    @property
    def pool(self):
        return str(self.block[16]), str(self.block[126])

    @property
    def api(self):
        """The public endpoints' address, on the external network below the pool."""
        return str(self.block[2])

    @property
    def mgmt(self):
        return ipaddress.ip_network(f"{self.block[128]}/30")

    @property
    def mgmt_host(self):
        return str(self.block[129])

    @property
    def mgmt_cloud(self):
        return str(self.block[130])


def existing_plan(cloud):
    """The plan of a cloud whose links already exist (read from the uplink's address)."""
    out = ip("-4", "-o", "addr", "show", "dev", uplink(cloud), check=False).stdout
    m = re.search(r"inet (\S+)", out)
    if not m:
        return None
    iface = ipaddress.ip_interface(m.group(1))
    return Plan(ipaddress.ip_network(f"{iface.network.network_address}/24", strict=False))


def choose_plan(cloud, avoid=()):
    """A free /24 of 100.64.0.0/10 for a new cloud: from the cloud's name, moved on past
    routes this machine has and the ``avoid`` CIDRs (its first cluster's own networks)."""
    taken = [net for net, _ in routes()] + [ipaddress.ip_network(c) for c in avoid]
    blocks = 2 ** (24 - SPACE.prefixlen)
    start = int(hashlib.sha1(cloud.encode()).hexdigest(), 16) % blocks
    for i in range(blocks):
        n = (start + i) % blocks
        block = ipaddress.ip_network(f"{SPACE[n * 256]}/24")
        if not any(block.overlaps(t) for t in taken):
            return Plan(block)
    raise ConvergeError("no free /24 left in 100.64.0.0/10 for a rehearsal cloud")


def create_cloud_links(cloud, plan):
    """The cloud's namespace and its two links to this machine; idempotent."""
    ns = cloud_ns(cloud)
    if ns not in namespaces(ns):
        ip("netns", "add", ns)
    ip("-n", ns, "link", "set", "lo", "up")
    for root_end, cloud_end, address in (
        (uplink(cloud), "ext0", f"{plan.gateway}/{plan.external.prefixlen}"),
        (mgmt_link(cloud), "mgmt0", f"{plan.mgmt_host}/{plan.mgmt.prefixlen}"),
    ):
        if root_end not in links(root_end):
            ip("link", "add", root_end, "type", "veth", "peer", "name", cloud_end, "netns", ns)
        if f" {address.split('/')[0]}/" not in ip("-o", "addr", "show", "dev", root_end).stdout:
            ip("addr", "add", address, "dev", root_end)
        ip("link", "set", root_end, "up")
        ip("-n", ns, "link", "set", cloud_end, "up")
    if EXT_BRIDGE not in links(EXT_BRIDGE, ns):
        ip("-n", ns, "link", "add", EXT_BRIDGE, "type", "bridge", "forward_delay", "0",
           "stp_state", "0")
    ip("-n", ns, "link", "set", "ext0", "master", EXT_BRIDGE)
    ip("-n", ns, "link", "set", EXT_BRIDGE, "up")
    _address(ns, "mgmt0", plan.mgmt_cloud, plan.mgmt)
    _address(ns, EXT_BRIDGE, plan.api, plan.external)
    return ns


def _address(ns, dev, host, network):
    """``host`` on ``dev`` in ``ns``, with ``network``'s prefix; idempotent."""
    if f" {host}/" not in ip("-n", ns, "-o", "addr", "show", "dev", dev).stdout:
        ip("-n", ns, "addr", "add", f"{host}/{network.prefixlen}", "dev", dev)


def plug_cloud_port(cloud, dev, port_id, mac, host, network):
    """A Neutron port of the cloud's own (Octavia's health manager on its management
    network) as ``dev`` in the cloud's namespace: a veth whose other end carries the port's
    tap name, which Neutron's Linux bridge agent puts on the network's bridge."""
    ns = cloud_ns(cloud)
    tap = tap_name(port_id)
    if dev not in links(dev, ns):
        ip("-n", ns, "link", "del", tap, check=False)
        ip("-n", ns, "link", "add", dev, "type", "veth", "peer", "name", tap)
    ip("-n", ns, "link", "set", dev, "address", mac)
    _address(ns, dev, host, network)
    ip("-n", ns, "link", "set", tap, "up")
    ip("-n", ns, "link", "set", dev, "up")


def plug_host(cloud, server_id, nics):
    """A server's netns with one veth per NIC: ``eth<i>`` with the port's MAC in the host,
    the port's tap device in the cloud. ``nics``: dicts with port_id, mac, mtu."""
    ns = host_ns(cloud, server_id)
    if ns not in namespaces(ns):
        ip("netns", "add", ns)
    ip("-n", ns, "link", "set", "lo", "up")
    have = links("eth", ns)
    for i, nic in enumerate(nics):
        _plug(cloud, ns, f"eth{i}", nic, create=f"eth{i}" not in have)
    return ns


def hot_plug(cloud, server_id, nic):
    """One more NIC in a running host (Nova's interface attach), beside the ones it has
    (which the host may have moved or renamed: an amphora moves its VIP's into a
    namespace of its own). Nothing when its tap is there already."""
    ns, inside = host_ns(cloud, server_id), cloud_ns(cloud)
    if links(tap_name(nic["port_id"]), inside):
        return
    have = set(links("eth", ns))
    dev = next(f"eth{i}" for i in range(len(have) + 16) if f"eth{i}" not in have)
    _plug(cloud, ns, dev, nic, create=True)


def _plug(cloud, ns, dev, nic, create):
    inside = cloud_ns(cloud)
    tap = tap_name(nic["port_id"])
    if create:
        ip("-n", inside, "link", "del", tap, check=False)
        ip("link", "add", tap, "netns", inside, "type", "veth", "peer", "name", dev, "netns", ns)
    ip("-n", ns, "link", "set", dev, "address", nic["mac"])
    if nic.get("mtu"):
        ip("-n", ns, "link", "set", dev, "mtu", str(nic["mtu"]))
        ip("-n", inside, "link", "set", tap, "mtu", str(nic["mtu"]))
    if nic.get("bridge"):
        # What os-vif and libvirt do on a KVM host: the tap joins the network's bridge
        # (Neutron's Linux bridge agent leaves compute ports to the hypervisor).
        bridge = nic["bridge"]
        if bridge not in links(bridge, inside):
            ip("-n", inside, "link", "add", bridge, "type", "bridge", "forward_delay", "0",
               "stp_state", "0", check=False)
        ip("-n", inside, "link", "set", bridge, "up")
        ip("-n", inside, "link", "set", tap, "master", bridge)
    ip("-n", inside, "link", "set", tap, "up")


def unplug_host(cloud, server_id):
    """The server's netns; its veths, and so their tap ends in the cloud, go with it."""
    ns = host_ns(cloud, server_id)
    if ns in namespaces(ns):
        ip("netns", "del", ns, check=False)


def remove(cloud):
    """Every namespace and link of this cloud, by name. Returns what it removed."""
    removed = []

    def mine():
        return [n for n in namespaces(f"kos-{cloud}-") if re.fullmatch(cloud_pattern(cloud), n)]

    for ns in mine():
        ip("netns", "del", ns, check=False)
        removed.append(f"netns {ns}")
    for name in (uplink(cloud), mgmt_link(cloud)):
        for link in links(name):
            ip("link", "del", link, check=False)
            removed.append(f"link {link}")
    left = mine() + links(uplink(cloud)) + links(mgmt_link(cloud))
    if left:
        raise CleanupError(f"could not remove {', '.join(left)}", fix="ip netns del / ip link del them")
    return removed
