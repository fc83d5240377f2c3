"""
Converge kubeadm nodes: the first control plane, join credentials published for
the other nodes, cluster membership, applied manifests, and the way out (drain,
reset, delete).

Join tokens and certificate keys never appear in a state's changes or comment;
only their expiry does.
"""

import hashlib
import os
import time

import yaml
from salt.exceptions import CommandExecutionError

__virtualname__ = "kubeadm"

DEFAULT_DESCRIPTION = "kos: node join"
# What kubeadm calls the token that owns the kubeadm-certs Secret (CLI reference B.3).
CERT_TOKEN_DESCRIPTION = "Proxy for managing TTL for the kubeadm-certs secret"
INIT_RECORD = "kubeadm-init.json"


def __virtual__():
    # Loads without the kubeadm command too: a test run on a node whose packages are
    # not installed yet predicts instead of failing as "state not found".
    return __virtualname__


def _ret(name):
    return __utils__["kos_state.ret"](name)


def _fail(ret, exc):
    return __utils__["kos_state.fail"](ret, exc)


def _installed():
    return "kubeadm.init_status" in __salt__


def _missing(ret, what):
    return __utils__["kos_state.missing_module"](ret, __opts__, "kubeadm", what)


def _published(path):
    return __utils__["kos_state.read_json"](path)


def _write_json(path, doc):
    __utils__["kos_state.write_json"](path, doc)


def _remove(path):
    return __utils__["kos_state.remove"](path)


def _state_file(name, path=None):
    return path or __utils__["kos_state.state_file"](__salt__, name)


def _pending(wanted, control_planes=None, stacked_etcd=True):
    """
    Node names that have not joined yet: not registered, or (``control_planes``) no
    etcd member yet. None when nothing was asked.
    """
    if wanted is None and control_planes is None:
        return None
    registered = set(__salt__["kubeadm.nodes"]())
    pending = set(wanted or []) - registered
    if control_planes:
        done = registered
        if stacked_etcd:
            done = done & set(__salt__["kubeadm.etcd_members"]())
        pending |= set(control_planes) - done
    return sorted(pending)


def _not_initialized(ret, what, status):
    """A test run on a fresh node predicts; a real run cannot go on without a cluster."""
    if __opts__["test"]:
        ret["result"] = None
        ret["comment"] = f"would {what} once the control plane is initialized"
        return ret
    return _fail(ret, f"this node runs no initialized control plane ({status['reason']}): "
                      f"cannot {what}")


def _status(kube_dir):
    return __salt__["kubeadm.init_status"](kube_dir)


def _api_ready(timeout, kube_dir):
    """The API answers through this node's admin kubeconfig (the control-plane endpoint)."""
    kwargs = {"kubeconfig": os.path.join(kube_dir, "admin.conf")} if kube_dir else {}
    return __salt__["kubeadm.api_ready"](timeout=timeout, **kwargs)


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
        __salt__["kubeadm.init"](
            name, upload_certs=upload_certs, ignore_preflight_errors=ignore_preflight_errors,
            kube_dir=kube_dir,
        )
        if not _api_ready(timeout, kube_dir):
            return _fail(
                ret, f"kubeadm init ran, but the API does not answer through the "
                f"control-plane endpoint after {timeout}s",
            )
        status = _status(kube_dir)
        if not status["initialized"]:
            return _fail(ret, f"kubeadm init reported success but {status['reason']}")
        _remove(record)
        ret["comment"] = (f"kubeadm reset and init done again ({old})" if redo
                          else "kubeadm init done")
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"kubeadm init failed: {exc}")
    return ret


def token_present(name, ttl=3600, min_remaining=900, description=DEFAULT_DESCRIPTION,
                  wanted_nodes=None, control_planes=None, stacked_etcd=True, ca_file=None,
                  kube_dir=None):
    """
    Ensure a bootstrap token with enough life left is published at ``name`` (a
    JSON file readable by root only; the ``kos.join_info`` mine function serves it
    to Kubernetes nodes only), together with the CA certificate hash.

    The published token is reused while the cluster still lists it with at least
    ``min_remaining`` seconds left and the CA is unchanged; otherwise a new one is
    created and the old one deleted. Run on the first control plane.

    ttl
        Lifetime of a new token in seconds: short, the orchestration deletes it
        after the wave anyway.

    min_remaining
        Replace the token when less than this is left, so a join wave never races
        its expiry.

    description
        Marks the tokens this state manages (``join_credentials_absent`` deletes
        them).

    wanted_nodes
        Node names that should be in the cluster: when all of them are, no token
        is needed and none is issued.

    control_planes
        The control-plane node names among them: they have joined only once they
        run an etcd member (``stacked_etcd``), so a join that stopped before the etcd
        step still gets a token for its next attempt.

    A token this run created is deleted again when it cannot be published.
    """
    ret = _ret(name)
    if int(ttl) <= int(min_remaining):
        return _fail(ret, f"ttl ({ttl}) must be larger than min_remaining ({min_remaining})")
    if not _installed():
        return _missing(ret, "issue a join token")
    now = time.time()
    current = _published(name)
    token_id = None
    try:
        status = _status(kube_dir)
        if not status["initialized"]:
            return _not_initialized(ret, "issue a join token", status)
        pending = _pending(wanted_nodes, control_planes, stacked_etcd)
        if pending == []:
            ret["comment"] = "every node has joined: no join token needed"
            return ret
        ca_hash = __salt__["kubeadm.ca_cert_hash"](ca_file)
        listed = {t["id"]: t for t in __salt__["kubeadm.token_list"]()}
        old_token = listed.get((current or {}).get("token_id"))
        reason = None
        if current is None:
            reason = "no token published"
        elif old_token is None:
            reason = "the published token is gone from the cluster (expired or deleted)"
        elif old_token["expires"] is not None and old_token["expires"] - now < int(min_remaining):
            reason = "the published token is near expiry"
        elif current.get("ca_cert_hash") != ca_hash:
            reason = "the cluster CA changed"
        if reason is None:
            left = "no expiry" if old_token["expires"] is None else \
                f"valid for {int(old_token['expires'] - now)}s more"
            ret["comment"] = f"join token published, {left}"
            return ret
        old = None if current is None else {"expires": current.get("expires")}
        ret["changes"] = {"token": {"old": old, "new": {"ttl": int(ttl)}}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"a new join token would be issued ({reason})"
            return ret
        token = __salt__["kubeadm.token_create"](ttl=int(ttl), description=description)
        token_id = token.split(".", 1)[0]
        mine = {t["id"]: t for t in __salt__["kubeadm.token_list"]()}.get(token_id)
        if mine is None:
            raise CommandExecutionError("kubeadm token create succeeded but the token is not "
                                        "listed")
        doc = {
            "distribution": "kubeadm",
            "token": token,
            "token_id": token_id,
            "ca_cert_hash": ca_hash,
            "issued": int(now),
            "expires": None if mine["expires"] is None else int(mine["expires"]),
        }
        _write_json(name, doc)
        token_id = None
        if old_token is not None:
            __salt__["kubeadm.token_delete"](old_token["id"])
    except (OSError, CommandExecutionError) as exc:
        if token_id is not None:
            _withdraw(token_id)
        return _fail(ret, f"issuing a join token failed: {exc}")
    ret["changes"]["token"]["new"]["expires"] = doc["expires"]
    ret["comment"] = f"new join token published ({reason})"
    if pending:
        ret["comment"] += f" for {', '.join(pending)}"
    return ret


def _withdraw(token_id):
    """Delete a token this run created but could not publish: nobody could use it."""
    try:
        __salt__["kubeadm.token_delete"](token_id)
    except CommandExecutionError:
        pass


def certificate_key_present(name, min_remaining=900, wanted_nodes=None, stacked_etcd=True,
                            config=None, kube_dir=None):
    """
    Ensure the control-plane certificates are uploaded (``kubeadm init phase
    upload-certs --upload-certs``) and the key that decrypts them is published at
    ``name`` (root only; served by the mine to control-plane nodes only).

    The Secret lives two hours, owned by a hidden bootstrap token; the key is
    re-uploaded when that token is gone (the Secret went with it), when a later
    upload replaced the Secret, or when less than ``min_remaining`` seconds are
    left. Run on the first control plane.

    min_remaining
        Re-upload when less than this is left of the two hours.

    wanted_nodes
        Control-plane node names that should be in the cluster: when all of them
        are registered and (``stacked_etcd``) run an etcd member, no key is needed
        and none is uploaded.

    config
        kubeadm configuration file (with external etcd kubeadm needs it to upload
        the etcd client certificates).
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, "upload the certificates")
    now = time.time()
    current = _published(name)
    try:
        status = _status(kube_dir)
        if not status["initialized"]:
            return _not_initialized(ret, "upload the certificates", status)
        pending = _pending(None, wanted_nodes, stacked_etcd)
        if pending == []:
            ret["comment"] = "every control plane has joined: no certificate key needed"
            return ret
        proxies = _cert_tokens()
        owner = next((t for t in proxies if t["id"] == (current or {}).get("owner_token_id")), None)
        newest = max((t["expires"] or 0 for t in proxies), default=0)
        reason = None
        if current is None:
            reason = "no certificate key published"
        elif owner is None:
            reason = "the kubeadm-certs Secret is gone (expired or deleted)"
        elif (owner["expires"] or 0) < newest:
            reason = "a later upload replaced the kubeadm-certs Secret"
        elif owner["expires"] is not None and owner["expires"] - now < int(min_remaining):
            reason = "the certificate key is close to its two-hour end"
        if reason is None:
            ret["comment"] = (
                f"certificate key published, valid for {int(owner['expires'] - now)}s more"
            )
            return ret
        old = None if current is None else {"expires": current.get("expires")}
        ret["changes"] = {"certificate_key": {"old": old, "new": {"uploaded": True}}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"the certificates would be uploaded again ({reason})"
            return ret
        before = {t["id"] for t in proxies}
        key = __salt__["kubeadm.upload_certs"](config=config)
        created = [t for t in _cert_tokens() if t["id"] not in before]
        if not created:
            return _fail(ret, "the certificates were uploaded but no token owns the Secret")
        owner = max(created, key=lambda t: t["expires"] or 0)
        doc = {
            "certificate_key": key,
            "owner_token_id": owner["id"],
            "uploaded": int(now),
            "expires": None if owner["expires"] is None else int(owner["expires"]),
        }
        try:
            _write_json(name, doc)
        except OSError:
            # an unpublished Secret helps nobody: deleting its owner deletes it
            _withdraw(owner["id"])
            raise
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"uploading the control-plane certificates failed: {exc}")
    ret["changes"]["certificate_key"]["new"]["expires"] = doc["expires"]
    ret["comment"] = f"certificates uploaded, new key published ({reason})"
    return ret


def _cert_tokens():
    """The hidden tokens kubeadm creates to own (and expire) the kubeadm-certs Secret."""
    return [
        t for t in __salt__["kubeadm.token_list"]() if t["description"] == CERT_TOKEN_DESCRIPTION
    ]


def join_credentials_absent(name, certificate_key_file=None, description=DEFAULT_DESCRIPTION,
                            kube_dir=None):
    """
    Ensure no join credentials remain once a wave is done: the tokens this formula
    issued (by ``description``) are deleted, the token owning the ``kubeadm-certs``
    Secret is deleted (the Secret goes with it), and the published files are removed.

    name
        The published token file (``token_present``).

    certificate_key_file
        The published certificate-key file (``certificate_key_present``).
    """
    ret = _ret(name)
    token_doc = _published(name)
    key_doc = _published(certificate_key_file) if certificate_key_file else None
    files = [p for p in (name, certificate_key_file) if p and os.path.exists(p)]
    if not _installed():
        return _missing(ret, "revoke the join credentials") if files else dict(
            ret, comment="no join credentials left")
    try:
        initialized_here = _status(kube_dir)["initialized"]
        listed = __salt__["kubeadm.token_list"]() if initialized_here else []
        ours = [t for t in listed if t["description"] == description]
        owner = next(
            (t for t in listed if key_doc and t["id"] == key_doc.get("owner_token_id")), None
        )
        if not (files or ours or owner):
            ret["comment"] = "no join credentials left"
            return ret
        if ours or token_doc:
            ret["changes"]["tokens"] = {"old": len(ours), "new": 0}
        if owner or key_doc:
            ret["changes"]["certificate_key"] = {
                "old": {"expires": (key_doc or {}).get("expires")}, "new": None,
            }
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = "the join credentials would be revoked"
            return ret
        for token in ours + ([owner] if owner else []):
            __salt__["kubeadm.token_delete"](token["id"])
        for path in files:
            _remove(path)
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"revoking the join credentials failed: {exc}")
    ret["comment"] = "join credentials revoked"
    return ret


def joined(name, api_server_endpoint, role="worker", node_name=None, advertise_address=None,
           bind_port=None, cri_socket=None, kubelet_extra_args=None, discovery_timeout=None,
           mine_function="kos_join", control_plane_mine_function="kos_join_control_plane",
           min_remaining=60, timeout=120, stacked_etcd=True, kube_dir=None):
    """
    Ensure this node joined the cluster of the first control plane ``name``: its Node
    is registered and, for a control plane with stacked etcd, it runs an etcd member
    (``kubeadm.join_status``). The token, CA hash and (control planes) certificate key
    come from the mine, where ``name`` published them, so they never pass through
    rendered SLS.

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

    try:
        before = status()
        if before["joined"]:
            ret["comment"] = "this node has joined the cluster"
            return ret
        kubelet_conf = os.path.join(kube_dir or "/etc/kubernetes", "kubelet.conf")
        if before["started"] and not before["answers"] and os.path.exists(kubelet_conf):
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
        info = __salt__["mine.get"](name, mine_function).get(name) or {}
        if not info.get("token"):
            return _fail(ret, f"{name} has published no join token in the mine ({mine_function})")
        now = time.time()
        if info.get("expires") is not None and info["expires"] - now < min_remaining:
            return _fail(
                ret, f"the join token published by {name} expires in "
                f"{int(info['expires'] - now)}s; re-apply kubeadm.credentials on {name}",
            )
        key = None
        if control_plane:
            cp = __salt__["mine.get"](name, control_plane_mine_function).get(name) or {}
            key = cp.get("certificate_key")
            if not key:
                return _fail(
                    ret, f"{name} has published no certificate key in the mine "
                    f"({control_plane_mine_function})",
                )
            if cp.get("expires") is not None and cp["expires"] - now < min_remaining:
                return _fail(
                    ret, f"the certificate key published by {name} expires in "
                    f"{int(cp['expires'] - now)}s; re-apply kubeadm.credentials on {name}",
                )
        if redo:
            __salt__["kubeadm.reset"]()
        __salt__["kubeadm.join"](
            api_server_endpoint, info["token"], info["ca_cert_hash"],
            control_plane=control_plane, certificate_key=key, node_name=node_name,
            advertise_address=advertise_address, bind_port=bind_port, cri_socket=cri_socket,
            kubelet_extra_args=kubelet_extra_args, discovery_timeout=discovery_timeout,
        )
        deadline = time.time() + float(timeout)
        after = status()
        while not after["joined"] and time.time() < deadline:
            time.sleep(1)
            after = status()
        if not after["joined"]:
            return _fail(ret, f"kubeadm join reported success but {after['reason']}")
        if control_plane and not _api_ready(timeout, kube_dir):
            return _fail(ret, f"joined, but the API does not answer after {timeout}s")
        ret["comment"] = (f"reset and joined the cluster of {name} as {role} again ({old})"
                          if redo else f"joined the cluster of {name} as {role}")
    except CommandExecutionError as exc:
        return _fail(ret, f"kubeadm join failed: {exc}")
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
        text = __utils__["kos_state.read_text"](name)
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
                    if not __salt__["kubeadm.object_exists"](kind, obj, namespace=ns,
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
        verdicts = __salt__["kubeadm.apply"](name, kubeconfig=kubeconfig)
        changed = {obj: verdict for obj, verdict in verdicts.items() if verdict != "unchanged"}
        if _read_text(record) != digest:
            __utils__["kos_state.write_file"](record, digest)
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"kubectl apply -f {name} failed: {exc}")
    if changed:
        ret["changes"] = {"objects": changed}
        ret["comment"] = f"applied {name}: {len(changed)} of {len(verdicts)} objects changed"
    else:
        ret["comment"] = f"{len(verdicts)} objects applied and unchanged"
    return ret


def _read_text(path):
    text = __utils__["kos_state.read_text"](path)
    return None if text is None else text.strip()


def node_drained(name, timeout=None, kubeconfig=None):
    """
    Ensure node ``name`` is drained (run on a control plane), the first step of taking
    a node out: cordoned, and no Pod left on it that ``kubectl drain`` evicts
    (``kubeadm.evictable_pods``). A drain that timed out leaves a cordoned node with
    Pods on it; the next run drains again. A node that is not registered is left alone.

    timeout
        Seconds to wait for Pod evictions.
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, f"drain node {name}")
    try:
        node = __salt__["kubeadm.nodes"](kubeconfig=kubeconfig).get(name)
        if node is None:
            ret["comment"] = f"node {name} is not registered"
            return ret
        left = __salt__["kubeadm.evictable_pods"](name, kubeconfig=kubeconfig)
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
        __salt__["kubeadm.drain"](name, timeout=timeout, kubeconfig=kubeconfig)
        node = __salt__["kubeadm.nodes"](kubeconfig=kubeconfig).get(name, {})
        left = __salt__["kubeadm.evictable_pods"](name, kubeconfig=kubeconfig)
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
        if name not in __salt__["kubeadm.nodes"](kubeconfig=kubeconfig):
            ret["comment"] = f"node {name} is not registered"
            return ret
        ret["changes"] = {"node": {"old": name, "new": None}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"node {name} would be deleted"
            return ret
        __salt__["kubeadm.delete_node"](name, ignore_not_found=True, kubeconfig=kubeconfig)
        if name in __salt__["kubeadm.nodes"](kubeconfig=kubeconfig):
            return _fail(ret, f"kubectl delete node {name} ran but the node is still there")
        ret["comment"] = f"node {name} deleted"
    except CommandExecutionError as exc:
        return _fail(ret, f"deleting node {name} failed: {exc}")
    return ret


def reset(name, kube_dir=None, record=None):
    """
    Ensure this node is no longer part of a cluster (``kubeadm reset -f``): its
    kubelet stops, its files go, a control plane leaves etcd. Drain the node
    before and delete its Node object after (``node_drained``, ``node_absent`` on a
    control plane; ``kubeadm/orch/remove.sls`` does all three).

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
            return _fail(ret, "kubeadm reset ran but the node still has its cluster files")
        _remove(record)
        ret["comment"] = f"{name} reset"
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"kubeadm reset failed: {exc}")
    return ret
