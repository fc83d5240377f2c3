"""Node identity: IPs (utils.sh get_default_ip/get_ips) and hostname."""

import ipaddress
import os
import socket
import subprocess

from . import common

# get_ips drops the addresses of these CNI interfaces [MK utils.sh get_ips].
CNI_INTERFACES = ("vxlan.calico", "flannel.1", "cni0", "ovn0")


def _ip(*args):
    try:
        return subprocess.run(
            ["ip", *args], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _host_default_ip():
    dev = None
    for line in _ip("-4", "-o", "route", "show", "default").splitlines():
        parts = line.split()
        if "dev" in parts:
            dev = parts[parts.index("dev") + 1]
            break
    if not dev:
        return None
    for line in _ip("-4", "-o", "addr", "show", "dev", dev).splitlines():
        parts = line.split()
        if "inet" in parts:
            return parts[parts.index("inet") + 1].split("/")[0]
    return None


def default_ip():
    return os.environ.get("KOS_STANDIN_IP") or _host_default_ip() or "127.0.0.1"


def all_ips():
    """`hostname -I` minus link-local and CNI addresses; just KOS_STANDIN_IP when that is set."""
    if os.environ.get("KOS_STANDIN_IP"):
        return [os.environ["KOS_STANDIN_IP"]]
    ips = []
    for family in ("-4", "-6"):
        for line in _ip(family, "-o", "addr", "show").splitlines():
            parts = line.split()
            if len(parts) < 4 or parts[1] == "lo" or parts[1] in CNI_INTERFACES:
                continue
            if "scope" in parts and parts[parts.index("scope") + 1] != "global":
                continue
            addr = parts[3].split("/")[0]
            if addr.startswith("169.254."):
                continue
            ips.append(addr)
    return ips or [default_ip()]


def local_ips():
    """Addresses remove_node.py/leave.py consider "mine" when splitting dqlite endpoints."""
    ips = {"127.0.0.1", default_ip()}
    if not os.environ.get("KOS_STANDIN_IP"):
        ips.update(all_ips())
    return ips


def hostname():
    text = common.read_file(common.rpath("/etc/hostname"))
    if text and text.strip():
        return text.strip()
    return socket.gethostname()


def hostname_resolves_to(name, ip):
    """util.GetRemoteHost: does `name` resolve (on this node) to `ip`?"""
    if common.root() != "/":
        # A simulated node resolves names through its own /etc/hosts only.
        text = common.read_file(common.rpath("/etc/hosts"), "")
        found = set()
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) >= 2 and name.lower() in (f.lower() for f in fields[1:]):
                found.add(fields[0])
    else:
        try:
            found = {ai[4][0] for ai in socket.getaddrinfo(name, None)}
        except OSError:
            return False
    try:
        want = ipaddress.ip_address(ip)
    except ValueError:
        return False
    for addr in found:
        try:
            if ipaddress.ip_address(addr) == want:
                return True
        except ValueError:
            continue
    return False
