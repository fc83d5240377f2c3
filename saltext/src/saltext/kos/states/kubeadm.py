"""
Converge a kubeadm node's cluster membership: the first control plane initialized, the
other nodes joined with the credential issued for each of them (``kubeadm_join``), and
the way out (drain, reset, delete the Node, remove a gone control plane's etcd member).
What a member runs besides its membership (manifests, images, certificates, the routed
pod network) is ``kubeadm_node``'s.

Join tokens and certificate keys never appear in a state's changes or comment.
"""

import os
import time

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_state

__virtualname__ = "kubeadm"

INIT_RECORD = "kubeadm-init.json"


def __virtual__():
    # Loads without the kubeadm command too: a test run on a node whose packages are
    # not installed yet predicts instead of failing as "state not found".
    return __virtualname__


def _api_ready(timeout, kube_dir):
    """The API answers through this node's admin kubeconfig (the control-plane endpoint)."""
    kwargs = {"kubeconfig": os.path.join(kube_dir, "admin.conf")} if kube_dir else {}
    return __salt__["kos_kubectl.api_ready"](timeout=timeout, **kwargs)


def initialized(name, upload_certs=False, timeout=120, ignore_preflight_errors=None,
                kube_dir=None, record=None):
    """
    Ensure this node is the initialized first control plane (``kubeadm init
    --config NAME``): the API answers through the control-plane endpoint and the
    cluster holds ``kubeadm-config`` and ``cluster-info`` (``kubeadm.init_status``).
    Changes to the configuration after init are an upgrade, not this state's business.

    An init this state started and never saw finish (it timed out, the minion was
    killed) is reset (``kubeadm reset -f``) and run again; the comment says what was
    missing. A control plane this state did not start is never reset: when its API
    does not answer the state fails instead.

    In test mode ``kubeadm init --dry-run`` runs when the configuration file exists,
    so preflight problems (swap, ports in use, a node that joined elsewhere) show
    before anything changes.

    name
        The kubeadm configuration file.

    upload_certs
        Upload the control-plane certificates at init (``--upload-certs``). The
        ``kubeadm_join.credential_present`` state uploads them when a join needs them.

    timeout
        Seconds to wait for the API to answer through the control-plane endpoint
        (after init, or on an initialized node that is still starting).

    record
        Where the state notes an init it started until it sees it finish (default
        ``<kos:state_dir>/kubeadm-init.json``).
    """
    ret = kos_state.ret(name)
    if "kubeadm.init_status" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm", "run kubeadm init")
    record = record or kos_state.state_file(__salt__, INIT_RECORD)
    made = None  # what ran before a failure
    try:
        status = __salt__["kubeadm.init_status"](kube_dir)
        ours = kos_state.read_json(record) is not None
        if status["started"] and not status["answers"] and not ours:
            # an initialized control plane may just be starting (a reboot): wait for it
            if _api_ready(timeout, kube_dir):
                status = __salt__["kubeadm.init_status"](kube_dir)
        if status["initialized"]:
            if ours and not __opts__["test"]:
                kos_state.remove(record)
            ret["comment"] = "the control plane is initialized"
            return ret
        if status["started"] and not ours:
            return kos_state.fail(
                ret, f"{status['reason']}; this node holds a control plane that this state "
                "did not initialize, so it is not reset: run `kubeadm reset -f` on it if no "
                "cluster lives there")
        redo = status["started"]
        old = f"half-initialized: {status['reason']}" if redo else None
        ret["changes"] = {"control_plane": {"old": old, "new": "initialized"}}
        if __opts__["test"]:
            ret["result"] = None
            if redo:
                ret["comment"] = f"kubeadm reset and init would run again ({status['reason']})"
            elif os.path.exists(name):
                __salt__["kubeadm.init"](
                    name, dry_run=True, ignore_preflight_errors=ignore_preflight_errors,
                    kube_dir=kube_dir,
                )
                ret["comment"] = "kubeadm init would run (its --dry-run passed)"
            else:
                ret["comment"] = f"kubeadm init would run once {name} is written"
            return ret
        # noted before kubeadm starts: a run killed halfway is recognised as ours next time
        kos_state.write_json(record, {"started": int(time.time())})
        if redo:
            __salt__["kubeadm.reset"]()
            made = {"control_plane": {"old": old, "new": "reset (kubeadm reset -f)"}}
        __salt__["kubeadm.init"](
            name, upload_certs=upload_certs, ignore_preflight_errors=ignore_preflight_errors,
            kube_dir=kube_dir,
        )
        made = {"control_plane": {"old": old, "new": "kubeadm init ran, not seen initialized"}}
        if not _api_ready(timeout, kube_dir):
            return kos_state.fail(
                ret, f"kubeadm init ran, but the API does not answer through the "
                f"control-plane endpoint after {timeout}s", made,
            )
        status = __salt__["kubeadm.init_status"](kube_dir)
        if not status["initialized"]:
            return kos_state.fail(
                ret, f"kubeadm init reported success but {status['reason']}", made)
        kos_state.remove(record)
        ret["comment"] = (f"kubeadm reset and init done again ({old})" if redo
                          else "kubeadm init done")
    except (OSError, CommandExecutionError) as exc:
        return kos_state.fail(ret, f"kubeadm init failed: {exc}", made)
    return ret


def joined(name, api_server_endpoint, role="worker", node_name=None, advertise_address=None,
           bind_port=None, cri_socket=None, kubelet_extra_args=None, discovery_timeout=None,
           mine_function=None, min_remaining=60, timeout=120, stacked_etcd=True,
           kube_dir=None):
    """
    Ensure this node joined the cluster of the first control plane ``name``: its Node
    is registered and, for a control plane with stacked etcd, it runs an etcd member
    (``kubeadm.join_status``). The token, CA hash and (control planes) certificate key
    come from the mine, where ``name`` published them for this minion alone
    (``kubeadm_join.credential_present``), so they never pass through rendered SLS; a credential
    issued for another role is refused.

    A join that stopped halfway (a control plane whose etcd step failed, files of a
    join that never registered the node) is reset (``kubeadm reset -f``) and done
    again; the comment says what was missing. When the API does not answer, a node
    with a ``kubelet.conf`` is left alone and the state fails: it may well be a member.
    A failed join reports kubeadm's message (an expired token: ``could not find a JWS
    signature``; a stale key: ``Secret "kubeadm-certs" was not found``).

    api_server_endpoint
        The control-plane endpoint (this node's local load balancer).

    role
        ``worker`` or ``control_plane``.

    node_name
        The Kubernetes node name (default: the host name, as kubeadm picks it).

    mine_function
        The mine entry to read (default ``kos_join_<this minion id>``).

    min_remaining
        Refuse published credentials with less than this many seconds left.

    timeout
        Seconds to wait, after the join, for the node to show as joined (a control
        plane's etcd Pod, the API through the local load balancer).

    stacked_etcd
        Control planes run etcd members (False with external etcd).
    """
    ret = kos_state.ret(name)
    if role not in ("worker", "control_plane"):
        return kos_state.fail(ret, f"role must be worker or control_plane, not {role!r}")
    if "kubeadm.init_status" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm",
                                        f"join the cluster of {name} as {role}")
    control_plane = role == "control_plane"
    node_name = node_name or __grains__["host"].lower()

    def status():
        return __salt__["kubeadm.join_status"](node_name, control_plane=control_plane,
                                               stacked_etcd=stacked_etcd, kube_dir=kube_dir)

    made = None  # what ran before a failure
    try:
        before = status()
        if before["joined"]:
            ret["comment"] = "this node has joined the cluster"
            return ret
        # a kubelet.conf (where the execution module looks for it): maybe a member
        if before["started"] and not before["answers"] and os.path.exists(os.path.join(
                __salt__["kubeadm.get_kube_dir"](kube_dir), "kubelet.conf")):
            return kos_state.fail(
                ret, f"cannot tell whether this node has joined: {before['reason']}; "
                "a member is never reset on a guess")
        redo = before["started"]
        old = f"half-joined: {before['reason']}" if redo else None
        ret["changes"] = {"cluster": {"old": old, "new": f"joined {name} as {role}"}}
        if __opts__["test"]:
            # No --dry-run here: kubeadm's join dry run still runs discovery with the
            # token, and the credentials may not be published yet.
            ret["result"] = None
            ret["comment"] = (f"would reset and join the cluster of {name} as {role} again "
                              f"({before['reason']})" if redo
                              else f"would join the cluster of {name} as {role}")
            return ret
        me = __opts__["id"]
        mine_function = mine_function or kos_state.mine_key(me)
        info, problem = kos_state.issued_credential(
            __salt__, name, me, role, mine_function, "token", min_remaining)
        if problem:
            return kos_state.fail(ret, problem)
        now = time.time()
        key = None
        if control_plane:
            key = info.get("certificate_key")
            if not key:
                return kos_state.fail(
                    ret, f"the credential {name} issued for {me} holds no certificate key")
            left = info.get("key_expires")
            if left is not None and left - now < min_remaining:
                return kos_state.fail(
                    ret, f"the certificate key {name} issued expires in {int(left - now)}s; "
                    "run the orchestration again to issue a new one",
                )
        if redo:
            __salt__["kubeadm.reset"]()
            made = {"cluster": {"old": old, "new": "reset (kubeadm reset -f)"}}
        __salt__["kubeadm.join"](
            api_server_endpoint, info["token"], info["ca_cert_hash"],
            control_plane=control_plane, certificate_key=key, node_name=node_name,
            advertise_address=advertise_address, bind_port=bind_port, cri_socket=cri_socket,
            kubelet_extra_args=kubelet_extra_args, discovery_timeout=discovery_timeout,
        )
        made = {"cluster": {"old": old, "new": "kubeadm join ran, not seen joined"}}
        deadline = time.time() + float(timeout)
        after = status()
        while not after["joined"] and time.time() < deadline:
            time.sleep(1)
            after = status()
        if not after["joined"]:
            return kos_state.fail(
                ret, f"kubeadm join reported success but {after['reason']}", made)
        if control_plane and not _api_ready(timeout, kube_dir):
            return kos_state.fail(ret, f"joined, but the API does not answer after {timeout}s",
                                  ret["changes"])
        ret["comment"] = (f"reset and joined the cluster of {name} as {role} again ({old})"
                          if redo else f"joined the cluster of {name} as {role}")
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"kubeadm join failed: {exc}", made)
    return ret


def node_drained(name, timeout=None, kubeconfig=None):
    """
    Ensure node ``name`` is drained (run on a control plane), the first step of taking
    a node out: cordoned, and no Pod left on it that ``kubectl drain`` evicts
    (``kos_kubectl.evictable_pods``). A drain that timed out leaves a cordoned node with
    Pods on it; the next run drains again. A node that is not registered is left alone.

    timeout
        Seconds to wait for Pod evictions.
    """
    ret = kos_state.ret(name)
    if "kubeadm.init_status" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm", f"drain node {name}")
    try:
        node = __salt__["kos_kubectl.nodes"](kubeconfig=kubeconfig).get(name)
        if node is None:
            ret["comment"] = f"node {name} is not registered"
            return ret
        left = __salt__["kos_kubectl.evictable_pods"](name, kubeconfig=kubeconfig)
        if node["unschedulable"] and not left:
            ret["comment"] = f"node {name} is drained"
            return ret
        ret["changes"] = {"drained": {
            "old": {"schedulable": not node["unschedulable"], "pods": left},
            "new": {"schedulable": False, "pods": []},
        }}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"node {name} would be drained"
            return ret
        __salt__["kos_kubectl.drain"](name, timeout=timeout, kubeconfig=kubeconfig)
        node = __salt__["kos_kubectl.nodes"](kubeconfig=kubeconfig).get(name, {})
        left = __salt__["kos_kubectl.evictable_pods"](name, kubeconfig=kubeconfig)
        if not node.get("unschedulable", True) or left:
            return kos_state.fail(
                ret, f"kubectl drain {name} ran but the node is still schedulable or has "
                f"Pods to evict: {', '.join(left) or 'none'}")
        ret["comment"] = f"node {name} drained"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"draining {name} failed: {exc}")
    return ret


def node_absent(name, kubeconfig=None):
    """
    Ensure the Node object ``name`` is deleted (run on a control plane, after the
    node was reset: a running kubelet would register it again).
    """
    ret = kos_state.ret(name)
    if "kubeadm.init_status" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm", f"delete node {name}")
    try:
        if name not in __salt__["kos_kubectl.nodes"](kubeconfig=kubeconfig):
            ret["comment"] = f"node {name} is not registered"
            return ret
        if kos_state.predicted(ret, __opts__, {"node": {"old": name, "new": None}},
                               f"node {name} would be deleted"):
            return ret
        __salt__["kos_kubectl.delete_node"](name, ignore_not_found=True, kubeconfig=kubeconfig)
        if name in __salt__["kos_kubectl.nodes"](kubeconfig=kubeconfig):
            return kos_state.fail(
                ret, f"kubectl delete node {name} ran but the node is still there")
        ret["comment"] = f"node {name} deleted"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"deleting node {name} failed: {exc}")
    return ret


def etcd_member_absent(name, peer_url=None, kube_dir=None):
    """
    Ensure the control plane ``name`` has no etcd member any more (run on another
    control plane, for a node that is gone and cannot leave by itself; ``reset`` on a
    live node does this on its own). ``peer_url`` also matches a member its join added
    but never started (it has no name yet).
    """
    ret = kos_state.ret(name)
    try:
        found = [m for m in __salt__["kos_etcd.etcd_member_list"](kube_dir=kube_dir)
                 if m["name"] == name or (peer_url and peer_url in m["peer_urls"])]
        if not found:
            ret["comment"] = f"{name} has no etcd member"
            return ret
        if kos_state.predicted(
                ret, __opts__, {"etcd_members": {"old": [m["id"] for m in found], "new": []}},
                f"the etcd member of {name} would be removed"):
            return ret
        __salt__["kos_etcd.etcd_member_remove"](name, peer_url=peer_url, kube_dir=kube_dir)
        ret["comment"] = f"the etcd member of {name} removed"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"removing the etcd member of {name} failed: {exc}")
    return ret


def reset(name, kube_dir=None, record=None):
    """
    Ensure this node is no longer part of a cluster (``kubeadm reset -f``): its
    kubelet stops, its files go, a control plane leaves etcd. Drain the node
    before and delete its Node object after (``node_drained``, ``node_absent`` on a
    control plane; ``orch.remove`` does all three).

    In test mode ``kubeadm reset --dry-run`` shows what would go.

    name
        The node name (for messages).

    record
        The note ``initialized`` keeps of an unfinished init (default
        ``<kos:state_dir>/kubeadm-init.json``): it goes too.
    """
    ret = kos_state.ret(name)
    if "kubeadm.init_status" not in __salt__:
        ret["comment"] = f"{name} has no kubeadm: not part of a cluster"
        return ret
    record = record or kos_state.state_file(__salt__, INIT_RECORD)
    try:
        if not __salt__["kubeadm.has_local_files"](kube_dir):
            if not __opts__["test"]:
                kos_state.remove(record)
            ret["comment"] = f"{name} is not part of a cluster"
            return ret
        ret["changes"] = {"cluster": {"old": "member", "new": "reset"}}
        if __opts__["test"]:
            __salt__["kubeadm.reset"](dry_run=True)
            ret["result"] = None
            ret["comment"] = f"{name} would be reset (kubeadm reset --dry-run passed)"
            return ret
        __salt__["kubeadm.reset"]()
        if __salt__["kubeadm.has_local_files"](kube_dir):
            return kos_state.fail(
                ret, "kubeadm reset ran but the node still has its cluster files",
                {"cluster": {"old": "member", "new": "kubeadm reset ran"}})
        kos_state.remove(record)
        ret["comment"] = f"{name} reset"
    except (OSError, CommandExecutionError) as exc:
        return kos_state.fail(ret, f"kubeadm reset failed: {exc}")
    return ret
