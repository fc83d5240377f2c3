"""
The steps of the kubeadm rolling upgrade (orch.upgrade, as
https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/ describes it), each
idempotent so that a re-run finishes a node whose upgrade stopped half-way: the Kubernetes
packages moved to one version and held there, ``kubeadm upgrade apply``/``node``, the
kubelet restarted on its new package, the node Ready on that version, uncordoned.
"""

import os
import time

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_state

__virtualname__ = "kubeadm_upgrade"


def __virtual__():
    # Loads without the kubeadm command too: a test run predicts instead of failing as
    # "state not found"; each state says what is missing.
    return __virtualname__


def _plain(version):
    """``v1.32.1`` and ``1.32.1-1.1`` (a Debian package version) as ``1.32.1``."""
    return str(version or "").lstrip("v").split("-", 1)[0] or None


def packages(name, pkgs, refresh=True):
    """
    Ensure the Kubernetes packages ``pkgs`` (``[kubeadm]``, ``[kubelet, kubectl]``) are
    installed at package version ``name`` (``1.32.1-1.1``) and held there, as
    https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/
    does by hand (unhold, install the exact version, hold): an unattended upgrade
    must not move them again.

    refresh
        Read the package lists first (the repository line may have just changed).
    """
    ret = kos_state.ret(name)
    if "pkg.version" not in __salt__:
        return kos_state.fail(ret, "no package manager Salt knows on this node (pkg.version)")
    try:
        # kos_upgrade reads every version at once; before kubeadm is installed, pkg does
        if "kos_upgrade.package_versions" in __salt__:
            have = __salt__["kos_upgrade.package_versions"]()
        else:
            have = {p: __salt__["pkg.version"](p) or None for p in pkgs}
        changes = {p: {"old": have.get(p), "new": name} for p in pkgs if have.get(p) != name}
        if not changes:
            ret["comment"] = f"{', '.join(pkgs)} at {name}"
            return ret
        if kos_state.predicted(ret, __opts__, changes,
                               f"{', '.join(sorted(changes))} would move to {name} and be held"):
            return ret
        __salt__["pkg.unhold"](pkgs=list(pkgs))
        __salt__["pkg.install"](pkgs=[{p: name} for p in pkgs], refresh=refresh)
        __salt__["pkg.hold"](pkgs=list(pkgs))
        now = {p: __salt__["pkg.version"](p) or None for p in pkgs}
        wrong = {p: v for p, v in now.items() if v != name}
        if wrong:
            return kos_state.fail(ret, f"installing {name} left {wrong}")
        ret["comment"] = f"{', '.join(sorted(changes))} moved to {name} and held"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"moving {', '.join(pkgs)} to {name} failed: {exc}")
    return ret


def upgraded(name, node, first=False, kubeconfig=None):
    """
    Ensure this node's part of the cluster is at version ``name`` (``v1.32.1``), with the
    kubeadm package already at that version: on the first control plane ``kubeadm
    upgrade apply`` (the stored cluster version and this node's control-plane instance),
    on any other node ``kubeadm upgrade node`` (a control plane's instance, every node's
    kubelet configuration). A worker keeps no trace of it but its kubelet, so a worker
    whose kubelet does not run ``name`` yet runs ``upgrade node``, which is idempotent
    (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/#upgrade-worker-nodes). Test mode runs kubeadm's ``--dry-run``.

    node
        This node's Kubernetes name.

    first
        This node is the first control plane: ``apply``.
    """
    ret = kos_state.ret(name)
    if "kos_upgrade.upgrade_facts" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm",
                                        f"upgrade this node to {name}")
    try:
        facts = __salt__["kos_upgrade.upgrade_facts"]()
        if _plain(facts["kubeadm"]) != _plain(name):
            if __opts__["test"]:
                # in a test run the package step before this one only predicted its move
                ret["result"] = None
                ret["changes"] = {"kubeadm": {"old": facts["kubeadm"], "new": name}}
                ret["comment"] = (f"kubeadm upgrade would run once the kubeadm package is at "
                                  f"{name} (it is {facts['kubeadm']})")
                return ret
            return kos_state.fail(ret, f"kubeadm is {facts['kubeadm']}, not {name}: move its "
                                       "package first (kubeadm_upgrade.packages)")
        if first:
            have = {"cluster": __salt__["kos_kubectl.cluster_version"](kubeconfig=kubeconfig),
                    "control_plane": facts["control_plane_version"]}
        elif facts["control_plane"]:
            have = {"control_plane": facts["control_plane_version"]}
        else:
            have = {"kubelet": (_own_node(node) or {}).get("version")}
        changes = {k: {"old": v, "new": name} for k, v in have.items() if _plain(v) != _plain(name)}
        if not changes:
            ret["comment"] = f"this node's part of the cluster is at {name}"
            return ret
        ret["changes"] = changes
        command = f"kubeadm upgrade apply {name}" if first else "kubeadm upgrade node"
        if __opts__["test"]:
            if first:
                __salt__["kos_upgrade.upgrade_apply"](name, dry_run=True)
            else:
                __salt__["kos_upgrade.upgrade_node"](dry_run=True)
            ret["result"] = None
            ret["comment"] = f"{command} would run (its dry run passed)"
            return ret
        if first:
            __salt__["kos_upgrade.upgrade_apply"](name)
        else:
            __salt__["kos_upgrade.upgrade_node"]()
        ret["comment"] = f"{command} ran"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"upgrading this node to {name} failed: {exc}")
    return ret


def _kubelet_conf():
    return os.path.join(__salt__["kubeadm.get_kube_dir"](), "kubelet.conf")


def _own_node(name):
    """Node ``name`` (this one) as the API shows it to the kubelet's credential, which may
    read its own Node only (the Node authorizer)."""
    return __salt__["kos_kubectl.node"](name, kubeconfig=_kubelet_conf())


def _wait_node(name, version, timeout, kubeconfig, interval=1):
    """The node's record once it is Ready on ``version``, or the last one seen. An error
    counts as "not yet": behind the local haproxy, the API server of a control plane
    kubeadm has just restarted may answer before its informers have synced (refusing even
    kubernetes-admin) until the health check takes it out. An error at the deadline is
    raised."""
    deadline = time.monotonic() + timeout
    node = None
    while True:
        try:
            node = __salt__["kos_kubectl.node"](name, kubeconfig=kubeconfig)
        except CommandExecutionError:
            if time.monotonic() >= deadline:
                raise
        else:
            if node and node["ready"] and _plain(node["version"]) == _plain(version):
                return node, True
            if time.monotonic() >= deadline:
                return node, False
        time.sleep(interval)


def kubelet_restarted(name, version, timeout=300):
    """
    Ensure the kubelet of this node (Kubernetes node ``name``) runs its package's version
    ``version``: a kubelet keeps reporting the version it started with, so a node whose
    kubelet package moved has it restarted (``service.restart kubelet``, systemd reloads
    its units first) and is seen Ready on ``version`` within ``timeout`` seconds, through
    the kubelet's own credential.
    """
    ret = kos_state.ret(name)
    if "kos_upgrade.upgrade_facts" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm",
                                        f"restart the kubelet of {name}")
    try:
        node = _own_node(name)
        running = (node or {}).get("version")
        if node and node["ready"] and _plain(running) == _plain(version):
            ret["comment"] = f"the kubelet of {name} runs {running}"
            return ret
        if kos_state.predicted(ret, __opts__, {"kubelet": {"old": running, "new": version}},
                               f"the kubelet of {name} would be restarted on {version}"):
            return ret
        __salt__["service.restart"]("kubelet")
        node, ready = _wait_node(name, version, timeout, _kubelet_conf())
        if not ready:
            return kos_state.fail(
                ret, f"the kubelet of {name} was restarted but the node is not Ready on "
                f"{version} after {timeout} s (it reports {(node or {}).get('version')}, "
                f"ready: {(node or {}).get('ready')})")
        ret["comment"] = f"the kubelet of {name} restarted on {version}"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"restarting the kubelet of {name} failed: {exc}")
    return ret


def node_ready(name, version, timeout=300, kubeconfig=None):
    """
    Ensure node ``name`` is Ready on kubelet version ``version`` (run on a control plane),
    waiting up to ``timeout`` seconds. Changes nothing.
    """
    ret = kos_state.ret(name)
    if "kos_upgrade.upgrade_facts" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm",
                                        f"see node {name} Ready on {version}")
    try:
        if __opts__["test"]:
            node = __salt__["kos_kubectl.node"](name, kubeconfig=kubeconfig)
            ready = bool(node and node["ready"] and _plain(node["version"]) == _plain(version))
        else:
            node, ready = _wait_node(name, version, timeout, kubeconfig)
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"reading node {name} failed: {exc}")
    if ready:
        ret["comment"] = f"node {name} is Ready on {node['version']}"
    elif __opts__["test"]:
        ret["result"] = None
        ret["comment"] = f"node {name} is not Ready on {version} yet"
    else:
        ret["result"] = False
        ret["comment"] = (f"node {name} is not Ready on {version} after {timeout} s (it reports "
                          f"{(node or {}).get('version')}, ready: {(node or {}).get('ready')})")
    return ret


def node_uncordoned(name, kubeconfig=None, timeout=60, interval=1):
    """
    Ensure node ``name`` takes Pods (run on a control plane): ``kubectl uncordon``. API
    errors are retried for ``timeout`` seconds, as ``node_ready`` waits through them: the
    request may reach a control plane's API server that is not ready yet.
    """
    ret = kos_state.ret(name)
    if "kos_upgrade.upgrade_facts" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm", f"uncordon node {name}")
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _uncordon(ret, name, kubeconfig)
        except CommandExecutionError as exc:
            if time.monotonic() >= deadline:
                return kos_state.fail(ret, f"uncordoning {name} failed: {exc}")
        time.sleep(interval)


def _uncordon(ret, name, kubeconfig):
    node = __salt__["kos_kubectl.nodes"](kubeconfig=kubeconfig).get(name)
    if node is None:
        return kos_state.fail(ret, f"node {name} is not registered")
    if not node["unschedulable"]:
        ret["comment"] = f"node {name} takes Pods"
        return ret
    if kos_state.predicted(ret, __opts__, {"schedulable": {"old": False, "new": True}},
                           f"node {name} would be uncordoned"):
        return ret
    __salt__["kos_kubectl.uncordon"](name, kubeconfig=kubeconfig)
    if __salt__["kos_kubectl.nodes"](kubeconfig=kubeconfig).get(name, {}).get("unschedulable"):
        return kos_state.fail(
            ret, f"kubectl uncordon {name} ran but the node is still cordoned")
    ret["comment"] = f"node {name} uncordoned"
    return ret
