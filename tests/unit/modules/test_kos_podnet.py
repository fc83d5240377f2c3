"""Unit tests of the kos_podnet execution module: the routed pod network."""

import json

import pytest
from salt.exceptions import CommandExecutionError

from tests.unit.modules import kubeadm_modules as loader
from tests.unit.modules.kubeadm_modules import MODULES, result

# the fixtures: every kubeadm-side module on one loader, as a minion loads them
kube_dir = loader.kube_dir
configure_loader_modules = loader.configure_loader_modules

kos_podnet = MODULES["kos_podnet"]


ROUTED_NODES = {"items": [
    {"metadata": {"name": name, "labels": {}}, "spec": {"podCIDR": cidr} if cidr else {},
     "status": {"addresses": [{"type": "InternalIP", "address": ip}], "conditions": []}}
    for name, ip, cidr in (("k8s-cp-1", "10.1.0.11", "10.244.0.0/24"),
                           ("k8s-worker-1", "10.1.0.21", "10.244.1.0/24"),
                           ("k8s-worker-2", "10.1.0.22", "10.244.2.0/24"),
                           # registered, no CIDR yet: no route to it
                           ("k8s-worker-3", "10.1.0.23", None))
]}


def routed_cli(routes, egress_present):
    """kubectl, ip and iptables as this node sees them; records what changes."""
    def run(cmd, **kwargs):
        if cmd[0] == "kubectl":
            return result(json.dumps(ROUTED_NODES))
        if cmd[:3] == ["ip", "-j", "route"]:
            return result(json.dumps([{"dst": d, "gateway": g, "protocol": "149"}
                                      for d, g in routes.items()]))
        if cmd[:4] == ["iptables", "-t", "nat", "-C"]:
            return result(retcode=0 if egress_present else 1)
        return result()
    return run


@pytest.fixture
def routed(run_all, kube_dir, tmp_path):
    kube_dir.mkdir(parents=True)
    (kube_dir / "kubelet.conf").write_text("apiVersion: v1\n")
    return tmp_path / "net.d" / "10-kos-routed.conflist"


def changing_calls(run_all):
    return [c.args[0] for c in run_all.call_args_list
            if c.args[0][0] in ("ip", "iptables") and c.args[0][1:3] not in (["-j", "route"],)
            and "-C" not in c.args[0]]


@pytest.mark.parametrize("test", [False, True], ids=["apply", "test"])
def test_sync_pod_network_routes_every_other_node_and_drops_gone_ones(run_all, kube_dir, routed,
                                                                      test):
    # one route right, one via an old address, one to a node that is gone
    run_all.side_effect = routed_cli({"10.244.1.0/24": "10.1.0.21",
                                      "10.244.2.0/24": "10.1.0.99",
                                      "10.244.9.0/24": "10.1.0.29"}, egress_present=False)
    got = kos_podnet.sync_pod_network("k8s-cp-1", "10.244.0.0/16", cni_conf=str(routed), test=test)
    assert got["pod_cidr"] == "10.244.0.0/24"
    # the kubelet's own credential reads the nodes
    assert run_all.call_args_list[0].args[0][:3] == ["kubectl", "--kubeconfig",
                                                     str(kube_dir / "kubelet.conf")]
    assert got["changes"]["cni"] == {"old": None, "new": "10.244.0.0/24"}
    assert got["changes"]["routes"]["new"] == {"10.244.1.0/24": "10.1.0.21",
                                               "10.244.2.0/24": "10.1.0.22"}
    assert got["changes"]["egress"]["old"] is None
    if test:
        assert changing_calls(run_all) == [] and not routed.exists()
        return
    assert changing_calls(run_all) == [
        ["ip", "route", "replace", "10.244.2.0/24", "via", "10.1.0.22", "proto", "149"],
        ["ip", "route", "del", "10.244.9.0/24", "proto", "149"],
        ["iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "10.244.0.0/16", "!", "-d",
         "10.244.0.0/16", "-m", "comment", "--comment", "kos: pod egress", "-j", "MASQUERADE"],
    ]
    conf = json.loads(routed.read_text())
    bridge = conf["plugins"][0]
    assert bridge["type"] == "bridge" and bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.0.0/24"}]]


def test_sync_pod_network_in_line_changes_nothing(run_all, routed):
    run_all.side_effect = routed_cli({"10.244.0.0/24": "10.1.0.11",
                                      "10.244.2.0/24": "10.1.0.22"}, egress_present=True)
    routed.parent.mkdir(parents=True)
    routed.write_text(kos_podnet._cni_conf("10.244.1.0/24"))
    got = kos_podnet.sync_pod_network("k8s-worker-1", "10.244.0.0/16", cni_conf=str(routed))
    assert got == {"pod_cidr": "10.244.1.0/24", "changes": {}}
    assert changing_calls(run_all) == []


def test_sync_pod_network_needs_the_nodes_own_cidr_and_kubelet(run_all, kube_dir, routed):
    run_all.side_effect = routed_cli({}, egress_present=True)
    with pytest.raises(CommandExecutionError, match="no pod CIDR"):
        kos_podnet.sync_pod_network("k8s-worker-3", "10.244.0.0/16", cni_conf=str(routed))
    (kube_dir / "kubelet.conf").unlink()
    with pytest.raises(CommandExecutionError, match="has not joined"):
        kos_podnet.sync_pod_network("k8s-worker-1", "10.244.0.0/16", cni_conf=str(routed))
