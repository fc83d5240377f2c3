"""
Services of type LoadBalancer through the real OpenStack cloud-controller-manager and the
rehearsal cloud's real Octavia (issue 46, items 2 and 3). The CCM makes a Service's load
balancer in one request, listener, pool, health monitor and members together: an amphora
booted by the materialiser from the amphora image, plugged into the cluster's networks by
Nova's interface attach, the VIP on the public subnet with a floating IP, the members on
the private subnet. Here a Service in front of CoreDNS's health endpoint gets an address
that answers this machine, refuses a source outside its ``loadBalancerSourceRanges``,
keeps the VIP's policy rule once the members' network is plugged, and once deleted leaves
no load balancer, amphora, port or floating IP behind.
"""

import json
import time
import urllib.request

import pytest
from kos.ccm import SERVICE_LB_ANNOTATION
from kos_local import hosts as local_hosts
from kos_local import net as local_net

from tests.e2e.conftest import cloud
from tests.e2e.test_real_kubernetes import kube_json, kubectl, wait_for

pytestmark = pytest.mark.netns

NAME = "kos-e2e-lb"
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: %s, namespace: kube-system}
spec:
  type: LoadBalancer
  selector: {k8s-app: kube-dns}
  loadBalancerSourceRanges: ["%s/32"]
  ports: [{name: health, port: 8080, targetPort: 8080, protocol: TCP}]
"""
# kubeadm labels its control planes so; the CCM leaves such nodes out of every pool
# (k8s.io/cloud-provider, controllers/service)
EXCLUDED = "node.kubernetes.io/exclude-from-external-load-balancers"


def answer(url):
    try:
        with urllib.request.urlopen(url, timeout=3) as res:
            return res.read().decode().strip()
    except OSError as exc:
        return f"no answer: {exc}"


def test_a_service_of_type_load_balancer_answers_refuses_and_leaves_nothing(real):
    conn = real.conn()
    admin = cloud().admin()
    here = local_net.existing_plan(cloud().name).gateway
    nodes = kube_json(real, "get", "nodes")["items"]
    members_wanted = {a["address"] for n in nodes if EXCLUDED not in n["metadata"]["labels"]
                      for a in n["status"]["addresses"] if a["type"] == "InternalIP"}
    began = time.monotonic()
    kubectl(real, "apply", "-f", "-", stdin=SERVICE % (NAME, here))
    lb_id, amphorae, address = None, [], None
    try:
        def addressed():
            svc = kube_json(real, "-n", "kube-system", "get", "service", NAME)
            ingress = svc.get("status", {}).get("loadBalancer", {}).get("ingress")
            events = kubectl(real, "-n", "kube-system", "get", "events", "--field-selector",
                             f"involvedObject.name={NAME}", "-o",
                             "custom-columns=R:.reason,M:.message", "--no-headers",
                             check=False).stdout.strip().splitlines()
            return bool(ingress), (svc, ingress) if ingress else events[-3:]
        svc, ingress = wait_for("the Service's load balancer address", addressed,
                                timeout=600, interval=5)
        address = ingress[0]["ip"]
        lb_id = svc["metadata"]["annotations"][SERVICE_LB_ANNOTATION]
        print(f"\nService LoadBalancer: {address} {time.monotonic() - began:.0f}s "
              "after the Service was applied")

        def through_it():
            said = answer(f"http://{address}:8080/health")
            return said == "OK", said
        wait_for("CoreDNS's health through the Service's address", through_it, timeout=180)

        lbs = conn.load_balancer
        lb = lbs.get_load_balancer(lb_id)
        assert lb.provisioning_status == "ACTIVE", lb.provisioning_status
        # Octavia's listener and pool lists take no load balancer filter: the load
        # balancer names its own
        [listener] = [lbs.get_listener(x["id"]) for x in lb.listeners]
        assert listener.allowed_cidrs == [f"{here}/32"], listener.allowed_cidrs
        [pool] = [lbs.get_pool(x["id"]) for x in lb.pools]
        assert pool.health_monitor_id, "the CCM made the pool without a health monitor"
        members = {m.address for m in lbs.members(pool)}
        assert members == members_wanted, (members, members_wanted)
        fip = next(conn.network.ips(floating_ip_address=address))
        assert fip.port_id == lb.vip_port_id

        # kos status reads the API's pool from its own load balancer, this one beside it
        res = real.kos("status", *real.args, "--json", timeout=300)
        api = json.loads(res.stdout)["api_endpoint"]["load_balancer"]
        assert api["members"] == dict.fromkeys(["k8s-cp-1", "k8s-cp-2", "k8s-cp-3"],
                                               "ONLINE"), (api, res.stderr[-1000:])

        # the bastion, on the VIP's own subnet, is no source the Service allows
        refused = real.host("bastion").run("curl", "-s", "-m", "5",
                                           f"http://{lb.vip_address}:8080/health", check=False)
        assert refused.returncode != 0 and "OK" not in refused.stdout, refused
        # one amphora, a host the materialiser booted, in the cloud's service project;
        # with the members' network plugged, answers from the VIP still leave by the VIP's
        # own table (kos_local.amphora)
        amphorae = [a.compute_id for a in admin.load_balancer.amphorae()
                    if a.loadbalancer_id == lb_id]
        assert len(amphorae) == 1 and admin.compute.get_server(amphorae[0]).status == "ACTIVE"
        amphora = local_hosts.Machine(local_net.host_ns(cloud().name, amphorae[0]),
                                      cloud().root / "hosts" / amphorae[0])
        rules = amphora.run("ip", "netns", "exec", "amphora-haproxy", "ip", "rule").stdout
        assert f"from {lb.vip_address} lookup 1" in rules, rules
    finally:
        kubectl(real, "-n", "kube-system", "delete", "service", NAME, "--wait=true",
                timeout=300, check=False)

    lbs = conn.load_balancer
    if lb_id:
        wait_for("the Service's load balancer gone", lambda: (
            lbs.find_load_balancer(lb_id) is None, "still there"), timeout=300)
    wait_for("the amphora's server gone", lambda: (
        all(admin.compute.find_server(a) is None for a in amphorae), amphorae), timeout=180)
    if lb_id:
        # its VIP port (named by the load balancer) and its amphora's (by the server), not
        # the API load balancer's beside it; Nova deletes the ports it made for the amphora
        # only as it deletes the server, after Octavia calls the load balancer gone
        wait_for("the Service's ports gone", lambda: (
            not (left := [p.name or p.id for p in conn.network.ports()
                          if lb_id in (p.name or "") or p.device_id in amphorae]), left),
            timeout=60)
    if address:
        assert not list(conn.network.ips(floating_ip_address=address))
