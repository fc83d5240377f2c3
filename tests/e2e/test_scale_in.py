"""
Scale in and out by name on the rehearsal cloud's microk8s cluster (issue 16, item 2): the
operator retires k8s-worker-2 (``retired_nodes``) and raises ``num_kube_nodes`` in the same
change; ``kos up`` takes k8s-worker-2 out of the cluster before Terraform destroys exactly
its server, forgets its salt key and mine data, and k8s-worker-3 joins. Nothing of
k8s-worker-2 is left (server, host, key, /etc/hosts lines, Kubernetes node), and no other
node moved. Named to run after test_rolling_upgrade.py and before test_teardown.py (the
package's modules run in file-name order); test_secret_ccm.py looks at k8s-worker-1 only.
"""

import json

import pytest

from kos.local import hosts as local_hosts
from kos.local import net as local_net

pytestmark = pytest.mark.netns

UP_TIMEOUT = 1200


@pytest.fixture
def microk8s(cluster):
    if cluster.values["kubernetes_distribution"] != "microk8s":
        pytest.skip("once is enough: orch.remove and kos up's path are the same for kubeadm "
                    "(tests/integration_kubeadm takes a kubeadm node out through orch.remove)")
    assert cluster.up.returncode == 0, cluster.failed_up()
    return cluster


def salt_json(cluster, *args):
    res = cluster.host("salt").run(*args, "--out=json", timeout=120, check=False)
    return json.loads(res.stdout)


def test_a_retired_worker_leaves_nothing_behind_and_a_new_one_joins(microk8s):
    cluster = microk8s
    ids = {i["hostname"]: mid for mid, i in cluster.outputs()["minions"].items()}
    domain = ids["salt"].split(".", 1)[1]
    gone, new, first = (f"{h}.{domain}" for h in ("k8s-worker-2", "k8s-worker-3", "k8s-cp-1"))
    before = {i["hostname"]: i["private_ip"] for i in cluster.outputs()["minions"].values()}
    server = cluster.server("k8s-worker-2")
    machine = local_net.host_ns(cluster.name, server.id)
    assert machine in local_hosts.nspawns(local_net.cluster_pattern(cluster.name))
    cluster.values = dict(cluster.values, retired_nodes=["k8s-worker-2"],
                          num_kube_nodes=cluster.values["num_kube_nodes"] + 1)
    (cluster.kos.cwd / "cluster.tfvars.json").write_text(json.dumps(cluster.values))

    res = cluster.kos("up", *cluster.args, "--yes", timeout=UP_TIMEOUT)
    assert res.returncode == 0, res.stderr[-4000:]
    steps = json.loads((cluster.state / "steps.json").read_text())["steps"]
    assert steps["remove-nodes"]["status"] == "done", steps["remove-nodes"]
    assert steps["terraform-apply"]["detail"]["retired"] == [gone]
    assert steps["salt-keys-retired"]["status"] == "done"

    # Terraform destroyed exactly that server; the others kept their addresses
    after = {i["hostname"]: i["private_ip"] for i in cluster.outputs()["minions"].values()}
    assert set(after) == set(before) - {"k8s-worker-2"} | {"k8s-worker-3"}
    assert {h: after[h] for h in before if h != "k8s-worker-2"} == {
        h: ip for h, ip in before.items() if h != "k8s-worker-2"}
    assert cluster.conn().compute.find_server(server.id, ignore_missing=True) is None
    assert machine not in local_hosts.nspawns(local_net.cluster_pattern(cluster.name))

    # the master forgot it: no key in any state, no mine data
    keys = salt_json(cluster, "salt-key", "-L")
    assert gone not in {k for v in keys.values() for k in v}, keys
    assert new in keys["minions"]
    mine = salt_json(cluster, "salt", first, "mine.get", "*", "kos_private_ips")[first]
    assert gone not in mine and new in mine, mine

    # every node's /etc/hosts lost it and learnt the new one; Kubernetes agrees
    for hostname in after:
        hosts = cluster.host(hostname).path("/etc/hosts").read_text()
        assert "k8s-worker-2" not in hosts and "k8s-worker-3" in hosts, (hostname, hosts)
    nodes = salt_json(cluster, "salt", first, "microk8s.nodes")[first]
    assert set(nodes) == {"k8s-cp-1", "k8s-worker-1", "k8s-worker-3"}, nodes
    assert nodes["k8s-worker-3"]["ready"] and nodes["k8s-worker-3"]["role"] == "worker"

    status = cluster.kos("status", *cluster.args, "--json")
    assert status.returncode == 0, status.stdout[-3000:] + status.stderr[-2000:]
    doc = json.loads(status.stdout)
    assert doc["unexpected_keys"] == [] and doc["healthy"] is True
