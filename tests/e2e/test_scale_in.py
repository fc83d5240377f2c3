"""
Scale in and out by name on the rehearsal cloud (issue 16, item 2; issue 11, item 4): the
operator takes k8s-worker-2's entry out of ``kubernetes_nodes`` and adds a new worker's in the
same change; ``kos up`` takes k8s-worker-2 out of the cluster before Terraform destroys exactly
its server, forgets its salt key and mine data, and a new worker joins. Nothing of
k8s-worker-2 is left (server, host, key, /etc/hosts lines, Kubernetes node, and on the
real kubeadm cluster its pod route on every node), and no other node moved. Named to run
after test_rolling_upgrade.py and before test_teardown.py (the package's modules run in
file-name order); test_secret_ccm.py looks at k8s-worker-1 only.
"""

import json
import time

import pytest

import kos_local as local
from kos_local import hosts as local_hosts
from kos_local import net as local_net
from tests.e2e.conftest import cloud

pytestmark = pytest.mark.netns

UP_TIMEOUT = 1200
# the function that lists a cluster's Kubernetes nodes, per distribution
NODES = {"microk8s": "microk8s.nodes", "kubeadm": "kos_kubectl.nodes"}


@pytest.fixture
def up(cluster):
    if cluster.values["kubernetes_distribution"] != "kubeadm":
        # The cloud's part (Terraform, keys, hosts) is the kubeadm cluster's; microk8s's
        # own removal is orch.remove, which tests/integration/test_deploy.py runs on it.
        pytest.skip("scaled in on the kubeadm cluster; microk8s's orch.remove in "
                    "tests/integration/test_deploy.py")
    assert cluster.up.returncode == 0, cluster.failed_up()
    return cluster


def salt_json(cluster, *args):
    res = cluster.host("salt").run(*args, "--out=json", timeout=120, check=False)
    return json.loads(res.stdout)


def wait_for(what, probe, timeout=120, interval=3):
    deadline = time.monotonic() + timeout
    while True:
        ok, last = probe()
        if ok:
            return last
        if time.monotonic() > deadline:
            pytest.fail(f"{what} after {timeout}s: {last}")
        time.sleep(interval)


def test_a_retired_worker_leaves_nothing_behind_and_a_new_one_joins(up):
    cluster = up
    distribution = cluster.values["kubernetes_distribution"]
    nodes = cluster.values["kubernetes_nodes"]
    workers = sum(1 for node in nodes.values() if node["role"] == "worker")
    added = f"k8s-worker-{workers + 1}"
    ids = {i["hostname"]: mid for mid, i in cluster.outputs()["minions"].items()}
    domain = ids["salt"].split(".", 1)[1]
    gone, new, first = (f"{h}.{domain}" for h in ("k8s-worker-2", added, "k8s-cp-1"))
    if distribution == "kubeadm":
        cidrs_before = {n: v["pod_cidr"] for n, v in
                        salt_json(cluster, "salt", first, "kos_kubectl.nodes")[first].items()}
    before = {i["hostname"]: i["private_ip"] for i in cluster.outputs()["minions"].values()}
    server = cluster.server("k8s-worker-2")
    pattern = local_net.cloud_pattern(cloud().name)
    machine = local_net.host_ns(cloud().name, server.id)
    assert machine in local_hosts.nspawns(pattern)
    # the operator's edit: one entry out, one in
    nodes = {name: node for name, node in nodes.items() if name != "k8s-worker-2"}
    cluster.values = dict(cluster.values, kubernetes_nodes={**nodes, added: {"role": "worker"}})
    (cluster.kos.cwd / "cluster.tfvars.json").write_text(json.dumps(cluster.values))

    res = cluster.kos("up", *cluster.args, "--yes", timeout=UP_TIMEOUT)
    assert res.returncode == 0, res.stderr[-4000:]
    steps = json.loads((cluster.state / "steps.json").read_text())["steps"]
    assert steps["remove-nodes"]["status"] == "done", steps["remove-nodes"]
    assert steps["terraform-apply"]["detail"]["retired"] == [gone]
    assert steps["salt-keys-retired"]["status"] == "done"

    # Terraform destroyed exactly that server; the others kept their addresses
    after = {i["hostname"]: i["private_ip"] for i in cluster.outputs()["minions"].values()}
    assert set(after) == set(before) - {"k8s-worker-2"} | {added}
    assert {h: after[h] for h in before if h != "k8s-worker-2"} == {
        h: ip for h, ip in before.items() if h != "k8s-worker-2"}
    assert cluster.conn().compute.find_server(server.id, ignore_missing=True) is None
    assert machine not in local_hosts.nspawns(pattern)

    # the master forgot it: no key in any state, no mine data
    keys = salt_json(cluster, "salt-key", "-L")
    assert gone not in {k for v in keys.values() for k in v}, keys
    assert new in keys["minions"]
    mine = salt_json(cluster, "salt", first, "mine.get", "*", "kos_private_ips")[first]
    assert gone not in mine and new in mine, mine

    # every node's /etc/hosts lost it and learnt the new one; Kubernetes agrees
    for hostname in after:
        hosts = cluster.host(hostname).path("/etc/hosts").read_text()
        assert "k8s-worker-2" not in hosts and added in hosts, (hostname, hosts)
    k8s = sorted(h for h in after if h.startswith("k8s-"))
    nodes = salt_json(cluster, "salt", first, NODES[distribution])[first]
    assert sorted(nodes) == k8s, nodes
    assert nodes[added]["ready"]
    if distribution == "microk8s":
        assert nodes[added]["role"] == "worker"
    else:
        assert nodes[added]["roles"] == [] and nodes[added]["version"] == nodes["k8s-cp-1"]["version"]
        # the routed pod network: every node routes to the new worker's pods through it,
        # and to the retired one's no more (each minion's scheduler, from the API)
        want = {v["pod_cidr"]: v["ip"] for n, v in nodes.items()}
        # the controller-manager frees a deleted node's CIDR and may give it to the next
        # node that joins: the retired worker's range is either gone or the new worker's
        assert before["k8s-worker-2"] not in want.values(), want
        assert want.get(cidrs_before["k8s-worker-2"], after[added]) == after[added], want

        def routes_in_line():
            seen = {h: salt_json(cluster, "salt", f"{h}.{domain}",
                                 "kos_podnet.pod_routes").get(f"{h}.{domain}") for h in k8s}
            wrong = {h: r for h, r in seen.items()
                     if r != {c: ip for c, ip in want.items() if c != nodes[h]["pod_cidr"]}}
            return not wrong, wrong
        # the other nodes learn the new worker's CIDR on one of their next syncs
        sync = local.pillar_layer()["kubeadm"]["network"]["sync_seconds"]
        wait_for("pod routes that do not match the nodes", routes_in_line, timeout=4 * sync)

    status = cluster.kos("status", *cluster.args, "--json")
    assert status.returncode == 0, status.stdout[-3000:] + status.stderr[-2000:]
    doc = json.loads(status.stdout)
    assert doc["unexpected_keys"] == [] and doc["healthy"] is True


def test_a_node_added_back_and_retired_again_leaves_again(up):
    """The steps ask the cluster and the master whether there is anything to do, not their
    record: k8s-worker-2 comes back (its entry back in kubernetes_nodes), joins, and retired
    again with the very variables of its first retirement it leaves again and its key goes."""
    cluster = up
    distribution = cluster.values["kubernetes_distribution"]
    first = next(m for m, i in cluster.outputs()["minions"].items() if i["hostname"] == "k8s-cp-1")
    domain = first.split(".", 1)[1]
    back = f"k8s-worker-2.{domain}"
    retired = dict(cluster.values)
    assert "k8s-worker-2" not in retired["kubernetes_nodes"], "runs after the retirement above"
    again = dict(retired, kubernetes_nodes={**retired["kubernetes_nodes"],
                                            "k8s-worker-2": {"role": "worker"}})
    for values, member in ((again, True), (retired, False)):
        cluster.values = values
        (cluster.kos.cwd / "cluster.tfvars.json").write_text(json.dumps(values))
        res = cluster.kos("up", *cluster.args, "--yes", timeout=UP_TIMEOUT)
        assert res.returncode == 0, res.stderr[-4000:]
        nodes = salt_json(cluster, "salt", first, NODES[distribution])[first]
        keys = salt_json(cluster, "salt-key", "-L")
        assert ("k8s-worker-2" in nodes) is member, nodes
        assert (back in keys["minions"]) is member, keys
        if member:
            assert nodes["k8s-worker-2"]["ready"], nodes
