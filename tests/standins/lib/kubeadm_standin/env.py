"""Environment of a stand-in invocation: the simulated root, node identity, knobs.

Conventions shared with the rest of the kos tests:

KOS_STANDIN_ROOT               directory treated as `/` for every file (default `/`)
KOS_STANDIN_IP                 node IP (default: first IPv4 of the default-route interface)
KOS_STANDIN_KUBE_VERSION       version of every Kubernetes package (default v1.31.4)
KOS_STANDIN_DELAY              simulated duration of init/join in seconds (default 0)
KOS_STANDIN_DISCOVERY_TIMEOUT  cap on the join discovery timeout in seconds (default 5)
KOS_STANDIN_CERT_KEY_TTL       lifetime of the kubeadm-certs Secret in seconds (default 7200)

Installed package versions: `$KOS_STANDIN_ROOT/var/lib/kos-standin/packages.json`, e.g.
`{"kubeadm": "v1.32.1", "kubelet": "v1.31.4", "kubectl": "v1.31.4"}`, overrides
KOS_STANDIN_KUBE_VERSION per package (what apt would have installed on the node).
"""

import json
import os
import re
import socket
import subprocess
import sys

DEFAULT_VERSION = "v1.31.4"
PIDFILE = "/var/run/kos-standin-apiserver.pid"
STATE_DIR = "/var/lib/kos-standin-apiserver"
STATE_FILE = STATE_DIR + "/state.json"
DAEMON_LOG = "/var/log/kos-standin-apiserver.log"


def root():
    return os.environ.get("KOS_STANDIN_ROOT") or "/"


def host(path):
    """Where the simulated absolute `path` lives on this machine."""
    r = root()
    if r == "/" or not os.path.isabs(path):
        return path
    return os.path.join(r, path.lstrip("/"))


def input_file(path):
    """Resolve a file the caller hands us (config, manifest, kubeconfig).

    Files are looked up under the simulated root first; a test that passes a path of
    its own temporary directory still works because the literal path is the fallback.
    """
    mapped = host(path)
    if mapped != path and not os.path.exists(mapped) and os.path.exists(path):
        return path
    return mapped


PACKAGES_FILE = "/var/lib/kos-standin/packages.json"
_TOOL = []


def set_tool(name):
    """Name the package whose version this process is (kubeadm, kubectl): `version()`."""
    _TOOL[:] = [name]


def default_version():
    """KOS_STANDIN_KUBE_VERSION: the version of a package packages.json does not name."""
    return normalize_package_version(os.environ.get("KOS_STANDIN_KUBE_VERSION")
                                     or DEFAULT_VERSION)


def normalize_package_version(text):
    """`v1.32.1` for `v1.32.1`, `1.32.1` or a Debian package version `1.32.1-1.1`."""
    text = str(text).strip()
    m = re.match(r"^v?(\d+\.\d+\.\d+)(-\d+(\.\d+)*)?$", text)
    if m:
        return "v" + m.group(1)
    return text if text.startswith("v") else "v" + text


def packages():
    """The installed package versions of this node (packages.json), {} without the file."""
    try:
        with open(host(PACKAGES_FILE)) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def package_version(name):
    """Version of the installed package `name` (kubeadm, kubelet, kubectl)."""
    value = packages().get(name)
    if isinstance(value, str) and value.strip():
        return normalize_package_version(value)
    return default_version()


def version():
    """The version of the running tool: its package's, else KOS_STANDIN_KUBE_VERSION."""
    return package_version(_TOOL[0]) if _TOOL else default_version()


def version_tuple(v=None):
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", v or version())
    if not m:
        return (1, 31, 4)
    return tuple(int(x) for x in m.groups())


def minor():
    return version_tuple()[1]


def _float_env(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


def delay():
    return _float_env("KOS_STANDIN_DELAY", 0)


def discovery_timeout_cap():
    return _float_env("KOS_STANDIN_DISCOVERY_TIMEOUT", 5)


def cert_key_ttl():
    return _float_env("KOS_STANDIN_CERT_KEY_TTL", 7200)


def node_ip():
    ip = os.environ.get("KOS_STANDIN_IP")
    if ip:
        return ip
    try:
        route = subprocess.run(["ip", "-4", "-o", "route", "show", "default"],
                               capture_output=True, text=True, timeout=5).stdout
        m = re.search(r"\bdev\s+(\S+)", route)
        if m:
            addr = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", m.group(1)],
                                  capture_output=True, text=True, timeout=5).stdout
            a = re.search(r"\binet\s+([0-9.]+)/", addr)
            if a:
                return a.group(1)
    except (OSError, subprocess.SubprocessError):
        pass
    return "127.0.0.1"


def hostname():
    try:
        with open(host("/etc/hostname")) as f:
            name = f.read().strip()
            if name:
                return name
    except OSError:
        pass
    return socket.gethostname()


def out(text=""):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def err(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


FAULTS_DIR = "/kos-standin-faults"


def take_fault(name):
    """True once for each fault a test armed by creating `$ROOT/kos-standin-faults/<name>`.

    A test knob, not part of the simulated node: the file is consumed, so the next run of
    the command behaves normally again (the way a transient failure does).
    """
    path = host(os.path.join(FAULTS_DIR, name))
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False
