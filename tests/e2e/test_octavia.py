"""
The rehearsal cloud runs Octavia for real (issue 46, item 2): the amphora provider, an
amphora booted by the materialiser from the amphora image, reached by the controllers over
the management network, plugged into the cluster's networks by Nova's interface attach.
Here a load balancer is made in the kubeadm cluster's project the way Terraform makes the
API's (the VIP on the public subnet, a floating IP on it, members on the private subnet):
in front of a NodePort of CoreDNS's health endpoint on every worker, it answers this
machine through its floating IP, refuses a source outside its allowed_cidrs, keeps the VIP's
policy rule once the members' network is plugged, and leaves no amphora, port or floating
IP behind once deleted.
"""

import time
import urllib.request

import pytest
from kos_local import hosts as local_hosts
from kos_local import net as local_net

from tests.e2e.conftest import cloud
from tests.e2e.test_real_kubernetes import kubectl, kube_json, wait_for

pytestmark = pytest.mark.netns

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: kos-e2e-dns-health, namespace: kube-system}
spec:
  type: NodePort
  selector: {k8s-app: kube-dns}
  ports: [{name: health, port: 8080, targetPort: 8080, protocol: TCP}]
"""


def active(get, ident, timeout=300):
    def ready():
        obj = get(ident)
        if obj.provisioning_status == "ERROR":
            pytest.fail(f"{obj.name} went to ERROR")
        return obj.provisioning_status == "ACTIVE", obj.provisioning_status
    return wait_for(f"{ident} ACTIVE", ready, timeout=timeout, interval=2)


def answer(url):
    try:
        with urllib.request.urlopen(url, timeout=3) as res:
            return res.read().decode().strip()
    except OSError as exc:
        return f"no answer: {exc}"


@pytest.fixture
def health_nodeport(real):
    kubectl(real, "apply", "-f", "-", stdin=SERVICE)
    yield kube_json(real, "-n", "kube-system", "get", "service",
                    "kos-e2e-dns-health")["spec"]["ports"][0]["nodePort"]
    kubectl(real, "-n", "kube-system", "delete", "service", "kos-e2e-dns-health", check=False)


def test_an_amphora_load_balancer_answers_refuses_and_leaves_nothing(real, health_nodeport):
    conn = real.conn()
    name = real.name
    public = conn.network.find_subnet(f"{name}-public")
    private = conn.network.find_subnet(f"{name}-private")
    external = conn.network.find_network(real.values["external_network_name"])
    here = local_net.existing_plan(cloud().name).gateway
    workers = {n: i["private_ip"] for n, i in real.outputs()["kubernetes_nodes"].items()
               if i["role"] == "worker"}
    lbs = conn.load_balancer
    admin = cloud().admin()
    amphorae = []
    began = time.monotonic()
    lb = lbs.create_load_balancer(name="kos-e2e-lb", vip_subnet_id=public.id)
    fip = None
    try:
        active(lbs.get_load_balancer, lb.id)
        created = time.monotonic() - began
        listener = lbs.create_listener(name="kos-e2e-lb", loadbalancer_id=lb.id,
                                       protocol="TCP", protocol_port=8080,
                                       allowed_cidrs=[f"{here}/32"])
        active(lbs.get_listener, listener.id)
        pool = lbs.create_pool(name="kos-e2e-lb", listener_id=listener.id, protocol="TCP",
                               lb_algorithm="ROUND_ROBIN")
        active(lbs.get_pool, pool.id)
        lbs.create_health_monitor(pool_id=pool.id, type="TCP", delay=2, timeout=1,
                                  max_retries=1)
        active(lbs.get_load_balancer, lb.id)
        for host, address in sorted(workers.items()):
            lbs.create_member(pool, address=address, protocol_port=health_nodeport,
                              subnet_id=private.id, name=host.split(".")[0])
            active(lbs.get_load_balancer, lb.id)
        vip_port = lbs.get_load_balancer(lb.id).vip_port_id
        fip = conn.network.create_ip(floating_network_id=external.id, port_id=vip_port,
                                     description="kos e2e: Octavia")
        print(f"\nOctavia: load balancer ACTIVE {created:.0f}s after its create request")

        def through_it():
            said = answer(f"http://{fip.floating_ip_address}:8080/health")
            return said == "OK", said
        wait_for("CoreDNS's health through the load balancer's floating IP", through_it,
                 timeout=120)
        members = {m.address: m.operating_status for m in lbs.members(pool)}
        assert set(members) == set(workers.values()), members
        # the bastion's public address is no source the listener allows
        vip = lbs.get_load_balancer(lb.id).vip_address
        refused = real.host("bastion").run("curl", "-s", "-m", "5",
                                           f"http://{vip}:8080/health", check=False)
        assert refused.returncode != 0 and "OK" not in refused.stdout, refused
        # one amphora, a host the materialiser booted, in the cloud's service project
        amphorae = [a.compute_id for a in admin.load_balancer.amphorae(loadbalancer_id=lb.id)]
        assert len(amphorae) == 1 and admin.compute.get_server(amphorae[0]).status == "ACTIVE"
        # with the members' network plugged, answers from the VIP still leave by the VIP's
        # own table (kos_local.amphora): a node on the members' network gets them
        amphora = local_hosts.Machine(local_net.host_ns(cloud().name, amphorae[0]),
                                      cloud().root / "hosts" / amphorae[0])
        rules = amphora.run("ip", "netns", "exec", "amphora-haproxy", "ip", "rule").stdout
        assert f"from {vip} lookup 1" in rules, rules
    finally:
        if fip is not None:
            conn.network.delete_ip(fip)
        lbs.delete_load_balancer(lb.id, cascade=True, ignore_missing=True)
    wait_for("the load balancer gone", lambda: (
        lbs.find_load_balancer(lb.id) is None, "still there"), timeout=300)
    left = [p.name or p.id for p in conn.network.ports()
            if lb.id in (p.name or "") or (p.device_owner or "").startswith("Octavia")]
    assert left == [], left
    assert not [i for i in conn.network.ips() if i.description == "kos e2e: Octavia"]
    wait_for("the amphora's server gone", lambda: (
        all(admin.compute.find_server(a) is None for a in amphorae), amphorae), timeout=180)
