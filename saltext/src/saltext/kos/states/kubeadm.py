"""
Converge kubeadm nodes: the first control plane, the join credential each joining node
gets for itself, cluster membership, applied manifests, and the way out (drain, reset,
delete).

Join tokens and certificate keys never appear in a state's changes or comment;
only their expiry does.
"""

import glob
import hashlib
import os
import time

import yaml
from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_state

__virtualname__ = "kubeadm"

DEFAULT_DESCRIPTION = "kos: node join"
# What kubeadm calls the token that owns the kubeadm-certs Secret
# (https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/phases/copycerts/copycerts.go).
CERT_TOKEN_DESCRIPTION = "Proxy for managing TTL for the kubeadm-certs secret"
INIT_RECORD = "kubeadm-init.json"


def __virtual__():
    # Loads without the kubeadm command too: a test run on a node whose packages are
    # not installed yet predicts instead of failing as "state not found".
    return __virtualname__


def _ret(name):
    return kos_state.ret(name)


def _fail(ret, exc, made=None):
    return kos_state.fail(ret, exc, made)


def _installed():
    return "kubeadm.init_status" in __salt__


def _missing(ret, what):
    return kos_state.missing_module(ret, __opts__, "kubeadm", what)


def _published(path):
    return kos_state.read_json(path)


def _write_json(path, doc):
    kos_state.write_json(path, doc)


def _remove(path):
    return kos_state.remove(path)


def _state_file(name, path=None):
    return path or kos_state.state_file(__salt__, name)


def _not_initialized(ret, what, status):
    """A test run on a fresh node predicts; a real run cannot go on without a cluster."""
    if __opts__["test"]:
        ret["result"] = None
        ret["comment"] = f"would {what} once the control plane is initialized"
        return ret
    return _fail(ret, f"this node runs no initialized control plane ({status['reason']}): "
                      f"cannot {what}")


def _kubelet_conf(kube_dir):
    """The kubelet's kubeconfig, where the execution module looks for it."""
    return os.path.join(__salt__["kubeadm.get_kube_dir"](kube_dir), "kubelet.conf")


def _status(kube_dir):
    return __salt__["kubeadm.init_status"](kube_dir)


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
        ``certificate_key_present`` state uploads them when a join needs them.

    timeout
        Seconds to wait for the API to answer through the control-plane endpoint
        (after init, or on an initialized node that is still starting).

    record
        Where the state notes an init it started until it sees it finish (default
        ``<kos:state_dir>/kubeadm-init.json``).
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, "run kubeadm init")
    record = _state_file(INIT_RECORD, record)
    made = None  # what ran before a failure
    try:
        status = _status(kube_dir)
        ours = _published(record) is not None
        if status["started"] and not status["answers"] and not ours:
            # an initialized control plane may just be starting (a reboot): wait for it
            if _api_ready(timeout, kube_dir):
                status = _status(kube_dir)
        if status["initialized"]:
            if ours and not __opts__["test"]:
                _remove(record)
            ret["comment"] = "the control plane is initialized"
            return ret
        if status["started"] and not ours:
            return _fail(ret, f"{status['reason']}; this node holds a control plane that this "
                              "state did not initialize, so it is not reset: run `kubeadm reset "
                              "-f` on it if no cluster lives there")
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
        _write_json(record, {"started": int(time.time())})
        if redo:
            __salt__["kubeadm.reset"]()
            made = {"control_plane": {"old": old, "new": "reset (kubeadm reset -f)"}}
        __salt__["kubeadm.init"](
            name, upload_certs=upload_certs, ignore_preflight_errors=ignore_preflight_errors,
            kube_dir=kube_dir,
        )
        made = {"control_plane": {"old": old, "new": "kubeadm init ran, not seen initialized"}}
        if not _api_ready(timeout, kube_dir):
            return _fail(
                ret, f"kubeadm init ran, but the API does not answer through the "
                f"control-plane endpoint after {timeout}s", made,
            )
        status = _status(kube_dir)
        if not status["initialized"]:
            return _fail(ret, f"kubeadm init reported success but {status['reason']}", made)
        _remove(record)
        ret["comment"] = (f"kubeadm reset and init done again ({old})" if redo
                          else "kubeadm init done")
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"kubeadm init failed: {exc}", made)
    return ret


def _token_reason(doc, listed, now, min_remaining, ca_hash):
    """Why the token of the issued credential ``doc`` cannot serve a join, or None."""
    token = listed.get((doc or {}).get("token_id"))
    if doc is None:
        return "no credential issued"
    if token is None:
        return "its token is gone from the cluster (expired or deleted)"
    if token["expires"] is not None and token["expires"] - now < int(min_remaining):
        return "its token is near expiry"
    if doc.get("ca_cert_hash") != ca_hash:
        return "the cluster CA changed"
    return None


def _key_reason(doc, proxies, now, min_remaining):
    """Why the certificate key of ``doc`` cannot serve a control-plane join, or None."""
    owner = next((t for t in proxies if t["id"] == (doc or {}).get("owner_token_id")), None)
    newest = max((t["expires"] or 0 for t in proxies), default=0)
    if not (doc or {}).get("certificate_key"):
        return "no certificate key issued"
    if owner is None:
        return "the kubeadm-certs Secret is gone (expired or deleted)"
    if (owner["expires"] or 0) < newest:
        return "a later upload replaced the kubeadm-certs Secret"
    if owner["expires"] is not None and owner["expires"] - now < int(min_remaining):
        return "the certificate key is close to its two-hour end"
    return None


def _upload(config):
    """Upload the control-plane certificates: ``(key, owner token)``."""
    before = {t["id"] for t in _cert_tokens()}
    key = __salt__["kubeadm.upload_certs"](config=config)
    created = [t for t in _cert_tokens() if t["id"] not in before]
    if not created:
        raise CommandExecutionError("the certificates were uploaded but no token owns the Secret")
    return key, max(created, key=lambda t: t["expires"] or 0)


def join_credential_present(name, role, node_name=None, ttl=900, min_remaining=300,
                            key_min_remaining=900, description=DEFAULT_DESCRIPTION,
                            ca_file=None, config=None, kube_dir=None):
    """
    Ensure the node ``name`` (a minion id) holds a join credential of its own, issued on
    this first control plane and published in the mine under ``kos_join_<name>``, which
    only the minion ``name`` can read: a bootstrap token with a short TTL and the CA hash,
    and for a control plane only the certificate key that decrypts the cluster's CA keys
    (``kubeadm init phase upload-certs``). A worker's credential holds no certificate key,
    so it cannot join a control plane (kubeadm needs the shared certificates for that).

    Used once: the orchestration revokes it (``join_credentials_absent``) as soon as the
    node joined, and when its wave ends. Reused until then while its token has
    ``min_remaining`` seconds left and the CA is unchanged, and (control planes) its key's
    Secret is still the newest upload with ``key_min_remaining`` seconds left; otherwise
    the stale part is issued again and the old one deleted. Whatever this run created and
    could not publish is deleted again.

    role
        ``worker`` or ``control_plane``: the node's role in Terraform's inventory.

    node_name
        The node's Kubernetes name, in the token's description.

    ttl
        Lifetime of a new token in seconds.

    description
        Marks the tokens this state issues (followed by the node name).

    config
        kubeadm configuration file (with external etcd, upload-certs needs it).
    """
    ret = _ret(name)
    if role not in ("worker", "control_plane"):
        return _fail(ret, f"role must be worker or control_plane, not {role!r}")
    if int(ttl) <= int(min_remaining):
        return _fail(ret, f"ttl ({ttl}) must be larger than min_remaining ({min_remaining})")
    if not _installed():
        return _missing(ret, f"issue a join credential for {name}")
    control_plane = role == "control_plane"
    path = kos_state.credential_file(__salt__, name)
    now = time.time()
    current = _published(path)
    if current is not None and current.get("role") != role:
        # issued for another role: nothing of it is reused
        stale, current = current, None
    else:
        stale = None
    created = []
    try:
        status = _status(kube_dir)
        if not status["initialized"]:
            return _not_initialized(ret, f"issue a join credential for {name}", status)
        ca_hash = __salt__["kubeadm.ca_cert_hash"](ca_file)
        listed = {t["id"]: t for t in __salt__["kubeadm.token_list"]()}
        token_reason = _token_reason(current, listed, now, min_remaining, ca_hash)
        key_reason = (_key_reason(current, _cert_tokens(), now, key_min_remaining)
                      if control_plane else None)
        reason = token_reason or key_reason
        if stale is not None:
            reason = f"the issued credential was for a {stale.get('role')}"
        if reason is None:
            if not __opts__["test"]:
                kos_state.publish_credential(__salt__, name)
            token = listed[current["token_id"]]
            left = "no expiry" if token["expires"] is None else \
                f"valid for {int(token['expires'] - now)}s more"
            ret["comment"] = f"join credential for {name} ({role}) issued, {left}"
            return ret
        old = None if (current or stale) is None else {
            "role": (current or stale).get("role"), "expires": (current or stale).get("expires")}
        ret["changes"] = {"credential": {"old": old, "new": {"role": role, "ttl": int(ttl)}}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"a join credential for {name} would be issued ({reason})"
            return ret
        doc = dict(current or {}, distribution="kubeadm", node=name, role=role)
        replaced = [t for t in ((stale or {}).get("token_id"),
                                (stale or {}).get("owner_token_id")) if t]
        if token_reason:
            token = __salt__["kubeadm.token_create"](
                ttl=int(ttl), description=f"{description} {node_name or name}".strip())
            token_id = token.split(".", 1)[0]
            created.append(token_id)
            mine = {t["id"]: t for t in __salt__["kubeadm.token_list"]()}.get(token_id)
            if mine is None:
                raise CommandExecutionError("kubeadm token create succeeded but the token is "
                                            "not listed")
            if (current or {}).get("token_id") in listed:
                replaced.append(current["token_id"])
            doc.update(token=token, token_id=token_id, ca_cert_hash=ca_hash, issued=int(now),
                       expires=None if mine["expires"] is None else int(mine["expires"]))
        if key_reason:
            key, owner = _upload(config)
            created.append(owner["id"])
            if (current or {}).get("owner_token_id"):
                replaced.append(current["owner_token_id"])
            doc.update(certificate_key=key, owner_token_id=owner["id"], uploaded=int(now),
                       key_expires=None if owner["expires"] is None else int(owner["expires"]))
        _write_json(path, doc)
        kos_state.publish_credential(__salt__, name)
        created = []
        still = {t["id"] for t in __salt__["kubeadm.token_list"]()}
        for token_id in replaced:
            if token_id in still:
                __salt__["kubeadm.token_delete"](token_id)
    except (OSError, CommandExecutionError) as exc:
        for token_id in created:
            _withdraw(token_id)
        return _fail(ret, f"issuing a join credential for {name} failed: {exc}")
    ret["changes"]["credential"]["new"]["expires"] = doc.get("expires")
    ret["comment"] = f"join credential for {name} ({role}) issued and published ({reason})"
    return ret


def _withdraw(token_id):
    """Delete a token this run created but could not publish: nobody could use it."""
    try:
        __salt__["kubeadm.token_delete"](token_id)
    except CommandExecutionError:
        pass


def _cert_tokens():
    """The hidden tokens kubeadm creates to own (and expire) the kubeadm-certs Secret."""
    return [
        t for t in __salt__["kubeadm.token_list"]() if t["description"] == CERT_TOKEN_DESCRIPTION
    ]


def join_credentials_absent(name, nodes=None, description=DEFAULT_DESCRIPTION, kube_dir=None):
    """
    Ensure the join credentials of ``nodes`` are revoked on this first control plane:
    their bootstrap tokens and the token owning a control plane's ``kubeadm-certs``
    Secret are deleted (the Secret goes with it), the credential files removed and the
    mine entries withdrawn. The shared token goes too: the one ``kubeadm init`` made
    (marked with ``description`` alone).

    nodes
        Minion ids whose credentials go; None: every credential issued here and every
        token marked with ``description``; ``[]``: only the shared ones.
    """
    ret = _ret(name)
    issued = kos_state.credential_nodes(__salt__)
    chosen = issued if nodes is None else [n for n in nodes if n in issued]
    docs = [(kos_state.credential_file(__salt__, n), n) for n in chosen]
    if not _installed():
        if docs:
            return _missing(ret, "revoke the join credentials")
        ret["comment"] = "no join credential left"
        return ret
    try:
        listed = ({t["id"]: t for t in __salt__["kubeadm.token_list"]()}
                  if _status(kube_dir)["initialized"] else {})
        doomed = set()
        for path, _ in docs:
            doc = _published(path) or {}
            doomed |= {doc.get("token_id"), doc.get("owner_token_id")} & set(listed)
        # the shared token, kubeadm init's own (each node's own carries its name after
        # the description)
        doomed |= {i for i, t in listed.items() if t["description"] == description}
        if nodes is None:
            doomed |= {i for i, t in listed.items() if t["description"].startswith(description)}
        if not (docs or doomed):
            ret["comment"] = "no join credential left"
            return ret
        ret["changes"] = {"credentials": {"old": sorted(chosen), "new": []}}
        if doomed:
            ret["changes"]["tokens"] = {"old": len(doomed), "new": 0}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = "the join credentials would be revoked"
            return ret
        for token_id in sorted(doomed):
            __salt__["kubeadm.token_delete"](token_id)
        for path, node in docs:
            _remove(path)
            kos_state.withdraw_credential(__salt__, node)
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"revoking the join credentials failed: {exc}")
    ret["comment"] = "join credentials revoked"
    if ret["changes"]["credentials"]["old"]:
        ret["comment"] += ": " + ", ".join(ret["changes"]["credentials"]["old"])
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
    (``join_credential_present``), so they never pass through rendered SLS; a credential
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
    ret = _ret(name)
    if role not in ("worker", "control_plane"):
        return _fail(ret, f"role must be worker or control_plane, not {role!r}")
    if not _installed():
        return _missing(ret, f"join the cluster of {name} as {role}")
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
        if before["started"] and not before["answers"] and os.path.exists(
                _kubelet_conf(kube_dir)):
            return _fail(ret, f"cannot tell whether this node has joined: {before['reason']}; "
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
            return _fail(ret, problem)
        now = time.time()
        key = None
        if control_plane:
            key = info.get("certificate_key")
            if not key:
                return _fail(ret, f"the credential {name} issued for {me} holds no certificate "
                                  "key")
            left = info.get("key_expires")
            if left is not None and left - now < min_remaining:
                return _fail(
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
            return _fail(ret, f"kubeadm join reported success but {after['reason']}", made)
        if control_plane and not _api_ready(timeout, kube_dir):
            return _fail(ret, f"joined, but the API does not answer after {timeout}s",
                         ret["changes"])
        ret["comment"] = (f"reset and joined the cluster of {name} as {role} again ({old})"
                          if redo else f"joined the cluster of {name} as {role}")
    except CommandExecutionError as exc:
        return _fail(ret, f"kubeadm join failed: {exc}", made)
    return ret


def _manifest_objects(text):
    objects = []
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and doc.get("kind"):
            meta = doc.get("metadata") or {}
            objects.append((doc["kind"], meta.get("name"), meta.get("namespace")))
    return objects


def manifest_applied(name, record=None, kubeconfig=None):
    """
    Ensure the objects in manifest file ``name`` are applied (``kubectl apply``).
    Changes list the objects kubectl created or configured; ``unchanged`` ones are
    not changes.

    Test mode cannot ask kubectl for a dry run that every API server honours, so it
    predicts: objects that do not exist, or a manifest whose digest differs from
    the one recorded at the last apply, would be applied.

    record
        Where the digest of the last applied manifest is kept (default
        ``<kos:state_dir>/applied/<file name>.sha256``).
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, f"apply {name}")
    record = record or _state_file(os.path.join("applied", os.path.basename(name) + ".sha256"))
    try:
        text = kos_state.read_text(name)
        if text is None:
            raise OSError(f"{name} cannot be read")
        objects = _manifest_objects(text)
    except (OSError, yaml.YAMLError) as exc:
        if __opts__["test"] and isinstance(exc, OSError):
            ret["result"] = None
            ret["comment"] = f"{name} would be applied once it is written"
            return ret
        return _fail(ret, f"cannot read manifest {name}: {exc}")
    digest = hashlib.sha256(text.encode()).hexdigest()
    try:
        if __opts__["test"]:
            try:
                missing = [
                    f"{kind}/{obj}" for kind, obj, ns in objects
                    if not __salt__["kos_kubectl.object_exists"](kind, obj, namespace=ns,
                                                             kubeconfig=kubeconfig)
                ]
            except CommandExecutionError as exc:
                ret["result"] = None
                ret["comment"] = f"{name} would be applied (the cluster does not answer: {exc})"
                return ret
            recorded = _read_text(record)
            if not missing and recorded == digest:
                ret["comment"] = f"{len(objects)} objects applied and unchanged"
                return ret
            ret["result"] = None
            ret["changes"] = {"objects": {"old": {"missing": missing}, "new": "applied"}}
            ret["comment"] = f"{name} would be applied"
            return ret
        verdicts = __salt__["kos_kubectl.apply"](name, kubeconfig=kubeconfig)
        changed = {obj: verdict for obj, verdict in verdicts.items() if verdict != "unchanged"}
        if _read_text(record) != digest:
            kos_state.write_file(record, digest)
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"kubectl apply -f {name} failed: {exc}")
    if changed:
        ret["changes"] = {"objects": changed}
        ret["comment"] = f"applied {name}: {len(changed)} of {len(verdicts)} objects changed"
    else:
        ret["comment"] = f"{len(verdicts)} objects applied and unchanged"
    return ret


def _read_text(path):
    text = kos_state.read_text(path)
    return None if text is None else text.strip()


def node_drained(name, timeout=None, kubeconfig=None):
    """
    Ensure node ``name`` is drained (run on a control plane), the first step of taking
    a node out: cordoned, and no Pod left on it that ``kubectl drain`` evicts
    (``kos_kubectl.evictable_pods``). A drain that timed out leaves a cordoned node with
    Pods on it; the next run drains again. A node that is not registered is left alone.

    timeout
        Seconds to wait for Pod evictions.
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, f"drain node {name}")
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
            return _fail(ret, f"kubectl drain {name} ran but the node is still schedulable or "
                              f"has Pods to evict: {', '.join(left) or 'none'}")
        ret["comment"] = f"node {name} drained"
    except CommandExecutionError as exc:
        return _fail(ret, f"draining {name} failed: {exc}")
    return ret


def node_absent(name, kubeconfig=None):
    """
    Ensure the Node object ``name`` is deleted (run on a control plane, after the
    node was reset: a running kubelet would register it again).
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, f"delete node {name}")
    try:
        if name not in __salt__["kos_kubectl.nodes"](kubeconfig=kubeconfig):
            ret["comment"] = f"node {name} is not registered"
            return ret
        ret["changes"] = {"node": {"old": name, "new": None}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"node {name} would be deleted"
            return ret
        __salt__["kos_kubectl.delete_node"](name, ignore_not_found=True, kubeconfig=kubeconfig)
        if name in __salt__["kos_kubectl.nodes"](kubeconfig=kubeconfig):
            return _fail(ret, f"kubectl delete node {name} ran but the node is still there")
        ret["comment"] = f"node {name} deleted"
    except CommandExecutionError as exc:
        return _fail(ret, f"deleting node {name} failed: {exc}")
    return ret


def etcd_member_absent(name, peer_url=None, kube_dir=None):
    """
    Ensure the control plane ``name`` has no etcd member any more (run on another
    control plane, for a node that is gone and cannot leave by itself; ``reset`` on a
    live node does this on its own). ``peer_url`` also matches a member its join added
    but never started (it has no name yet).
    """
    ret = _ret(name)
    try:
        found = [m for m in __salt__["kos_etcd.etcd_member_list"](kube_dir=kube_dir)
                 if m["name"] == name or (peer_url and peer_url in m["peer_urls"])]
        if not found:
            ret["comment"] = f"{name} has no etcd member"
            return ret
        ret["changes"] = {"etcd_members": {"old": [m["id"] for m in found], "new": []}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"the etcd member of {name} would be removed"
            return ret
        __salt__["kos_etcd.etcd_member_remove"](name, peer_url=peer_url, kube_dir=kube_dir)
        ret["comment"] = f"the etcd member of {name} removed"
    except CommandExecutionError as exc:
        return _fail(ret, f"removing the etcd member of {name} failed: {exc}")
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
    ret = _ret(name)
    if not _installed():
        ret["comment"] = f"{name} has no kubeadm: not part of a cluster"
        return ret
    record = _state_file(INIT_RECORD, record)
    try:
        if not __salt__["kubeadm.has_local_files"](kube_dir):
            if not __opts__["test"]:
                _remove(record)
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
            return _fail(ret, "kubeadm reset ran but the node still has its cluster files",
                         {"cluster": {"old": "member", "new": "kubeadm reset ran"}})
        _remove(record)
        ret["comment"] = f"{name} reset"
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"kubeadm reset failed: {exc}")
    return ret


def certificates_renewed(name, within_days=30, force=False, restart_wait=20, timeout=120,
                         kube_dir=None):
    """
    This control plane's certificates have at least ``within_days`` days left: when one
    has fewer (or with ``force``), ``kubeadm certs renew all`` and the static control-plane
    Pods restarted so they use them: all of this node's at once (their manifests leave
    together, as
    https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-certs/#manual-certificate-renewal
    describes), so this node's etcd member and API server are down together for
    ``restart_wait``; the API answers again before the state returns. Certificates signed by an external CA are left to it;
    the CAs themselves are never renewed (ten years).

    name
        A label.
    within_days
        Renew when a certificate has fewer days left than this.
    force
        Renew whatever is left.
    restart_wait
        Seconds the manifests stay out of the manifests directory (the kubelet stops the
        Pods meanwhile).
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, "renew the control plane's certificates")
    try:
        found = __salt__["kos_certs.certificates"](kube_dir)
    except CommandExecutionError as exc:
        return _fail(ret, exc)
    left = {cert: entry["days"] for cert, entry in found["certificates"].items()
            if entry and not entry["externally_managed"]}
    due = {cert: days for cert, days in sorted(left.items()) if force or days < within_days}
    if not due:
        ret["comment"] = (f"every certificate has {within_days} days or more left "
                          f"(the fewest: {min(left.values())})" if left
                          else "no certificate kubeadm can renew here")
        return ret
    if __opts__["test"]:
        ret["result"] = None
        ret["changes"] = {"certificates": {"old": due, "new": "renewed"}}
        ret["comment"] = "would renew the certificates and restart the control plane"
        return ret
    try:
        renewed = __salt__["kos_certs.renew_certificates"]("all", kube_dir=kube_dir)
        restarted = __salt__["kos_certs.restart_control_plane"](
            wait=restart_wait, timeout=timeout, kube_dir=kube_dir)
        after = __salt__["kos_certs.certificates"](kube_dir)["certificates"]
    except CommandExecutionError as exc:
        return _fail(ret, exc)
    ret["changes"] = {"certificates": {
        "old": due, "new": {cert: (after.get(cert) or {}).get("days") for cert in due}}}
    ret["comment"] = (f"renewed {len(renewed)} certificates; restarted "
                      f"{', '.join(n[: -len('.yaml')] for n in restarted) or 'no static Pod'}")
    return ret


def images_imported(name, namespace="k8s.io"):
    """
    Ensure every image that the archives (``*.tar``) in directory ``name`` hold is in
    containerd's ``namespace``; missing ones are imported (``ctr images import``), so
    kubeadm finds them and pulls nothing. For a node that reaches no registry.
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, f"import the images of {name}")
    try:
        archives = sorted(glob.glob(os.path.join(name, "*.tar")))
        if not archives:
            return _fail(ret, f"no image archives (*.tar) in {name}")
        have = set(__salt__["kos_images.images"](namespace))
        missing = {}
        for path in archives:
            refs = __salt__["kos_images.archive_images"](path)
            if not refs:
                return _fail(ret, f"{path} names no image")
            if not set(refs) <= have:
                missing[path] = refs
        if not missing:
            ret["comment"] = f"every image of {len(archives)} archives is in containerd"
            return ret
        wanted = sorted(ref for refs in missing.values() for ref in refs)
        ret["changes"] = {"images": {"old": sorted(set(wanted) & have), "new": wanted}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"would import {', '.join(wanted)}"
            return ret
        for path in missing:
            __salt__["kos_images.import_images"](path, namespace)
        ret["comment"] = f"imported {', '.join(wanted)}"
    except CommandExecutionError as exc:
        return _fail(ret, f"importing images from {name} failed: {exc}")
    return ret


def pod_network_routed(name, cluster_cidr, timeout=60, kube_dir=None):
    """
    Ensure node ``name``'s routed pod network matches the API (``kos_podnet.sync_pod_network``:
    the CNI configuration for its pod CIDR, routes to the other nodes' pod CIDRs, egress
    masquerading). Waits up to ``timeout`` seconds for the controller manager to give the
    node its pod CIDR.
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, f"set up the routed pod network of {name}")
    kubelet_conf = _kubelet_conf(kube_dir)
    if not os.path.exists(kubelet_conf):
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"would set up the routed pod network of {name} once it joined"
            return ret
        return _fail(ret, f"{kubelet_conf} is missing: {name} has not joined")
    deadline = time.time() + float(timeout)
    while True:
        try:
            res = __salt__["kos_podnet.sync_pod_network"](
                name, cluster_cidr, kube_dir=kube_dir, test=__opts__["test"])
            break
        except CommandExecutionError as exc:
            if "no pod CIDR" not in str(exc) or time.time() > deadline:
                return _fail(ret, f"the routed pod network of {name}: {exc}")
            time.sleep(2)
    ret["changes"] = res["changes"]
    if res["changes"] and __opts__["test"]:
        ret["result"] = None
        ret["comment"] = f"would bring the routed pod network of {name} ({res['pod_cidr']}) " \
                         "in line with the API"
    elif res["changes"]:
        ret["comment"] = f"routed pod network of {name} ({res['pod_cidr']}) in line with the API"
    else:
        ret["comment"] = f"the routed pod network of {name} ({res['pod_cidr']}) matches the API"
    return ret
