"""
Issue and revoke, on the first control plane, the join credential each joining kubeadm
node gets for itself: a bootstrap token and the CA hash, and for a control plane the
certificate key (through the ``kos_join`` execution module). Each is kept in
``<kos:state_dir>/join/<node>.json`` and published in the mine to that node alone
(``kos_state``); ``kubeadm.joined`` reads it there.

Join tokens and certificate keys never appear in a state's changes or comment;
only their expiry does.
"""

import time

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_state

__virtualname__ = "kubeadm_join"

DEFAULT_DESCRIPTION = "kos: node join"
# What kubeadm calls the token that owns the kubeadm-certs Secret (kos_join has it too)
# (https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/phases/copycerts/copycerts.go).
CERT_TOKEN_DESCRIPTION = "Proxy for managing TTL for the kubeadm-certs secret"


def __virtual__():
    # Loads without the kubeadm command too: a test run on a node whose packages are
    # not installed yet predicts instead of failing as "state not found".
    return __virtualname__


def _not_initialized(ret, what, status):
    """A test run on a fresh node predicts; a real run cannot go on without a cluster."""
    if __opts__["test"]:
        ret["result"] = None
        ret["comment"] = f"would {what} once the control plane is initialized"
        return ret
    return kos_state.fail(
        ret, f"this node runs no initialized control plane ({status['reason']}): cannot {what}")


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
    key = __salt__["kos_join.upload_certs"](config=config)
    created = [t for t in _cert_tokens() if t["id"] not in before]
    if not created:
        raise CommandExecutionError("the certificates were uploaded but no token owns the Secret")
    return key, max(created, key=lambda t: t["expires"] or 0)


def credential_present(name, role, node_name=None, ttl=900, min_remaining=300,
                       key_min_remaining=900, description=DEFAULT_DESCRIPTION, ca_file=None,
                       config=None, kube_dir=None):
    """
    Ensure the node ``name`` (a minion id) holds a join credential of its own, issued on
    this first control plane and published in the mine under ``kos_join_<name>``, which
    only the minion ``name`` can read: a bootstrap token with a short TTL and the CA hash,
    and for a control plane only the certificate key that decrypts the cluster's CA keys
    (``kubeadm init phase upload-certs``). A worker's credential holds no certificate key,
    so it cannot join a control plane (kubeadm needs the shared certificates for that).

    Used once: the orchestration revokes it (``credentials_absent``) as soon as the
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
    ret = kos_state.ret(name)
    problem = kos_state.credential_problem(role, ttl, min_remaining)
    if problem:
        return kos_state.fail(ret, problem)
    if "kos_join.token_list" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm",
                                        f"issue a join credential for {name}")
    control_plane = role == "control_plane"
    path = kos_state.credential_file(__salt__, name)
    now = time.time()
    current = kos_state.read_json(path)
    if current is not None and current.get("role") != role:
        # issued for another role: nothing of it is reused
        stale, current = current, None
    else:
        stale = None
    created = []
    try:
        status = __salt__["kubeadm.init_status"](kube_dir)
        if not status["initialized"]:
            return _not_initialized(ret, f"issue a join credential for {name}", status)
        ca_hash = __salt__["kos_join.ca_cert_hash"](ca_file)
        listed = {t["id"]: t for t in __salt__["kos_join.token_list"]()}
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
        if kos_state.predicted(
                ret, __opts__, {"credential": {"old": old, "new": {"role": role, "ttl": int(ttl)}}},
                f"a join credential for {name} would be issued ({reason})"):
            return ret
        doc = dict(current or {}, distribution="kubeadm", node=name, role=role)
        replaced = [t for t in ((stale or {}).get("token_id"),
                                (stale or {}).get("owner_token_id")) if t]
        if token_reason:
            token = __salt__["kos_join.token_create"](
                ttl=int(ttl), description=f"{description} {node_name or name}".strip())
            token_id = token.split(".", 1)[0]
            created.append(token_id)
            mine = {t["id"]: t for t in __salt__["kos_join.token_list"]()}.get(token_id)
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
        kos_state.write_json(path, doc)
        kos_state.publish_credential(__salt__, name)
        created = []
        still = {t["id"] for t in __salt__["kos_join.token_list"]()}
        for token_id in replaced:
            if token_id in still:
                __salt__["kos_join.token_delete"](token_id)
    except (OSError, CommandExecutionError) as exc:
        for token_id in created:
            _withdraw(token_id)
        return kos_state.fail(ret, f"issuing a join credential for {name} failed: {exc}")
    ret["changes"]["credential"]["new"]["expires"] = doc.get("expires")
    ret["comment"] = f"join credential for {name} ({role}) issued and published ({reason})"
    return ret


def _withdraw(token_id):
    """Delete a token this run created but could not publish: nobody could use it."""
    try:
        __salt__["kos_join.token_delete"](token_id)
    except CommandExecutionError:
        pass


def _cert_tokens():
    """The hidden tokens kubeadm creates to own (and expire) the kubeadm-certs Secret."""
    return [
        t for t in __salt__["kos_join.token_list"]() if t["description"] == CERT_TOKEN_DESCRIPTION
    ]


def credentials_absent(name, nodes=None, description=DEFAULT_DESCRIPTION, kube_dir=None):
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
    ret = kos_state.ret(name)
    issued = kos_state.credential_nodes(__salt__)
    chosen = issued if nodes is None else [n for n in nodes if n in issued]
    docs = [(kos_state.credential_file(__salt__, n), n) for n in chosen]
    if "kos_join.token_list" not in __salt__:
        if docs:
            return kos_state.missing_module(ret, __opts__, "kubeadm",
                                            "revoke the join credentials")
        ret["comment"] = "no join credential left"
        return ret
    try:
        listed = ({t["id"]: t for t in __salt__["kos_join.token_list"]()}
                  if __salt__["kubeadm.init_status"](kube_dir)["initialized"] else {})
        doomed = set()
        for path, _ in docs:
            doc = kos_state.read_json(path) or {}
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
            __salt__["kos_join.token_delete"](token_id)
        for path, node in docs:
            kos_state.remove(path)
            kos_state.withdraw_credential(__salt__, node)
    except (OSError, CommandExecutionError) as exc:
        return kos_state.fail(ret, f"revoking the join credentials failed: {exc}")
    ret["comment"] = "join credentials revoked"
    if ret["changes"]["credentials"]["old"]:
        ret["comment"] += ": " + ", ".join(ret["changes"]["credentials"]["old"])
    return ret
