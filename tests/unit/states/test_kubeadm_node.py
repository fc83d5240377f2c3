"""Unit tests of the kubeadm_node states (manifests, certificates, images, the routed
pod network): every state with test mode off and on."""

from unittest.mock import create_autospec

import pytest
from salt.exceptions import CommandExecutionError

from tests.unit.states import kubeadm_states as shared
from tests.unit.conftest import load
from tests.unit.states.kubeadm_states import (
    MODULES,
    expect_applied,
)

states = load("states", "kubeadm_node")

# the fixtures: every kubeadm state module on one __salt__ of mocked execution functions
test_mode, state_dir, m = shared.test_mode, shared.state_dir, shared.m
configure_loader_modules = shared.configure_loader_modules


# --- manifest_applied ------------------------------------------------------------------------

MANIFEST = """apiVersion: v1
kind: ServiceAccount
metadata:
  name: kube-router
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kube-router
"""


def test_manifest_applied(m, tmp_path, test_mode):
    path = tmp_path / "kube-router.yaml"
    path.write_text(MANIFEST)
    record = tmp_path / "applied" / "kube-router.yaml.sha256"
    m["kos_kubectl.object_exists"].return_value = False
    m["kos_kubectl.apply"].return_value = {"serviceaccount/kube-router": "created",
                                       "clusterrole.rbac.authorization.k8s.io/kube-router":
                                           "unchanged"}
    ret = states.manifest_applied(str(path), record=str(record), kubeconfig="/a.conf")
    expect_applied(ret, test_mode)
    if test_mode:
        m["kos_kubectl.apply"].assert_not_called()
        assert [c.args for c in m["kos_kubectl.object_exists"].call_args_list] == [
            ("ServiceAccount", "kube-router"), ("ClusterRole", "kube-router")]
        assert not record.exists()
    else:
        assert ret["changes"] == {"objects": {"serviceaccount/kube-router": "created"}}
        assert record.read_text()


def test_manifest_unchanged(m, tmp_path, test_mode):
    import hashlib

    path = tmp_path / "kube-router.yaml"
    path.write_text(MANIFEST)
    record = tmp_path / "kube-router.yaml.sha256"
    record.write_text(hashlib.sha256(MANIFEST.encode()).hexdigest())
    m["kos_kubectl.object_exists"].return_value = True
    m["kos_kubectl.apply"].return_value = {"serviceaccount/kube-router": "unchanged"}
    ret = states.manifest_applied(str(path), record=str(record))
    assert ret["result"] is True and ret["changes"] == {}, ret


def test_manifest_predicted_while_the_cluster_does_not_answer(m, tmp_path):
    states.__opts__["test"] = True
    path = tmp_path / "x.yaml"
    path.write_text(MANIFEST)
    m["kos_kubectl.object_exists"].side_effect = CommandExecutionError(
        "error: stat /etc/kubernetes/admin.conf: no such file or directory")
    ret = states.manifest_applied(str(path), record=str(tmp_path / "r"))
    assert ret["result"] is None and "would be applied" in ret["comment"]


def test_manifest_apply_failure(m, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(MANIFEST)
    m["kos_kubectl.apply"].side_effect = CommandExecutionError("The connection to the server was refused")
    ret = states.manifest_applied(str(path), record=str(tmp_path / "r"))
    assert ret["result"] is False and "refused" in ret["comment"]


# --- certificates_renewed --------------------------------------------------------------------

def certs(**days):
    """What kos_certs.certificates returns: ``name=days`` leaves (None: missing), one CA."""
    return {"certificates": {name.replace("_", "-"): None if d is None else
                             {"days": d, "externally_managed": name == "external"}
                             for name, d in days.items()},
            "authorities": {"ca": {"days": 3000, "externally_managed": False}}}


@pytest.fixture
def cert_mocks(m):
    for name in ("certificates", "renew_certificates", "restart_control_plane"):
        m[f"kos_certs.{name}"] = create_autospec(getattr(MODULES["kos_certs"], name))
    m["kos_certs.renew_certificates"].return_value = ["apiserver", "admin.conf"]
    m["kos_certs.restart_control_plane"].return_value = ["etcd.yaml", "kube-apiserver.yaml"]
    return m


def test_certificates_renewed_leaves_certificates_with_time_left(cert_mocks):
    cert_mocks["kos_certs.certificates"].return_value = certs(apiserver=200, admin_conf=31,
                                                            super_admin_conf=None)
    ret = states.certificates_renewed("control-plane certificates", within_days=30)
    assert ret["result"] is True and ret["changes"] == {}
    assert "the fewest: 31" in ret["comment"]
    cert_mocks["kos_certs.renew_certificates"].assert_not_called()


def test_certificates_renewed_renews_and_restarts_when_one_is_due(cert_mocks, test_mode):
    cert_mocks["kos_certs.certificates"].side_effect = [
        certs(apiserver=29, admin_conf=200, external=3), certs(apiserver=365, admin_conf=365)]
    ret = states.certificates_renewed("control-plane certificates", within_days=30,
                                      restart_wait=0, kube_dir="/k")
    expect_applied(ret, test_mode)
    # an externally managed certificate is its CA's owner's to renew
    if test_mode:
        assert ret["changes"] == {"certificates": {"old": {"apiserver": 29}, "new": "renewed"}}
        cert_mocks["kos_certs.renew_certificates"].assert_not_called()
        cert_mocks["kos_certs.restart_control_plane"].assert_not_called()
    else:
        assert ret["changes"] == {"certificates": {"old": {"apiserver": 29},
                                                   "new": {"apiserver": 365}}}
        cert_mocks["kos_certs.renew_certificates"].assert_called_once_with("all", kube_dir="/k")
        cert_mocks["kos_certs.restart_control_plane"].assert_called_once_with(
            wait=0, timeout=120, kube_dir="/k")
        assert "restarted etcd, kube-apiserver" in ret["comment"]


def test_certificates_renewed_with_force_renews_whatever_is_left(cert_mocks):
    cert_mocks["kos_certs.certificates"].side_effect = [certs(apiserver=300), certs(apiserver=365)]
    ret = states.certificates_renewed("c", force=True, restart_wait=0)
    assert ret["changes"] == {"certificates": {"old": {"apiserver": 300}, "new": {"apiserver": 365}}}


def test_certificates_renewed_fails_when_the_api_does_not_come_back(cert_mocks):
    cert_mocks["kos_certs.certificates"].return_value = certs(apiserver=1)
    cert_mocks["kos_certs.restart_control_plane"].side_effect = CommandExecutionError(
        "the API did not answer within 120 s after the control plane restarted")
    ret = states.certificates_renewed("c", restart_wait=0)
    assert ret["result"] is False and ret["changes"] == {}
    assert "did not answer within 120 s" in ret["comment"]


# --- images_imported -------------------------------------------------------------------------

@pytest.fixture
def archives(tmp_path):
    d = tmp_path / "images"
    d.mkdir()
    for name in ("etcd", "pause"):
        (d / f"{name}.tar").write_bytes(b"")
    return d


def refs_of(path):
    return {"etcd.tar": ["registry.k8s.io/etcd:3.5.15-0"],
            "pause.tar": ["registry.k8s.io/pause:3.10"]}[path.rsplit("/", 1)[1]]


def test_images_imported_imports_only_what_containerd_lacks(m, archives, test_mode):
    m["kos_images.images"].return_value = ["registry.k8s.io/pause:3.10"]
    m["kos_images.archive_images"].side_effect = refs_of
    ret = states.images_imported(str(archives))
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"images": {"old": [], "new": ["registry.k8s.io/etcd:3.5.15-0"]}}
    if test_mode:
        m["kos_images.import_images"].assert_not_called()
    else:
        m["kos_images.import_images"].assert_called_once_with(str(archives / "etcd.tar"), "k8s.io")


def test_images_imported_nothing_to_do_and_bad_directories(m, archives, tmp_path):
    m["kos_images.images"].return_value = ["registry.k8s.io/etcd:3.5.15-0",
                                        "registry.k8s.io/pause:3.10"]
    m["kos_images.archive_images"].side_effect = refs_of
    ret = states.images_imported(str(archives))
    assert ret["result"] is True and ret["changes"] == {}
    ret = states.images_imported(str(tmp_path / "nowhere"))
    assert ret["result"] is False and "no image archives" in ret["comment"]
    m["kos_images.archive_images"].side_effect = CommandExecutionError("x.tar is not an image archive")
    ret = states.images_imported(str(archives))
    assert ret["result"] is False and "not an image archive" in ret["comment"]


# --- pod_network_routed ----------------------------------------------------------------------

@pytest.fixture
def kubelet_conf(tmp_path):
    kube = tmp_path / "kube"
    kube.mkdir()
    (kube / "kubelet.conf").write_text("")
    return kube


def test_pod_network_routed_applies_what_the_sync_reports(m, kubelet_conf, test_mode):
    changes = {"routes": {"old": {}, "new": {"10.244.1.0/24": "10.1.0.21"}}}
    m["kos_podnet.sync_pod_network"].return_value = {"pod_cidr": "10.244.0.0/24",
                                                  "changes": changes}
    ret = states.pod_network_routed("k8s-cp-1", "10.244.0.0/16", kube_dir=str(kubelet_conf))
    expect_applied(ret, test_mode)
    assert ret["changes"] == changes
    m["kos_podnet.sync_pod_network"].assert_called_once_with(
        "k8s-cp-1", "10.244.0.0/16", kube_dir=str(kubelet_conf), test=test_mode)


def test_pod_network_routed_waits_for_the_nodes_cidr(m, kubelet_conf, monkeypatch):
    monkeypatch.setattr(states.time, "sleep", lambda s: None)
    m["kos_podnet.sync_pod_network"].side_effect = [
        CommandExecutionError("the API gives node k8s-cp-1 no pod CIDR (yet)"),
        {"pod_cidr": "10.244.0.0/24", "changes": {}}]
    ret = states.pod_network_routed("k8s-cp-1", "10.244.0.0/16", kube_dir=str(kubelet_conf))
    assert ret["result"] is True and ret["changes"] == {} and "matches" in ret["comment"]
    m["kos_podnet.sync_pod_network"].side_effect = CommandExecutionError("ip: RTNETLINK failed")
    ret = states.pod_network_routed("k8s-cp-1", "10.244.0.0/16", kube_dir=str(kubelet_conf))
    assert ret["result"] is False and "RTNETLINK" in ret["comment"]


def test_pod_network_routed_reads_the_configured_directory(m, kubelet_conf, test_mode):
    m["config"]["kubeadm:kube_dir"] = str(kubelet_conf)
    m["kos_podnet.sync_pod_network"].return_value = {"pod_cidr": "10.244.0.0/24", "changes": {}}
    ret = states.pod_network_routed("k8s-cp-1", "10.244.0.0/16")
    assert ret["result"] is True and "matches" in ret["comment"], ret
    m["kos_podnet.sync_pod_network"].assert_called_once_with(
        "k8s-cp-1", "10.244.0.0/16", kube_dir=None, test=test_mode)


def test_pod_network_routed_before_the_join(m, tmp_path, test_mode):
    ret = states.pod_network_routed("k8s-worker-1", "10.244.0.0/16", kube_dir=str(tmp_path))
    if test_mode:
        assert ret["result"] is None and "once it joined" in ret["comment"]
    else:
        assert ret["result"] is False and "has not joined" in ret["comment"]
    m["kos_podnet.sync_pod_network"].assert_not_called()


# --- replicas_spread -------------------------------------------------------------------------

CP_TAINT = [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]


def node_rec(ready=True, unschedulable=False, taints=()):
    return {"ready": ready, "roles": [], "ip": None, "unschedulable": unschedulable,
            "taints": list(taints), "version": "v1.31.4", "pod_cidr": None}


def dns(*nodes):
    return {f"coredns-{i}": {"node": n, "phase": "Running", "ready": True}
            for i, n in enumerate(nodes)}


def spread():
    return states.replicas_spread("coredns", "k8s-app=kube-dns", kubeconfig="/a.conf")


@pytest.mark.parametrize("placed, nodes, why", [
    (dns("cp-1"), {"cp-1": node_rec(), "w-1": node_rec()}, "fewer than two replicas"),
    (dns("cp-1", "w-1"), {"cp-1": node_rec(), "w-1": node_rec()}, "already spread"),
    (dns(None, None), {"cp-1": node_rec()}, "not scheduled yet"),
    # a worker that is down, cordoned or tainted against CoreDNS cannot take a replica; another
    # control plane can (CoreDNS tolerates their taint)
    (dns("cp-1", "cp-1"), {"cp-1": node_rec(taints=CP_TAINT), "w-1": node_rec(ready=False),
                           "w-2": node_rec(unschedulable=True),
                           "w-3": node_rec(taints=[{"key": "gpu", "effect": "NoSchedule"}])},
     "no other node can take one"),
])
def test_replicas_left_where_they_are(m, test_mode, placed, nodes, why):
    m["kos_kubectl.pods"].return_value = placed
    m["kos_kubectl.nodes"].return_value = nodes
    ret = spread()
    assert ret["result"] is True and ret["changes"] == {} and why in ret["comment"], ret
    m["kos_kubectl.rollout_restart"].assert_not_called()


def test_replicas_all_on_one_node_are_restarted_apart(m, test_mode):
    nodes = {"cp-1": node_rec(taints=CP_TAINT), "cp-2": node_rec(taints=CP_TAINT),
             "w-1": node_rec()}
    m["kos_kubectl.pods"].side_effect = [dns("cp-1", "cp-1"), dns("cp-2", "w-1")]
    m["kos_kubectl.nodes"].return_value = nodes
    ret = spread()
    if test_mode:
        assert ret["result"] is None and "every replica is on cp-1" in ret["comment"]
        assert ret["changes"]["nodes"]["old"] == ["cp-1"]
        m["kos_kubectl.rollout_restart"].assert_not_called()
    else:
        assert ret["result"] is True, ret
        assert ret["changes"] == {"nodes": {"old": ["cp-1"], "new": ["cp-2", "w-1"]}}
        m["kos_kubectl.rollout_restart"].assert_called_once_with(
            "coredns", "kube-system", timeout=180, kubeconfig="/a.conf")


def test_replicas_the_scheduler_puts_together_again_fail_the_state(m):
    m["kos_kubectl.pods"].side_effect = [dns("cp-1", "cp-1"), dns("cp-1", "cp-1")]
    m["kos_kubectl.nodes"].return_value = {"cp-1": node_rec(), "w-1": node_rec()}
    ret = spread()
    assert ret["result"] is False and "every replica on cp-1 again" in ret["comment"]
    assert ret["changes"] == {"nodes": {"old": ["cp-1"], "new": ["cp-1"]}}


def test_replicas_not_readable_fail_the_state(m):
    m["kos_kubectl.pods"].side_effect = CommandExecutionError("connection refused")
    ret = spread()
    assert ret["result"] is False and "cannot read where coredns runs" in ret["comment"]
