"""Unit tests of the kubeadm rolling upgrade's execution functions (argument lists, what they
read) and its states (kubeadm_upgrade), every state with test mode off and on."""

import json
from unittest.mock import create_autospec

import pytest
import salt.modules.aptpkg
import salt.modules.cmdmod
import salt.modules.config
import salt.modules.pillar
import salt.modules.systemd_service
from salt.exceptions import CommandExecutionError

from tests.unit.conftest import load
from tests.unit.modules import kubeadm_modules as loader
from tests.unit.modules.kubeadm_modules import result

kubeadm = load("modules", "kubeadm")
kos_kubectl = load("modules", "kos_kubectl")
kos_upgrade = load("modules", "kos_upgrade")
states = load("states", "kubeadm_upgrade")

APISERVER = """apiVersion: v1
kind: Pod
spec:
  containers:
  - command:
    - kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.32.1
    name: kube-apiserver
"""


# -- execution functions ---------------------------------------------------------------------


kube_dir = loader.kube_dir


@pytest.fixture
def module(run_all, kube_dir, tmp_path):
    config = {"kubeadm:kube_dir": str(kube_dir), "kos:state_dir": str(tmp_path / "kos")}
    return {
        "cmd.run_all": run_all,
        "config.get": create_autospec(salt.modules.config.get,
                                      side_effect=lambda k, d="": config.get(k, d)),
        "pillar.items": create_autospec(salt.modules.pillar.items, return_value={"kubeadm": {
            "version": "v1.32.1", "package_version": "1.32.1-1.1",
            "repo": {"url": "https://pkgs.k8s.io/core:/stable:/v1.32/deb/"}}}),
        "pkg.version": create_autospec(salt.modules.aptpkg.version, return_value={
            "kubeadm": "1.32.1-1.1", "kubelet": "1.31.4-1.1", "kubectl": ""}),
        "kubeadm.version": kubeadm.version,
        "kubeadm.has_local_files": kubeadm.has_local_files,
    }


def test_upgrade_apply_and_node_arguments(run_all):
    kos_upgrade.upgrade_apply("v1.32.1")
    assert run_all.call_args.args[0] == ["kubeadm", "upgrade", "apply", "v1.32.1", "--yes"]
    assert run_all.call_args.kwargs["python_shell"] is False
    kos_upgrade.upgrade_apply("v1.32.1", dry_run=True)
    assert run_all.call_args.args[0] == ["kubeadm", "upgrade", "apply", "v1.32.1", "--yes",
                                         "--dry-run"]
    kos_upgrade.upgrade_node()
    assert run_all.call_args.args[0] == ["kubeadm", "upgrade", "node"]
    kos_upgrade.upgrade_node(dry_run=True)
    assert run_all.call_args.args[0] == ["kubeadm", "upgrade", "node", "--dry-run"]


def test_upgrade_apply_failure_is_kubeadms_words(run_all):
    run_all.return_value = result("", 1, (
        "error execution phase preflight: the version argument is invalid due to these fatal "
        "errors:\n\n\t- Specified version to upgrade to \"v1.33.0\" is too high; kubeadm can "
        "upgrade only 1 minor version at a time\n"))
    with pytest.raises(CommandExecutionError, match="only 1 minor version at a time"):
        kos_upgrade.upgrade_apply("v1.33.0")


def test_uncordon_and_cluster_version(run_all, kube_dir):
    kos_kubectl.uncordon("k8s-worker-1")
    assert run_all.call_args.args[0] == ["kubectl", "--kubeconfig", str(kube_dir / "admin.conf"),
                                         "uncordon", "k8s-worker-1"]
    run_all.return_value = result("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration"
                                  "\nkubernetesVersion: v1.32.1\n")
    assert kos_kubectl.cluster_version() == "v1.32.1"
    assert run_all.call_args.args[0] == [
        "kubectl", "--kubeconfig", str(kube_dir / "admin.conf"), "get", "configmap",
        "kubeadm-config", "-n", "kube-system", "-o", "jsonpath={.data.ClusterConfiguration}"]


def test_node_is_read_by_name(run_all, kube_dir):
    run_all.return_value = result(json.dumps({
        "metadata": {"name": "k8s-worker-1", "labels": {}},
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "nodeInfo": {"kubeletVersion": "v1.32.1"}}}))
    kubelet = str(kube_dir / "kubelet.conf")
    got = kos_kubectl.node("k8s-worker-1", kubeconfig=kubelet)
    assert (got["version"], got["ready"], got["unschedulable"]) == ("v1.32.1", True, True)
    assert run_all.call_args.args[0] == ["kubectl", "--kubeconfig", kubelet, "get", "node",
                                         "k8s-worker-1", "-o", "json"]
    run_all.return_value = result("", 1, 'Error from server (NotFound): nodes "k8s-worker-9" '
                                         "not found\n")
    assert kos_kubectl.node("k8s-worker-9") is None
    run_all.return_value = result("", 1, "Error from server (Forbidden): nodes is forbidden\n")
    with pytest.raises(CommandExecutionError, match="Forbidden"):
        kos_kubectl.node("k8s-worker-1")


def test_upgrade_facts(run_all, kube_dir, tmp_path):
    run_all.return_value = result("v1.32.1\n")
    facts = kos_upgrade.upgrade_facts()
    assert facts == {"joined": False, "kubeadm": "v1.32.1", "control_plane": False,
                     "control_plane_version": None,
                     "packages": {"kubeadm": "1.32.1-1.1", "kubelet": "1.31.4-1.1",
                                  "kubectl": None},
                     "pillar": {"version": "v1.32.1", "package_version": "1.32.1-1.1",
                                "repo": {"url": "https://pkgs.k8s.io/core:/stable:/v1.32/deb/"},
                                "images": None},
                     "pending": None, "pending_cordoned": False}
    (kube_dir / "manifests").mkdir(parents=True)
    (kube_dir / "manifests" / "kube-apiserver.yaml").write_text(APISERVER)
    (tmp_path / "kos").mkdir()
    (tmp_path / "kos" / "kubeadm-upgrade-pending.json").write_text(
        '{"version": "v1.32.1", "cordoned": true}')
    facts = kos_upgrade.upgrade_facts()
    assert (facts["joined"], facts["control_plane"], facts["control_plane_version"]) == (
        True, True, "v1.32.1")
    assert (facts["pending"], facts["pending_cordoned"]) == ("v1.32.1", True)


# -- states ----------------------------------------------------------------------------------


@pytest.fixture(params=[False, True], ids=["apply", "test"])
def test_mode(request):
    return request.param


@pytest.fixture
def m():
    names = ["upgrade_facts", "package_versions", "cluster_version", "upgrade_apply",
             "upgrade_node", "nodes", "node", "uncordon"]
    where = {"kos_upgrade": kos_upgrade, "kos_kubectl": kos_kubectl}
    mocks = {}
    for n in names:
        name = next(f"{m}.{n}" for m, module in where.items() if hasattr(module, n))
        mocks[name] = create_autospec(getattr(where[name.split(".")[0]], n))
    installed = {"kubeadm": "1.31.4-1.1", "kubelet": "1.31.4-1.1", "kubectl": "1.31.4-1.1"}

    def install(name=None, refresh=False, fromrepo=None, skip_verify=False, debconf=None,
                pkgs=None, sources=None, reinstall=False, downloadonly=False, ignore_epoch=False,
                **kwargs):
        for item in pkgs:
            installed.update(item)
        return {}

    mocks["installed"] = installed
    mocks["kos_upgrade.package_versions"].side_effect = lambda: dict(installed)
    mocks["pkg.version"] = create_autospec(salt.modules.aptpkg.version,
                                           side_effect=lambda n, **kw: installed.get(n, ""))
    mocks["pkg.install"] = create_autospec(salt.modules.aptpkg.install, side_effect=install)
    mocks["pkg.hold"] = create_autospec(salt.modules.aptpkg.hold, return_value={})
    mocks["pkg.unhold"] = create_autospec(salt.modules.aptpkg.unhold, return_value={})
    mocks["service.restart"] = create_autospec(salt.modules.systemd_service.restart,
                                               return_value=True)
    config = {"kubeadm:kube_dir": "/etc/kubernetes"}
    mocks["config.get"] = create_autospec(salt.modules.config.get,
                                          side_effect=lambda k, d="": config.get(k, d))
    mocks["kubeadm.get_kube_dir"] = create_autospec(
        kubeadm.get_kube_dir, side_effect=lambda kube_dir=None: kube_dir or config.get(
            "kubeadm:kube_dir"))
    return mocks


@pytest.fixture
def configure_loader_modules(module, m, request):
    test = request.getfixturevalue("test_mode") if "test_mode" in request.fixturenames else False
    functions = {k: v for k, v in m.items() if "." in k}
    return {**{mod: {"__salt__": module, "__context__": {}}
               for mod in (kubeadm, kos_kubectl, kos_upgrade)},
            states: {"__salt__": functions, "__opts__": {"test": test},
                     "__context__": {}}}


def test_packages_moved_and_held(m, test_mode):
    ret = states.packages("1.32.1-1.1", ["kubelet", "kubectl"])
    assert ret["changes"] == {"kubelet": {"old": "1.31.4-1.1", "new": "1.32.1-1.1"},
                              "kubectl": {"old": "1.31.4-1.1", "new": "1.32.1-1.1"}}
    if test_mode:
        assert ret["result"] is None and not m["pkg.install"].called
        return
    assert ret["result"] is True, ret
    m["pkg.unhold"].assert_called_once_with(pkgs=["kubelet", "kubectl"])
    m["pkg.install"].assert_called_once_with(
        pkgs=[{"kubelet": "1.32.1-1.1"}, {"kubectl": "1.32.1-1.1"}], refresh=True)
    m["pkg.hold"].assert_called_once_with(pkgs=["kubelet", "kubectl"])
    assert m["installed"]["kubeadm"] == "1.31.4-1.1"
    again = states.packages("1.32.1-1.1", ["kubelet", "kubectl"])
    assert again["result"] is True and again["changes"] == {}


def test_upgraded_needs_the_kubeadm_package_first(m, test_mode):
    m["kos_upgrade.upgrade_facts"].return_value = {"kubeadm": "v1.31.4", "control_plane": True,
                                               "control_plane_version": "v1.31.4"}
    ret = states.upgraded("v1.32.1", node="k8s-cp-1", first=True)
    if test_mode:
        # the package step before it only predicted the move
        assert ret["result"] is None and ret["changes"] == {
            "kubeadm": {"old": "v1.31.4", "new": "v1.32.1"}}
    else:
        assert ret["result"] is False and "move its package first" in ret["comment"]
    assert not m["kos_upgrade.upgrade_apply"].called


def test_upgraded_first_control_plane_applies(m, test_mode):
    m["kos_upgrade.upgrade_facts"].return_value = {"kubeadm": "v1.32.1", "control_plane": True,
                                               "control_plane_version": "v1.31.4"}
    m["kos_kubectl.cluster_version"].return_value = "v1.31.4"
    ret = states.upgraded("v1.32.1", node="k8s-cp-1", first=True)
    assert ret["changes"] == {"cluster": {"old": "v1.31.4", "new": "v1.32.1"},
                              "control_plane": {"old": "v1.31.4", "new": "v1.32.1"}}
    if test_mode:
        assert ret["result"] is None
        m["kos_upgrade.upgrade_apply"].assert_called_once_with("v1.32.1", dry_run=True)
    else:
        assert ret["result"] is True and ret["comment"] == "kubeadm upgrade apply v1.32.1 ran"
        m["kos_upgrade.upgrade_apply"].assert_called_once_with("v1.32.1")


def test_upgraded_worker_runs_upgrade_node_until_its_kubelet_is_new(m, test_mode):
    m["kos_upgrade.upgrade_facts"].return_value = {"kubeadm": "v1.32.1", "control_plane": False,
                                               "control_plane_version": None}
    m["kos_kubectl.node"].return_value = {"version": "v1.32.1", "ready": True}
    ret = states.upgraded("v1.32.1", node="k8s-worker-1")
    assert ret["result"] is True and ret["changes"] == {}
    m["kos_kubectl.node"].assert_called_with("k8s-worker-1",
                                         kubeconfig="/etc/kubernetes/kubelet.conf")
    m["kos_kubectl.node"].return_value = {"version": "v1.31.4", "ready": True}
    ret = states.upgraded("v1.32.1", node="k8s-worker-1")
    assert ret["result"] is (None if test_mode else True)
    m["kos_upgrade.upgrade_node"].assert_called_once_with(**({"dry_run": True} if test_mode else {}))


def test_kubelet_restarted_until_the_node_reports_its_package(m, test_mode):
    reports = [{"version": "v1.31.4", "ready": True}, {"version": "v1.32.1", "ready": True}]
    m["kos_kubectl.node"].side_effect = lambda name, kubeconfig=None: reports[
        min(m["service.restart"].call_count, 1)]
    ret = states.kubelet_restarted("k8s-worker-1", "v1.32.1", timeout=5)
    assert ret["changes"] == {"kubelet": {"old": "v1.31.4", "new": "v1.32.1"}}
    if test_mode:
        assert ret["result"] is None and not m["service.restart"].called
    else:
        assert ret["result"] is True, ret
        m["service.restart"].assert_called_once_with("kubelet")
        assert states.kubelet_restarted("k8s-worker-1", "v1.32.1")["changes"] == {}
    # the kubelet's credential may read its own Node only (the Node authorizer)
    assert m["kos_kubectl.node"].call_args.args == ("k8s-worker-1",)
    assert m["kos_kubectl.node"].call_args.kwargs == {"kubeconfig": "/etc/kubernetes/kubelet.conf"}


def test_node_uncordoned(m, test_mode):
    m["kos_kubectl.nodes"].side_effect = [{"k8s-cp-2": {"unschedulable": True}},
                                      {"k8s-cp-2": {"unschedulable": False}}]
    ret = states.node_uncordoned("k8s-cp-2")
    assert ret["changes"] == {"schedulable": {"old": False, "new": True}}
    if test_mode:
        assert ret["result"] is None and not m["kos_kubectl.uncordon"].called
    else:
        assert ret["result"] is True
        m["kos_kubectl.uncordon"].assert_called_once_with("k8s-cp-2", kubeconfig=None)


def test_node_ready_fails_with_what_the_node_reports(m, test_mode):
    m["kos_kubectl.node"].return_value = {"version": "v1.31.4", "ready": True}
    ret = states.node_ready("k8s-cp-2", "v1.32.1", timeout=0)
    assert ret["changes"] == {}
    assert ret["result"] is (None if test_mode else False)
    if not test_mode:
        assert "it reports v1.31.4" in ret["comment"]


FORBIDDEN = CommandExecutionError(
    'Error from server (Forbidden): nodes "k8s-cp-1" is forbidden: User "kubernetes-admin" '
    'cannot get resource "nodes" in API group "" at the cluster scope')


def test_node_ready_waits_through_an_api_server_that_is_not_ready_yet(m, monkeypatch):
    # behind haproxy, a restarted API server answers before its RBAC informers synced
    monkeypatch.setattr(states.time, "sleep", lambda s: None)
    m["kos_kubectl.node"].side_effect = [FORBIDDEN, FORBIDDEN, {"version": "v1.32.1", "ready": True}]
    ret = states.node_ready("k8s-cp-1", "v1.32.1", timeout=30)
    assert ret["result"] is True, ret
    assert m["kos_kubectl.node"].call_count == 3


def test_node_ready_reports_the_error_that_lasted_past_the_timeout(m):
    m["kos_kubectl.node"].side_effect = FORBIDDEN
    ret = states.node_ready("k8s-cp-1", "v1.32.1", timeout=0)
    assert ret["result"] is False
    assert ret["comment"].startswith("reading node k8s-cp-1 failed: Error from server (Forbidden)")


def test_node_uncordoned_retries_api_errors_then_gives_up_with_the_last(m, monkeypatch):
    monkeypatch.setattr(states.time, "sleep", lambda s: None)
    m["kos_kubectl.nodes"].side_effect = [FORBIDDEN, {"k8s-cp-1": {"unschedulable": True}},
                                      {"k8s-cp-1": {"unschedulable": False}}]
    ret = states.node_uncordoned("k8s-cp-1", timeout=30)
    assert ret["result"] is True and ret["changes"] == {"schedulable": {"old": False, "new": True}}
    m["kos_kubectl.uncordon"].assert_called_once_with("k8s-cp-1", kubeconfig=None)
    m["kos_kubectl.nodes"].side_effect = FORBIDDEN
    ret = states.node_uncordoned("k8s-cp-1", timeout=0)
    assert ret["result"] is False and "Forbidden" in ret["comment"]
