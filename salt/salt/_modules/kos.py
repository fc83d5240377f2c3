"""
kos glue: pillar validation, this node's roles, and the join information a
control-plane node publishes through the mine.
"""

import ipaddress
import json
import logging
import os
import re

import salt.utils.files
from salt.exceptions import CommandExecutionError

log = logging.getLogger(__name__)

__virtualname__ = "kos"

DEFAULT_STATE_DIR = "/etc/kos"

DISTRIBUTIONS = ("microk8s", "kubeadm")
NODE_ROLES = ("control_plane", "worker")

# Addon names of the microk8s 1.31 track (core and community repositories).
MICROK8S_ADDONS = frozenset(
    """cert-manager cis-hardening community dashboard dns gpu ha-cluster helm helm3 host-access
    hostpath-storage ingress kube-ovn mayastor metallb metrics-server minio nvidia observability
    prometheus rbac registry rook-ceph storage
    argocd cilium cloudnative-pg dashboard-ingress easyhaproxy falco fluentd gopaddle inaccel istio
    jaeger kata keda knative kubearmor kwasm linkerd microcks multus nfs ngrok openebs openfaas
    osm-edge parking portainer shifu sosivio sriov-device-plugin stunner traefik trivy""".split()
)

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
POSIX_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
SNAP_CHANNEL = re.compile(r"^(latest|[0-9]+\.[0-9]+(-strict)?)/(stable|candidate|beta|edge)$")
MISSING = object()


def __virtual__():
    return __virtualname__


class _Checker:
    """Collects one message per bad key: 'pillar key a:b: problem; fix'."""

    def __init__(self, pillar):
        self.pillar = pillar
        self.errors = []

    def get(self, key, default=MISSING):
        node = self.pillar
        for part in key.split(":"):
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return default
        return node

    def error(self, key, problem, fix):
        self.errors.append(f"pillar key '{key}': {problem}; {fix}")

    def require(self, key, kind, fix):
        value = self.get(key)
        if value is MISSING or value is None:
            self.error(key, "is missing", fix)
            return MISSING
        return self.typed(key, value, kind)

    def optional(self, key, kind):
        value = self.get(key)
        if value is MISSING or value is None:
            return MISSING
        return self.typed(key, value, kind)

    def typed(self, key, value, kind):
        # bool is an int in Python: a port of True is a mistake, not 1.
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            got = type(value).__name__
            self.error(key, f"must be a {names}, got {got} {value!r}", f"set it to a {names}")
            return MISSING
        return value

    def seq(self, key):
        """The list at ``key``, or an empty one when it is missing or not a list."""
        value = self.optional(key, list)
        return [] if value is MISSING else value

    def cidr(self, key, required=False):
        value = (self.require if required else self.optional)(
            key, str, *(["set it to a network such as 10.1.0.0/16"] if required else [])
        )
        if value is MISSING:
            return None
        try:
            return ipaddress.ip_network(value, strict=True)
        except ValueError as exc:
            self.error(key, f"{value!r} is not a valid CIDR ({exc})", "use a network such as 10.1.0.0/16")
            return None

    def ip(self, key, required=False):
        value = (self.require if required else self.optional)(
            key, str, *(["set it to an IP address"] if required else [])
        )
        if value is MISSING:
            return None
        try:
            return ipaddress.ip_address(value)
        except ValueError:
            self.error(key, f"{value!r} is not an IP address", "use an address such as 10.1.0.11")
            return None


def _check_kos(c):
    domain = c.require("kos:domain", str, "set it to the deployment's DNS domain")
    if domain is not MISSING and not all(DNS_LABEL.match(p) for p in domain.split(".")):
        c.error("kos:domain", f"{domain!r} is not a DNS name", "use lower-case labels, e.g. prod.example.com")
    dist = c.optional("kubernetes:distribution", str)
    if dist is not MISSING and dist not in DISTRIBUTIONS:
        c.error("kubernetes:distribution", f"unknown distribution {dist!r}", f"use one of {', '.join(DISTRIBUTIONS)}")
    private = c.cidr("kos:networks:private_cidr", required=True)
    c.cidr("kos:networks:public_cidr")
    for key in ("kos:networks:pod_cidr", "kos:networks:service_cidr"):
        net = c.cidr(key)
        if net and private and net.version == private.version and net.overlaps(private):
            c.error(key, f"{net} overlaps the private network {private}", "choose a range outside it")
    c.require("kos:salt_master:id", str, "set it to the salt master's minion id")
    c.ip("kos:salt_master:ip")
    for key in ("kos:bastion:ip", "kos:bastion:public_ip", "kos:bastion:floating_ip",
                "kos:api:floating_ip", "kos:api:admin_ip"):
        c.ip(key)
    nodes = c.require("kos:nodes", dict, "list every Kubernetes node by minion id")
    if nodes is not MISSING:
        if not nodes:
            c.error("kos:nodes", "is empty", "list at least one control-plane node")
        for node_id, node in nodes.items():
            base = f"kos:nodes:{node_id}"
            if c.typed(base, node, dict) is MISSING:
                continue
            role = c.require(f"{base}:role", str, f"set it to one of {', '.join(NODE_ROLES)}")
            if role is not MISSING and role not in NODE_ROLES:
                c.error(f"{base}:role", f"unknown role {role!r}", f"use one of {', '.join(NODE_ROLES)}")
            addr = c.ip(f"{base}:ip", required=True)
            if addr and private and addr not in private:
                c.error(f"{base}:ip", f"{addr} is outside the private network {private}", "use an address inside it")
            c.ip(f"{base}:floating_ip")
    first = c.require("kos:first_control_plane", str, "set it to the minion id of the first control-plane node")
    if first is not MISSING and isinstance(nodes, dict):
        if first not in nodes:
            c.error("kos:first_control_plane", f"{first!r} is not in kos:nodes", "name a node listed there")
        elif isinstance(nodes[first], dict) and nodes[first].get("role") != "control_plane":
            c.error("kos:first_control_plane", f"{first!r} is not a control_plane node", "name a control-plane node")


def _check_core(c):
    c.optional("core:ipv6_disabled", bool)
    c.optional("core:locale", str)
    sysctl = c.optional("core:sysctl", dict)
    if sysctl is not MISSING:
        for name, value in sysctl.items():
            c.typed(f"core:sysctl:{name}", value, (int, str))
    for i, ns in enumerate(c.seq("core:nameservers")):
        c.ip(f"core:nameservers:{i}") if isinstance(ns, str) else c.typed(f"core:nameservers:{i}", ns, str)
    for i, pkg in enumerate(c.seq("core:packages")):
        c.typed(f"core:packages:{i}", pkg, str)
    port = c.optional("core:sshd:port", int)
    if port is not MISSING and not 0 < port < 65536:
        c.error("core:sshd:port", f"{port} is not a TCP port", "use 1-65535")
    users = c.optional("core:users", list)
    for i, user in enumerate(users if users is not MISSING else []):
        base = f"core:users:{i}"
        if c.typed(base, user, dict) is MISSING:
            continue
        name = c.require(f"{base}:name", str, "give the user a login name")
        if name is not MISSING and not POSIX_USER.match(name):
            c.error(f"{base}:name", f"{name!r} is not a valid login name", "use lower-case letters, digits, _ and -")
        keys = c.optional(f"{base}:ssh_keys", list)
        for j, key in enumerate(keys if keys is not MISSING else []):
            if c.typed(f"{base}:ssh_keys:{j}", key, str) is not MISSING and not re.match(
                r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-\S+) [A-Za-z0-9+/=]+", key
            ):
                c.error(f"{base}:ssh_keys:{j}", "is not an OpenSSH public key", "paste the line from the user's .pub file")
        c.optional(f"{base}:sudo", bool)


def _check_microk8s(c):
    channel = c.optional("microk8s:channel", str)
    if channel is not MISSING and not SNAP_CHANNEL.match(channel):
        c.error("microk8s:channel", f"{channel!r} is not a snap channel", "use track/risk, e.g. 1.31/stable")
    addons = c.optional("microk8s:addons", dict)
    for name, spec in (addons if addons is not MISSING else {}).items():
        key = f"microk8s:addons:{name}"
        if name.split("/", 1)[-1] not in MICROK8S_ADDONS:
            c.error(key, f"unknown addon {name!r}", "use an addon name from `microk8s status` (e.g. dns, hostpath-storage)")
            continue
        if isinstance(spec, dict):
            c.optional(f"{key}:enabled", bool)
            c.optional(f"{key}:args", list)
        else:
            c.typed(key, spec, bool)
    ttl = c.optional("microk8s:token:ttl", int)
    low = c.optional("microk8s:token:min_remaining", int)
    if ttl is not MISSING and low is not MISSING and ttl <= low:
        c.error("microk8s:token:ttl", f"{ttl} is not above min_remaining ({low})", "raise ttl or lower min_remaining")
    for i, san in enumerate(c.seq("microk8s:extra_sans")):
        c.typed(f"microk8s:extra_sans:{i}", san, str)


KUBE_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+$")
ENCRYPTION_ALGORITHMS = ("RSA-2048", "RSA-3072", "RSA-4096", "ECDSA-P256")
CCM_APPLICATION_CREDENTIAL = ("application_credential_id", "application_credential_secret")
CCM_PASSWORD = ("username", "password")


def _check_kubeadm(c):
    version = c.optional("kubeadm:version", str)
    if version is not MISSING and not KUBE_VERSION.match(version):
        c.error("kubeadm:version", f"{version!r} is not a Kubernetes version", "use e.g. v1.31.4")
    manage = c.optional("kubeadm:manage", dict)
    for key in (manage if manage is not MISSING else {}):
        c.typed(f"kubeadm:manage:{key}", manage[key], bool)
    for key in ("kubeadm:api:bind_port", "kubeadm:api:lb_port"):
        port = c.optional(key, int)
        if port is not MISSING and not 0 < port < 65536:
            c.error(key, f"{port} is not a TCP port", "use 1-65535")
    endpoint = c.optional("kubeadm:api:endpoint", str)
    if endpoint is not MISSING and not re.fullmatch(r"[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}", endpoint):
        c.error("kubeadm:api:endpoint", f"{endpoint!r} is not host:port", "use e.g. 10.1.0.100:6443")
    algorithm = c.optional("kubeadm:encryption_algorithm", str)
    if algorithm is not MISSING and algorithm not in ENCRYPTION_ALGORITHMS:
        c.error("kubeadm:encryption_algorithm", f"unknown algorithm {algorithm!r}",
                f"use one of {', '.join(ENCRYPTION_ALGORITHMS)}")
    ttl = c.optional("kubeadm:token:ttl", int)
    low = c.optional("kubeadm:token:min_remaining", int)
    if ttl is not MISSING and low is not MISSING and ttl <= low:
        c.error("kubeadm:token:ttl", f"{ttl} is not above min_remaining ({low})", "raise ttl or lower min_remaining")
    key_low = c.optional("kubeadm:certificate_key:min_remaining", int)
    if key_low is not MISSING and not 0 <= key_low < 7200:
        c.error("kubeadm:certificate_key:min_remaining", f"{key_low} is not within the key's two hours",
                "use 0-7199 seconds, e.g. 900")
    for i, san in enumerate(c.seq("kubeadm:cert_sans")):
        c.typed(f"kubeadm:cert_sans:{i}", san, str)
    endpoints = c.seq("kubeadm:etcd:external:endpoints")
    for i, url in enumerate(endpoints):
        if c.typed(f"kubeadm:etcd:external:endpoints:{i}", url, str) is not MISSING and not url.startswith("https://"):
            c.error(f"kubeadm:etcd:external:endpoints:{i}", f"{url!r} is not an https:// URL", "use https://<ip>:2379")
    for name in ("ca_file", "cert_file", "key_file"):
        path = c.optional(f"kubeadm:etcd:external:{name}", str)
        if path is not MISSING and not path.startswith("/"):
            c.error(f"kubeadm:etcd:external:{name}", f"{path!r} is not absolute", "start it with /")
    asn = c.optional("kubeadm:kube_router:cluster_asn", int)
    if asn is not MISSING and not 0 < asn < 2**32:
        c.error("kubeadm:kube_router:cluster_asn", f"{asn} is not an AS number", "use e.g. 64512")
    _check_kubeadm_ccm(c)


def _check_kubeadm_ccm(c):
    credentials = c.optional("kubeadm:ccm:credentials", dict)
    roles = c.get("kos:roles", [])
    roles = roles if isinstance(roles, list) else []
    if credentials is not MISSING:
        if "control_plane" not in roles and roles:
            c.error("kubeadm:ccm:credentials", "is readable on a node that is no control plane",
                    "move it into the control-plane hosts' layers (minions/<domain>/<host>.sls)")
        app = [k for k in CCM_APPLICATION_CREDENTIAL if credentials.get(k)]
        password = [k for k in CCM_PASSWORD if credentials.get(k)]
        if app and password:
            c.error("kubeadm:ccm:credentials", "holds both an application credential and a password",
                    "keep only the application credential")
        elif app and len(app) < 2 or password and len(password) < 2 or not (app or password):
            c.error("kubeadm:ccm:credentials", "is incomplete",
                    "set application_credential_id and application_credential_secret")
    enabled = c.optional("kubeadm:ccm:enabled", bool)
    kubeadm = c.get("kubernetes:distribution", "microk8s") == "kubeadm"
    if kubeadm and enabled is not False and "control_plane" in roles:
        c.require("kubeadm:ccm:auth_url", str, "set the Keystone URL of the cloud")
        if credentials is MISSING:
            c.error("kubeadm:ccm:credentials", "is missing on a control plane",
                    "set an application credential in this host's layer")


def _check_files(c):
    files = c.optional("file_transfer:files", list)
    for i, spec in enumerate(files if files is not MISSING else []):
        base = f"file_transfer:files:{i}"
        if c.typed(base, spec, dict) is MISSING:
            continue
        path = c.require(f"{base}:path", str, "give the absolute destination path")
        if path is not MISSING and not path.startswith("/"):
            c.error(f"{base}:path", f"{path!r} is not absolute", "start it with /")
        src = c.require(f"{base}:source", str, "give a salt:// source")
        if src is not MISSING and not src.startswith("salt://"):
            c.error(f"{base}:source", f"{src!r} is not on the salt file server", "use salt://...")
        mode = c.optional(f"{base}:mode", str)
        if mode is not MISSING and not re.fullmatch(r"0?[0-7]{3,4}", mode):
            c.error(f"{base}:mode", f"{mode!r} is not an octal mode", "quote it, e.g. '0644'")


def check_pillar(pillar):
    """Return the list of problems in ``pillar`` (empty when it is valid)."""
    c = _Checker(pillar or {})
    _check_kos(c)
    _check_core(c)
    _check_microk8s(c)
    _check_kubeadm(c)
    _check_files(c)
    return c.errors


def validate_pillar():
    """
    Validate this minion's pillar before anything changes. Raises with one line per
    bad key (naming the key and the fix); returns True when the pillar is valid.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.validate_pillar
    """
    pillar = __pillar__.value() if hasattr(__pillar__, "value") else dict(__pillar__)
    # A layer that does not render leaves the rest of the pillar incomplete: say that first.
    render_errors = pillar.get("_errors") or []
    if render_errors:
        raise CommandExecutionError(
            "pillar did not render (fix the named SLS file):\n" + "\n".join(map(str, render_errors))
        )
    errors = check_pillar(pillar)
    if errors:
        raise CommandExecutionError("invalid pillar:\n" + "\n".join(errors))
    return True


def roles():
    """
    Return this minion's roles in the deployment (salt_master, bastion,
    control_plane, worker, first_control_plane, kubernetes_node), as the pillar
    layer ``kos/derived.sls`` derived them from the Terraform layer.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.roles
    """
    return list(__pillar__.get("kos", {}).get("roles", []))


def state_dir():
    return __salt__["config.get"]("kos:state_dir", DEFAULT_STATE_DIR)


def join_info(control_plane=False):
    """
    Return the join information this node published (mine function ``kos_join``,
    readable only by Kubernetes nodes): for microk8s the connection string and its
    expiry, for kubeadm the bootstrap token, CA hash and expiry. With
    ``control_plane`` (mine function ``kos_join_control_plane``, readable only by
    control-plane nodes) the kubeadm certificate key, which decrypts the cluster's
    CA keys. Empty when nothing is published.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos.join_info
    """
    name = "join-control-plane.json" if control_plane else "join.json"
    path = os.path.join(state_dir(), name)
    try:
        with salt.utils.files.fopen(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("kos: unreadable join file %s: %s", path, exc)
        return {}
