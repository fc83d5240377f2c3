"""
Converge MicroK8s nodes: running services, the join credential each joining node gets
for itself, cluster membership, and the Kubernetes nodes as a control plane sees them
(drained, removed, uncordoned, Ready). Addons and certificates have their own state
modules (``microk8s_addons``, ``microk8s_certs``).

Join tokens never appear in a state's changes or comment.
"""

import secrets
import time

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_state

__virtualname__ = "microk8s"


def __virtual__():
    # Loads without the microk8s command too: a test run on a node without the snap
    # predicts what it would do instead of failing as "state not found".
    return __virtualname__


def _installed():
    return "microk8s.status" in __salt__


def running(name, timeout=120):
    """
    Ensure the node's services run and the node is ready.

    timeout
        Seconds to wait for the node to become ready.
    """
    ret = kos_state.ret(name)
    if not _installed():
        return kos_state.missing_module_predicting(
            ret, __opts__, "microk8s", "start microk8s", {"running": {"old": False, "new": True}})
    try:
        st = __salt__["microk8s.status"]()
        if st["worker"] or st["running"]:
            ret["comment"] = "microk8s is running"
            return ret
        if kos_state.predicted(ret, __opts__, {"running": {"old": False, "new": True}},
                               "microk8s would be started"):
            return ret
        if st["stopped"]:
            __salt__["microk8s.start"]()
        st = __salt__["microk8s.status"](wait_ready=True, timeout=timeout)
        if not st["running"]:
            return kos_state.fail(
                ret, st["message"] or f"microk8s is not ready after {timeout}s",
                made=ret["changes"])
        ret["comment"] = "microk8s started"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, exc)
    return ret


def _credential_left(doc, now, min_remaining, check, snap_data):
    """Why the issued credential ``doc`` cannot serve a join any more, or None."""
    if doc is None:
        return "no credential issued"
    token = doc.get("connection", "").split("/")[1:2]
    if doc.get("expires", 0) - now < int(min_remaining):
        return "the issued credential is near expiry"
    if not token or not __salt__["microk8s.token_valid"](token[0], snap_data):
        return "the cluster agent no longer knows the issued credential"
    if doc.get("check") != check:
        return "the server certificate changed"
    return None


def join_credential_present(name, role, ttl=900, min_remaining=300, cidr=None, snap_data=None):
    """
    Ensure the node ``name`` (a minion id) holds a join credential of its own, issued on
    this first control plane and published in the mine under ``kos_join_<name>``, which
    only the minion ``name`` can read. The credential names the node and its ``role``: the
    joining state refuses one issued for another role, and joins a worker with
    ``--worker``.

    The credential is an ``add-node`` token with a TTL, never a single-use one: the
    cluster agent burns a single-use token at the first join attempt, even one that then
    fails, while a TTL token survives it, so a failed join can be
    tried again. It is used once all the same: the orchestration revokes it
    (``join_credentials_absent``) as soon as the node joined, and when its wave ends.

    An issued credential is reused while it has ``min_remaining`` seconds left, the
    cluster agent still knows its token and the server certificate is unchanged;
    otherwise a new one replaces it (the old token is withdrawn). A token that cannot be
    published is withdrawn again.

    role
        ``worker`` or ``control_plane``: the node's role in Terraform's inventory.

    ttl
        Lifetime of a new token, in seconds: long enough for its wave.

    min_remaining
        Issue a new token when less than this is left.

    cidr
        Use the connection string whose address is in this network (the private
        network); default: the node's default address.
    """
    ret = kos_state.ret(name)
    problem = kos_state.credential_problem(role, ttl, min_remaining)
    if problem:
        return kos_state.fail(ret, problem)
    if not _installed():
        return kos_state.missing_module_predicting(
            ret, __opts__, "microk8s", f"issue a join credential for {name}",
            {"credential": {"old": None, "new": {"role": role, "ttl": int(ttl)}}})
    path = kos_state.credential_file(__salt__, name)
    now = time.time()
    current = kos_state.read_json(path)
    issued = None
    try:
        check = __salt__["microk8s.cert_check"](snap_data)
        reason = _credential_left(current, now, min_remaining, check, snap_data)
        if reason is None and current.get("role") != role:
            reason = f"the issued credential is for a {current.get('role')}"
        if reason is None:
            if not __opts__["test"]:
                kos_state.publish_credential(__salt__, name)
            ret["comment"] = (f"join credential for {name} ({role}) issued, valid for "
                              f"{int(current['expires'] - now)}s more")
            return ret
        old = None if current is None else {"role": current.get("role"),
                                            "expires": current.get("expires")}
        if kos_state.predicted(
                ret, __opts__, {"credential": {"old": old, "new": {"role": role, "ttl": int(ttl)}}},
                f"a join credential for {name} would be issued ({reason})"):
            return ret
        if cidr and not __salt__["network.ip_addrs"](cidr=cidr, include_loopback=True):
            return kos_state.fail(ret, f"this node has no address in {cidr}: no credential issued")
        # our own token (as Canonical's charm does): known before add-node, so it can be
        # withdrawn whatever fails after
        issued = secrets.token_hex(16)
        urls = __salt__["microk8s.add_node"](ttl=int(ttl), token=issued)["urls"]
        chosen = urls[0]
        if cidr:
            chosen = next((u for u in urls
                           if __salt__["network.ip_in_subnet"](u.split(":", 1)[0], cidr)), None)
            if chosen is None:
                raise CommandExecutionError(f"add-node offered no address in {cidr}: "
                                            f"{len(urls)} URLs")
        doc = {
            "distribution": "microk8s",
            "node": name,
            "role": role,
            "connection": chosen,
            "check": chosen.rsplit("/", 1)[-1],
            "issued": int(now),
            "expires": int(now + int(ttl)),
        }
        kos_state.write_json(path, doc)
        kos_state.publish_credential(__salt__, name)
        if current is not None:
            old_token = current.get("connection", "").split("/")[1:2]
            if old_token:
                __salt__["microk8s.remove_token"](old_token[0], snap_data)
    except (OSError, CommandExecutionError) as exc:
        if issued is not None:
            try:
                __salt__["microk8s.remove_token"](issued, snap_data)
                kos_state.remove(path)
            except (OSError, CommandExecutionError):
                pass
        return kos_state.fail(ret, f"issuing a join credential for {name} failed: {exc}")
    ret["changes"]["credential"]["new"]["expires"] = doc["expires"]
    ret["comment"] = f"join credential for {name} ({role}) issued and published ({reason})"
    return ret


def join_credentials_absent(name, nodes=None, snap_data=None):
    """
    Ensure the join credentials of ``nodes`` are revoked on this first control plane: the
    token goes from the cluster agent, the credential file from disk, the mine entry
    from the master.

    nodes
        Minion ids whose credentials go; None: every credential issued here.
    """
    ret = kos_state.ret(name)
    issued = kos_state.credential_nodes(__salt__)
    nodes = issued if nodes is None else [n for n in nodes if n in issued]
    if not nodes:
        ret["comment"] = "no join credential left"
        return ret
    if kos_state.predicted(ret, __opts__, {"credentials": {"old": sorted(nodes), "new": []}},
                           "the join credentials would be revoked"):
        return ret
    try:
        for node in nodes:
            path = kos_state.credential_file(__salt__, node)
            token = ((kos_state.read_json(path) or {}).get("connection") or "").split("/")[1:2]
            if token and _installed():
                __salt__["microk8s.remove_token"](token[0], snap_data)
            kos_state.remove(path)
            kos_state.withdraw_credential(__salt__, node)
    except (OSError, CommandExecutionError) as exc:
        return kos_state.fail(ret, f"revoking the join credentials failed: {exc}")
    ret["comment"] = f"join credentials revoked: {', '.join(ret['changes']['credentials']['old'])}"
    return ret


def cluster_joined(name, source, role="worker", mine_function=None, min_remaining=60):
    """
    Ensure this node is part of the cluster whose first control-plane node is
    ``source``, joined in its ``role``. The credential comes from the mine, where
    ``source`` published it for this minion alone (``join_credential_present``), so it
    never passes through rendered SLS; one issued for another role is refused, and a
    worker joins with ``--worker``.

    A node already in a cluster does nothing. A failed join reports the CLI's
    message (e.g. ``Connection failed. Invalid token (500).``).

    source
        Minion id of the node that issued the credential.

    role
        ``worker`` or ``control_plane``.

    mine_function
        The mine entry to read (default ``kos_join_<this minion id>``).

    min_remaining
        Refuse a credential with less than this many seconds left.
    """
    ret = kos_state.ret(name)
    if role not in ("worker", "control_plane"):
        return kos_state.fail(ret, f"role must be worker or control_plane, not {role!r}")
    changes = {"cluster": {"old": "standalone", "new": f"joined {source} as {role}"}}
    if not _installed():
        return kos_state.missing_module_predicting(
            ret, __opts__, "microk8s", f"join the cluster of {source} as {role}", changes)
    me = __opts__["id"]
    mine_function = mine_function or kos_state.mine_key(me)
    try:
        # a stopped control plane counts by the members it last knew, never as alone
        member = __salt__["microk8s.is_clustered"]()
    except CommandExecutionError as exc:
        return kos_state.fail(ret, exc)
    try:
        if member:
            ret["comment"] = "already part of a cluster"
            return ret
        if kos_state.predicted(ret, __opts__, changes,
                               f"would join the cluster of {source} as {role}"):
            return ret
        info, problem = kos_state.issued_credential(
            __salt__, source, me, role, mine_function, "connection", min_remaining)
        if problem:
            return kos_state.fail(ret, problem)
        out = __salt__["microk8s.join"](info["connection"], worker=(role == "worker"))
        if not __salt__["microk8s.is_clustered"]():
            return kos_state.fail(
                ret, f"microk8s join reported success but the node is alone: {out}",
                made=ret["changes"])
        ret["comment"] = f"joined the cluster of {source} as {role}"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"microk8s join failed: {exc}")
    return ret


def cluster_left(name):
    """
    Ensure this node is in no cluster (``microk8s leave``): the way back before the
    snap is removed. A node without the snap, or alone, has nothing to leave. A stopped
    control plane that is still a member fails, in test mode too: ``microk8s leave`` runs
    only on a running node (its wrapper exits when stopped: ``exit_if_stopped`` in
    https://github.com/canonical/microk8s/blob/master/microk8s-resources/wrappers/microk8s-leave.wrapper),
    so the node must be started first.
    """
    ret = kos_state.ret(name)
    if not _installed():
        ret["comment"] = "microk8s is not installed: no cluster to leave"
        return ret
    try:
        if not __salt__["microk8s.is_clustered"]():
            ret["comment"] = "not part of a cluster"
            return ret
        if __salt__["microk8s.status"]()["stopped"]:
            return kos_state.fail(ret, "microk8s is stopped and this node is still a member "
                                       "of its cluster's datastore; microk8s leave needs it "
                                       "running: start it (microk8s start), then leave")
        if kos_state.predicted(ret, __opts__, {"cluster": {"old": "member", "new": "standalone"}},
                               "would leave the cluster"):
            return ret
        __salt__["microk8s.leave"]()
        if __salt__["microk8s.is_clustered"]():
            return kos_state.fail(ret, "microk8s leave ran but the node is still in a cluster")
        ret["comment"] = "left the cluster"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"microk8s leave failed: {exc}")
    return ret


def _node(name):
    node = __salt__["microk8s.nodes"]().get(name)
    if node is None:
        raise CommandExecutionError(f"node {name} is not registered in the cluster")
    return node


def node_drained(name, timeout=None, absent_ok=False):
    """
    Ensure node ``name`` is cordoned and drained (run on a control plane), before
    something takes it away for a while (a refresh) or for good (it leaves). A node
    already cordoned is drained again: a drain that timed out earlier may have left Pods
    on it.

    timeout
        Seconds to wait for evictions.

    absent_ok
        A node that is not registered (it left already) is fine: a removal that stopped
        half-way runs again. An upgrade leaves it False: its node must be there.
    """
    ret = kos_state.ret(name)
    if not _installed():
        return kos_state.missing_module_predicting(
            ret, __opts__, "microk8s", f"drain node {name}",
            {"schedulable": {"old": True, "new": False}})
    try:
        if absent_ok and name not in __salt__["microk8s.nodes"]():
            ret["comment"] = f"node {name} is not registered in the cluster"
            return ret
        node = _node(name)
        if node["unschedulable"]:
            ret["comment"] = f"node {name} is cordoned"
        else:
            ret["changes"] = {"schedulable": {"old": True, "new": False}}
        if __opts__["test"]:
            if ret["changes"]:
                ret["result"] = None
            ret["comment"] = f"node {name} would be drained"
            return ret
        __salt__["microk8s.drain"](name, timeout=timeout)
        if not _node(name)["unschedulable"]:
            return kos_state.fail(
                ret, f"kubectl drain {name} ran but the node is still schedulable")
        ret["comment"] = f"node {name} drained"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"draining {name} failed: {exc}")
    return ret


def node_removed(name, force=False):
    """
    Ensure node ``name`` is no longer a member of the cluster (run on a control plane,
    after the node left: ``microk8s remove-node``): its Node object goes, and a control
    plane's place in the datastore.

    force
        Also when the node never left (its server is gone): ``remove-node --force``.
    """
    ret = kos_state.ret(name)
    if not _installed():
        return kos_state.missing_module_predicting(
            ret, __opts__, "microk8s", f"remove node {name}",
            {"member": {"old": True, "new": False}})
    try:
        if name not in __salt__["microk8s.nodes"]():
            ret["comment"] = f"node {name} is not in the cluster"
            return ret
        if kos_state.predicted(ret, __opts__, {"member": {"old": True, "new": False}},
                               f"node {name} would be removed from the cluster"):
            return ret
        __salt__["microk8s.remove_node"](name, force=force)
        if name in __salt__["microk8s.nodes"]():
            return kos_state.fail(
                ret, f"microk8s remove-node {name} ran but the node is still listed")
        ret["comment"] = f"node {name} removed from the cluster"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"removing node {name} failed: {exc}")
    return ret


def node_uncordoned(name):
    """Ensure node ``name`` takes Pods again (run on a control plane)."""
    ret = kos_state.ret(name)
    if not _installed():
        return kos_state.missing_module_predicting(
            ret, __opts__, "microk8s", f"uncordon node {name}",
            {"schedulable": {"old": False, "new": True}})
    try:
        if not _node(name)["unschedulable"]:
            ret["comment"] = f"node {name} is schedulable"
            return ret
        if kos_state.predicted(ret, __opts__, {"schedulable": {"old": False, "new": True}},
                               f"node {name} would be uncordoned"):
            return ret
        __salt__["microk8s.uncordon"](name)
        if _node(name)["unschedulable"]:
            return kos_state.fail(
                ret, f"kubectl uncordon {name} ran but the node is still cordoned")
        ret["comment"] = f"node {name} uncordoned"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"uncordoning {name} failed: {exc}")
    return ret


def _track_of(version):
    """``v1.32.9`` -> ``1.32``."""
    parts = str(version or "").lstrip("v").split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else None


def node_ready(name, track, timeout=180, interval=2):
    """
    Wait until node ``name`` is Ready and its kubelet runs Kubernetes ``track`` (e.g.
    ``1.32``), as this control plane sees it: what an upgraded node must show before the
    next one goes. Changes nothing.

    timeout
        Seconds to wait.
    """
    ret = kos_state.ret(name)
    if not isinstance(track, str):
        # YAML reads 1.30 as the number 1.3
        return kos_state.fail(ret, f"track must be a string such as '1.32', got {track!r}")
    if not _installed():
        return kos_state.missing_module_predicting(
            ret, __opts__, "microk8s", f"see node {name} Ready on {track}", {})
    if __opts__["test"]:
        ret["comment"] = f"would wait for node {name} to be Ready on {track}"
        return ret
    deadline = time.monotonic() + timeout
    node = None
    while True:
        try:
            node = __salt__["microk8s.nodes"]().get(name)
        except CommandExecutionError as exc:
            # the API server of a refreshing control plane answers again after a while
            node = {"error": str(exc)}
        if node and node.get("ready") and _track_of(node.get("version")) == track:
            ret["comment"] = f"node {name} is Ready on {node['version']}"
            return ret
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    if node is None:
        seen = "is not registered"
    elif "error" in node:
        seen = f"could not be read: {node['error']}"
    else:
        seen = f"is {'Ready' if node['ready'] else 'NotReady'} on {node.get('version')}"
    return kos_state.fail(ret, f"node {name} {seen} after {timeout} s; expected Ready on {track}")
