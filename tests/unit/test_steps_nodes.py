"""
Nodes leaving and forgotten, judged from the world (``kos.steps.nodes``), with kos's
master channel replaced by a cluster held in a dict (the orchestrations themselves run on
a real master in tests/integration/test_deploy.py): a retired node leaves the cluster
only while the cluster has it, so one that came back leaves again; ``kos forget`` makes
the cluster and the master forget a node whose server is gone, refuses one Terraform still
lists, and a re-run finds nothing left.
"""

import contextlib
from types import SimpleNamespace

import pytest
import yaml
from kos.errors import InputError
from kos.state import StateDir
from kos.steps import nodes

DOMAIN = "example.com"
FIRST = f"k8s-cp-1.{DOMAIN}"


class Cluster:
    """The salt master as kos.salt.Master answers: key lists, the first control plane's
    pillar and Kubernetes nodes, orch.remove and key deletion acting on them."""

    def __init__(self, members, keys):
        self.members = set(members)
        self.accepted = set(keys)
        self.orchestrations = []

    def keys(self):
        return {"minions": sorted(self.accepted), "minions_pre": [], "minions_rejected": [],
                "minions_denied": []}

    def salt(self, targets, fun, *args):
        answers = {"pillar.get": "microk8s",
                   "microk8s.nodes": {n: {"ready": True} for n in self.members}}
        return {t: answers[fun] for t in targets if t == FIRST}

    def answering(self, minions, timeout=30):
        return sorted(m for m in minions if m in self.accepted), \
            sorted(m for m in minions if m not in self.accepted)

    def orchestrate(self, sls, pillar, rerun=None):
        self.orchestrations.append((sls, pillar))
        self.members -= {m.split(".")[0] for m in pillar["remove"]}
        return {"steps": []}

    def delete_keys(self, minions):
        self.accepted -= set(minions)
        return {"deleted": sorted(minions)}


def deployment(tmp_path, cluster, hosts):
    minions = {f"{h}.{DOMAIN}": {"hostname": h, "role": "control_plane" if "cp" in h
                                 else "worker"} for h in ["salt", *hosts]}
    found = {"minions": minions, "kubernetes_nodes": {m: v for m, v in minions.items()
                                                      if v["hostname"] != "salt"},
             "salt_pillar": yaml.safe_dump({"kos": {"first_control_plane": FIRST}})}

    @contextlib.contextmanager
    def master():
        yield cluster

    return SimpleNamespace(steps=StateDir(tmp_path, "kosn").steps(), settings=None,
                           outputs=lambda: found, require_outputs=lambda: found,
                           master=master)


@pytest.fixture(autouse=True)
def no_push(monkeypatch):
    """The formula's push is kos's SSH to the master; nothing to push to here."""
    monkeypatch.setattr(nodes, "push_trees", lambda master, settings: {})


def test_a_retired_node_leaves_while_the_cluster_has_it_and_again_after_it_came_back(
        tmp_path):
    worker = f"k8s-worker-3.{DOMAIN}"
    cluster = Cluster(["k8s-cp-1", "k8s-worker-3"], [FIRST, worker])
    dep = deployment(tmp_path, cluster, ["k8s-cp-1", "k8s-worker-3"])
    nodes.remove_nodes(dep, [worker])
    assert cluster.orchestrations == [("orch.remove", {"remove": [worker]})]
    assert "k8s-worker-3" not in cluster.members
    # a re-run (the apply was interrupted): it left, nothing to do
    assert nodes.remove_nodes(dep, [worker]) == {"left": [], "not_members": [worker]}
    assert len(cluster.orchestrations) == 1
    # added again (it joined), then retired again with the same variables: it leaves again
    cluster.members.add("k8s-worker-3")
    nodes.remove_nodes(dep, [worker])
    assert cluster.orchestrations[1:] == [("orch.remove", {"remove": [worker]})]
    assert "k8s-worker-3" not in cluster.members


def test_forget_makes_the_cluster_and_the_master_forget_a_node_whose_server_is_gone(
        tmp_path):
    gone = f"k8s-worker-3.{DOMAIN}"
    cluster = Cluster(["k8s-cp-1", "k8s-worker-3"], [FIRST, gone])
    dep = deployment(tmp_path, cluster, ["k8s-cp-1"])
    done = nodes.forget(dep, ["k8s-worker-3"])
    assert cluster.orchestrations == [("orch.remove", {"remove": [gone], "force": True})]
    assert gone not in cluster.accepted and "k8s-worker-3" not in cluster.members
    assert done["forgotten"] == [gone] and done["keys"] == [gone]
    # again, by its minion id: nothing knows it, nothing runs
    assert nodes.forget(dep, [gone])["forgotten"] == []
    assert len(cluster.orchestrations) == 1


def test_forget_refuses_a_node_terraform_still_lists_and_changes_nothing(tmp_path):
    worker = f"k8s-worker-3.{DOMAIN}"
    cluster = Cluster(["k8s-cp-1", "k8s-worker-3"], [FIRST, worker])
    dep = deployment(tmp_path, cluster, ["k8s-cp-1", "k8s-worker-3"])
    with pytest.raises(InputError) as err:
        nodes.forget(dep, ["k8s-worker-3"])
    assert "Terraform still lists its server" in err.value.problem
    assert "retired_nodes" in err.value.fix
    assert cluster.orchestrations == [] and worker in cluster.accepted
