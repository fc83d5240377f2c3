"""
``kos down`` of the package's clusters, last (the modules before it share them): first the
cluster with the cloud kept, whose project must then be empty, with the kubeconfigs kos
wrote gone; then the cloud, leaving nothing on this machine.
"""

import time

import pytest

from tests.e2e.conftest import first_of_run, leftovers

pytestmark = pytest.mark.netns


def seed_what_kubernetes_leaves(cluster):
    """What the cloud controller manager and the Cinder CSI driver leave behind them."""
    conn = cluster.conn()
    private = conn.network.find_network(f"{cluster.name}-private")
    port = conn.network.create_port(network_id=private.id, name="kos-debris-vip")
    ip = conn.network.create_ip(
        floating_network_id=conn.network.find_network("public").id,
        description=f"Floating IP for Kubernetes external service default/web from cluster "
                    f"{cluster.name}")
    vol = conn.block_storage.create_volume(
        size=1, name="pvc-kos-data", metadata={"cinder.csi.openstack.org/cluster": cluster.name})
    conn.block_storage.wait_for_status(vol, "available", wait=120)
    return port, ip, vol


def test_down_leaves_nothing_in_the_cloud_nor_on_this_machine(cluster):
    assert leftovers(cluster.name, cluster.state) != []  # the cluster is there
    if first_of_run(cluster):  # once: kos down finds it the same way on both
        seed_what_kubernetes_leaves(cluster)
    written = [p for p in (cluster.extra.get("kubeconfig"), cluster.state / "kubeconfig") if p]
    assert any(p.exists() for p in written)
    # first the cluster, the cloud kept: its project must be empty
    kept = cluster.kos("down", *cluster.args, "--yes", env={"KOS_LOCAL_KEEP_CLOUD": "1"},
                       timeout=900)
    assert kept.returncode == 0, kept.stderr[-3000:]
    conn = cluster.conn()
    project = conn.current_project_id
    assert list(conn.compute.servers()) == []
    assert [p.id for p in conn.network.ports(project_id=project)
            if not (p.device_owner or "").startswith("network:")] == []
    assert list(conn.network.ips(project_id=project)) == []
    assert list(conn.block_storage.volumes()) == []
    assert list(conn.network.routers(project_id=project)) == []
    assert list(conn.network.networks(project_id=project)) == []
    # the admin kubeconfigs kos wrote went with the cluster
    assert "admin kubeconfig" in kept.stderr
    assert [p for p in written if p.exists()] == []
    assert not (cluster.state / "kubeconfigs.json").exists()
    # then the cloud: nothing of it stays on this machine
    time.sleep(1)
    cluster.down = cluster.kos("down", *cluster.args, "--yes", timeout=900)
    assert cluster.down.returncode == 0, cluster.down.stderr[-3000:]
    assert leftovers(cluster.name, cluster.state) == []
    assert not (cluster.state / "local").exists()
