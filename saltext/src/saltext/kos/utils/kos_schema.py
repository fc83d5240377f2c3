"""
The kos pillar schema: every key the formulas read, its type, range and meaning, declared
once with Salt's own schema library (``salt.utils.schema``, JSON Schema draft 4), plus the
rules that span several keys. ``kos.validate_pillar`` runs it on every minion before a
highstate or the orchestration uses any value; ``kos.pillar_schema`` prints it.

``salt.utils.schema`` only declares; fastjsonschema validates
(https://horejsek.github.io/python-fastjsonschema/), and kos_schema_check words its errors.
Why fastjsonschema rather than jsonschema: the validator runs in the Python that runs
salt-minion, and the master serves its minions the extension and its dependencies as wheels
built from the installed distributions. jsonschema needs rpds-py (through referencing), a
compiled wheel, so one per minion platform and Python
(https://github.com/python-jsonschema/jsonschema/blob/main/pyproject.toml);
fastjsonschema is pure Python with no dependencies.

Keywords beyond draft 4 (ignored by any other JSON Schema tool):
    secret    the value here and below is never shown in a message
    fix       how to fix a bad value (else derived from the type, range or format)
    key_fix   how to fix an unknown key of a mapping that has no close match
    title     what the value or a mapping's keys are ("unknown addon", "unknown role")

Errors read ``pillar key 'a:b:c': <problem>; <fix>``: one per bad key, with the key path
as the user writes it in a pillar file.

A new key: declare it in its section below (a format from kos_schema_check.FORMATS, or a new
one there), a rule across keys with @rule in kos_schema_rules; document it in
pillar/pillar.example (a test holds the two equal) and, for a formula default, in its
defaults.yaml (checked against this schema).
A key kos stops reading: its declaration goes, and RETIRED names it with what replaced it.
"""

import copy
import re
from collections.abc import Mapping

import salt.utils.schema as s

from saltext.kos.utils import kos_schema_check, kos_schema_rules

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

# sshd_config(5) words, for the keys where a boolean is also accepted (true: yes, false: no).
SSHD_WORDS = {
    "permit_root_login": ("yes", "prohibit-password", "forced-commands-only", "no",
                          "without-password"),
    "password_authentication": ("yes", "no"),
    "allow_tcp_forwarding": ("yes", "all", "no", "local", "remote"),
    "x11_forwarding": ("yes", "no"),
}
# File systems cinder-csi-plugin formats a volume with (its image's mkfs.*).
FSTYPES = ("ext4", "xfs")
ENCRYPTION_ALGORITHMS = ("RSA-2048", "RSA-3072", "RSA-4096", "ECDSA-P256")
DAY = 86400

# What other modules and the tests read here: the values and messages, and the rules.
FORMATS = kos_schema_check.FORMATS
KEYWORDS = kos_schema_check.KEYWORDS
MSGPACK_INTS = kos_schema_check.MSGPACK_INTS
Problem = kos_schema_check.Problem
coerce_big_int = kos_schema_check.coerce_big_int
plain = kos_schema_check.plain
ADDON_ALIASES = kos_schema_rules.ADDON_ALIASES
ADDON_REPOSITORIES = kos_schema_rules.ADDON_REPOSITORIES
CCM_APPLICATION_CREDENTIAL = kos_schema_rules.CCM_APPLICATION_CREDENTIAL
CCM_PASSWORD = kos_schema_rules.CCM_PASSWORD
RULES = kos_schema_rules.RULES
rule = kos_schema_rules.rule
View = kos_schema_rules.View


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
    (JSON Schema applies every matching pattern)."""
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
        "public_subnet_id": nullable(text("The public subnet's ID: Services' load balancers "
                                          "go there (kubeadm:ccm:subnet_id).")),
        "private_subnet_id": nullable(text("The private subnet's ID: their members are "
                                           "there (kubeadm:ccm:member_subnet_id).")),
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
    "api": section("Where the API is reached (Terraform's api_load_balancer); every address "
                   "here is in the API server's certificate.", {
        "load_balancer": choice("What serves the API: octavia or none.", ["octavia", "none"]),
        "vip": nullable(text("The load balancer's private address: the cluster's own "
                             "endpoint (null: each node's local load balancer).", "ip")),
        "floating_ip": nullable(text("Where operators reach the API: the load balancer's "
                                     "floating IP, or the first control plane's.", "ip")),
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

# cloud-provider-openstack's [LoadBalancer] lb-provider and lb-method values
# (pkg/openstack/openstack.go; Octavia's pool lb_algorithm).
LB_PROVIDERS = ("amphora", "ovn")
LB_METHODS = ("ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT")

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
    "csi": section("Cinder CSI (needs the cloud controller's credential).", {
        "enabled": flag("The controller on the control planes, the node service everywhere."),
        "images": section("Images.", {
            key: text(f"The {key}'s image.", "image")
            for key in ("plugin", "provisioner", "attacher", "resizer", "registrar")
        }),
        "ignore_volume_az": flag("Make volumes in Cinder's default zone (its zones are not "
                                 "Nova's)."),
        "node_volume_attach_limit": integer("Volumes one node takes.", 1, 4096),
        "storage_classes": listing("One StorageClass per Cinder volume type.", section(
            "A StorageClass.", {
                "name": text("Its name.", "k8s-name", required=True),
                "type": nullable(text("Cinder volume type (null: Cinder's default).")),
                "availability": nullable(text("Cinder zone of its volumes (null: the zone "
                                              "of the first Pod's node).")),
                "default": flag("The cluster's default StorageClass (exactly one)."),
                "fstype": choice("File system.", FSTYPES),
                "reclaim_policy": choice("What deleting the claim does to the volume.",
                                         ("Delete", "Retain")),
                "allow_volume_expansion": flag("Claims may grow."),
            })),
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
        "member_subnet_id": nullable(text("LoadBalancer members' subnet.")),
        "lb_provider": nullable(choice("Octavia provider of Services' load balancers.",
                                       LB_PROVIDERS)),
        "lb_method": nullable(choice("Pool algorithm (ovn takes SOURCE_IP_PORT only).",
                                     LB_METHODS)),
        "internal_lb": flag("Services' load balancers without a floating IP."),
        "create_monitor": flag("LoadBalancer health monitors."),
        "monitor_delay": integer("Seconds between a monitor's checks.", 1, 3600),
        "monitor_timeout": integer("Seconds a check may take.", 1, 3600),
        "monitor_max_retries": integer("Good checks before a member is ONLINE.", 1, 10),
        "monitor_max_retries_down": integer("Failed checks before a member is ERROR.", 1, 10),
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
                "by": choice("Who runs this converge: the reactor (a minion that started) "
                             "or the orchestration.", ("reactor", "orchestration")),
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


# Compiled on the first check: fastjsonschema takes a fraction of a second for this schema.
_VALIDATOR = kos_schema_check.Validator(SCHEMA, RETIRED)


def problems(pillar, defaults=None):
    """Every Problem in ``pillar``; ``defaults`` maps formula -> its defaults.yaml data."""
    found = _VALIDATOR.problems(pillar if pillar is not None else {})
    return kos_schema_rules.judge(pillar, defaults, found)


def check(pillar, defaults=None):
    """The list of messages for ``pillar`` (empty when it is valid)."""
    return [str(p) for p in problems(pillar, defaults)]
