"""
The OpenStack cloud-controller-manager runs for real on the rehearsal cloud's kubeadm
cluster (issue 46, item 3): built from ``k8s.io/cloud-provider-openstack`` beside
Kubernetes (kos_local.cloud_provider), run by the formula as a static Pod on every control
plane with the application credential kos manages, it calls the cloud's public endpoints
from the nodes as on any OpenStack. Every node it initialised carries what Nova and
Neutron say of its server: the provider ID, the flavor, the region and zone, and the
server's own addresses; a node it has not initialised keeps the kubelet's taint and runs
no workload.
"""

import pytest

from tests.e2e.test_real_kubernetes import kube_json, wait_for

pytestmark = pytest.mark.netns

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


def nodes(cluster):
    return {n["metadata"]["name"]: n for n in kube_json(cluster, "get", "nodes")["items"]}


def test_every_node_is_initialised_from_its_server_in_nova(real):
    def initialised():
        found = nodes(real)
        waiting = sorted(name for name, n in found.items()
                         if any(t["key"] == UNINITIALIZED for t in n["spec"].get("taints") or []))
        return not waiting, found if not waiting else f"still tainted: {waiting}"

    found = wait_for("the cloud controller initialising every node", initialised, timeout=300)
    assert sorted(found) == sorted(h for h in real.hostnames() if h.startswith("k8s-"))
    conn = real.conn()
    zoned = []
    for name, node in found.items():
        server = conn.compute.get_server(real.server(name).id)
        assert node["spec"]["providerID"] == f"openstack:///{server.id}", name
        labels = node["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == server.flavor.name, name
        assert labels["topology.kubernetes.io/zone"] == server.availability_zone, name
        # in the zone kubernetes_nodes names (a node that names none goes where Nova puts it)
        asked = (real.values["kubernetes_nodes"].get(name) or {}).get("az")
        if asked:
            zoned.append(name)
            assert server.availability_zone == asked, name
        assert labels["topology.kubernetes.io/region"] == "RegionOne", name
        nova = {a["addr"] for net in server.addresses.values() for a in net
                if a.get("OS-EXT-IPS:type", "fixed") == "fixed"}
        internal = [a["address"] for a in node["status"]["addresses"]
                    if a["type"] == "InternalIP"]
        # the kubelet's --node-ip first, as the cloud controller keeps it; none made up
        assert internal and set(internal) <= nova, (name, internal, nova)
        assert internal[0] == node["metadata"]["annotations"][
            "alpha.kubernetes.io/provided-node-ip"], name
        floating = {a["addr"] for net in server.addresses.values() for a in net
                    if a.get("OS-EXT-IPS:type") == "floating"}
        external = {a["address"] for a in node["status"]["addresses"]
                    if a["type"] == "ExternalIP"}
        assert external == floating, name
    # the kubeadm cluster puts a worker in the cloud's second zone
    assert zoned, "no node of the cluster names a zone"
