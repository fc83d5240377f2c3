"""Unit tests of the kos_kubectl execution module: nodes, drain, manifests, the API."""

import json

from tests.unit.modules import kubeadm_modules as loader
from tests.unit.modules.kubeadm_modules import MODULES, called_args, result

# the fixtures: every kubeadm-side module on one loader, as a minion loads them
kube_dir = loader.kube_dir
configure_loader_modules = loader.configure_loader_modules

kos_kubectl = MODULES["kos_kubectl"]


def test_etcd_members_are_the_nodes_of_kubeadms_etcd_pods(run_all):
    run_all.return_value = result(json.dumps({"items": [
        {"metadata": {"name": "etcd-k8s-cp-1"}, "spec": {"nodeName": "k8s-cp-1"}},
        {"metadata": {"name": "etcd-k8s-cp-2"}, "spec": {"nodeName": "k8s-cp-2"}}]}))
    assert kos_kubectl.etcd_members(kubeconfig="/a.conf") == ["k8s-cp-1", "k8s-cp-2"]
    assert called_args(run_all) == ["kubectl", "--kubeconfig", "/a.conf", "get", "pods",
                                    "--namespace", "kube-system", "-l",
                                    "component=etcd,tier=control-plane", "-o", "json"]


def test_evictable_pods_are_what_drain_evicts(run_all):
    """DaemonSet Pods, static Pods' mirrors and finished Pods stay (kubectl's drain
    filters, https://github.com/kubernetes/kubectl/blob/v0.31.0/pkg/drain/filters.go)."""
    def pod(name, owner=None, mirror=False, phase="Running"):
        meta = {"name": name, "namespace": "default"}
        if owner:
            meta["ownerReferences"] = [{"kind": owner, "name": "x"}]
        if mirror:
            meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
        return {"metadata": meta, "status": {"phase": phase}}

    run_all.return_value = result(json.dumps({"items": [
        pod("web-1", "ReplicaSet"), pod("bare"), pod("kube-router-x", "DaemonSet"),
        pod("kube-apiserver-k8s-cp-1", mirror=True), pod("job-1", "Job", phase="Succeeded")]}))
    assert kos_kubectl.evictable_pods("k8s-worker-2", kubeconfig="/a.conf") == [
        "default/bare", "default/web-1"]
    assert called_args(run_all) == ["kubectl", "--kubeconfig", "/a.conf", "get", "pods",
                                    "--all-namespaces", "--field-selector",
                                    "spec.nodeName=k8s-worker-2", "-o", "json"]


NODES = {"items": [
    {"metadata": {"name": "k8s-cp-1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
     "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]},
     "status": {"addresses": [{"type": "InternalIP", "address": "10.1.0.11"}],
                "conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"kubeletVersion": "v1.31.4"}}},
    {"metadata": {"name": "k8s-worker-1", "labels": {}},
     "spec": {"unschedulable": True},
     "status": {"addresses": [{"type": "InternalIP", "address": "10.1.0.21"}],
                "conditions": [{"type": "Ready", "status": "Unknown"}]}},
]}


def test_nodes_through_the_admin_kubeconfig(run_all, kube_dir):
    run_all.return_value = result(json.dumps(NODES))
    got = kos_kubectl.nodes()
    assert called_args(run_all) == ["kubectl", "--kubeconfig", str(kube_dir / "admin.conf"),
                                    "get", "nodes", "-o", "json"]
    assert got["k8s-cp-1"] == {"ready": True, "roles": ["control-plane"], "ip": "10.1.0.11",
                               "unschedulable": False, "taints": NODES["items"][0]["spec"]["taints"],
                               "version": "v1.31.4", "pod_cidr": None}
    assert got["k8s-worker-1"]["ready"] is False and got["k8s-worker-1"]["unschedulable"] is True
    # a node that has not reported its kubelet yet
    assert got["k8s-worker-1"]["version"] is None


def test_drain_delete_apply_arguments(run_all):
    kos_kubectl.drain("k8s-worker-2", timeout=120, kubeconfig="/a.conf")
    assert called_args(run_all) == ["kubectl", "--kubeconfig", "/a.conf", "drain", "k8s-worker-2",
                                    "--ignore-daemonsets", "--delete-emptydir-data", "--force",
                                    "--timeout=120s"]
    kos_kubectl.delete_node("k8s-worker-2", ignore_not_found=True, kubeconfig="/a.conf")
    assert called_args(run_all) == ["kubectl", "--kubeconfig", "/a.conf", "delete", "node",
                                    "k8s-worker-2", "--ignore-not-found"]
    run_all.return_value = result("configmap/kube-router-cfg created\n"
                                  "daemonset.apps/kube-router unchanged\n"
                                  "clusterrole.rbac.authorization.k8s.io/kube-router configured\n")
    assert kos_kubectl.apply("/k/addons/kube-router.yaml", kubeconfig="/a.conf") == {
        "configmap/kube-router-cfg": "created",
        "daemonset.apps/kube-router": "unchanged",
        "clusterrole.rbac.authorization.k8s.io/kube-router": "configured",
    }
    assert called_args(run_all) == ["kubectl", "--kubeconfig", "/a.conf", "apply", "-f",
                                    "/k/addons/kube-router.yaml"]


def test_pods_leave_out_those_on_their_way_out(run_all):
    """A rolling restart's old Pods linger, terminating, after the rollout is done."""
    def pod(name, node, ready=True, leaving=False):
        meta = {"name": name, "namespace": "kube-system"}
        if leaving:
            meta["deletionTimestamp"] = "2026-12-06T03:00:00Z"
        return {"metadata": meta, "spec": {"nodeName": node} if node else {},
                "status": {"phase": "Running" if node else "Pending",
                           "conditions": [{"type": "Ready", "status": str(ready)}]}}

    run_all.return_value = result(json.dumps({"items": [
        pod("coredns-a", "k8s-cp-1", leaving=True), pod("coredns-b", "k8s-cp-2"),
        pod("coredns-c", None, ready=False)]}))
    assert kos_kubectl.pods("k8s-app=kube-dns", kubeconfig="/a.conf") == {
        "coredns-b": {"node": "k8s-cp-2", "phase": "Running", "ready": True},
        "coredns-c": {"node": None, "phase": "Pending", "ready": False}}
    assert called_args(run_all) == ["kubectl", "--kubeconfig", "/a.conf", "get", "pods",
                                    "--namespace", "kube-system", "--selector",
                                    "k8s-app=kube-dns", "-o", "json"]


def test_rollout_restart_waits_for_the_rollout(run_all):
    run_all.return_value = result('deployment "coredns" successfully rolled out\n')
    assert "successfully rolled out" in kos_kubectl.rollout_restart(
        "coredns", timeout=90, kubeconfig="/a.conf")
    assert [c.args[0] for c in run_all.call_args_list][-2:] == [
        ["kubectl", "--kubeconfig", "/a.conf", "rollout", "restart", "deployment/coredns",
         "--namespace", "kube-system"],
        ["kubectl", "--kubeconfig", "/a.conf", "rollout", "status", "deployment/coredns",
         "--namespace", "kube-system", "--timeout=90s"]]


def test_object_exists(run_all):
    run_all.return_value = result("daemonset.apps/kube-router\n")
    assert kos_kubectl.object_exists("DaemonSet", "kube-router", namespace="kube-system",
                                 kubeconfig="/a.conf")
    assert called_args(run_all) == ["kubectl", "--kubeconfig", "/a.conf", "get", "DaemonSet",
                                    "kube-router", "-o", "name", "--ignore-not-found",
                                    "--namespace=kube-system"]
    run_all.return_value = result("")
    assert not kos_kubectl.object_exists("ClusterRole", "kube-router")


def test_api_ready_polls_until_the_server_answers(run_all):
    run_all.side_effect = [
        result("", 1, "The connection to the server 127.0.0.1:7443 was refused\n"),
        result(json.dumps({"clientVersion": {}, "serverVersion": {"gitVersion": "v1.31.4"}})),
    ]
    assert kos_kubectl.api_ready(timeout=5, interval=0) is True
    assert run_all.call_count == 2
    run_all.side_effect = None
    run_all.return_value = result("", 1, "refused")
    assert kos_kubectl.api_ready(timeout=0, interval=0) is False
