"""
``kos down`` of the package's clusters, last (the modules before it share them). A
cluster goes with its project, its clouds.yaml entry and the kubeconfigs kos wrote, and
nothing of it stays in the cloud; the cloud stays while another cluster is on it, and goes
with the last one, leaving nothing on this machine.
"""

import pytest
import yaml

from kos_local import net as local_net
from tests.e2e.conftest import admin, cloud, first_of_run, leftovers
from tests.e2e.test_real_kubernetes import wait_for

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


def in_project(conn, project):
    """Everything of ``project`` the cloud still holds, as its admin sees it."""
    found = {
        "servers": [s.name for s in conn.compute.servers(all_projects=True, project_id=project)],
        "ports": [p.id for p in conn.network.ports(project_id=project)],
        "floating ips": [f.floating_ip_address for f in conn.network.ips(project_id=project)],
        "volumes": [v.name or v.id for v in conn.block_storage.volumes(all_projects=True,
                                                                        project_id=project)],
        "routers": [r.name for r in conn.network.routers(project_id=project)],
        "load balancers": [lb.name for lb in conn.load_balancer.load_balancers(
            project_id=project)],
        "networks": [n.name for n in conn.network.networks(project_id=project)],
        # all of them, filtered here: asked for one project's, Neutron makes its default group
        "security groups": [g.name for g in conn.network.security_groups()
                            if g.project_id == project],
    }
    return {k: v for k, v in found.items() if v}


def test_down_leaves_nothing_of_the_cluster_and_the_last_takes_the_cloud(cluster):
    assert leftovers(cluster.name, cluster.state) != []  # the cluster is there
    if first_of_run(cluster):  # once: kos down finds it the same way on both
        seed_what_kubernetes_leaves(cluster)
    written = [p for p in (cluster.extra.get("kubeconfig"), cluster.state / "kubeconfig") if p]
    assert any(p.exists() for p in written)
    project = cluster.conn().current_project_id
    others = set(cloud().clusters()) - {cluster.name}
    ours = {s.id for s in cluster.conn().compute.servers()}
    servers_of_others = {s.id for s in admin().compute.servers(all_projects=True)
                         if s.project_id != project}
    # the amphorae are the load-balancer service's servers, in its own project
    lbs = {lb.id for lb in admin().load_balancer.load_balancers(project_id=project)}
    amphorae = {a.compute_id for a in admin().load_balancer.amphorae()
                if a.loadbalancer_id in lbs and a.compute_id}
    servers_of_others -= amphorae

    cluster.down = cluster.kos("down", *cluster.args, "--yes", timeout=900)
    assert cluster.down.returncode == 0, cluster.down.stderr[-3000:]
    # the admin kubeconfigs kos wrote went with the cluster, and its clouds.yaml entry
    assert "admin kubeconfig" in cluster.down.stderr
    assert [p for p in written if p.exists()] == []
    assert not (cluster.state / "kubeconfigs.json").exists()
    clouds = cluster.kos.cwd / "config" / "openstack" / "clouds.yaml"
    assert f"kos-local-{cluster.name}" not in (yaml.safe_load(clouds.read_text()) or {}).get(
        "clouds", {})
    assert leftovers(cluster.name, cluster.state) == []
    if others & set(cloud().clusters()):
        # the cloud stays for the others, with nothing of this project in it, and theirs intact
        conn = admin()
        assert in_project(conn, project) == {}
        assert conn.identity.find_project(cluster.name, domain_id="default") is None
        assert servers_of_others <= {s.id for s in conn.compute.servers(all_projects=True)}
        assert not amphorae & {s.id for s in conn.compute.servers(all_projects=True)}
        assert "the rehearsal cloud stays up for" in cluster.down.stderr
        # and its servers' hosts are gone from this machine
        c = cloud()
        def hosts_gone():
            left = [i for i in ours | amphorae if (c.root / "hosts" / i).exists()
                    or local_net.namespaces(local_net.host_ns(c.name, i))]
            return not left, left
        # the amphorae's go once Nova's delete, which Octavia's own flow sent, reaches them
        wait_for("the servers' hosts gone from this machine", hosts_gone, timeout=120)
    else:
        # the last: the cloud went, and nothing of it stays on this machine
        assert "and the rehearsal cloud destroyed" in cluster.down.stderr
        assert not cloud().root.exists()
