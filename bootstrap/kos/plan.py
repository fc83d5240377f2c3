"""
``kos plan`` as a diff: what Terraform will add, change and destroy (read from the saved
plan with ``terraform show -json``), and which nodes Salt will converge after it, and why:

* a new node, or a server Terraform rebuilds: its highstate;
* a node Terraform removes (``retired_nodes``): it leaves the cluster first, then the
  deployment;
* a changed Terraform layer (``salt_pillar``): judged per node with the rule the nodes
  themselves apply (``salt/salt/_utils/kos_inputs.py``): a section a node's highstate reads
  changed (highstate), or only the deployment's members (its /etc/hosts learns them);
* the repository's formula or pillar layers differing from the master's copies (read over
  SSH when the cluster exists): the nodes each layer applies to (``pillar/top.sls``);
* what a node still needs from before (``kos.converge_need``: never converged, not joined,
  pillar changed on the master already).

What cannot be told (no cluster yet, the master unreachable) is said, not guessed.
"""

import importlib.util
from pathlib import Path

import yaml

from . import drift, ui
from .errors import InputError, KosError

# The module that holds the nodes' servers and ports, keyed by hostname (terraform/modules/server
# called from terraform/modules/nodes).
NODE_SERVERS = "module.nodes.module.server"

ACTIONS = ("create", "update", "delete", "replace")
# pillar/top.sls: the layers every minion gets; the others are per domain or per host.
EVERYONE = ("top.sls", "kos/derived.sls", "environments/defaults.sls")
TERRAFORM_LAYER = "_from_terraform.sls"
# kos drift's words (the master's copy against the repository) as a change kos will push.
PUSHED = {"missing on the master": "new in the repository",
          "edited on the master": "changed in the repository",
          "not in the repository": "removed from the repository"}


def _kos_inputs(formula_dir):
    """The formula's own rule of what a node's highstate is made of."""
    path = Path(formula_dir) / "_utils" / "kos_inputs.py"
    spec = importlib.util.spec_from_file_location("kos_plan_inputs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- Terraform --------------------------------------------------------------------------------


def terraform_of(backend):
    """The Terraform working copy a backend plans with (the local cloud plans through the
    OpenStack backend it runs)."""
    found = getattr(backend, "terraform", None) or getattr(backend, "openstack", None)
    return getattr(found, "terraform", found)


def terraform_changes(doc):
    """``{action: [resource address]}`` of what the plan does (no-ops and reads left out)."""
    found = {action: [] for action in ACTIONS}
    for change in doc.get("resource_changes") or []:
        actions = change.get("change", {}).get("actions") or []
        if set(actions) == {"create", "delete"}:
            found["replace"].append(change["address"])
        elif actions and actions[0] in found:
            found[actions[0]].append(change["address"])
    return found


def output_change(doc, name):
    """``(before, after, known)`` of a root output in the plan."""
    change = (doc.get("output_changes") or {}).get(name) or {}
    known = not change.get("after_unknown")
    return change.get("before"), change.get("after"), known


def destroyed_nodes(doc):
    """Host names of the Kubernetes nodes whose servers the plan destroys for good (not
    replaced): the nodes that must leave the cluster before it is applied."""
    return sorted(
        change["index"] for change in doc.get("resource_changes") or []
        if change.get("type") == "openstack_compute_instance_v2"
        and change.get("module_address") == NODE_SERVERS
        and (change.get("change") or {}).get("actions") == ["delete"]
        and isinstance(change.get("index"), str)
    )


def refuse_moving_nodes(doc):
    """A plan that gives a node's private port another address would move a running node
    (its join, its certificates and every /etc/hosts name the old one): refuse it. The
    one way this happens is a cluster made before worker_address_base."""
    moved = []
    for change in doc.get("resource_changes") or []:
        if (change.get("type") != "openstack_networking_port_v2"
                or change.get("module_address") != NODE_SERVERS
                or change.get("name") != "private"):
            continue
        actions = (change.get("change") or {}).get("actions") or []
        before = (change.get("change") or {}).get("before") or {}
        after = (change.get("change") or {}).get("after") or {}
        if set(actions) in ({"create"}, {"delete"}):
            continue  # a node that comes or goes, not one that moves
        old = [ip.get("ip_address") for ip in before.get("fixed_ip") or []]
        new = [ip.get("ip_address") for ip in after.get("fixed_ip") or []]
        if old != new:
            moved.append(f"{change.get('index')} from {', '.join(map(str, old))} "
                         f"to {', '.join(map(str, new))}")
    if moved:
        raise InputError(
            "the change would move running nodes to other addresses: " + "; ".join(moved),
            fix="a cluster made before worker_address_base keeps its workers right after its "
            "control planes: set worker_address_base = 20 + num_control_plane in its variables",
        )


def rebuilt_hosts(doc):
    """Host names of the servers the plan replaces."""
    hosts = []
    for change in doc.get("resource_changes") or []:
        if change.get("type") != "openstack_compute_instance_v2":
            continue
        if set(change.get("change", {}).get("actions") or []) != {"create", "delete"}:
            continue
        index = change.get("index")
        if isinstance(index, str):
            hosts.append(index)
        elif "bastion" in change.get("module_address", ""):
            hosts.append("bastion")
        elif "salt_master" in change.get("module_address", ""):
            hosts.append("salt")
    return hosts


# -- Salt -------------------------------------------------------------------------------------


def layer_minions(layer, minions):
    """The minions a pillar layer applies to (pillar/top.sls)."""
    parts = layer.split("/")
    if layer in EVERYONE or len(parts) == 1:
        return sorted(minions)
    found = []
    for minion in minions:
        host, _, domain = minion.partition(".")
        domain = domain.replace(".", "_")
        if parts[0] == "environments" and parts[1] == f"{domain}.sls":
            found.append(minion)
        elif parts[0] == "minions" and parts[-1] == f"{host}.sls" and (
                parts[1] in ("defaults", domain)):
            found.append(minion)
        elif parts[0] not in ("environments", "minions"):
            found.append(minion)
    return found


def salt_changes(before, after, rebuilt=(), layer_before=None, layer_after=None,
                 layer_known=True, trees=None, pending=None, formula_dir=None):
    """
    ``{minion: {"converge": "highstate"|"learn"|"nothing"|"leaves", "reasons": [...]}}``
    after the Terraform plan: ``before``/``after`` are its ``minions`` output (id ->
    hostname, role, IP), ``layer_*`` its ``salt_pillar`` (YAML), ``trees`` the repository
    trees against the master's (``{"states": [drift entries], "pillar": [...]}``) and
    ``pending`` what the nodes say they still need (``kos.converge_need``).
    """
    rule = _kos_inputs(formula_dir)
    before, after = before or {}, after or {}
    plan = {m: {"converge": "nothing", "reasons": []} for m in after}

    def needs(minion, reason, what="highstate"):
        entry = plan[minion]
        if what == "highstate" or entry["converge"] == "nothing":
            entry["converge"] = what
        if reason not in entry["reasons"]:
            entry["reasons"].append(reason)

    for minion in sorted(set(before) - set(after)):
        plan[minion] = {"converge": "leaves", "reasons": [
            "Terraform removes its server; kos up takes it out of the cluster first (orch.remove) "
            "and forgets its key after"]}
    for minion in sorted(set(after) - set(before)):
        needs(minion, "new node")
    by_host = {info.get("hostname"): m for m, info in after.items()}
    for host in rebuilt:
        if host in by_host:
            needs(by_host[host], "Terraform rebuilds its server")
    old_layer = yaml.safe_load(layer_before) if isinstance(layer_before, str) else None
    new_layer = yaml.safe_load(layer_after) if isinstance(layer_after, str) else None
    for minion in sorted(set(after) & set(before)):
        if not layer_known or new_layer is None or old_layer is None:
            if set(after) - set(before):
                needs(minion, "new members (the Terraform layer's values are known after "
                              "apply)", "learn")
            elif not layer_known:
                needs(minion, "the Terraform layer changes (values known after apply)")
            continue
        old, new = rule.inputs(old_layer, minion), rule.inputs(new_layer, minion)
        changed = rule.changed(old, new)
        if changed:
            needs(minion, "Terraform layer changed: " + ", ".join(changed))
        elif old["members"] != new["members"]:
            needs(minion, "new members", "learn")
    alive = [m for m in plan if plan[m]["converge"] != "leaves"]
    for entry in (trees or {}).get("states") or []:
        for minion in alive:
            needs(minion, f"formula file {entry['path']}: "
                          f"{PUSHED.get(entry['change'], entry['change'])}")
    for entry in (trees or {}).get("pillar") or []:
        if entry["path"] == TERRAFORM_LAYER:
            continue
        for minion in layer_minions(entry["path"], alive):
            needs(minion, f"pillar layer {entry['path']}: "
                          f"{PUSHED.get(entry['change'], entry['change'])}")
    for minion, need in (pending or {}).items():
        if minion in plan and isinstance(need, dict):
            for reason in need.get("highstate") or []:
                needs(minion, reason)
            if need.get("learn"):
                needs(minion, "new members", "learn")
    return plan


def master_view(dep, outputs):
    """What the master says: its trees against the repository's, and what each node
    still needs. None when there is no master to ask (said, not guessed)."""
    settings = dep.settings
    pillar_root = str(Path(settings.pillar_file).parent)
    try:
        with dep.master() as master:
            trees = {
                "states": drift.compare_tree(drift._local_files(settings.formula_dir),
                                             drift._remote_files(master, settings.state_tree)),
                "pillar": drift.compare_tree(drift._local_files(settings.pillar_dir),
                                             drift._remote_files(master, pillar_root),
                                             keep=drift.CLOUD_LAYERS),
            }
            # the trees as they are on the master now: only what changed since is new
            pending = master.salt(sorted(outputs["minions"]), "kos.converge_need", timeout=60)
    except KosError as exc:
        return None, exc.problem
    return {"trees": trees, "pending": pending}, None


def format_plan(terraform, salt, why_unknown=None):
    lines = ["Terraform: {create} to add, {update} to change, {delete} to destroy, "
             "{replace} to replace".format(**{k: len(v) for k, v in terraform.items()})]
    marks = {"create": "+", "update": "~", "delete": "-", "replace": "-/+"}
    for action in ACTIONS:
        lines += [f"  {marks[action]} {address}" for address in terraform[action]]
    if salt is None:
        lines.append(f"Salt: which nodes converge cannot be told: {why_unknown}")
        return "\n".join(lines)
    count = {k: sum(1 for e in salt.values() if e["converge"] == k)
             for k in ("highstate", "learn", "leaves", "nothing")}
    lines.append(f"Salt: {count['highstate']} highstate, {count['learn']} learn new members "
                 f"(/etc/hosts only), {count['leaves']} leave, {count['nothing']} unchanged")
    words = {"highstate": "highstate", "learn": "/etc/hosts only", "leaves": "leaves"}
    for minion, entry in sorted(salt.items()):
        if entry["converge"] in words:
            lines.append(f"  {minion}: {words[entry['converge']]} "
                         f"({'; '.join(entry['reasons'])})")
    return "\n".join(lines)


def plan_report(dep, terraform_doc):
    """The whole diff: ``{"terraform": {...}, "salt": {...} or None, "salt_unknown": why}``."""
    changes = terraform_changes(terraform_doc)
    before, after, _ = output_change(terraform_doc, "minions")
    layer_before, layer_after, known = output_change(terraform_doc, "salt_pillar")
    current = {}
    try:
        current = dep.outputs() or {}
    except KosError as exc:
        ui.warn(f"no current outputs: {exc.problem}")
    before = before if before is not None else current.get("minions")
    if after is None:
        after = before
    view, why = None, None
    if current.get("minions"):
        view, why = master_view(dep, current)
    else:
        why = "the cluster does not exist yet: every node is new"
    salt = salt_changes(
        before or {}, after or {}, rebuilt_hosts(terraform_doc), layer_before, layer_after,
        layer_known=known, trees=(view or {}).get("trees"), pending=(view or {}).get("pending"),
        formula_dir=dep.settings.formula_dir,
    ) if (after is not None and (view is not None or not current.get("minions"))) else None
    return {"terraform": changes, "salt": salt, "salt_unknown": why if salt is None else None,
            "salt_note": why if salt is not None else None}
