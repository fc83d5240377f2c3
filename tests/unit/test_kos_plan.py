"""kos plan's diff: Terraform's changes from its JSON plan, and which nodes Salt converges
after them and why, by the rule the nodes apply themselves (saltext.kos.utils.kos_inputs)."""

import copy
import json
import types

import yaml
from kos import drift, plan

from tests.unit.conftest import SALT_TREE

DOMAIN = "example.com"


def fqdn(host):
    return f"{host}.{DOMAIN}"


def minions(workers=2, control_planes=1):
    found = {fqdn("salt"): {"hostname": "salt", "role": "salt_master"},
             fqdn("bastion"): {"hostname": "bastion", "role": "bastion"}}
    for i in range(control_planes):
        found[fqdn(f"k8s-cp-{i + 1}")] = {"hostname": f"k8s-cp-{i + 1}", "role": "control_plane"}
    for i in range(workers):
        found[fqdn(f"k8s-worker-{i + 1}")] = {"hostname": f"k8s-worker-{i + 1}", "role": "worker"}
    return found


def layer(workers=2, control_planes=1, **extra):
    nodes = {}
    for i in range(control_planes):
        nodes[fqdn(f"k8s-cp-{i + 1}")] = {"role": "control_plane", "ip": f"10.1.0.{11 + i}"}
    for i in range(workers):
        nodes[fqdn(f"k8s-worker-{i + 1}")] = {"role": "worker", "ip": f"10.1.0.{21 + i}"}
    doc = {"kos": {"domain": DOMAIN, "nodes": nodes, "first_control_plane": fqdn("k8s-cp-1"),
                   "salt_master": {"id": fqdn("salt"), "ip": "10.1.0.5"},
                   "bastion": {"id": fqdn("bastion"), "ip": "10.1.0.4"}, **extra}}
    return yaml.safe_dump(doc)


def diff(before, after, **kw):
    return plan.salt_changes(before, after, **kw)["minions"]


def verdict(entry):
    return {"converge": entry["converge"], "reasons": entry["reasons"]}


def converged(minion, **said):
    """What a node kos converged answers to kos.converge_need."""
    k8s = None if minion in (fqdn("salt"), fqdn("bastion")) else {
        "role": "control_plane" if "-cp-" in minion else "worker", "initialised": True,
        "joined": True, "fresh": False}
    return {"highstate": [], "learn": False, "members": "m1", "sync": False, "kubernetes": k8s,
            "problems": [], **said}


def steps(found):
    """The run's steps in order: [(what, [minion, ...])]."""
    order = {}
    for minion, entry in sorted(found.items()):
        if entry["step"]:
            order.setdefault((entry["step"]["n"], entry["step"]["what"]), []).append(minion)
    return [(what, ms) for (_, what), ms in sorted(order.items())]


def test_terraform_changes_from_the_json_plan():
    doc = {"resource_changes": [
        {"address": "a", "change": {"actions": ["create"]}},
        {"address": "b", "change": {"actions": ["update"]}},
        {"address": "c", "change": {"actions": ["delete", "create"]}},
        {"address": "d", "change": {"actions": ["no-op"]}},
        {"address": "e", "change": {"actions": ["delete"]}},
    ]}
    assert plan.terraform_changes(doc) == {"create": ["a"], "update": ["b"], "delete": ["e"],
                                           "replace": ["c"]}


def test_adding_a_worker_is_its_highstate_and_hosts_for_the_others():
    found = diff(minions(2), minions(3), layer_before=layer(2), layer_after=layer(3))
    assert verdict(found[fqdn("k8s-worker-3")]) == {"converge": "highstate",
                                                    "reasons": ["new node"]}
    for other in minions(2):
        assert verdict(found[other]) == {"converge": "learn", "reasons": ["new members"]}, other
    # orch.deploy's order: the new worker joins in the wave, then the others learn it
    assert steps(found) == [("wave part 1 of 1", [fqdn("k8s-worker-3")]),
                            ("/etc/hosts only", sorted(minions(2)))]


def test_adding_a_worker_whose_address_is_known_after_apply():
    found = diff(minions(2), minions(3), layer_before=layer(2), layer_after=None,
                 layer_known=False)
    assert found[fqdn("k8s-worker-3")]["converge"] == "highstate"
    assert {e["converge"] for m, e in found.items() if m != fqdn("k8s-worker-3")} == {"learn"}


def test_adding_a_control_plane_is_an_input_of_every_node():
    after = minions(2, control_planes=2)
    found = diff(minions(2), after, layer_before=layer(2), layer_after=layer(2, 2))
    assert found[fqdn("k8s-cp-2")]["reasons"] == ["new node"]
    for other in minions(2):
        assert verdict(found[other]) == {"converge": "highstate",
                                         "reasons": ["Terraform layer changed: kos:nodes"]}, other
    # the first control plane changes before a control plane joins: it goes alone first,
    # the new control plane joins alone, then everything else in one wave
    assert steps(found) == [("first control plane, alone", [fqdn("k8s-cp-1")]),
                            ("control plane, alone (joins)", [fqdn("k8s-cp-2")]),
                            ("wave part 1 of 1", [fqdn(h) for h in (
                                "bastion", "k8s-worker-1", "k8s-worker-2", "salt")])]


def test_nothing_changed_converges_nothing():
    found = diff(minions(2), minions(2), layer_before=layer(2), layer_after=layer(2))
    assert {e["converge"] for e in found.values()} == {"nothing"}


def test_removed_and_rebuilt_servers():
    found = diff(minions(2), minions(1), rebuilt=["k8s-cp-1"], layer_before=layer(2),
                 layer_after=layer(1))
    assert found[fqdn("k8s-worker-2")]["converge"] == "leaves"
    assert "Terraform rebuilds its server" in found[fqdn("k8s-cp-1")]["reasons"]


def test_pillar_layers_reach_the_nodes_the_top_file_gives_them():
    trees = {"states": [], "pillar": [
        {"path": "minions/defaults/k8s-worker-1.sls", "change": "missing on the master"},
        {"path": f"minions/{DOMAIN.replace('.', '_')}/salt.sls", "change": "edited on the master"},
    ]}
    found = diff(minions(2), minions(2), layer_before=layer(2), layer_after=layer(2),
                 trees=trees)
    assert verdict(found[fqdn("k8s-worker-1")]) == {"converge": "highstate", "reasons": [
        "pillar layer minions/defaults/k8s-worker-1.sls: new in the repository"]}
    assert found[fqdn("salt")]["reasons"] == [
        "pillar layer minions/example_com/salt.sls: changed in the repository"]
    assert found[fqdn("k8s-worker-2")]["converge"] == "nothing"
    everyone = diff(minions(2), minions(2), layer_before=layer(2), layer_after=layer(2),
                    trees={"pillar": [{"path": "environments/example_com.sls",
                                       "change": "edited on the master"}],
                           "states": [{"path": "core/init.sls", "change": "edited on the master"}]})
    assert {e["converge"] for e in everyone.values()} == {"highstate"}
    assert everyone[fqdn("bastion")]["reasons"] == [
        "formula file core/init.sls: changed in the repository",
        "pillar layer environments/example_com.sls: changed in the repository"]


def test_what_a_node_still_needs_is_said():
    pending = {m: converged(m) for m in minions(2)}
    pending[fqdn("k8s-worker-2")] = converged(fqdn("k8s-worker-2"), highstate=["not joined"])
    pending[fqdn("k8s-worker-2")]["kubernetes"]["joined"] = False
    found = diff(minions(2), minions(2), layer_before=layer(2), layer_after=layer(2),
                 pending=pending)
    assert verdict(found[fqdn("k8s-worker-2")]) == {"converge": "highstate",
                                                    "reasons": ["not joined"]}
    assert {m for m, e in found.items() if e["converge"] != "nothing"} == {fqdn("k8s-worker-2")}


def test_a_node_that_does_not_answer_is_what_orch_deploy_makes_of_it():
    pending = {m: converged(m) for m in minions(2) if m != fqdn("k8s-worker-1")}
    got = plan.salt_changes(minions(2), minions(2), layer_before=layer(2), layer_after=layer(2),
                            pending=pending)
    assert got["silent"] == [fqdn("k8s-worker-1")]
    assert got["minions"][fqdn("k8s-worker-1")]["reasons"] == [
        "it did not say what it needs (kos.converge_need)"]


def test_a_fresh_cluster_in_orch_deploys_order():
    found = diff({}, minions(2, control_planes=3), layer_after=layer(2, 3))
    assert {e["converge"] for e in found.values()} == {"highstate"}
    assert steps(found) == [
        ("first control plane, alone", [fqdn("k8s-cp-1")]),
        ("control plane, alone (joins)", [fqdn("k8s-cp-2")]),
        ("control plane, alone (joins)", [fqdn("k8s-cp-3")]),
        ("wave part 1 of 1", [fqdn(h) for h in ("bastion", "k8s-worker-1", "k8s-worker-2",
                                                  "salt")])]
    # the wave's parts: kos:orchestration:batch, as orch.deploy reads it
    small = diff({}, minions(2, control_planes=3),
                 layer_after=layer(2, 3, orchestration={"batch": 3}))
    assert [what for what, _ in steps(small)][-2:] == ["wave part 1 of 2", "wave part 2 of 2"]


def test_a_rebuilt_first_control_plane_rejoins_through_a_joined_one():
    before = minions(1, control_planes=2)
    pending = {m: converged(m) for m in before}
    found = diff(before, before, rebuilt=["k8s-cp-1"], layer_before=layer(1, 2),
                 layer_after=layer(1, 2), pending=pending)
    assert steps(found) == [("control plane, alone (joins)", [fqdn("k8s-cp-1")])]
    assert found[fqdn("k8s-cp-1")]["reasons"] == ["Terraform rebuilds its server"]
    # with no other control plane it cannot: orch.deploy stops, and kos plan says so
    alone = minions(1)
    got = plan.salt_changes(alone, alone, rebuilt=["k8s-cp-1"], layer_before=layer(1),
                            layer_after=layer(1), pending={m: converged(m) for m in alone})
    assert "second cluster" in got["stop"]
    assert {e["converge"] for e in got["minions"].values()} == {"nothing"}


def test_the_diff_reads_as_a_person_reads_it():
    terraform = {"create": ['module.nodes.openstack_compute_instance_v2.this["k8s-worker-3"]'],
                 "update": [], "delete": [], "replace": []}
    salt = diff(minions(2), minions(3), layer_before=layer(2), layer_after=layer(3))
    text = plan.format_plan(terraform, salt)
    assert text.splitlines()[:3] == [
        "Terraform: 1 to add, 0 to change, 0 to destroy, 0 to replace",
        '  + module.nodes.openstack_compute_instance_v2.this["k8s-worker-3"]',
        "Salt: 1 highstate, 5 learn new members (/etc/hosts only), 0 leave, 0 unchanged"]
    assert f"  {fqdn('k8s-worker-3')}: highstate (new node)" in text
    assert "cannot be told: no master" in plan.format_plan(terraform, None, "no master")


def test_the_orchestrations_rule_is_the_one_plan_applies():
    """One source: kos plan judges the Terraform layer with the nodes' own module."""
    rule = plan.kos_inputs
    doc = yaml.safe_load(layer(2))
    other = copy.deepcopy(doc)
    other["kos"]["nodes"][fqdn("k8s-worker-9")] = {"role": "worker", "ip": "10.1.0.99"}
    a, b = rule.inputs(doc, fqdn("k8s-worker-1")), rule.inputs(other, fqdn("k8s-worker-1"))
    assert rule.changed(a, b) == [] and a["members"] != b["members"]


def test_before_the_terraform_layer_is_known_the_first_control_plane_is_not_guessed():
    found = diff({}, minions(1, control_planes=2), layer_known=False)
    assert steps(found)[:2] == [("control plane, alone", [fqdn("k8s-cp-1")]),
                                ("control plane, alone", [fqdn("k8s-cp-2")])]


class Master:
    """The master as kos reaches it: its copies of the trees (``{directory: {path:
    sha256}}``, here the ones kos pushes, unchanged) over SSH, and the nodes' answers over the
    channel."""

    def __init__(self, trees, answers, cores):
        self.trees, self.answers, self.cores = trees, answers, cores
        self.ssh = self

    def run(self, argv, check=True):
        directory = argv[1]
        files = self.trees[directory]
        lines = [f"{digest}  {directory}/{rel}" for rel, digest in files.items()]
        return types.SimpleNamespace(stdout="\n".join(lines))

    def salt(self, targets, fun, *args, timeout=60):
        if fun == "grains.get":
            return {m: self.cores for m in targets}
        return {m: self.answers[m] for m in targets if m in self.answers}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_plan_report_plans_with_the_current_layer_while_the_planned_one_is_unknown():
    """A worker added whose address Terraform knows after apply: the order is planned with
    the last apply's Terraform layer (its wave size among it), and the report says so."""
    repo = SALT_TREE.parents[1]
    settings = types.SimpleNamespace(
        formula_dir=SALT_TREE, state_tree="/srv/salt", pillar_dir=repo / "pillar",
        pillar_file="/srv/pillar/_from_terraform.sls")
    current = {"minions": minions(4), "salt_pillar": layer(4, orchestration={"batch": 2})}
    master = Master({"/srv/salt": drift.local_state_tree(settings),
                     "/srv/pillar": drift._local_files(repo / "pillar")},
                    {m: converged(m) for m in minions(4)}, cores=4)
    dep = types.SimpleNamespace(settings=settings, outputs=lambda: current,
                                master=lambda: master)
    doc = {"output_changes": {
        "minions": {"before": minions(4), "after": minions(7)},
        "salt_pillar": {"before": current["salt_pillar"], "after_unknown": True}}}
    report = plan.plan_report(dep, doc)
    assert "planned with the current one" in report["salt_note"]
    assert report["salt_stop"] is None
    new = [fqdn(f"k8s-worker-{i}") for i in (5, 6, 7)]
    assert [what for what, _ in steps(report["salt"])] == [
        "wave part 1 of 2", "wave part 2 of 2", "/etc/hosts only"]
    assert [m for _, ms in steps(report["salt"])[:2] for m in ms] == new
    json.dumps(report)  # diff.json


def test_the_order_reads_as_a_person_reads_it():
    terraform = {"create": [], "update": [], "delete": [], "replace": []}
    text = plan.format_plan(terraform, diff({}, minions(1, control_planes=2),
                                            layer_after=layer(1, 2)))
    assert text.splitlines()[-4:] == [
        "Salt order (orch.deploy, one step after the other):",
        f"  1. first control plane, alone: {fqdn('k8s-cp-1')}",
        f"  2. control plane, alone (joins): {fqdn('k8s-cp-2')}",
        f"  3. wave part 1 of 1: {fqdn('bastion')}, {fqdn('k8s-worker-1')}, {fqdn('salt')}"]


def _lb_change(*actions):
    return {"resource_changes": [{
        "type": "openstack_lb_loadbalancer_v2", "module_address": plan.API_LOAD_BALANCER,
        "change": {"actions": list(actions)}}]}


def _built_with(choice):
    return {"salt_pillar": yaml.safe_dump({"kos": {"api": {"load_balancer": choice}}})}


def test_the_api_endpoint_does_not_move_under_a_running_cluster():
    import pytest
    from kos.errors import InputError

    with pytest.raises(InputError, match="changed from none to octavia") as refused:
        plan.refuse_switching_api_endpoint(_lb_change("create"), _built_with("none"))
    assert 'keep api_load_balancer = "none"' in refused.value.fix
    with pytest.raises(InputError, match="changed from octavia to none"):
        plan.refuse_switching_api_endpoint(_lb_change("delete"), _built_with("octavia"))
    # a cluster from before the choice reached its API without a load balancer
    with pytest.raises(InputError, match="changed from none to octavia"):
        plan.refuse_switching_api_endpoint(_lb_change("create"), {"salt_pillar": "kos: {}\n"})
    # built with one whose load balancer is gone (deleted by hand, or never made by a first
    # apply that stopped): the re-run makes it again; a replacement is no switch either
    plan.refuse_switching_api_endpoint(_lb_change("create"), _built_with("octavia"))
    plan.refuse_switching_api_endpoint(_lb_change("delete", "create"), _built_with("none"))
