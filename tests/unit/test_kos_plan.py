"""kos plan's diff: Terraform's changes from its JSON plan, and which nodes Salt converges
after them and why, by the rule the nodes apply themselves (salt/salt/_utils/kos_inputs.py)."""

import copy

import yaml
from kos import plan

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
    return plan.salt_changes(before, after, formula_dir=SALT_TREE, **kw)


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
    assert found[fqdn("k8s-worker-3")] == {"converge": "highstate", "reasons": ["new node"]}
    for other in minions(2):
        assert found[other] == {"converge": "learn", "reasons": ["new members"]}, other


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
        assert found[other] == {"converge": "highstate",
                                "reasons": ["Terraform layer changed: kos:nodes"]}, other


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
    assert found[fqdn("k8s-worker-1")] == {"converge": "highstate", "reasons": [
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
    pending = {fqdn("k8s-worker-2"): {"highstate": ["not joined"], "learn": False}}
    found = diff(minions(2), minions(2), layer_before=layer(2), layer_after=layer(2),
                 pending=pending)
    assert found[fqdn("k8s-worker-2")] == {"converge": "highstate", "reasons": ["not joined"]}


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
    rule = plan._kos_inputs(SALT_TREE)
    doc = yaml.safe_load(layer(2))
    other = copy.deepcopy(doc)
    other["kos"]["nodes"][fqdn("k8s-worker-9")] = {"role": "worker", "ip": "10.1.0.99"}
    a, b = rule.inputs(doc, fqdn("k8s-worker-1")), rule.inputs(other, fqdn("k8s-worker-1"))
    assert rule.changed(a, b) == [] and a["members"] != b["members"]
