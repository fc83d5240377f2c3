"""Nodes by name on kos's side: what the node set Terraform evaluated (kos.inputs.Inputs.nodes)
asks of the cloud, and which server `kos up --replace HOST` rebuilds."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from kos import backends, cloud, plan
from kos.errors import InputError, TerraformError
from kos.inputs import Inputs

TERRAFORM = Path(__file__).resolve().parents[2] / "terraform"


def outputs(*hosts):
    found = {"salt.example.com": {"hostname": "salt", "role": "salt_master"},
             "bastion.example.com": {"hostname": "bastion", "role": "bastion"}}
    for host in hosts:
        role = "control_plane" if host.startswith("k8s-cp-") else "worker"
        found[f"{host}.example.com"] = {"hostname": host, "role": role}
    return {"minions": found}


def node_set(*names, **flavors):
    """A node set as terraform/modules/node_set gives it."""
    return {name: {"role": "control_plane" if name.startswith("k8s-cp-") else "worker",
                   "address": 20 + i, "az": None, "flavor": flavors.get(name.replace("-", "_"))}
            for i, name in enumerate(names)}


def test_quota_counts_each_node_with_its_own_flavor():
    small = SimpleNamespace(vcpus=2, ram=2048)
    large = SimpleNamespace(vcpus=8, ram=16384)
    values = {"first_control_plane_access": "floating_ip", "kube_node_flavor": "m1.small",
              "salt_master_flavor": "m1.small", "bastion_flavor": "m1.small",
              "salt_master_volume_size": 10}
    nodes = node_set("k8s-cp-1", "k8s-worker-2", "gpu-1", gpu_1="g1.large")
    need = cloud.plan_needs(values, nodes, {"m1.small": small, "g1.large": large})
    assert need["instances"] == 3 + 2
    assert need["cores"] == 4 * 2 + 8 and need["ram"] == 4 * 2048 + 16384


def test_quota_counts_the_boot_volumes_beside_the_masters():
    small = SimpleNamespace(vcpus=2, ram=2048)
    values = {"kube_node_flavor": "m1.small", "salt_master_flavor": "m1.small",
              "bastion_flavor": "m1.small", "salt_master_volume_size": 10}
    nodes = node_set("k8s-cp-1", "k8s-worker-1", "k8s-worker-2")
    nodes["k8s-worker-1"]["boot_volume"] = {"size": 20, "type": None}
    nodes["k8s-worker-2"]["boot_volume"] = {"size": 40, "type": "ssd"}
    need = cloud.plan_needs(values, nodes, {"m1.small": small})
    assert need["volumes"] == 1 + 2 and need["gigabytes"] == 10 + 20 + 40


def test_quota_counts_a_server_group_per_grouped_role_and_its_largest_membership():
    small = SimpleNamespace(vcpus=2, ram=2048)
    values = {"kube_node_flavor": "m1.small", "salt_master_flavor": "m1.small",
              "bastion_flavor": "m1.small", "salt_master_volume_size": 10,
              "server_group_policies": {"control_plane": "anti-affinity",
                                        "worker": "soft-anti-affinity"}}
    nodes = node_set("k8s-cp-1", "k8s-cp-2", "k8s-cp-3", "k8s-worker-1", "k8s-worker-2")
    need = cloud.plan_needs(values, nodes, {"m1.small": small})
    assert need["server_groups"] == 2 and need["server_group_members"] == 3
    values["server_group_policies"] = {"control_plane": "none", "worker": "soft-anti-affinity"}
    need = cloud.plan_needs(values, nodes, {"m1.small": small})
    assert need["server_groups"] == 1 and need["server_group_members"] == 2
    values["server_group_policies"] = {"control_plane": "none", "worker": "none"}
    need = cloud.plan_needs(values, nodes, {"m1.small": small})
    assert "server_groups" not in need and "server_group_members" not in need


def test_replace_names_the_server_terraform_declares():
    found = outputs("k8s-cp-1", "k8s-worker-2")
    address = backends.instance_address(found, "k8s-worker-2")
    assert address == 'module.nodes.module.server.openstack_compute_instance_v2.this["k8s-worker-2"]'
    assert backends.instance_address(found, "salt") == backends.SERVER_ADDRESSES["salt"]
    # every address kos hands to -replace is a resource the modules declare
    for full in [backends.NODE_SERVER, *backends.SERVER_ADDRESSES.values()]:
        _, role, _, call, kind, name = full.split("[")[0].split(".")
        caller = (TERRAFORM / "modules" / role / "main.tf").read_text()
        assert re.search(rf'^module "{call}" {{\n  source = "\.\./server"', caller, re.MULTILINE), full
        text = (TERRAFORM / "modules" / "server" / "main.tf").read_text()
        assert re.search(rf'^resource "{kind}" "{name}"', text, re.M), full


def test_replace_of_a_retired_or_unknown_node_names_the_ones_there_are():
    with pytest.raises(InputError) as err:
        backends.instance_address(outputs("k8s-cp-1", "k8s-worker-2"), "k8s-worker-1")
    assert "no such server" in err.value.problem
    assert "k8s-cp-1, k8s-worker-2" in err.value.fix
    with pytest.raises(InputError) as err:
        backends.instance_address({}, "k8s-worker-1")
    assert "no servers yet" in err.value.problem


def port_change(host, actions, old, new):
    return {"type": "openstack_networking_port_v2", "module_address": plan.NODE_SERVERS,
            "name": "private", "index": host, "address": f'{plan.NODE_SERVERS}.x["{host}"]',
            "change": {"actions": actions,
                       "before": {"fixed_ip": [{"ip_address": old}]} if old else None,
                       "after": {"fixed_ip": [{"ip_address": new}]} if new else None}}


def test_a_plan_that_moves_a_running_node_is_refused_with_the_fix():
    doc = {"resource_changes": [port_change("k8s-worker-1", ["update"], "10.0.0.21", "10.0.0.30")]}
    with pytest.raises(InputError) as err:
        plan.refuse_moving_nodes(doc)
    assert "k8s-worker-1 from 10.0.0.21 to 10.0.0.30" in err.value.problem
    assert "its address back in kubernetes_nodes" in err.value.fix
    assert "worker_address_base = 20 + the number of control planes" in err.value.fix


def test_nodes_that_come_or_go_or_stay_put_pass():
    plan.refuse_moving_nodes({"resource_changes": [
        port_change("k8s-worker-2", ["delete"], "10.0.0.31", None),
        port_change("k8s-worker-3", ["create"], None, "10.0.0.32"),
        port_change("k8s-worker-1", ["update"], "10.0.0.30", "10.0.0.30"),
    ]})


def server_change(host, actions):
    return {"type": "openstack_compute_instance_v2", "module_address": plan.NODE_SERVERS,
            "name": "this", "index": host, "change": {"actions": actions}}


class FakeTerraform:
    def __init__(self, before, after):
        """A plan that takes the cluster from the ``before`` minions to the ``after`` ones."""
        hosts = {i["hostname"] for i in (before or {}).values()}
        later = {i["hostname"] for i in (after or {}).values()}
        self.doc = {"resource_changes": [server_change(h, ["delete"]) for h in hosts - later]
                    + [server_change(h, ["create"]) for h in later - hosts]
                    + [server_change("k8s-cp-1", ["delete", "create"])]}
        self.calls = []

    def apply(self, replace=()):
        self.calls.append("apply")
        return {"add": 9}

    def plan(self, out=None):
        self.calls.append("plan")
        Path(out).write_text("plan")

    def show_plan(self, plan_file):
        return self.doc

    def apply_plan(self, plan_file):
        self.calls.append("apply_plan")
        return {"add": 1, "remove": 1}


def backend(tmp_path, terraform, current):
    found = backends.OpenStackBackend.__new__(backends.OpenStackBackend)
    found.terraform = terraform
    found.state = SimpleNamespace(path=tmp_path)
    (tmp_path / "terraform").mkdir(parents=True)
    found.outputs = lambda: current
    return found


def test_leaving_nodes_leave_before_terraform_destroys_their_servers(tmp_path):
    before = outputs("k8s-cp-1", "k8s-worker-1", "k8s-worker-2")["minions"]
    after = outputs("k8s-cp-1", "k8s-worker-1", "k8s-worker-3")["minions"]
    tf = FakeTerraform(before, after)
    left = []
    found = backend(tmp_path, tf, {"minions": before})
    detail = found._apply(lambda ids: left.append((list(ids), list(tf.calls))))
    # asked to leave after the plan and before it is applied
    assert left == [(["k8s-worker-2.example.com"], ["plan"])]
    assert tf.calls == ["plan", "apply_plan"]
    assert detail == {"add": 1, "remove": 1, "retired": ["k8s-worker-2.example.com"]}
    assert not (tmp_path / "terraform" / "up.tfplan").exists()


def test_the_plan_file_never_stays_even_when_the_nodes_fail_to_leave(tmp_path):
    before = outputs("k8s-cp-1", "k8s-worker-1", "k8s-worker-2")["minions"]
    after = outputs("k8s-cp-1", "k8s-worker-1")["minions"]
    tf = FakeTerraform(before, after)

    def refuse(ids):
        raise RuntimeError("orch.remove failed")

    with pytest.raises(RuntimeError):
        backend(tmp_path, tf, {"minions": before})._apply(refuse)
    assert tf.calls == ["plan"]  # nothing applied
    assert not (tmp_path / "terraform" / "up.tfplan").exists()


def test_replace_refuses_a_change_that_also_retires_a_running_node():
    running = outputs("k8s-cp-1", "k8s-worker-1", "k8s-worker-2")
    with pytest.raises(InputError) as err:
        backends.refuse_retiring_while_replacing(
            Inputs({}, nodes=node_set("k8s-cp-1", "k8s-worker-1")), running)
    assert "k8s-worker-2 still run but the inputs no longer list it" in err.value.problem
    assert "kos up without --replace first" in err.value.fix
    # once it is gone, or with nothing retired, a replacement goes on
    backends.refuse_retiring_while_replacing(Inputs({}, nodes=node_set("k8s-cp-1", "k8s-worker-1")),
                                             outputs("k8s-cp-1", "k8s-worker-1"))
    backends.refuse_retiring_while_replacing(
        Inputs({}, nodes=node_set("k8s-cp-1", "k8s-worker-1", "k8s-worker-2")), running)


def test_a_failed_apply_says_why_nova_put_servers_in_error():
    servers = [
        SimpleNamespace(name="kc-k8s-cp-3", status="ERROR", metadata={"kos_cluster": "kc"},
                        fault={"message": "Build of instance aborted: Failed to allocate the "
                                          "network(s)", "details": "Traceback...\n  PortBindingFailed: x\n"}),
        SimpleNamespace(name="kc-k8s-cp-1", status="ACTIVE", metadata={"kos_cluster": "kc"},
                        fault=None),
        SimpleNamespace(name="other-salt", status="ERROR", metadata={"kos_cluster": "other"},
                        fault={"message": "not ours"}),
    ]
    conn = SimpleNamespace(compute=SimpleNamespace(servers=lambda details: servers))
    assert cloud.server_faults(conn, "kc") == [
        "kc-k8s-cp-3: Build of instance aborted: Failed to allocate the network(s) "
        "(PortBindingFailed: x)"]
    found = backends.OpenStackBackend.__new__(backends.OpenStackBackend)
    found._conn = conn

    def apply():
        raise TerraformError("terraform apply failed", details=["unexpected state 'ERROR'"])

    with pytest.raises(TerraformError) as err:
        found._with_faults(apply, "kc")
    assert err.value.details == [
        "unexpected state 'ERROR'",
        "Nova: kc-k8s-cp-3: Build of instance aborted: Failed to allocate the network(s) "
        "(PortBindingFailed: x)"]
    assert found._with_faults(lambda: {"add": 1}, "kc") == {"add": 1}


def test_no_valid_host_in_an_anti_affinity_group_names_the_group_and_the_fix():
    fault = {"message": "No valid host was found. There are not enough hosts available."}
    servers = [SimpleNamespace(id=f"s{n}", name=f"kc-k8s-cp-{n}", status=status,
                               metadata={"kos_cluster": "kc", "kos_role": "control_plane"},
                               fault=fault if status == "ERROR" else None)
               for n, status in ((1, "ACTIVE"), (2, "ERROR"))]
    groups = [SimpleNamespace(name="kc-worker", policy="soft-anti-affinity", policies=None,
                              member_ids=["w1"]),
              SimpleNamespace(name="kc-control-plane", policy=None, policies=["anti-affinity"],
                              member_ids=["s1", "s2"])]
    conn = SimpleNamespace(compute=SimpleNamespace(servers=lambda details: servers,
                                                   server_groups=lambda: groups))
    assert cloud.server_faults(conn, "kc") == [
        "kc-k8s-cp-2: No valid host was found. There are not enough hosts available.; server "
        "group kc-control-plane (anti-affinity) needs a compute host for each of its 2 "
        'members: add compute hosts, or set server_group_policies = { control_plane = '
        '"soft-anti-affinity" }']
    # no group of the server's, or a soft one: Nova's message alone
    groups[1].member_ids = ["s1"]
    assert cloud.server_faults(conn, "kc") == [f"kc-k8s-cp-2: {fault['message']}"]


class Steps:
    """kos.state's steps as create() uses them: each runs, its detail kept by name."""

    def __init__(self):
        self.ran, self.detail = [], {}

    def run(self, name, fp, title, func, *, always=False, quiet_failure=False):
        self.ran.append(name)
        self.detail[name] = func()
        return self.detail[name]


def test_replaced_nodes_leave_the_cluster_before_their_servers_are_rebuilt(tmp_path, monkeypatch):
    """--replace k8s-worker-2 --replace bastion: the node (not the bastion) leaves first, as a
    node that comes back; the apply rebuilds both and records their host names."""
    current = outputs("k8s-cp-1", "k8s-cp-2", "k8s-cp-3", "k8s-worker-2")
    tf = FakeTerraform(current["minions"], current["minions"])
    tf.initialized, tf.backend, tf.config_fingerprint = True, "local", lambda: "tf"
    tf.init = lambda: None
    found = backend(tmp_path, tf, current)
    found.state.ensure = lambda: None
    found.settings = SimpleNamespace(replace=("k8s-worker-2", "bastion"))
    found._conn = object()
    monkeypatch.setattr(backends.cloud, "wait_first_boot", lambda *a, **kw: {"booted": 2})
    left = []
    steps = Steps()
    nodes = node_set("k8s-cp-1", "k8s-cp-2", "k8s-cp-3", "k8s-worker-2")
    found.create(Inputs({"cluster_name": "kc"}, nodes=nodes), steps,
                 leaving=lambda ids, replace=False: left.append((ids, replace, list(tf.calls))))
    assert left == [(["k8s-worker-2.example.com"], True, [])]  # before anything applied
    assert tf.calls == ["apply"]
    assert steps.detail["terraform-apply"] == {"add": 9, "replaced": ["bastion", "k8s-worker-2"]}


def deployment(replace, detail=None, nodes=("k8s-cp-1", "k8s-cp-2", "k8s-worker-1")):
    found = outputs(*nodes)
    found["salt_pillar"] = "kos:\n  first_control_plane: k8s-cp-1.example.com\n"
    records = {"terraform-apply": {"detail": detail or {}, "finished": "2026-11-27T21:00:00Z"}}
    return SimpleNamespace(outputs=lambda: found, settings=SimpleNamespace(replace=replace),
                           backend=SimpleNamespace(create_step="terraform-apply"),
                           steps=SimpleNamespace(get=lambda name: records.get(name, {})))


def test_the_only_control_plane_is_never_rebuilt_in_place():
    """A rebuilt first control plane rejoins through another control plane; with none,
    its cluster would be gone: refused before anything changes."""
    from kos.steps import nodes

    alone = deployment(("bastion", "k8s-cp-1"), nodes=("k8s-cp-1", "k8s-worker-1"))
    with pytest.raises(InputError) as err:
        nodes.refuse_replacing_the_only_control_plane(alone)
    assert "k8s-cp-1 is the only control plane" in err.value.problem
    assert "k8s-cp-2 and k8s-cp-3 in kubernetes_nodes" in err.value.fix and "Replace a node" in err.value.fix
    # with another control plane to rejoin through, the first one is rebuilt like any other
    nodes.refuse_replacing_the_only_control_plane(deployment(("bastion", "k8s-cp-1")))
    nodes.refuse_replacing_the_only_control_plane(deployment(("k8s-cp-2", "salt")))


def test_the_rebuilt_servers_old_keys_are_forgotten_but_the_masters():
    """The master's keys live on its state volume: a rebuilt master keeps them."""
    from kos.steps import nodes

    dep = deployment((), {"add": 3, "replaced": ["bastion", "k8s-cp-2", "salt"]})
    assert nodes.rebuilt_minions(dep) == ["bastion.example.com", "k8s-cp-2.example.com"]
    assert nodes.rebuilt_minions(deployment((), {"add": 1, "retired": ["x"]})) == []


def test_a_saved_plans_node_map_is_the_same_map_without_its_null_attributes():
    """A saved plan keeps the map as written; kos's evaluation has the optional attributes
    Terraform's type adds, as null. Only a real change refuses the plan."""
    from kos.terraform import changed_variables

    written = {"kubernetes_nodes": {"k8s-cp-1": {"role": "control_plane"}}}
    typed = {"k8s-cp-1": {"role": "control_plane", "address": None, "az": None, "flavor": None}}
    assert changed_variables(written, {"kubernetes_nodes": typed}) == []
    typed["k8s-cp-1"]["flavor"] = "m1.large"
    assert changed_variables(written, {"kubernetes_nodes": typed}) == ["kubernetes_nodes"]
