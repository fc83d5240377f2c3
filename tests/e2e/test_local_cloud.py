"""
``kos up --cloud local`` with 1 control plane + 2 workers (microk8s) and with 3 control
planes + 1 worker (kubeadm): every node joins, the network behaves as the OpenStack plan
says, a second orchestration changes nothing, and ``kos down`` leaves nothing behind.
"""

import ipaddress
import json
import re
import subprocess

import pytest

from kos.local import net as local_net
from tests.e2e.conftest import connects, leftovers, tcp_peer_seen_by_listener

pytestmark = pytest.mark.netns


def test_up_converges_every_node(cluster):
    assert cluster.up.returncode == 0, cluster.up.stderr[-3000:]
    assert "simulated" in cluster.up.stderr
    # data on stdout and nothing else (progress goes to stderr)
    assert json.loads(cluster.up.stdout)["bastion"] == cluster.outputs()["bastion_floating_ip"]
    status = cluster.kos("status", *cluster.args, "--json", timeout=300)
    assert status.returncode == 0, status.stderr[-2000:]
    doc = json.loads(status.stdout)
    assert doc["healthy"] is True
    assert doc["simulated"] is True
    assert doc["distribution"] == cluster.values["kubernetes_distribution"]
    nodes = {n["hostname"]: n for n in doc["nodes"]}
    assert sorted(nodes) == sorted(cluster.hostnames())
    kube = {h: n["kubernetes"] for h, n in nodes.items() if "kubernetes" in n}
    assert len(kube) == cluster.values["num_kube_nodes"]
    for hostname, k8s in kube.items():
        want = "control-plane" if hostname.startswith("k8s-cp-") else "worker"
        assert k8s == {"member": True, "ready": True, "role": want}, hostname
    for n in nodes.values():
        assert n["key"] == "accepted" and n["reachable"] and n["last_highstate"]["result"] == "ok"
    table = cluster.kos("status", *cluster.args, timeout=300)
    assert "simulated on the local cloud" in table.stdout


def test_hosts_files_list_every_other_host(cluster):
    domain = cluster.values["deploy_domain_name"]
    minions = cluster.outputs()["minions"]
    for hostname in cluster.hostnames():
        text = cluster.host(hostname).path("/etc/hosts").read_text()
        for other in minions.values():
            if other["hostname"] == hostname:
                continue
            line = f"{other['private_ip']} {other['hostname']}.{domain} {other['hostname']}"
            assert re.search(rf"^{re.escape(other['private_ip'])}\s.*\b{re.escape(other['hostname'])}\.{re.escape(domain)}\b",
                             text, re.M), f"{hostname}: /etc/hosts lacks {line}\n{text}"


def test_bastion_nat_lets_a_private_host_out(cluster):
    out = cluster.outputs()
    gateway = str(ipaddress.ip_network(cluster.values["public_cidr"])[1])
    worker = next(h for h in cluster.hostnames() if h.startswith("k8s-worker-"))
    # the worker has only a private address; the machine sees the bastion's public one
    seen = tcp_peer_seen_by_listener(gateway, cluster.netns(worker))
    assert seen == out["bastion_floating_ip"]


def test_only_the_bastion_leads_into_the_private_network(cluster):
    out = cluster.outputs()
    salt_ip = out["salt_master_private_ip"]
    # this machine's routes never lead into the private network through the local cloud
    route = subprocess.run(["ip", "-o", "route", "get", salt_ip], capture_output=True, text=True)
    assert local_net.uplink(cluster.name) not in route.stdout
    # a host on the public network that routes the private CIDR at the bastion gets
    # nowhere either: the bastion forwards only what the private side started
    name, link = f"kosx-{cluster.name}", f"kosx{cluster.name[-4:]}"
    public = ipaddress.ip_network(cluster.values["public_cidr"])
    ip = ["ip"]
    net = f"kos-{cluster.name}-net"
    try:
        subprocess.run([*ip, "netns", "add", name], check=True)
        subprocess.run([*ip, "-n", name, "link", "add", "eth0", "type", "veth", "peer", "name",
                        link, "netns", net], check=True)
        subprocess.run([*ip, "-n", net, "link", "set", link, "master", "pub", "up"], check=True)
        subprocess.run([*ip, "-n", name, "addr", "add", f"{public[200]}/{public.prefixlen}",
                        "dev", "eth0"], check=True)
        subprocess.run([*ip, "-n", name, "link", "set", "eth0", "up"], check=True)
        subprocess.run([*ip, "-n", name, "route", "add", cluster.values["private_cidr"], "via",
                        out["bastion_floating_ip"]], check=True)
        # the outsider itself works: it reaches the bastion's sshd
        assert connects(name, out["bastion_floating_ip"], 22)
        assert not connects(name, salt_ip, 22)
        assert not connects(name, salt_ip, 4506)
        for mid, node in out["kubernetes_nodes"].items():
            assert not connects(name, node["private_ip"], 22), mid
    finally:
        subprocess.run([*ip, "netns", "del", name], check=False)
        subprocess.run([*ip, "-n", net, "link", "del", link], check=False, capture_output=True)


def test_second_orchestration_changes_nothing(cluster):
    res = cluster.kos("converge", *cluster.args, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = re.findall(r"✓ (\S+): highstate ok \((\d+) states, (\d+) changed\)", res.stderr)
    assert sorted(m for m, _, _ in runs) == sorted(cluster.outputs()["minions"])
    assert {m: int(changed) for m, _, changed in runs if changed != "0"} == {}


def test_kubeconfig_points_at_the_first_control_plane(cluster):
    res = cluster.kos("kubeconfig", *cluster.args, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    text = (cluster.state / "kubeconfig").read_text()
    port = 16443 if cluster.values["kubernetes_distribution"] == "microk8s" else 6443
    assert f"server: https://{cluster.outputs()['api_floating_ip']}:{port}" in text


def test_down_leaves_nothing_behind(cluster):
    assert not leftovers(cluster.name, cluster.state) == []  # the cluster is there
    cluster.down = cluster.kos("down", *cluster.args, "--yes", timeout=600)
    assert cluster.down.returncode == 0, cluster.down.stderr[-3000:]
    assert leftovers(cluster.name, cluster.state) == []
    assert not (cluster.state / "local").exists()
