"""
The kos pillar schema: every key the formulas read, its type, range and meaning, declared
once with Salt's own schema library (``salt.utils.schema``, JSON Schema draft 4), plus the
rules that span several keys. ``kos.validate_pillar`` runs it on every minion before a
highstate or the orchestration uses any value; ``kos.pillar_schema`` prints it.

Why ``salt.utils.schema`` and a small interpreter rather than jsonschema or voluptuous: the
validator runs in the Python that runs salt-minion, and neither jsonschema nor voluptuous is
a requirement of Salt 3008 (the onedir that bootstrap-salt.sh installs, or salt on PyPI).
``salt.utils.schema`` only declares; ``_Walker`` applies the draft-4 keywords this schema
uses and refuses any other (``KEYWORDS``), so nothing in the schema is silently ignored.

Keywords beyond draft 4 (ignored by any other JSON Schema tool):
    secret    the value here and below is never shown in a message
    fix       how to fix a bad value (else derived from the type, range or format)
    key_fix   how to fix an unknown key of a mapping that has no close match
    title     what the value or a mapping's keys are ("unknown addon", "unknown role")

Errors read ``pillar key 'a:b:c': <problem>; <fix>``: one per bad key, with the key path
as the user writes it in a pillar file.

A new key: declare it in its section below (a format from FORMATS, or a new one there), a
rule across keys with @rule; document it in pillar/pillar.example (a test holds the two
equal) and, for a formula default, in its defaults.yaml (checked against this schema).
A key kos stops reading: its declaration goes, and RETIRED names it with what replaced it.
"""

import copy
import difflib
import ipaddress
import re
from collections.abc import Mapping

import salt.utils.dictupdate
import salt.utils.schema as s

# The formulas whose defaults.yaml the maps merge the pillar over (see ``check``).
FORMULAS = ("core", "bastion", "file_transfer", "salt_master", "microk8s", "kubeadm")

DISTRIBUTIONS = ("microk8s", "kubeadm")
NODE_ROLES = ("control_plane", "worker")
DERIVED_ROLES = ("salt_master", "bastion", "control_plane", "worker", "first_control_plane",
                 "kubernetes_node")
TERRAFORM_DISTRIBUTION = "kubernetes_distribution"
# Where kos:distribution comes from, for every message about it.
DISTRIBUTION_FIX = (f"set {TERRAFORM_DISTRIBUTION} ({' or '.join(DISTRIBUTIONS)}) in the "
                    "Terraform variables and apply (kos up): Terraform writes it to the pillar "
                    "as kos:distribution")
# Keys kos once read and reads no more: a pillar that still sets one is told what replaced it
# rather than having it silently ignored.
RETIRED = {
    ("kubernetes",): (
        "is no longer read (kubernetes:distribution was the older name of kos:distribution)",
        (f"delete it; the distribution is Terraform's {TERRAFORM_DISTRIBUTION} alone, which "
         "Terraform writes to the pillar as kos:distribution"),
    ),
}

# Addon names of the microk8s 1.31 track (core and community repositories).
MICROK8S_ADDONS = tuple(sorted(set(
    """cert-manager cis-hardening community dashboard dns gpu ha-cluster helm helm3 host-access
    hostpath-storage ingress kube-ovn mayastor metallb metrics-server minio nvidia observability
    prometheus rbac registry rook-ceph storage
    argocd cilium cloudnative-pg dashboard-ingress easyhaproxy falco fluentd gopaddle inaccel istio
    jaeger kata keda knative kubearmor kwasm linkerd microcks multus nfs ngrok openebs openfaas
    osm-edge parking portainer shifu sosivio sriov-device-plugin stunner traefik trivy""".split()
)))
# Names microk8s resolves to one addon: enabling one and disabling the other flips every run.
ADDON_ALIASES = {"prometheus": "observability"}
ADDON_REPOSITORIES = ("core", "community")

# sshd_config(5) words, for the keys where a boolean is also accepted (true: yes, false: no).
SSHD_WORDS = {
    "permit_root_login": ("yes", "prohibit-password", "forced-commands-only", "no",
                          "without-password"),
    "password_authentication": ("yes", "no"),
    "allow_tcp_forwarding": ("yes", "all", "no", "local", "remote"),
    "x11_forwarding": ("yes", "no"),
}
ENCRYPTION_ALGORITHMS = ("RSA-2048", "RSA-3072", "RSA-4096", "ECDSA-P256")
CCM_APPLICATION_CREDENTIAL = ("application_credential_id", "application_credential_secret")
CCM_PASSWORD = ("username", "password")

# msgpack carries integers in [-2**63, 2**64); Salt sends larger ones as decimal strings.
MSGPACK_INTS = range(-(2**63), 2**64)
DAY = 86400


# --- formats: name -> (check returning None or a reason, what it is, a good value) ---------

def _ip(value):
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return "wrong form"
    return None


def _cidr(value):
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        try:
            return f"host bits set: the network is {ipaddress.ip_network(value, strict=False)}"
        except ValueError:
            return "wrong form"
    return None


DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def _dns_name(value):
    if len(value) > 253 or not all(DNS_LABEL.match(p) for p in value.split(".")):
        return "use lower-case letters, digits and - between dots"
    return None


def _san(value):
    try:
        ipaddress.ip_address(value)
        return None
    except ValueError:
        return _dns_name(value.removeprefix("*."))


def _host_port(value):
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return "give host:port with a port 1-65535"
    return _san(host.strip("[]"))


def _regex(pattern):
    compiled = re.compile(pattern)
    return lambda value: None if compiled.fullmatch(value) else "wrong form"


FORMATS = {
    "ip": (_ip, "an IP address", "10.1.0.11"),
    "cidr": (_cidr, "a network in CIDR notation", "10.1.0.0/16"),
    "dns-name": (_dns_name, "a DNS name", "prod.example.com"),
    "san": (_san, "an IP address or DNS name", "api.example.com"),
    "host-port": (_host_port, "host:port", "10.1.0.100:6443"),
    "abspath": (_regex(r"/[^\0]*"), "an absolute path", "/etc/kos"),
    "salt-url": (_regex(r"salt://\S+"), "a salt:// URL on the salt file server",
                 "salt://files/motd"),
    "url": (_regex(r"https?://\S+"), "an http(s):// URL", "https://keystone.example.com:5000/v3"),
    "https-url": (_regex(r"https://\S+"), "an https:// URL", "https://10.1.0.31:2379"),
    "mirror-url": (_regex(r"(https://|file:/)\S+"), "an https:// URL or a file: path (a mirror)",
                   "https://pkgs.k8s.io/core:/stable:/v1.31/deb/"),
    "unix-url": (_regex(r"unix:///\S+"), "a unix:// socket URL",
                 "unix:///var/run/containerd/containerd.sock"),
    "octal-mode": (_regex(r"0?[0-7]{3,4}"), "an octal file mode", "'0644'"),
    "ssh-public-key": (
        _regex(r"(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-\S+) [A-Za-z0-9+/=]+.*"),
        "an OpenSSH public key", "the line from the user's .pub file"),
    "login-name": (_regex(r"[a-z_][a-z0-9_-]{0,31}"), "a login name", "alice"),
    "snap-channel": (_regex(r"(latest|[0-9]+\.[0-9]+(-strict)?)/(stable|candidate|beta|edge)"),
                     "a snap channel (track/risk)", "1.31/stable"),
    "k8s-version": (_regex(r"v[0-9]+\.[0-9]+\.[0-9]+"), "a Kubernetes version", "v1.31.4"),
    "deb-version": (_regex(r"[0-9][A-Za-z0-9.+~:-]*"), "a Debian package version", "1.31.4-1.1"),
    "package": (_regex(r"[a-z0-9][a-z0-9+.-]+"), "a Debian package name", "curl"),
    "image": (
        _regex(r"[a-z0-9][a-z0-9._/-]*(:[0-9]+)?(/[a-z0-9._-]+)*(:[\w.-]+)?(@sha256:[0-9a-f]{64})?"),
        "a container image reference", "registry.k8s.io/pause:3.10"),
    "name": (_regex(r"[A-Za-z0-9][A-Za-z0-9@_.:-]*"), "a name without spaces", "salt-minion"),
    "locale": (_regex(r"[A-Za-z]+(_[A-Za-z]+)?(\.[A-Za-z0-9-]+)?(@\w+)?"), "a locale", "C.UTF-8"),
    "duration": (_regex(r"[0-9]+(s|m|h|d|w)"), "a fail2ban duration", "1h (or seconds: 3600)"),
    "haproxy-time": (_regex(r"[0-9]+(us|ms|s|m|h|d)"), "an haproxy time", "2s"),
    "percent": (_regex(r"([1-9][0-9]?|100)%"), "a percentage of 1-100%", "'10%'"),
    "minion-id": (_regex(r"[a-z0-9][a-z0-9.-]*"), "a minion id (host.domain)",
                  "k8s-cp-1.prod.example.com"),
    "text": (_regex(r"[^\n]+"), "one line of text", "RegionOne"),
    "secret": (_regex(r"\S+"), "a non-empty string", None),
}


# --- declaration helpers ---------------------------------------------------------------------

def section(description, properties, **kw):
    """A mapping with exactly these keys."""
    return s.DictItem(description=description, properties=properties,
                      additional_properties=False, **kw)


def mapping(description, values, key_pattern=None, **kw):
    """A mapping of any keys (matching key_pattern) to values."""
    if key_pattern:
        return s.DictItem(description=description, pattern_properties={key_pattern: values},
                          additional_properties=False, **kw)
    return s.DictItem(description=description, additional_properties=values, **kw)


def flag(description):
    return s.BooleanItem(description=description)


def integer(description, minimum=None, maximum=None, **kw):
    return s.IntegerItem(description=description, minimum=minimum, maximum=maximum, **kw)


def seconds(description, minimum=1, maximum=DAY):
    return integer(description + " (seconds)", minimum, maximum)


def port(description):
    return integer(description, 1, 65535)


def text(description, fmt="text", **kw):
    return s.StringItem(description=description, format=fmt, **kw)


def path(description, **kw):
    return text(description, "abspath", **kw)


def choice(description, values, **kw):
    return s.StringItem(description=description, enum=list(values), **kw)


def listing(description, item, **kw):
    return s.ArrayItem(description=description, items=item, **kw)


def either(*items):
    return s.AnyOfItem(items=list(items))


def nullable(item):
    """The item, or null (the formula then derives or omits the value)."""
    return either(s.NullItem(), item)


def sshd_word(key, option):
    words = SSHD_WORDS[key]
    return either(flag(option), choice(option, words, title=f"{option} word",
                                       fix="write true or false without quotes, or one of "
                                           + ", ".join(words)))


INT_MAX = 2**31 - 1
# The kernel's range of the sysctls kos sets or that clusters commonly raise: a value outside
# it fails `sysctl -w` on the host mid-run. Most are documented under
# https://docs.kernel.org/admin-guide/sysctl/; where a page gives no bound, the bound is the
# handler's in the kernel source (a minimum of 0 and an int's maximum).
SYSCTL_RANGES = {
    # Not in the kernel's sysctl pages: https://man7.org/linux/man-pages/man5/proc_sys_fs_inotify.5.html
    # and the range in https://github.com/torvalds/linux/blob/master/fs/notify/inotify/inotify_user.c
    # (it_zero .. it_int_max)
    "fs.inotify.max_user_watches": (0, INT_MAX),
    "fs.inotify.max_user_instances": (0, INT_MAX),
    # https://docs.kernel.org/admin-guide/sysctl/vm.html#max-map-count (SYSCTL_ZERO minimum)
    "vm.max_map_count": (0, INT_MAX),
    # https://docs.kernel.org/networking/ip-sysctl.html (ip_forward - BOOLEAN)
    "net.ipv4.ip_forward": (0, 1),
    # https://docs.kernel.org/admin-guide/sysctl/net.html#somaxconn and
    # https://github.com/torvalds/linux/blob/master/net/core/sysctl_net_core.c (SYSCTL_ZERO)
    "net.core.somaxconn": (0, INT_MAX),
}


def sysctl_values(description):
    """Any sysctl name to a value; the names of SYSCTL_RANGES to an integer in its range
    (JSON Schema applies every matching pattern, as the walker does)."""
    known = {f"^{re.escape(name)}$": integer(f"{name} (kernel range {low}-{high})", low, high,
                                             fix=f"use an integer {low}-{high} for {name}")
             for name, (low, high) in SYSCTL_RANGES.items()}
    return s.DictItem(description=description, title="sysctl name",
                      pattern_properties={r"^[a-z0-9_][a-z0-9_.*/-]*$":
                                          either(integer("value"), text("value")), **known},
                      additional_properties=False,
                      key_fix="use a sysctl name such as net.ipv4.ip_forward")


# --- the schema --------------------------------------------------------------------------------

NODE = section("A Kubernetes node.", {
    "role": choice("control_plane or worker", NODE_ROLES, required=True, title="role"),
    "ip": text("Private address; inside kos:networks:private_cidr.", "ip", required=True),
    "availability_zone": nullable(text("OpenStack availability zone.")),
    "floating_ip": nullable(text("Floating address, if any.", "ip")),
})

KOS = section("Deployment facts written by Terraform, and kos operator settings.", {
    "cluster_name": text("Prefix of OpenStack resource names.", "name"),
    "domain": text("The deployment's DNS domain.", "dns-name", required=True),
    "deploy_user": text("SSH user of the image.", "login-name"),
    "distribution": choice("Kubernetes distribution, from Terraform's kubernetes_distribution.",
                           DISTRIBUTIONS, title="distribution", required=True,
                           fix=DISTRIBUTION_FIX),
    "networks": section("Networks.", {
        "public_cidr": text("Public network.", "cidr"),
        "private_cidr": text("Private network; node IPs are inside it.", "cidr", required=True),
        "pod_cidr": text("Pod network; outside the other networks.", "cidr", required=True,
                         fix="set pod_cidr in the Terraform variables and apply (kos up)"),
        "service_cidr": text("Service network; outside the other networks.", "cidr",
                             required=True, fix="set service_cidr in the Terraform variables "
                                                "and apply (kos up)"),
    }, required=True),
    "salt_master": section("The salt master.", {
        "id": text("Minion id of the salt master.", "minion-id", required=True),
        "ip": text("Private address.", "ip"),
        "floating_ip": nullable(text("Floating address (a top master's, for syndics).", "ip")),
        "syndic_master": nullable(text("The top master this master's salt-syndic joins, from "
                                       "Terraform's syndic_master.", "san")),
        "order_masters": flag("This master is a top master (Terraform's top_master): other "
                              "environments' masters join it as syndics."),
        "syndics": listing("Cluster names whose masters may join this top master.",
                           text("cluster name", "name")),
        "transport": choice("Salt's transport for this master and its minions (Terraform's: "
                            "tcp in a master-of-masters topology).", ["zeromq", "tcp"]),
    }, required=True),
    "bastion": section("The bastion.", {
        "id": text("Minion id.", "minion-id"),
        "ip": nullable(text("Private network side.", "ip")),
        "public_ip": nullable(text("Public network side.", "ip")),
        "floating_ip": nullable(text("Floating address.", "ip")),
    }),
    "nodes": mapping("Every Kubernetes node by minion id.", NODE,
                     key_pattern=r"^[a-z0-9][a-z0-9.-]*$", title="minion id", required=True,
                     min_properties=1,
                     key_fix="use the node's minion id: host.domain, lower case"),
    "first_control_plane": text("Minion id of the first control-plane node.", "minion-id",
                                required=True),
    "api": section("API server addresses added to the certificate SANs.", {
        "floating_ip": nullable(text("Floating address of the first control plane.", "ip")),
        "admin_ip": nullable(text("Address on an admin network.", "ip")),
    }),
    "roles": listing("Derived by kos/derived.sls; do not set by hand.",
                     choice("role", DERIVED_ROLES, title="role")),
    "state_dir": path("Where a node keeps kos state (join/<node>.json, 0600)."),
    "certificates": section("The control planes' Kubernetes certificates.", {
        "warn_days": integer("An expiry closer than this is shown by kos status and fires the "
                             "event kos/certificates/expiring.", 1, 3650),
    }),
    "orchestration": section("orch.deploy settings.", {
        "batch": nullable(either(integer("Minions per batch of a wave.", 1, 10000),
                                 text("Share of a wave's minions per batch.", "percent"))),
        "timeout": seconds("How long a wave's command waits for quiet minions before asking "
                           "whether their job still runs", 5, DAY),
    }),
})

CORE = section("Every host: sysctl, limits, locale, banners, sshd, resolver, hosts, packages, "
               "minion, users.", {
    "manage": section("Switch a part off where something else owns it.", {
        name: flag(f"Manage {name}.") for name in (
            "sysctl", "limits", "locale", "banners", "sshd", "resolver", "hosts", "packages",
            "minion", "users")
    }),
    "sysctl": sysctl_values("name: value, in /etc/sysctl.d/90-kos.conf."),
    "ipv6_disabled": flag("Also disable IPv6."),
    "nofile_limit": integer("Open files limit.", 1024, 2**30),
    "limits_file": path("limits.d file."),
    "locale": text("System locale.", "locale"),
    "issue": s.StringItem(description="Pre-login banner."),
    "motd": s.StringItem(description="Message of the day."),
    "issue_files": listing("Files holding the pre-login banner.", path("file")),
    "motd_file": path("Message of the day file."),
    "sshd": section("sshd_config.", {
        "config_file": path("sshd_config path."),
        "service": text("sshd's service name.", "name"),
        "port": port("TCP port."),
        "permit_root_login": sshd_word("permit_root_login", "PermitRootLogin"),
        "password_authentication": sshd_word("password_authentication", "PasswordAuthentication"),
        "allow_tcp_forwarding": sshd_word("allow_tcp_forwarding", "AllowTcpForwarding"),
        "x11_forwarding": sshd_word("x11_forwarding", "X11Forwarding"),
        "max_auth_tries": integer("MaxAuthTries.", 1, 100),
    }),
    "nameservers": listing("resolv.conf nameservers; managed only when non-empty.",
                           text("nameserver", "ip"), max_items=3),
    "search": listing("resolv.conf search domains.", text("domain", "dns-name"), max_items=6),
    "resolv_conf": path("resolv.conf path."),
    "hosts_file": path("hosts file with the managed block."),
    "packages": listing("Packages on every host.", text("package", "package")),
    "minion_service": text("salt-minion's service name.", "name"),
    "users": listing("Operator accounts (Terraform's var.users).", section("A user.", {
        "name": text("Login name.", "login-name", required=True),
        # Not echoed: what is pasted here by mistake may be a private key.
        "ssh_keys": listing("Authorized public keys.", text("key", "ssh-public-key", secret=True)),
        "sudo": flag("Passwordless sudo."),
        "shell": path("Login shell."),
    })),
    "sudoers_dir": path("sudoers.d directory."),
})

BASTION = section("The bastion: NAT for the private network, fail2ban.", {
    "public_interface": nullable(text("Interface; null: the one holding kos:bastion:public_ip.",
                                      "name")),
    "private_interface": nullable(text("Interface; null: the one holding kos:bastion:ip.", "name")),
    "rules_file": path("Where the NAT rules persist."),
    "sysctl_file": path("Forwarding sysctl file."),
    "packages": listing("Packages.", text("package", "package")),
    "fail2ban": section("fail2ban's sshd jail.", {
        "jail_file": path("Jail file."),
        "bantime": either(integer("Ban length (seconds).", 1, 10 * 365 * DAY),
                          text("Ban length.", "duration")),
        "findtime": either(integer("Window for maxretry (seconds).", 1, 365 * DAY),
                           text("Window for maxretry.", "duration")),
        "maxretry": integer("Failures before a ban.", 1, 100),
    }),
})

FILE_TRANSFER = section("Files delivered from the salt file server.", {
    "files": listing("Files.", section("A file.", {
        "path": path("Absolute destination.", required=True),
        "source": text("salt:// source.", "salt-url", required=True),
        "mode": text("Quoted octal mode.", "octal-mode"),
        "user": text("Owner.", "login-name"),
        "group": text("Group.", "login-name"),
        "makedirs": flag("Create parent directories."),
    })),
})

SALT_MASTER = section("The salt master's configuration.", {
    "config_file": path("master.d file."),
    "service": text("salt-master's service name.", "name"),
    "manage_service": flag("Restart (deferred 15 s) when the config changes."),
    "file_roots": listing("State tree roots.", path("root")),
    "pillar_roots": listing("Pillar roots.", path("root")),
    "auto_accept": flag("Accept minion keys automatically (kos converge accepts them otherwise)."),
    "worker_threads": nullable(integer("Worker processes; null: 4 per core, at least 5.", 1,
                                       256)),
    "timeout": seconds("How long a command waits for quiet minions", 1, 3600),
    "gather_job_timeout": seconds("How long the master waits for a minion to say whether its "
                                  "job still runs", 1, 3600),
    "publish_drain_timeout": seconds("How long the event bus waits for a subscriber that "
                                     "does not read before dropping it", 1, 86400),
    "reactor": flag("Converge a minion kos expects when it starts (salt/minion/<id>/start)."),
    "cachedir": path("The master's cache directory (the job cache and the mine), kept 0700."),
    "pki_dir": path("The master's key directory (its minions/ holds the accepted keys)."),
    # Salt's clean-up runs about hourly: less than a minute would keep nothing `kos status`
    # could read, more than a week is what the job cache should never hold.
    "keep_jobs_seconds": seconds("How long a job stays in the job cache", 60, 7 * DAY),
    "job_cache_filter": flag("Keep join credentials, tokens, certificate keys and kubeconfigs "
                             "out of the job cache (master_job_cache: kos_job_cache)."),
    "syndic": section("salt-syndic, when kos:salt_master:syndic_master names a top master.", {
        "service": text("salt-syndic's service name.", "name"),
        "wait": seconds("How long the syndic gathers its minions' returns before passing "
                        "them up", 1, 300),
    }),
    "backups": section("Datastore backups (orch.backup, orch.restore).", {
        "dir": path("Where the master keeps them (on its state volume)."),
        "keep": integer("How many of the newest it keeps.", 1, 1000),
        "every_hours": integer("The master runs orch.backup this often; 0: on demand only.",
                               0, 24 * 366),
        "max_mib": integer("The largest backup the master accepts, in MiB.", 1, 65536),
    }),
})

ADDON = either(flag("Enabled or disabled."), section("An addon with arguments.", {
    "enabled": flag("Enabled or disabled."),
    "args": listing("Arguments of `microk8s enable`.", text("argument")),
}))
ADDON_NAMES = "|".join(re.escape(name) for name in MICROK8S_ADDONS)

MICROK8S = section("The microk8s distribution.", {
    "channel": text("Snap channel new nodes install from; kos upgrade (orch.upgrade) moves the installed ones.", "snap-channel"),
    "snap_data": path("The snap's data directory."),
    "ready_timeout": seconds("Wait for the node to be ready", 1, 3600),
    "extra_sans": listing("More API certificate SANs.", text("SAN", "san")),
    "addons": s.DictItem(
        description="name: true|false, or {enabled: bool, args: [...]}.",
        title="addon",
        properties={name: ADDON for name in MICROK8S_ADDONS},
        pattern_properties={rf"^({'|'.join(ADDON_REPOSITORIES)})/({ADDON_NAMES})$": ADDON},
        additional_properties=False,
        key_fix="use an addon name that `microk8s status` lists, e.g. dns or hostpath-storage",
    ),
    "token": section("Join tokens.", {
        "ttl": seconds("Token lifetime", 60, 7 * DAY),
        "min_remaining": seconds("Re-issue when less than this is left", 0, 7 * DAY),
    }),
})

CCM_CREDENTIALS = s.DictItem(
    description="Keystone credentials of the cloud-controller-manager: only in control-plane "
                "layers.",
    properties={key: s.SecretItem(description=key) for key in (
        "application_credential_id", "application_credential_secret",
        "application_credential_name", "username", "password", "user_id", "user_domain_name",
        "user_domain_id", "tenant_id", "tenant_name", "tenant_domain_name", "tenant_domain_id",
        "domain_name", "domain_id")},
    additional_properties=False,
    secret=True,
)

KUBEADM = section("The kubeadm distribution.", {
    "version": text("kubernetesVersion.", "k8s-version"),
    "package_version": text("kubelet/kubeadm/kubectl package version.", "deb-version"),
    "repo": section("pkgs.k8s.io repository (or a mirror of it).", {
        "url": text("Repository URL.", "mirror-url"),
        "key_url": text("Signing key URL.", "mirror-url"),
        "keyring": path("Keyring path."),
    }),
    "images": section("Images without a registry.", {
        "archive_dir": nullable(path("Image archives imported into containerd.")),
    }),
    "containerd": section("containerd.", {
        "cni_bin_dir": path("CNI plugins."),
        "restrict_oom_score_adj": flag("Never below containerd's own OOM score."),
    }),
    "network": section("The pod network.", {
        "mode": choice("kube-router or routed.", ("kube-router", "routed"), title="mode"),
        "sync_seconds": seconds("routed: route sync interval", 5, 3600),
    }),
    "kube_proxy": section("kube-proxy (routed mode).", {
        "conntrack_max_per_core": nullable(integer("conntrack maxPerCore; 0 leaves it.", 0,
                                                   2**31 - 1)),
    }),
    "manage": section("Switch a part off where something else owns it.", {
        name: flag(f"Manage {name}.") for name in (
            "packages", "services", "swap", "kernel_modules", "sysctl")
    }),
    "kube_dir": path("Where kubeadm keeps its files."),
    "cri_socket": text("containerd's socket.", "unix-url"),
    "pause_image": text("Sandbox image.", "image"),
    "encryption_algorithm": choice("Key algorithm.", ENCRYPTION_ALGORITHMS, title="algorithm"),
    "dns_domain": text("Cluster DNS domain.", "dns-name"),
    "cert_sans": listing("More API certificate SANs.", text("SAN", "san")),
    "api": section("API endpoints.", {
        "bind_port": port("Each control plane's API server."),
        "lb_port": port("Every node's local haproxy on 127.0.0.1."),
        "endpoint": nullable(text("controlPlaneEndpoint.", "host-port")),
    }),
    "ready_timeout": seconds("Wait for the API after init/join", 1, 3600),
    "discovery_timeout": seconds("A join retries discovery", 1, 3600),
    "token": section("Bootstrap tokens.", {
        "ttl": seconds("Token lifetime", 60, DAY),
        "min_remaining": seconds("Replace a token with less left", 0, DAY),
    }),
    "certificate_key": section("The uploaded certificates (2 h life).", {
        "min_remaining": seconds("Re-upload with less left", 0, 7199),
    }),
    "etcd": section("etcd.", {
        "external": section("External etcd; empty endpoints: stacked etcd.", {
            "endpoints": listing("Endpoints.", text("endpoint", "https-url")),
            "ca_file": path("CA."),
            "cert_file": path("Client certificate."),
            "key_file": path("Client key."),
        }),
    }),
    "kernel_modules": listing("Kernel modules.", text("module", "name")),
    "sysctl": sysctl_values("name: value, in /etc/sysctl.d/90-kos-kubernetes.conf."),
    "haproxy": section("The local API load balancer.", {
        "config_file": path("haproxy.cfg."),
        "pidfile": path("pidfile (manage:services false)."),
        "user": text("User.", "login-name"),
        "group": text("Group.", "login-name"),
        "check_interval": text("Health check interval.", "haproxy-time"),
    }),
    "kube_router": section("The pod network.", {
        "image": text("Image.", "image"),
        "service_proxy": flag("Replace kube-proxy."),
        "firewall": flag("NetworkPolicy."),
        "overlay": flag("Encapsulation."),
        "cluster_asn": integer("BGP AS number.", 1, 2**32 - 1),
    }),
    "ccm": section("OpenStack cloud-controller-manager.", {
        "enabled": flag("Also sets cloud-provider=external on every kubelet."),
        "image": text("Image.", "image"),
        "cloud_conf": path("cloud.conf (0600)."),
        "auth_url": nullable(text("Keystone URL.", "url")),
        "region": text("Region."),
        "ca_file": nullable(path("CA bundle for Keystone.")),
        "tls_insecure": flag("Skip TLS verification."),
        "internal_network_name": nullable(text("Internal network.")),
        "public_network_name": nullable(text("Public network.")),
        "floating_network_id": nullable(text("Floating IP network.")),
        "subnet_id": nullable(text("LoadBalancer VIP subnet.")),
        "create_monitor": flag("LoadBalancer health monitors."),
        "instance_id_file": path("Where cloud-init left the server's UUID (kubelet provider ID)."),
        "credentials": CCM_CREDENTIALS,
    }),
})

PILLAR = s.DictItem(
    description="Every key kos reads; pillar/pillar.example shows each with its default.",
    properties={
        "kos": KOS,
        "core": CORE,
        "bastion": BASTION,
        "file_transfer": FILE_TRANSFER,
        "salt_master": SALT_MASTER,
        "microk8s": MICROK8S,
        "kubeadm": KUBEADM,
        "kos_orchestration": section(
            "What orch.deploy passes to one run (inline pillar); never in a pillar file.", {
                "tree": text("Digest of the state tree the run converges with."),
                "issuer": text("The joined control plane that issues join credentials while "
                               "a rebuilt first control plane rejoins.", "minion-id"),
                "join_nodes": listing("Minion ids a credentials or revoke run is for.",
                                      text("minion id", "minion-id")),
                "refresh": listing("Minion ids that refresh their in-memory pillar once "
                                   "their highstate is noted.", text("minion id", "minion-id")),
                "force_renewal": flag("A certificates run renews whatever is left."),
            }),
        # Salt's own pillar keys: a minion's pillar refresh always sets schedule, and
        # pillar_opts adds master.
        "mine_functions": s.DictItem(description="Salt mine functions (kos/derived.sls).",
                                     additional_properties=True),
        "schedule": s.DictItem(description="Salt's scheduler.", additional_properties=True),
        "beacons": s.DictItem(description="Salt's beacons.", additional_properties=True),
        "master": s.DictItem(description="The master's options (pillar_opts).",
                             additional_properties=True),
        "_errors": listing("Salt's pillar render errors.", s.StringItem()),
    },
    additional_properties=False,
)

SCHEMA = PILLAR.serialize()


def schema():
    """The pillar schema, JSON Schema draft 4 with the kos keywords above."""
    return copy.deepcopy(SCHEMA)


def formulas():
    return list(FORMULAS)


def distribution(pillar):
    """
    The Kubernetes distribution of ``pillar``: kos:distribution, which Terraform writes from
    its kubernetes_distribution variable, and nothing else (kos/map.jinja reads the same
    key for the formulas and the orchestrations). Raises ValueError saying where the value
    comes from when it is missing or unknown: a default would converge a kubeadm cluster
    as microk8s.
    """
    kos = pillar.get("kos") if isinstance(pillar, Mapping) else None
    name = kos.get("distribution") if isinstance(kos, Mapping) else None
    if name not in DISTRIBUTIONS:
        found = "is not in the pillar" if name is None else f"is {name!r}, not a distribution"
        raise ValueError(f"pillar key 'kos:distribution' {found}; {DISTRIBUTION_FIX}")
    return name


# --- values in messages ------------------------------------------------------------------------

def plain(value):
    """Builtin containers for a message: Salt 3008 wraps pillar in MaskedDict/MaskedList,
    whose repr is '**********'. Only called where the key is not secret."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [plain(v) for v in list.__iter__(value)]
    return value


def json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


TYPE_NAMES = {"object": "a mapping", "array": "a list", "string": "a string",
              "integer": "an integer", "number": "a number", "boolean": "true or false",
              "null": "null"}


def literal(value, secret):
    """The value as a message quotes it: never when its key is secret."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    if secret:
        return "(not shown: secret)"
    text_ = repr(plain(value))
    return text_ if len(text_) <= 60 else text_[:57] + "..."


def shown(value, secret):
    """'a string 'yes'', 'a list [...]', 'true', 'null'."""
    if value is None or isinstance(value, bool):
        return literal(value, secret)
    kind = json_type(value)
    return f"{TYPE_NAMES.get(kind, kind)} {literal(value, secret)}"


def key_path(parts):
    return ":".join(str(p) for p in parts)


# --- the walker ----------------------------------------------------------------------------------

# Every keyword the walker applies or knows to be documentation only.
KEYWORDS = frozenset("""type properties patternProperties additionalProperties required items
    maxItems minProperties enum format minimum maximum anyOf title description fix key_fix
    secret""".split())


class Problem:
    def __init__(self, where, problem, fix):
        self.where = tuple(str(p) for p in where)
        self.problem, self.fix = problem, fix

    def __str__(self):
        return f"pillar key '{key_path(self.where)}': {self.problem}; {self.fix}"


def _type_matches(expected, kind):
    return kind == expected or expected == "number" and kind == "integer"


class _Walker:
    def __init__(self):
        self.problems = []

    def error(self, where, problem, fix):
        self.problems.append(Problem(where, problem, fix))

    def walk(self, node, value, where, secret=False):
        secret = secret or bool(node.get("secret")) or node.get("format") == "secret"
        if "anyOf" in node:
            self.any_of(node["anyOf"], value, where, secret)
            return
        value = coerce_big_int(node, value)
        kind = json_type(value)
        if "type" in node and not _type_matches(node["type"], kind):
            self.type_error([node], value, where, secret)
        elif kind == "object":
            self.mapping(node, value, where, secret)
        elif kind == "array":
            self.array(node, value, where, secret)
        else:
            self.scalar(node, value, where, secret)

    def any_of(self, options, value, where, secret):
        """Valid when one option is; else the problems of the option of the value's type."""
        kind = json_type(coerce_big_int({"type": "integer"}, value))
        options = [o for option in options for o in option.get("anyOf", [option])]
        candidates = []
        for option in options:
            trial = _Walker()
            trial.walk(option, value, where, secret)
            if not trial.problems:
                return
            if _type_matches(option.get("type"), kind):
                candidates.append(trial)
        if candidates:
            self.problems.extend(candidates[0].problems)
        else:
            self.type_error(options, value, where, secret)

    def type_error(self, options, value, where, secret):
        names = []
        for option in options:
            name = FORMATS[option["format"]][1] if option.get("format") in FORMATS else \
                TYPE_NAMES.get(option.get("type"), option.get("type"))
            if name not in names:
                names.append(name)
        expected = " or ".join(names)
        real = [o for o in options if o.get("type") != "null"] or options
        first, kind = real[0], json_type(value)
        fix = next((o["fix"] for o in real if "fix" in o), None)
        if fix:
            pass
        elif value is None:
            fix = "remove the key to keep the default, or give it a value"
        elif first.get("type") == "boolean":
            fix = "write true or false, without quotes"
        elif first.get("type") == "integer" and kind == "string":
            fix = "write the number without quotes"
        elif first.get("type") == "object":
            fix = "write it as a mapping of keys, as pillar.example shows"
        elif first.get("type") == "array":
            fix = "write it as a list, e.g. [a, b]"
        elif first.get("type") == "string":
            example = FORMATS[first["format"]][2] if first.get("format") in FORMATS else None
            fix = ("quote it" if kind in ("integer", "number", "boolean") else "give one value") \
                + (f", e.g. {example}" if example else "")
        else:
            fix = f"give {expected}"
        self.error(where, f"must be {expected}, got {shown(value, secret)}", fix)

    def mapping(self, node, value, where, secret):
        properties = node.get("properties", {})
        patterns = node.get("patternProperties", {})
        additional = node.get("additionalProperties", True)
        missing = [key for key in node.get("required", []) if value.get(key) is None]
        for key, item in value.items():
            name = str(key)
            if name in missing:
                continue
            if name in properties:
                self.walk(properties[name], item, where + (name,), secret)
                continue
            matched = [p for p in patterns if re.search(p, name)]
            for pattern in matched:
                self.walk(patterns[pattern], item, where + (name,), secret)
            if matched:
                continue
            if isinstance(additional, dict):
                self.walk(additional, item, where + (name,), secret)
            elif additional is False:
                self.unknown(node, name, where, missing)
        for key in missing:
            about = (properties[key].get("description") or "").rstrip(".")
            self.error(where + (key,), "is missing", properties[key].get("fix")
                       or "set it" + (f" ({about})" if about else ""))
        if len(value) < node.get("minProperties", 0):
            self.error(where, "is empty", f"list at least one {node.get('title') or 'entry'}")

    def unknown(self, node, name, where, missing):
        if where + (name,) in RETIRED:
            self.error(where + (name,), *RETIRED[where + (name,)])
            return
        properties = node.get("properties", {})
        title = node.get("title") or "key"
        close = difflib.get_close_matches(name, list(properties), n=1, cutoff=0.6)
        if close and close[0] in missing:
            missing.remove(close[0])  # one error for a misspelt required key
        if close:
            fix = f"did you mean '{close[0]}'?"
        elif "key_fix" in node:
            fix = node["key_fix"]
        elif len(properties) <= 12:
            fix = f"remove it; the keys here are {', '.join(properties)}"
        else:
            fix = "remove it; pillar.example lists every key"
        problem = f"unknown {title}" if properties else f"is not a valid {title}"
        self.error(where + (name,), problem, fix)

    def array(self, node, value, where, secret):
        item = node.get("items")
        if isinstance(item, dict):
            for index, element in enumerate(value):
                self.walk(item, element, where + (index,), secret)
        if "maxItems" in node and len(value) > node["maxItems"]:
            self.error(where, f"has {len(value)} entries", f"give at most {node['maxItems']}")

    def scalar(self, node, value, where, secret):
        if "enum" in node and value not in node["enum"]:
            what = node.get("title")
            problem = f"unknown {what} {literal(value, secret)}" if what else \
                f"{shown(value, secret)} is not allowed"
            self.error(where, problem,
                       node.get("fix") or f"use one of {', '.join(map(str, node['enum']))}")
            return
        if node.get("format") in FORMATS and isinstance(value, str):
            check, name, example = FORMATS[node["format"]]
            try:
                reason = check(value)
            except ValueError as exc:
                reason = str(exc)
            if reason:
                detail = "" if reason == "wrong form" or secret else f" ({reason})"
                fix = node.get("fix") or f"use {name}" + (f", e.g. {example}" if example else "")
                self.error(where, f"{literal(value, secret)} is not {name}{detail}", fix)
            return
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            low, high = node.get("minimum"), node.get("maximum")
            if low is not None and value < low or high is not None and value > high:
                side = "below the minimum" if low is not None and value < low else \
                    "above the maximum"
                span = f"{low}-{high}" if None not in (low, high) else \
                    (f"at least {low}" if low is not None else f"at most {high}")
                self.error(where, f"{value} is out of range ({side})",
                           node.get("fix") or f"use an integer {span}")


def coerce_big_int(node, value):
    """An integer beyond msgpack's range arrives as its decimal string: judge the number."""
    if node.get("type") == "integer" and isinstance(value, str) and \
            re.fullmatch(r"-?[0-9]+", value) and int(value) not in MSGPACK_INTS:
        return int(value)
    return value


# --- rules across keys ---------------------------------------------------------------------------

RULES = []


def rule(*reads):
    """A rule across keys; skipped when a key it reads already has an error."""
    def register(fn):
        RULES.append((tuple(tuple(r.split(":")) for r in reads), fn))
        return fn
    return register


class View:
    """The pillar as given, and merged over the formulas' defaults as the maps see it."""

    def __init__(self, pillar, defaults):
        self.pillar = pillar
        self.defaults = defaults or {}

    def given(self, key, default=None):
        node = self.pillar
        for part in key.split(":"):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    def merged(self, key):
        section, _, rest = key.partition(":")
        base = copy.deepcopy(self.defaults.get(section) or {})
        given = self.pillar.get(section)
        data = salt.utils.dictupdate.update(base, plain(given)) if isinstance(given, Mapping) \
            else base
        for part in rest.split(":") if rest else []:
            data = data.get(part) if isinstance(data, Mapping) else None
        return data

    def origin(self, key):
        """'' when the pillar sets key, else ', the default'."""
        return "" if self.given(key) is not None else ", the default"


def _networks(view):
    """The networks that parse; one that does not already has its own error (the "cidr"
    format), and a rule reading another network must not stop on it."""
    nets = {}
    # The order names the later key of an overlapping pair: pods before Terraform's others.
    for name in ("private_cidr", "public_cidr", "service_cidr", "pod_cidr"):
        value = view.given(f"kos:networks:{name}")
        if isinstance(value, str) and _cidr(value) is None:
            nets[f"kos:networks:{name}"] = ipaddress.ip_network(value)
    return nets


@rule("kos:networks")
def networks_apart(view, error):
    nets = list(_networks(view).items())
    for i, (key, net) in enumerate(nets):
        for other_key, other in nets[:i]:
            if net.version == other.version and net.overlaps(other):
                error(key, f"{net} overlaps {other_key} ({other})",
                      "choose a range outside it")


@rule("kos:networks:private_cidr", "kos:nodes", "kos:salt_master:ip", "kos:bastion:ip")
def addresses_in_private_network(view, error):
    private = _networks(view).get("kos:networks:private_cidr")
    if not private:
        return
    keys = [f"kos:nodes:{node_id}:ip" for node_id in view.given("kos:nodes", {})]
    for key in keys + ["kos:salt_master:ip", "kos:bastion:ip"]:
        value = view.given(key)
        if value and ipaddress.ip_address(value) not in private:
            error(key, f"{value} is outside the private network {private}",
                  "use an address inside it")


def _names_a_control_plane(view, error, key, hint):
    name, nodes = view.given(key), view.given("kos:nodes")
    if name is None or nodes is None:
        return
    if name not in nodes:
        error(key, f"{name!r} is not in kos:nodes", "name a node listed there")
    elif nodes[name].get("role") != "control_plane":
        error(key, f"{name!r} is not a control_plane node of kos:nodes", hint)


@rule("kos:first_control_plane", "kos:nodes")
def first_control_plane_is_a_control_plane(view, error):
    _names_a_control_plane(view, error, "kos:first_control_plane", "name a control-plane node")


@rule("kos_orchestration:issuer", "kos:nodes")
def issuer_is_a_control_plane(view, error):
    _names_a_control_plane(view, error, "kos_orchestration:issuer",
                           "name a joined control plane (orch.deploy chooses one)")


def _ttl_above_min_remaining(view, error, section):
    token = view.merged(f"{section}:token") or {}
    ttl, low = token.get("ttl"), token.get("min_remaining")
    if ttl is None or low is None or ttl > low:
        return
    ttl_key, low_key = f"{section}:token:ttl", f"{section}:token:min_remaining"
    if view.given(ttl_key) is not None:
        error(ttl_key, f"{ttl} is not above {low_key} ({low}{view.origin(low_key)})",
              "raise ttl or lower min_remaining")
    else:
        error(low_key, f"{low} is not below {ttl_key} ({ttl}{view.origin(ttl_key)})",
              "lower min_remaining or raise ttl")


@rule("microk8s:token")
def microk8s_ttl_above_min_remaining(view, error):
    _ttl_above_min_remaining(view, error, "microk8s")


@rule("kubeadm:token")
def kubeadm_ttl_above_min_remaining(view, error):
    _ttl_above_min_remaining(view, error, "kubeadm")


def addon_name(key):
    """The addon a key of microk8s:addons names: 'core/dns' and 'dns' are one addon."""
    repo, _, name = key.rpartition("/")
    name = name if repo in ADDON_REPOSITORIES else key
    return ADDON_ALIASES.get(name, name)


@rule("microk8s:addons")
def one_key_per_addon(view, error):
    given = view.given("microk8s:addons") or {}
    seen = {}
    for key in view.merged("microk8s:addons") or {}:
        seen.setdefault(addon_name(key), []).append(key)
    for keys in seen.values():
        if len(keys) < 2:
            continue
        # Name the key this pillar added; the defaults' key is the one to keep.
        mine = [k for k in keys if k in given]
        for key in mine[1:] if len(mine) == len(keys) else mine:
            others = [k for k in keys if k != key]
            default = [k for k in others if k not in given]
            error(f"microk8s:addons:{key}",
                  f"names the same addon as microk8s:addons:{others[0]}"
                  + (" (a default)" if default else ""),
                  f"set microk8s:addons:{others[0]} instead" if default else
                  f"keep only one of {', '.join(keys)}")


@rule("kubeadm:api")
def haproxy_and_api_ports_differ(view, error):
    api = view.merged("kubeadm:api") or {}
    if api.get("bind_port") is not None and api.get("bind_port") == api.get("lb_port"):
        key = "kubeadm:api:lb_port" if view.given("kubeadm:api:lb_port") is not None else \
            "kubeadm:api:bind_port"
        error(key, f"{api['lb_port']} is also the API server's port (kubeadm:api:bind_port)",
              "give haproxy and the API server different ports, e.g. 7443 and 6443")


def _unique(view, error, key, field):
    seen = set()
    for index, entry in enumerate(view.given(key) or []):
        value = entry.get(field)
        if value in seen:
            error(f"{key}:{index}:{field}", f"{value!r} is listed twice", "keep one entry")
        seen.add(value)


@rule("core:users")
def one_entry_per_user(view, error):
    _unique(view, error, "core:users", "name")


@rule("file_transfer:files")
def one_entry_per_path(view, error):
    _unique(view, error, "file_transfer:files", "path")


@rule("kubeadm:ccm", "kos:roles", "kos:distribution")
def ccm_credentials_on_control_planes(view, error):
    credentials = view.given("kubeadm:ccm:credentials")
    roles = view.given("kos:roles") or []
    if credentials is not None:
        if roles and "control_plane" not in roles:
            error("kubeadm:ccm:credentials", "is readable on a node that is no control plane",
                  "move it into the control-plane hosts' layers (minions/<domain>/<host>.sls)")
        app = [k for k in CCM_APPLICATION_CREDENTIAL if credentials.get(k)]
        password = [k for k in CCM_PASSWORD if credentials.get(k)]
        if app and password:
            error("kubeadm:ccm:credentials", "holds both an application credential and a password",
                  "keep only the application credential")
        elif app and len(app) < 2 or password and len(password) < 2 or not (app or password):
            error("kubeadm:ccm:credentials", "is incomplete",
                  "set application_credential_id and application_credential_secret")
    distribution = view.given("kos:distribution")
    ccm = view.merged("kubeadm:ccm") or {}
    if distribution == "kubeadm" and ccm.get("enabled") and "control_plane" in roles:
        if not ccm.get("auth_url"):
            error("kubeadm:ccm:auth_url", "is missing on a control plane",
                  "set the Keystone URL of the cloud")
        if credentials is None:
            error("kubeadm:ccm:credentials", "is missing on a control plane",
                  "set an application credential in this host's layer")


def _touches(problem_path, read):
    n = min(len(problem_path), len(read))
    return problem_path[:n] == read[:n]


def problems(pillar, defaults=None):
    """Every Problem in ``pillar``; ``defaults`` maps formula -> its defaults.yaml data."""
    walker = _Walker()
    walker.walk(SCHEMA, pillar if pillar is not None else {}, ())
    found = list(walker.problems)
    view = View(pillar if isinstance(pillar, Mapping) else {}, defaults)
    for reads, fn in RULES:
        if any(_touches(p.where, read) for p in found for read in reads):
            continue
        fn(view, lambda key, problem, fix: found.append(Problem(key.split(":"), problem, fix)))
    return found


def check(pillar, defaults=None):
    """The list of messages for ``pillar`` (empty when it is valid)."""
    return [str(p) for p in problems(pillar, defaults)]
