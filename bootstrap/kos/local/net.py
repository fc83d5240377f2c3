"""
The local cloud's networks. Per cluster:

- netns ``kos-<cluster>-net`` holds the two bridges, ``pub`` and ``prv`` (the public and
  the private network of the Terraform plan), so the machine's own firewall never sees
  the bridged traffic;
- the machine itself is the outside world: veth ``kos<id>x`` in the root namespace carries
  the public network's gateway address (where the OpenStack router would be). It has no
  address or route on the private network;
- every host gets a netns ``kos-<cluster>-<hostname>`` with ``eth0`` on ``prv`` and, for
  the bastion and the first control plane, ``eth1`` on ``pub``.

Everything is found again by name, so ``kos down`` removes it without any record.
"""

import hashlib
import ipaddress
import re
import subprocess

from ..errors import CleanupError, ConvergeError


# Every name kos gives a namespace after kos-<cluster>-: exact, so cluster "kos" never
# matches the namespaces of a cluster "kos-a".
HOSTNAME_RE = r"(net|bastion|salt|k8s-cp-[0-9]+|k8s-worker-[0-9]+)"


def cluster_pattern(cluster):
    return rf"kos-{re.escape(cluster)}-{HOSTNAME_RE}"


def ip(*args, check=True):
    res = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise ConvergeError(f"ip {' '.join(args)}: {res.stderr.strip()}")
    return res


def short_id(cluster):
    return hashlib.sha1(cluster.encode()).hexdigest()[:8]


def uplink(cluster):
    return f"kos{short_id(cluster)}x"  # 12 characters: interface names stop at 15


def net_ns(cluster):
    return f"kos-{cluster}-net"


def host_ns(cluster, hostname):
    return f"kos-{cluster}-{hostname}"


def namespaces(prefix):
    out = ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].startswith(prefix)]


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


def overlapping_routes(cidrs, cluster):
    """Routes of this machine (not this cluster's own uplink) that overlap ``cidrs``."""
    mine = uplink(cluster)
    found = []
    for line in ip("-4", "route", "show", check=False).stdout.splitlines():
        parts = line.split()
        if not parts or parts[0] == "default" or f"dev {mine}" in line:
            continue
        try:
            net = ipaddress.ip_network(parts[0], strict=False)
        except ValueError:
            continue
        for cidr in cidrs:
            if net.overlaps(ipaddress.ip_network(cidr)):
                found.append((cidr, line.strip()))
    return found


def create_networks(cluster, public_cidr, gateway):
    """The bridges and the machine's uplink; idempotent."""
    ns = net_ns(cluster)
    if ns not in namespaces(ns):
        ip("netns", "add", ns)
    ip("-n", ns, "link", "set", "lo", "up")
    have = links("", ns)
    for bridge in ("pub", "prv"):
        if bridge not in have:
            ip("-n", ns, "link", "add", bridge, "type", "bridge")
        ip("-n", ns, "link", "set", bridge, "up")
    name = uplink(cluster)
    if name not in links(name):
        ip("link", "add", name, "type", "veth", "peer", "name", "uplink", "netns", ns)
    ip("-n", ns, "link", "set", "uplink", "master", "pub", "up")
    prefix = ipaddress.ip_network(public_cidr).prefixlen
    if f" {gateway}/" not in ip("-o", "addr", "show", "dev", name).stdout:
        ip("addr", "add", f"{gateway}/{prefix}", "dev", name)
    ip("link", "set", name, "up")


def attach_host(cluster, index, spec, private_cidr, public_cidr, gateway):
    """A host's netns with its NICs, addresses and default route; idempotent."""
    ns, bridges = host_ns(cluster, spec.hostname), net_ns(cluster)
    if ns not in namespaces(ns):
        ip("netns", "add", ns)
    ip("-n", ns, "link", "set", "lo", "up")
    nics = [("eth0", "prv", spec.private_ip, private_cidr)]
    if spec.public_ip:
        nics.append(("eth1", "pub", spec.public_ip, public_cidr))
    have = links("eth", ns)
    for nic, bridge, address, cidr in nics:
        peer = f"h{index}{nic[-1]}"
        if nic not in have:
            ip("-n", bridges, "link", "del", peer, check=False)
            ip("-n", ns, "link", "add", nic, "type", "veth", "peer", "name", peer, "netns", bridges)
        ip("-n", bridges, "link", "set", peer, "master", bridge, "up")
        prefix = ipaddress.ip_network(cidr).prefixlen
        if f" {address}/" not in ip("-n", ns, "-o", "addr", "show", "dev", nic).stdout:
            ip("-n", ns, "addr", "add", f"{address}/{prefix}", "dev", nic)
        ip("-n", ns, "link", "set", nic, "up")
    # The bastion and the first control plane leave through the router (the machine),
    # every other host through the bastion's NAT, as on OpenStack.
    via = gateway if spec.public_ip else ipaddress.ip_network(private_cidr)[1]
    ip("-n", ns, "route", "replace", "default", "via", str(via))
    return ns


def remove(cluster):
    """Every namespace and link of this cluster, by name. Returns what it removed."""
    removed = []

    def mine():
        return [n for n in namespaces(f"kos-{cluster}-") if re.fullmatch(cluster_pattern(cluster), n)]

    for ns in mine():
        ip("netns", "del", ns, check=False)
        removed.append(f"netns {ns}")
    name = uplink(cluster)
    for link in links(name):
        ip("link", "del", link, check=False)
        removed.append(f"link {link}")
    left = mine() + links(name)
    if left:
        raise CleanupError(f"could not remove {', '.join(left)}", fix="ip netns del / ip link del them")
    return removed
