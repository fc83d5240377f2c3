"""
Converge kubeadm nodes: the first control plane, join credentials published for
the other nodes, cluster membership, applied manifests, and the way out (drain,
reset, delete).

Join tokens and certificate keys never appear in a state's changes or comment;
only their expiry does.
"""

import hashlib
import json
import os
import time

import salt.utils.files
import yaml
from salt.exceptions import CommandExecutionError

__virtualname__ = "kubeadm"

DEFAULT_DESCRIPTION = "kos: node join"
# What kubeadm calls the token that owns the kubeadm-certs Secret (CLI reference B.3).
CERT_TOKEN_DESCRIPTION = "Proxy for managing TTL for the kubeadm-certs secret"


def __virtual__():
    if "kubeadm.is_initialized" in __salt__:
        return __virtualname__
    return (False, "kubeadm: the kubeadm execution module is not available")


def _ret(name):
    return {"name": name, "result": True, "changes": {}, "comment": ""}


def _fail(ret, exc):
    ret["result"] = False
    ret["changes"] = {}
    ret["comment"] = str(exc)
    return ret


def _published(path):
    try:
        with salt.utils.files.fopen(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _write_json(path, doc):
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.kos-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _pending(wanted):
    """Names in ``wanted`` that are not registered nodes yet (None: not asked)."""
    if wanted is None:
        return None
    return sorted(set(wanted) - set(__salt__["kubeadm.nodes"]()))


def _not_initialized(ret, what):
    """A test run on a fresh node predicts; a real run cannot go on without a cluster."""
    if __opts__["test"]:
        ret["result"] = None
        ret["comment"] = f"would {what} once the control plane is initialized"
        return ret
    return _fail(ret, f"this node runs no control plane: cannot {what}")


def initialized(name, upload_certs=False, timeout=120, ignore_preflight_errors=None,
                kube_dir=None):
    """
    Ensure this node is the initialized first control plane (``kubeadm init
    --config NAME``). A node whose kube-apiserver manifest exists is left alone:
    kubeadm would refuse a second init anyway, and changes to the configuration
    after init are an upgrade, not this state's business.

    In test mode ``kubeadm init --dry-run`` runs when the configuration file exists,
    so preflight problems (swap, ports in use, a node that joined elsewhere) show
    before anything changes.

    name
        The kubeadm configuration file.

    upload_certs
        Upload the control-plane certificates at init (``--upload-certs``). The
        ``certificate_key_present`` state uploads them when a join needs them.

    timeout
        Seconds to wait, after init, for the API to answer through the
        control-plane endpoint (the local load balancer needs a health check).
    """
    ret = _ret(name)
    try:
        if __salt__["kubeadm.is_initialized"](kube_dir):
            ret["comment"] = "the control plane is initialized"
            return ret
        ret["changes"] = {"control_plane": {"old": None, "new": "initialized"}}
        if __opts__["test"]:
            ret["result"] = None
            if os.path.exists(name):
                __salt__["kubeadm.init"](
                    name, dry_run=True, ignore_preflight_errors=ignore_preflight_errors,
                    kube_dir=kube_dir,
                )
                ret["comment"] = "kubeadm init would run (its --dry-run passed)"
            else:
                ret["comment"] = f"kubeadm init would run once {name} is written"
            return ret
        __salt__["kubeadm.init"](
            name, upload_certs=upload_certs, ignore_preflight_errors=ignore_preflight_errors,
            kube_dir=kube_dir,
        )
        if not __salt__["kubeadm.is_initialized"](kube_dir):
            return _fail(ret, "kubeadm init reported success but wrote no kube-apiserver manifest")
        if not __salt__["kubeadm.api_ready"](timeout=timeout):
            return _fail(
                ret, f"kubeadm init ran, but the API does not answer through the "
                f"control-plane endpoint after {timeout}s",
            )
        ret["comment"] = "kubeadm init done"
    except CommandExecutionError as exc:
        return _fail(ret, f"kubeadm init failed: {exc}")
    return ret


def token_present(name, ttl=3600, min_remaining=900, description=DEFAULT_DESCRIPTION,
                  wanted_nodes=None, ca_file=None, kube_dir=None):
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
    """
    ret = _ret(name)
    if int(ttl) <= int(min_remaining):
        return _fail(ret, f"ttl ({ttl}) must be larger than min_remaining ({min_remaining})")
    now = time.time()
    current = _published(name)
    try:
        if not __salt__["kubeadm.is_initialized"](kube_dir):
            return _not_initialized(ret, "issue a join token")
        pending = _pending(wanted_nodes)
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
            return _fail(ret, "kubeadm token create succeeded but the token is not listed")
        doc = {
            "distribution": "kubeadm",
            "token": token,
            "token_id": token_id,
            "ca_cert_hash": ca_hash,
            "issued": int(now),
            "expires": None if mine["expires"] is None else int(mine["expires"]),
        }
        _write_json(name, doc)
        if old_token is not None:
            __salt__["kubeadm.token_delete"](old_token["id"])
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"issuing a join token failed: {exc}")
    ret["changes"]["token"]["new"]["expires"] = doc["expires"]
    ret["comment"] = f"new join token published ({reason})"
    if pending:
        ret["comment"] += f" for {', '.join(pending)}"
    return ret


def certificate_key_present(name, min_remaining=900, wanted_nodes=None, config=None,
                            kube_dir=None):
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
        are, no key is needed and none is uploaded.

    config
        kubeadm configuration file (with external etcd kubeadm needs it to upload
        the etcd client certificates).
    """
    ret = _ret(name)
    now = time.time()
    current = _published(name)
    try:
        if not __salt__["kubeadm.is_initialized"](kube_dir):
            return _not_initialized(ret, "upload the certificates")
        pending = _pending(wanted_nodes)
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
        _write_json(name, doc)
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
    try:
        initialized_here = __salt__["kubeadm.is_initialized"](kube_dir)
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
           min_remaining=60, timeout=120, kube_dir=None):
    """
    Ensure this node joined the cluster of the first control plane ``name``. The
    token, CA hash and (control planes) certificate key come from the mine, where
    ``name`` published them, so they never pass through rendered SLS.

    A node with a ``kubelet.conf`` has joined and is left alone. A failed join
    reports kubeadm's message (an expired token: ``could not find a JWS signature``;
    a stale key: ``Secret "kubeadm-certs" was not found``).

    api_server_endpoint
        The control-plane endpoint (this node's local load balancer).

    role
        ``worker`` or ``control_plane``.

    min_remaining
        Refuse published credentials with less than this many seconds left.

    timeout
        Control planes: seconds to wait for the API after the join.
    """
    ret = _ret(name)
    if role not in ("worker", "control_plane"):
        return _fail(ret, f"role must be worker or control_plane, not {role!r}")
    control_plane = role == "control_plane"
    try:
        if __salt__["kubeadm.is_joined"](kube_dir):
            ret["comment"] = "this node has joined the cluster"
            return ret
        ret["changes"] = {"cluster": {"old": None, "new": f"joined {name} as {role}"}}
        if __opts__["test"]:
            # No --dry-run here: kubeadm's join dry run still runs discovery with the
            # token, and the credentials may not be published yet.
            ret["result"] = None
            ret["comment"] = f"would join the cluster of {name} as {role}"
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
        __salt__["kubeadm.join"](
            api_server_endpoint, info["token"], info["ca_cert_hash"],
            control_plane=control_plane, certificate_key=key, node_name=node_name,
            advertise_address=advertise_address, bind_port=bind_port, cri_socket=cri_socket,
            kubelet_extra_args=kubelet_extra_args, discovery_timeout=discovery_timeout,
        )
        if not __salt__["kubeadm.is_joined"](kube_dir):
            return _fail(ret, "kubeadm join reported success but wrote no kubelet.conf")
        if control_plane and not __salt__["kubeadm.api_ready"](timeout=timeout):
            return _fail(ret, f"joined, but the API does not answer after {timeout}s")
        ret["comment"] = f"joined the cluster of {name} as {role}"
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
    record = record or os.path.join(
        __salt__["config.get"]("kos:state_dir", "/etc/kos"), "applied",
        os.path.basename(name) + ".sha256",
    )
    try:
        with salt.utils.files.fopen(name) as fh:
            text = fh.read()
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
            os.makedirs(os.path.dirname(record), mode=0o700, exist_ok=True)
            with salt.utils.files.fopen(record, "w") as fh:
                fh.write(digest)
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"kubectl apply -f {name} failed: {exc}")
    if changed:
        ret["changes"] = {"objects": changed}
        ret["comment"] = f"applied {name}: {len(changed)} of {len(verdicts)} objects changed"
    else:
        ret["comment"] = f"{len(verdicts)} objects applied and unchanged"
    return ret


def _read_text(path):
    try:
        with salt.utils.files.fopen(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def node_drained(name, timeout=None, kubeconfig=None):
    """
    Ensure node ``name`` is cordoned and drained (run on a control plane), the first
    step of taking a node out. A node that is not registered is left alone.

    timeout
        Seconds to wait for Pod evictions.
    """
    ret = _ret(name)
    try:
        node = __salt__["kubeadm.nodes"](kubeconfig=kubeconfig).get(name)
        if node is None:
            ret["comment"] = f"node {name} is not registered"
            return ret
        if node["unschedulable"]:
            ret["comment"] = f"node {name} is cordoned"
            return ret
        ret["changes"] = {"schedulable": {"old": True, "new": False}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"node {name} would be drained"
            return ret
        __salt__["kubeadm.drain"](name, timeout=timeout, kubeconfig=kubeconfig)
        if not __salt__["kubeadm.nodes"](kubeconfig=kubeconfig).get(name, {}).get(
            "unschedulable", True
        ):
            return _fail(ret, f"kubectl drain {name} ran but the node is still schedulable")
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


def reset(name, kube_dir=None):
    """
    Ensure this node is no longer part of a cluster (``kubeadm reset -f``): its
    kubelet stops, its files go, a control plane leaves etcd. Drain the node
    before and delete its Node object after (``node_drained``, ``node_absent`` on a
    control plane; ``kubeadm/orch/remove.sls`` does all three).

    In test mode ``kubeadm reset --dry-run`` shows what would go.

    name
        The node name (for messages).
    """
    ret = _ret(name)
    try:
        member = __salt__["kubeadm.is_joined"](kube_dir) or __salt__["kubeadm.is_initialized"](
            kube_dir
        )
        if not member:
            ret["comment"] = f"{name} is not part of a cluster"
            return ret
        ret["changes"] = {"cluster": {"old": "member", "new": "reset"}}
        if __opts__["test"]:
            __salt__["kubeadm.reset"](dry_run=True)
            ret["result"] = None
            ret["comment"] = f"{name} would be reset (kubeadm reset --dry-run passed)"
            return ret
        __salt__["kubeadm.reset"]()
        if __salt__["kubeadm.is_joined"](kube_dir) or __salt__["kubeadm.is_initialized"](
            kube_dir
        ):
            return _fail(ret, "kubeadm reset ran but the node still has its cluster files")
        ret["comment"] = f"{name} reset"
    except CommandExecutionError as exc:
        return _fail(ret, f"kubeadm reset failed: {exc}")
    return ret
