"""
The kos pillar rules that span several keys, which a JSON Schema cannot say: networks apart,
addresses inside the private network, one key per addon, ... Each is registered with @rule
and the keys it reads; kos_schema.problems runs them after the schema, on the pillar as given
and merged over the formulas' defaults (View), and skips a rule when a key it reads already
has an error.
"""

import copy
import ipaddress
from collections.abc import Mapping

import salt.utils.dictupdate

from saltext.kos.utils import kos_schema_check

# Names microk8s resolves to one addon: enabling one and disabling the other flips every run.
ADDON_ALIASES = {"prometheus": "observability"}
ADDON_REPOSITORIES = ("core", "community")
CCM_APPLICATION_CREDENTIAL = ("application_credential_id", "application_credential_secret")
CCM_PASSWORD = ("username", "password")

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
        data = salt.utils.dictupdate.update(base, kos_schema_check.plain(given)) \
            if isinstance(given, Mapping) else base
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
        if isinstance(value, str) and kos_schema_check.cidr(value) is None:
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


@rule("kubeadm:csi")
def one_default_storage_class(view, error):
    classes = view.merged("kubeadm:csi:storage_classes") or []
    _unique(view, error, "kubeadm:csi:storage_classes", "name")
    defaults = [c.get("name") for c in classes if c.get("default")]
    if (view.merged("kubeadm:csi:enabled") and classes) and len(defaults) != 1:
        error("kubeadm:csi:storage_classes",
              f"has {len(defaults)} default classes ({', '.join(map(str, defaults)) or 'none'})",
              "set default: true on exactly one StorageClass")


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


@rule("kubeadm:ccm")
def ccm_load_balancer_options_agree(view, error):
    ccm = view.merged("kubeadm:ccm") or {}
    if ccm.get("lb_provider") == "ovn" and ccm.get("lb_method") not in (None, "SOURCE_IP_PORT"):
        error("kubeadm:ccm:lb_method", f"{ccm['lb_method']} is not an algorithm OVN's load "
              "balancer has", "set SOURCE_IP_PORT, or leave it null")
    if ccm.get("create_monitor") and (ccm.get("monitor_timeout") or 0) > (
            ccm.get("monitor_delay") or 0):
        error("kubeadm:ccm:monitor_timeout", f"{ccm['monitor_timeout']} s is longer than "
              f"monitor_delay ({ccm['monitor_delay']} s{view.origin('kubeadm:ccm:monitor_delay')})",
              "Octavia refuses a timeout above the delay: lower it or raise the delay")


def _touches(problem_path, read):
    n = min(len(problem_path), len(read))
    return problem_path[:n] == read[:n]


def judge(pillar, defaults, found):
    """``found`` (the schema's problems) and those of every rule none of them touches."""
    found = list(found)
    view = View(pillar if isinstance(pillar, Mapping) else {}, defaults)
    for reads, fn in RULES:
        if any(_touches(p.where, read) for p in found for read in reads):
            continue
        fn(view, lambda key, problem, fix: found.append(
            kos_schema_check.Problem(key.split(":"), problem, fix)))
    return found
