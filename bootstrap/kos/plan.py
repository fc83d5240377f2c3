"""
``kos plan`` as a diff: what Terraform will add, change and destroy (read from the saved
plan with ``terraform show -json``), and which nodes Salt will converge after it, and why:

* a new node, or a server Terraform rebuilds: its highstate;
* a node Terraform removes (gone from ``kubernetes_nodes``): it leaves the cluster first, then the
  deployment;
* a changed Terraform layer (``salt_pillar``): judged per node with the rule the nodes
  themselves apply (``saltext.kos.utils.kos_inputs``): a section a node's highstate reads
  changed (highstate), or only the deployment's members (its /etc/hosts learns them);
* the repository's formula or pillar layers differing from the master's copies (read over
  SSH when the cluster exists): the nodes each layer applies to (``pillar/top.sls``);
* what a node still needs from before (``kos.converge_need``: never converged, not joined,
  pillar changed on the master already).

Who converges, and in which order (the first control plane alone, the control planes that
join one at a time, the parts of the wave, the nodes whose /etc/hosts only learns new
members), is decided by orch.deploy's own planner (``saltext.kos.runners.kos_plan``), fed
the deployment's ``kos`` pillar from Terraform's planned ``salt_pillar`` (the last apply's
while the planned one is known after apply) and what each node will answer once the
Terraform change is applied: one planner for both.

What cannot be told (no cluster yet, the master unreachable) is said, not guessed.
"""

from pathlib import Path

import yaml
from saltext.kos.runners import kos_plan
from saltext.kos.utils import kos_inputs

from . import drift, ui
from .errors import InputError, KosError

# The module that holds the nodes' servers and ports, keyed by hostname (terraform/modules/server
# called from terraform/modules/nodes).
NODE_SERVERS = "module.nodes.module.server"
API_LOAD_BALANCER = "module.api_lb[0]"

ACTIONS = ("create", "update", "delete", "replace")
# pillar/top.sls: the layers every minion gets; the others are per domain or per host.
EVERYONE = ("top.sls", "kos/derived.sls", "environments/defaults.sls")
TERRAFORM_LAYER = "_from_terraform.sls"
# kos drift's words (the master's copy against the repository) as a change kos will push.
PUSHED = {"missing on the master": "new in the repository",
          "edited on the master": "changed in the repository",
          "not in the repository": "removed from the repository"}


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
            fix="give each of them its address back in kubernetes_nodes (address = its host "
            "number in private_cidr); a cluster made before worker_address_base keeps its "
            "workers right after its control planes: worker_address_base = 20 + the number of "
            "control planes (num_control_plane) does that for all of them",
        )


def refuse_switching_api_endpoint(doc, outputs):
    """On a running cluster, a plan that adds the API load balancer or takes it away would
    move the API's endpoint, which the API server's certificate, every node's kubelet and
    kube-proxy configuration and every operator's kubeconfig name: refuse it. The cluster's
    choice is the one its last apply wrote into the pillar (``outputs``); a cluster built
    with the load balancer whose load balancer is missing (a first apply that stopped before
    it, or one deleted by hand) gets it again."""
    pillar = yaml.safe_load((outputs or {}).get("salt_pillar") or "{}") or {}
    # before the choice existed every cluster reached its API without a load balancer
    was = ((pillar.get("kos") or {}).get("api") or {}).get("load_balancer") or "none"
    for change in doc.get("resource_changes") or []:
        if (change.get("type") != "openstack_lb_loadbalancer_v2"
                or change.get("module_address") != API_LOAD_BALANCER):
            continue
        actions = set((change.get("change") or {}).get("actions") or [])
        now = {frozenset({"create"}): "octavia", frozenset({"delete"}): "none"}.get(
            frozenset(actions))
        if now and now != was:
            raise InputError(
                f"api_load_balancer changed from {was} to {now} on a running cluster: its API "
                "endpoint would move, and the API server's certificate, every node's "
                "configuration and every kubeconfig name the old one",
                fix=f'keep api_load_balancer = "{was}" for this cluster; a cluster built '
                f'with "{now}" gets the other endpoint',
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


def deployment(after, layer):
    """The ``kos`` pillar the planner reads: the Terraform layer's (``layer``, YAML, None
    when not known), its members made those of the planned ``minions`` output (id ->
    hostname, role, IP), which Terraform knows before apply."""
    doc = yaml.safe_load(layer) if isinstance(layer, str) else None
    kos = dict((doc or {}).get("kos") or {})
    nodes = kos.get("nodes") or {}
    kos["nodes"] = {m: nodes.get(m) or {"role": info.get("role")} for m, info in after.items()
                    if info.get("role") in ("control_plane", "worker")}
    for role, key in (("salt_master", "salt_master"), ("bastion", "bastion")):
        ids = [m for m, info in sorted(after.items()) if info.get("role") == role]
        kos[key] = {**(kos.get(key) or {}), "id": ids[0] if ids else None}
    if kos.get("first_control_plane") not in kos["nodes"]:
        kos["first_control_plane"] = None
    return kos


def _answer(info, reasons, learn, said, fresh, pending):
    """What ``minion`` will answer to ``kos.converge_need`` after the Terraform change: what
    it said (``said``) with what the change adds. A node Terraform creates or rebuilds holds
    nothing; without a master to ask (``pending`` None) the others are taken as converged.
    None: it was asked and did not answer (the planner says so)."""
    highstate = [r for r, what in reasons.items() if what == "highstate"]
    if fresh or pending is None:
        k8s = None
        if info.get("role") in ("control_plane", "worker"):
            k8s = {"role": info["role"], "initialised": not fresh, "joined": not fresh,
                   "fresh": fresh}
        return {"highstate": highstate, "learn": learn, "members": None, "sync": True,
                "kubernetes": k8s, "problems": None}
    if not isinstance(said, dict):
        return said
    return {**said, "highstate": list(dict.fromkeys(highstate + (said.get("highstate") or []))),
            "learn": bool(learn or said.get("learn"))}


def _steps(planned, first_known):
    """``{minion: {"n", "what"}}``: the step of the run each minion converges in. Which
    control plane initialises the cluster is the Terraform layer's to say: until it is
    known, the control planes are only said to go one at a time."""
    steps = []
    if planned.get("first"):
        steps.append(("first control plane, alone", [planned["first"]]))
    joins = "control plane, alone (joins)" if first_known else "control plane, alone"
    steps += [(joins, [m]) for m in planned["control_planes"]]
    parts = planned["wave"]
    steps += [(f"wave part {i} of {len(parts)}", part) for i, part in enumerate(parts, 1)]
    learners = [m for group in planned["learn"] for m in group["minions"]]
    if learners:
        steps.append(("/etc/hosts only", learners))
    return {m: {"n": n, "what": what} for n, (what, ms) in enumerate(steps, 1) for m in ms}


def salt_changes(before, after, rebuilt=(), layer_before=None, layer_after=None,
                 layer_known=True, trees=None, pending=None, layer=None,
                 cores=1):
    """
    ``{"minions": {minion: {"converge": "highstate"|"learn"|"nothing"|"leaves", "reasons":
    [...], "step": {"n", "what"} or None}}, "stop": ..., "silent": [...], "invalid": [...]}``
    after the Terraform plan, as orch.deploy plans it (``saltext.kos.runners.kos_plan``, fed what
    each node will answer): ``before``/``after`` are its ``minions`` output (id -> hostname,
    role, IP), ``layer_*`` its ``salt_pillar`` (YAML), ``layer`` the one the planner reads
    (``layer_after``, or the current one when the planned one is known after apply),
    ``trees`` the repository trees against the master's (``{"states": [drift entries],
    "pillar": [...]}``) and ``pending`` what the nodes answered (``kos.converge_need``;
    None: no master to ask). ``step`` numbers the run's steps: the first control plane
    alone, each joining control plane alone, the wave's parts, the /etc/hosts learners.
    """
    rule = kos_inputs
    before, after = before or {}, after or {}
    # What the Terraform change and the trees add to each node's answer: reason -> verdict.
    adds = {m: {} for m in after}

    def needs(minion, reason, what="highstate"):
        adds[minion].setdefault(reason, what)

    leaving = {m: {"converge": "leaves", "step": None, "reasons": [
        "Terraform removes its server; kos up takes it out of the cluster first (orch.remove) "
        "and forgets its key after"]} for m in sorted(set(before) - set(after))}
    fresh = set(after) - set(before)
    for minion in sorted(fresh):
        needs(minion, "new node")
    by_host = {info.get("hostname"): m for m, info in after.items()}
    for host in rebuilt:
        if host in by_host:
            fresh.add(by_host[host])
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
    for entry in (trees or {}).get("states") or []:
        for minion in after:
            needs(minion, f"formula file {entry['path']}: "
                          f"{PUSHED.get(entry['change'], entry['change'])}")
    for entry in (trees or {}).get("pillar") or []:
        if entry["path"] == TERRAFORM_LAYER:
            continue
        for minion in layer_minions(entry["path"], list(after)):
            needs(minion, f"pillar layer {entry['path']}: "
                          f"{PUSHED.get(entry['change'], entry['change'])}")
    answers = {}
    for minion, info in after.items():
        learn = "learn" in adds[minion].values()
        said = (pending or {}).get(minion)
        if pending is None or minion in fresh or minion in pending:
            answers[minion] = _answer(info, adds[minion], learn, said, minion in fresh, pending)
    kos = deployment(after, layer if layer is not None else layer_after)
    planned = kos_plan.plan(kos, {}, answers, cores=cores)
    steps = {} if planned["stop"] else _steps(planned, bool(kos["first_control_plane"]))
    found = {}
    for minion in after:
        said = answers.get(minion)
        step = steps.get(minion)
        reasons = [r for r in adds[minion] if adds[minion][r] == "highstate"]
        if isinstance(said, dict):
            reasons += [r for r in said.get("highstate") or [] if r not in reasons]
        if step is None:
            converge = "nothing"
        elif step["what"] == "/etc/hosts only":
            converge = "learn"
            reasons = [r for r in adds[minion] if adds[minion][r] == "learn"] or ["new members"]
        else:
            converge = "highstate"
            reasons = reasons or [kos_plan.NOT_SAID if said is None else "not initialised"]
        # Stopped, nothing converges: the reasons say what each node would have needed.
        found[minion] = {"converge": converge, "step": step,
                         "reasons": reasons if step or planned["stop"] else []}
    found.update(leaving)
    return {"minions": dict(sorted(found.items())), "stop": (planned["stop"] or {}).get("name"),
            "silent": planned.get("silent") or [], "invalid": planned.get("invalid") or []}


def master_view(dep, outputs):
    """What the master says: its trees against the repository's, and what each node
    still needs. None when there is no master to ask (said, not guessed)."""
    settings = dep.settings
    pillar_root = str(Path(settings.pillar_file).parent)
    try:
        with dep.master() as master:
            trees = {
                "states": drift.compare_tree(drift.local_state_tree(settings),
                                             drift._remote_files(master, settings.state_tree)),
                "pillar": drift.compare_tree(drift._local_files(settings.pillar_dir),
                                             drift._remote_files(master, pillar_root),
                                             keep=drift.CLOUD_LAYERS),
            }
            # the trees as they are on the master now: only what changed since is new
            pending = master.salt(sorted(outputs["minions"]), "kos.converge_need", timeout=60)
            # orch.deploy sizes the wave's parts by the master's cores (grains num_cpus)
            ids = [m for m, info in outputs["minions"].items()
                   if info.get("role") == "salt_master"]
            cores = master.salt(ids, "grains.get", "num_cpus", timeout=60) if ids else {}
    except KosError as exc:
        return None, exc.problem
    cores = next((c for c in cores.values() if isinstance(c, int)), None)
    return {"trees": trees, "pending": pending, "cores": cores}, None


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
    steps = {}
    for minion, entry in sorted(salt.items()):
        if entry.get("step"):
            steps.setdefault((entry["step"]["n"], entry["step"]["what"]), []).append(minion)
    if steps:
        lines.append("Salt order (orch.deploy, one step after the other):")
        lines += [f"  {n}. {what}: {', '.join(minions)}"
                  for (n, what), minions in sorted(steps.items())]
    return "\n".join(lines)


def plan_report(dep, terraform_doc):
    """The whole diff: ``{"terraform": {...}, "salt": {minion: ...} or None, "salt_unknown":
    why, "salt_note": what was assumed, "salt_stop": why orch.deploy would change nothing}``."""
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
    notes, view, why = [], None, None
    if current.get("minions"):
        view, why = master_view(dep, current)
    else:
        why = "the cluster does not exist yet: every node is new"
    layer = layer_after if known else None
    if layer is None and current.get("salt_pillar"):
        layer = current["salt_pillar"]
        notes.append("the Terraform layer is known after apply: the order is planned with the "
                     "current one (salt_pillar of the last apply) and the planned members")
    elif layer is None:
        notes.append("the Terraform layer is known after apply: the first control plane and "
                     "the wave's size are told once it is (the planned members are known)")
    if view is None or view.get("cores") is None:
        notes.append("without kos:orchestration:batch, the wave's parts are sized for a "
                     "master of 1 core (orch.deploy runs 5 highstates per core of the master)")
    salt = salt_changes(
        before or {}, after or {}, rebuilt_hosts(terraform_doc), layer_before, layer_after,
        layer_known=known, trees=(view or {}).get("trees"), pending=(view or {}).get("pending"),
        layer=layer, cores=(view or {}).get("cores") or 1,
    ) if (after is not None and (view is not None or not current.get("minions"))) else None
    if salt is not None:
        if salt["silent"]:
            notes.append(f"no answer from {', '.join(salt['silent'])}: orch.deploy stops "
                         "before anything changes unless they answer")
        if salt["invalid"]:
            notes.append("invalid pillar on " + " | ".join(salt["invalid"]))
        if salt["stop"]:
            notes.append(f"orch.deploy would change nothing: {salt['stop']}")
        # said beside format_plan's lines (kos plan prints those on stderr)
        for note in notes:
            ui.detail(f"Salt: {note}")
    return {"terraform": changes, "salt": None if salt is None else salt["minions"],
            "salt_unknown": why if salt is None else None,
            "salt_note": "; ".join(([why] if salt is not None and why else []) + notes) or None,
            "salt_stop": None if salt is None else salt["stop"]}
