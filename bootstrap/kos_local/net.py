"""
The rehearsal cloud's wiring on this machine. Per cluster:

- netns ``kos-<cluster>-cloud`` holds the cloud (its services, Neutron's bridges, router
  and DHCP namespaces);
- the machine itself is the outside world: veth ``kos<id>x`` in the root namespace is
  the gateway of the cloud's external network (the flat provider network floating IPs
  come from), its peer ``ext0`` is that network's interface in the cloud;
- veth ``kos<id>m`` leads to the cloud's management address, where its API endpoints
  answer, reachable from this machine only;
- every server's host gets a netns ``kos-<cluster>-<first 8 of the server id>``; each of
  its NICs is a veth whose cloud end is named as Neutron names a VM's tap device
  (``tap`` + the port id's first 11 characters), so Neutron's Linux bridge agent plugs it.

Addresses come from 100.64.0.0/10 (shared address space, which no LAN uses): one /24 per
cluster, chosen from the cluster's name and moved on when this machine already routes it.
Everything is found again by name, so ``kos down`` removes it without any record.
"""

import hashlib
import ipaddress
import re
import subprocess
from dataclasses import dataclass

from kos.errors import CleanupError, ConvergeError

SPACE = ipaddress.ip_network("100.64.0.0/10")


def ip(*args, check=True):
    res = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise ConvergeError(f"ip {' '.join(args)}: {res.stderr.strip()}")
    return res


def short_id(cluster):
    return hashlib.sha1(cluster.encode()).hexdigest()[:8]


def uplink(cluster):
    return f"kos{short_id(cluster)}x"  # 12 characters: interface names stop at 15


def mgmt_link(cluster):
    return f"kos{short_id(cluster)}m"


def cloud_ns(cluster):
    return f"kos-{cluster}-cloud"


def host_ns(cluster, server_id):
    return f"kos-{cluster}-{server_id[:8]}"


def cluster_pattern(cluster):
    """Every namespace and machine name of this cluster, exactly: cluster ``kos`` never
    matches those of a cluster ``kos-a``."""
    return rf"kos-{re.escape(cluster)}-(cloud|[0-9a-f]{{8}})"


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
    """The addresses of one cluster's cloud on this machine."""

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
    def mgmt(self):
        return ipaddress.ip_network(f"{self.block[128]}/30")

    @property
    def mgmt_host(self):
        return str(self.block[129])

    @property
    def mgmt_cloud(self):
        return str(self.block[130])


def existing_plan(cluster):
    """The plan of a cloud whose links already exist (read from the uplink's address)."""
    out = ip("-4", "-o", "addr", "show", "dev", uplink(cluster), check=False).stdout
    m = re.search(r"inet (\S+)", out)
    if not m:
        return None
    iface = ipaddress.ip_interface(m.group(1))
    return Plan(ipaddress.ip_network(f"{iface.network.network_address}/24", strict=False))


def choose_plan(cluster, avoid=()):
    """A free /24 of 100.64.0.0/10 for a new cloud: from the cluster's name, moved on past
    routes this machine has and the ``avoid`` CIDRs (the cluster's own networks)."""
    taken = [net for net, _ in routes()] + [ipaddress.ip_network(c) for c in avoid]
    blocks = 2 ** (24 - SPACE.prefixlen)
    start = int(hashlib.sha1(cluster.encode()).hexdigest(), 16) % blocks
    for i in range(blocks):
        n = (start + i) % blocks
        block = ipaddress.ip_network(f"{SPACE[n * 256]}/24")
        if not any(block.overlaps(t) for t in taken):
            return Plan(block)
    raise ConvergeError("no free /24 left in 100.64.0.0/10 for a rehearsal cloud")


def create_cloud_links(cluster, plan):
    """The cloud's namespace and its two links to this machine; idempotent."""
    ns = cloud_ns(cluster)
    if ns not in namespaces(ns):
        ip("netns", "add", ns)
    ip("-n", ns, "link", "set", "lo", "up")
    for root_end, cloud_end, address in (
        (uplink(cluster), "ext0", f"{plan.gateway}/{plan.external.prefixlen}"),
        (mgmt_link(cluster), "mgmt0", f"{plan.mgmt_host}/{plan.mgmt.prefixlen}"),
    ):
        if root_end not in links(root_end):
            ip("link", "add", root_end, "type", "veth", "peer", "name", cloud_end, "netns", ns)
        if f" {address.split('/')[0]}/" not in ip("-o", "addr", "show", "dev", root_end).stdout:
            ip("addr", "add", address, "dev", root_end)
        ip("link", "set", root_end, "up")
        ip("-n", ns, "link", "set", cloud_end, "up")
    address = f"{plan.mgmt_cloud}/{plan.mgmt.prefixlen}"
    if f" {plan.mgmt_cloud}/" not in ip("-n", ns, "-o", "addr", "show", "dev", "mgmt0").stdout:
        ip("-n", ns, "addr", "add", address, "dev", "mgmt0")
    return ns


def plug_host(cluster, server_id, nics):
    """A server's netns with one veth per NIC: ``eth<i>`` with the port's MAC in the host,
    the port's tap device in the cloud. ``nics``: dicts with port_id, mac, mtu."""
    ns, cloud = host_ns(cluster, server_id), cloud_ns(cluster)
    if ns not in namespaces(ns):
        ip("netns", "add", ns)
    ip("-n", ns, "link", "set", "lo", "up")
    have = links("eth", ns)
    for i, nic in enumerate(nics):
        tap, dev = tap_name(nic["port_id"]), f"eth{i}"
        if dev not in have:
            ip("-n", cloud, "link", "del", tap, check=False)
            ip("link", "add", tap, "netns", cloud, "type", "veth", "peer", "name", dev, "netns", ns)
        ip("-n", ns, "link", "set", dev, "address", nic["mac"])
        if nic.get("mtu"):
            ip("-n", ns, "link", "set", dev, "mtu", str(nic["mtu"]))
            ip("-n", cloud, "link", "set", tap, "mtu", str(nic["mtu"]))
        if nic.get("bridge"):
            # What os-vif and libvirt do on a KVM host: the tap joins the network's bridge
            # (Neutron's Linux bridge agent leaves compute ports to the hypervisor).
            bridge = nic["bridge"]
            if bridge not in links(bridge, cloud):
                ip("-n", cloud, "link", "add", bridge, "type", "bridge", "forward_delay", "0",
                   "stp_state", "0", check=False)
            ip("-n", cloud, "link", "set", bridge, "up")
            ip("-n", cloud, "link", "set", tap, "master", bridge)
        ip("-n", cloud, "link", "set", tap, "up")
    return ns


def unplug_host(cluster, server_id):
    """The server's netns; its veths, and so their tap ends in the cloud, go with it."""
    ns = host_ns(cluster, server_id)
    if ns in namespaces(ns):
        ip("netns", "del", ns, check=False)


def remove(cluster):
    """Every namespace and link of this cluster, by name. Returns what it removed."""
    removed = [f"peering {a} -> {b}" for a, b in unpeer(uplink(cluster))]

    def mine():
        return [n for n in namespaces(f"kos-{cluster}-") if re.fullmatch(cluster_pattern(cluster), n)]

    for ns in mine():
        ip("netns", "del", ns, check=False)
        removed.append(f"netns {ns}")
    for name in (uplink(cluster), mgmt_link(cluster)):
        for link in links(name):
            ip("link", "del", link, check=False)
            removed.append(f"link {link}")
    left = mine() + links(uplink(cluster)) + links(mgmt_link(cluster))
    if left:
        raise CleanupError(f"could not remove {', '.join(left)}", fix="ip netns del / ip link del them")
    return removed


# Each rehearsal cloud is cut off: this machine forwards nothing (the clouds' external
# networks end at their uplinks). A master of masters is the one link between clouds: the
# top's cloud and each syndic's reach each other through this machine, and only each other.
# Forwarding is on for the peered uplinks only (Linux forwards what arrives on an interface
# whose forwarding is on), and chain KOS-PEERS lets a peered uplink's packets out only to
# its peers: never to this machine's own networks or to a cloud it is not peered with.
PEERS_CHAIN = "KOS-PEERS"
UPLINK = re.compile(r"kos[0-9a-f]{8}x")


def iptables(*args, check=True):
    try:
        res = subprocess.run(["iptables", "-w", *args], capture_output=True, text=True)
    except FileNotFoundError:
        # no iptables, no peering: a machine without it has nothing to remove
        res = subprocess.CompletedProcess(["iptables", *args], 127, "", "iptables not found")
    if check and res.returncode != 0:
        raise ConvergeError(f"iptables {' '.join(args)}: {res.stderr.strip()}")
    return res


def _has(chain, *rule):
    return iptables("-C", chain, *rule, check=False).returncode == 0


def _forwarding(link, on):
    path = f"/proc/sys/net/ipv4/conf/{link}/forwarding"
    try:
        with open(path, "w") as f:
            f.write("1" if on else "0")
    except FileNotFoundError:
        pass  # the link is gone, and its setting with it


def uplink_towards(address):
    """The uplink of the rehearsal cloud this machine reaches ``address`` through, or None
    (an address of no cloud here, or not an address)."""
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return None
    out = ip("-4", "-o", "route", "get", address, check=False).stdout
    m = re.search(r" dev (\S+)", out)
    return m[1] if m and UPLINK.fullmatch(m[1]) else None


def peerings():
    """``{(from uplink, to uplink)}`` this machine forwards between."""
    res = iptables("-S", PEERS_CHAIN, check=False)
    found = set()
    for line in res.stdout.splitlines() if res.returncode == 0 else []:
        m = re.fullmatch(rf"-A {PEERS_CHAIN} -i (\S+) -o (\S+) -j ACCEPT", line.strip())
        if m:
            found.add((m[1], m[2]))
    return found


def peer(a, b):
    """Let the clouds behind uplinks ``a`` and ``b`` reach each other; idempotent. The
    rules come before forwarding, so nothing passes unfiltered meanwhile."""
    if iptables("-S", PEERS_CHAIN, check=False).returncode != 0:
        iptables("-N", PEERS_CHAIN)
        iptables("-A", PEERS_CHAIN, "-j", "DROP")
    for one, other in ((a, b), (b, a)):
        if not _has(PEERS_CHAIN, "-i", one, "-o", other, "-j", "ACCEPT"):
            iptables("-I", PEERS_CHAIN, "1", "-i", one, "-o", other, "-j", "ACCEPT")
        if not _has("FORWARD", "-i", one, "-j", PEERS_CHAIN):
            iptables("-I", "FORWARD", "1", "-i", one, "-j", PEERS_CHAIN)
    for link in (a, b):
        _forwarding(link, True)


def unpeer(link):
    """End every peering of ``link`` (a cloud going away); a peer left with none stops
    forwarding. Returns the peerings it ended."""
    ended = {p for p in peerings() if link in p}
    for one, other in ended:
        iptables("-D", PEERS_CHAIN, "-i", one, "-o", other, "-j", "ACCEPT", check=False)
    still = {x for p in peerings() for x in p}
    for alone in {x for p in ended for x in p} - still:
        _forwarding(alone, False)
        while _has("FORWARD", "-i", alone, "-j", PEERS_CHAIN):
            iptables("-D", "FORWARD", "-i", alone, "-j", PEERS_CHAIN)
    if ended and not still:
        iptables("-F", PEERS_CHAIN, check=False)
        iptables("-X", PEERS_CHAIN, check=False)
    return sorted(ended)
