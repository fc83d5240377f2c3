"""
Two clusters side by side on the one rehearsal cloud, each in its own project, as tenants
share any OpenStack: one project neither lists nor reaches the other's servers. In
``make test`` the microk8s cluster's tests run in one process while the kubeadm cluster
comes up and runs in another; this test, on the microk8s cluster, looks at the kubeadm one.
"""

import time

import pytest
from openstack import exceptions as sdk_exceptions

from kos_local import net as local_net
from tests.e2e.conftest import CLUSTERS, Listener, admin, cloud, connects

pytestmark = pytest.mark.netns

OTHER = CLUSTERS["kubeadm"]["cluster_name"]
# a port in the NodePort range, which a cluster's security group opens between its nodes
NODE_PORT = 30998


def others_servers(timeout=900):
    """The other cluster's servers once they are ACTIVE, as the cloud's admin sees them."""
    deadline = time.monotonic() + timeout
    while True:
        if OTHER not in cloud().clusters():
            pytest.skip(f"{OTHER} is not on the cloud beside this cluster (it runs beside it "
                        "only when the two run in two processes, as make test runs them)")
        conn = admin()
        project = conn.identity.find_project(OTHER, domain_id="default")
        servers = [s for s in conn.compute.servers(all_projects=True, project_id=project.id)
                   if s.status == "ACTIVE"] if project else []
        if any(s.name == f"{OTHER}-salt" for s in servers):
            return servers
        if time.monotonic() > deadline:
            pytest.fail(f"{OTHER}'s servers were not ACTIVE after {timeout}s")
        time.sleep(10)


def test_a_project_neither_lists_nor_reaches_another_projects_servers(cluster):
    if cluster.values["kubernetes_distribution"] != "microk8s":
        pytest.skip("looked at from the microk8s cluster, which goes first")
    assert cluster.up.returncode == 0, cluster.failed_up()
    theirs = others_servers()
    conn = cluster.conn()
    # the API: this project's credential lists its own servers only, and finds none of theirs
    mine = {s.id: s for s in conn.compute.servers()}
    assert mine and all(s.name.startswith(f"{cluster.name}-") for s in mine.values())
    assert not {s.id for s in theirs} & set(mine)
    for server in theirs[:3]:
        with pytest.raises(sdk_exceptions.NotFoundException):
            conn.compute.get_server(server.id)
    assert conn.network.find_network(f"{OTHER}-private") is None
    # the network: a worker reaches a NodePort on its own control plane, not on theirs,
    # where their own worker reaches it
    out = cluster.outputs()
    worker = next(h for h in cluster.hostnames() if h.startswith("k8s-worker-"))
    own_cp = out["kubernetes_nodes"]["k8s-cp-1.kos.internal"]["private_ip"]
    with Listener(cluster.netns("k8s-cp-1"), own_cp, NODE_PORT):
        assert connects(cluster.netns(worker), own_cp, NODE_PORT)
    # nodes their tests neither stop, replace nor retire while this runs (the API's
    # failover stops k8s-cp-3 and k8s-cp-1, scale-in retires k8s-worker-2)
    target, peer = (next(s for s in theirs if s.name == f"{OTHER}-{h}")
                    for h in ("k8s-cp-2", "k8s-worker-1"))
    address = target.addresses[f"{OTHER}-private"][0]["addr"]
    name = cloud().name
    with Listener(local_net.host_ns(name, target.id), address, NODE_PORT):
        assert connects(local_net.host_ns(name, peer.id), address, NODE_PORT)
        assert not connects(cluster.netns(worker), address, NODE_PORT, timeout=2)
