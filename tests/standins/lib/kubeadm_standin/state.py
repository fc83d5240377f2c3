"""Cluster state held by the stand-in API server, and the operations that change it.

The state is one JSON document (`/var/lib/kos-standin-apiserver/state.json` under the
node's root).  Every control-plane node keeps a full copy; see apiserver.py for how the
copies are kept in step.  Expiry is evaluated when the state is read, which plays the
part of kube-controller-manager's token cleaner and garbage collector: an expired
bootstrap token disappears, and the kubeadm-certs Secret disappears with the token that
owns it.
"""

import base64
import copy
import hashlib
import hmac
import json
import os
import time

from . import env

CERT_TOKEN_DESCRIPTION = "Proxy for managing TTL for the kubeadm-certs secret"
DEFAULT_TOKEN_GROUPS = ["system:bootstrappers:kubeadm:default-node-token"]
DEFAULT_TOKEN_USAGES = ["signing", "authentication"]


class ApiError(Exception):
    """An error the way the API server reports it (metav1.Status)."""

    def __init__(self, code, reason, message):
        Exception.__init__(self, message)
        self.code = code
        self.reason = reason
        self.message = message

    def status(self):
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}


def not_found(resource, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (resource, name))


def new_state(cluster_configuration, cluster_info_kubeconfig, kube_version,
              kubelet_configuration=None):
    return {
        "revision": 1,
        "kubernetesVersion": kube_version,
        "clusterConfiguration": cluster_configuration,
        "kubeletConfiguration": kubelet_configuration,
        "clusterInfo": cluster_info_kubeconfig,
        "tokens": {},
        "certs": None,
        "nodes": {},
        "members": [],
        "objects": {},
        "addons": {},
    }


# ---------------------------------------------------------------------------
# persistence

def path():
    return env.host(env.STATE_FILE)


def load(state_path=None):
    with open(state_path or path()) as f:
        return json.load(f)


def save(state, state_path=None):
    p = state_path or path()
    os.makedirs(os.path.dirname(p), exist_ok=True)
    tmp = p + ".tmp%d" % os.getpid()
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.chmod(tmp, 0o600)
    os.replace(tmp, p)


# ---------------------------------------------------------------------------
# views

def token_alive(tok, now):
    return tok.get("expires") is None or tok["expires"] > now


def live_tokens(state, now):
    return {tid: t for tid, t in state["tokens"].items() if token_alive(t, now)}


def live_certs(state, now):
    certs = state.get("certs")
    if not certs:
        return None
    owner = state["tokens"].get(certs.get("ownerToken"))
    if owner is None or not token_alive(owner, now):
        return None
    return certs


def authenticate_token(state, bearer, now):
    """The token record for `Authorization: Bearer id.secret`, or None."""
    if not bearer or "." not in bearer:
        return None
    tid, secret = bearer.split(".", 1)
    tok = live_tokens(state, now).get(tid)
    if tok and hmac.compare_digest(tok["secret"], secret) and \
            "authentication" in tok.get("usages", []):
        return tok
    return None


def _b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jws_detached(content, token_id, token_secret):
    """k8s.io/cluster-bootstrap/token/jws.ComputeDetachedSignature (HS256, kid=token id)."""
    header = _b64url(json.dumps({"alg": "HS256", "kid": token_id},
                                separators=(",", ":")).encode())
    payload = _b64url(content.encode())
    sig = hmac.new(token_secret.encode(), ("%s.%s" % (header, payload)).encode(),
                   hashlib.sha256).digest()
    return "%s..%s" % (header, _b64url(sig))


def cluster_info_configmap(state, now):
    """kube-public/cluster-info with one JWS per live signing token (bootstrapsigner)."""
    data = {"kubeconfig": state["clusterInfo"]}
    for tid, tok in sorted(live_tokens(state, now).items()):
        if "signing" in tok.get("usages", []):
            data["jws-kubeconfig-" + tid] = jws_detached(state["clusterInfo"], tid,
                                                          tok["secret"])
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"}, "data": data}


# ---------------------------------------------------------------------------
# operations

def _create_token(state, tok, now):
    existing = state["tokens"].get(tok["id"])
    if existing is not None and token_alive(existing, now):
        raise ApiError(409, "AlreadyExists",
                       'secrets "bootstrap-token-%s" already exists' % tok["id"])
    rec = dict(tok)
    rec["created"] = now
    state["tokens"][tok["id"]] = rec


def apply_op(state, op, now=None):
    """Apply one mutation in place; returns a JSON-able result or raises ApiError."""
    now = time.time() if now is None else now
    kind = op["op"]
    # The token cleaner runs continuously in a real cluster; drop what it would have.
    for tid in [t for t, rec in state["tokens"].items() if not token_alive(rec, now)]:
        del state["tokens"][tid]
    if state.get("certs") and live_certs(state, now) is None:
        state["certs"] = None

    if kind == "create_token":
        _create_token(state, op["token"], now)
        result = {"created": op["token"]["id"]}
    elif kind == "delete_token":
        tid = op["id"]
        if tid not in state["tokens"]:
            raise not_found("secrets", "bootstrap-token-" + tid)
        del state["tokens"][tid]
        result = {"deleted": tid}
    elif kind == "upload_certs":
        _create_token(state, op["ownerToken"], now)
        state["certs"] = {"ownerToken": op["ownerToken"]["id"], "data": op["data"]}
        result = {"uploaded": True}
    elif kind == "register_node":
        node = dict(op["node"])
        old = state["nodes"].get(node["name"])
        if old is not None and old.get("ready") and not op.get("force"):
            raise ApiError(409, "AlreadyExists", 'nodes "%s" already exists' % node["name"])
        node.setdefault("created", now)
        if old is not None and op.get("keepCreated"):
            node["created"] = old.get("created", now)
        state["nodes"][node["name"]] = node
        result = {"registered": node["name"]}
    elif kind == "patch_node":
        node = state["nodes"].get(op["name"])
        if node is None:
            raise not_found("nodes", op["name"])
        before = copy.deepcopy(node)
        node.update(op["patch"])
        result = {"changed": before != node, "node": node}
    elif kind == "delete_node":
        if op["name"] not in state["nodes"]:
            raise not_found("nodes", op["name"])
        del state["nodes"][op["name"]]
        result = {"deleted": op["name"]}
    elif kind == "add_member":
        state["members"] = [m for m in state["members"] if m["name"] != op["member"]["name"]]
        state["members"].append(op["member"])
        result = {"members": state["members"]}
    elif kind == "remove_member":
        before = len(state["members"])
        state["members"] = [m for m in state["members"] if m["name"] != op["name"]]
        result = {"removed": before != len(state["members"])}
    elif kind == "apply_object":
        key = op["key"]
        old = state["objects"].get(key)
        if old is None:
            verdict = "created"
            created = now
        else:
            verdict = "unchanged" if old["object"] == op["object"] else "configured"
            created = old.get("created", now)
        state["objects"][key] = {"object": op["object"], "created": created}
        result = {"verdict": verdict}
    elif kind == "upload_config":
        # kubeadm's upload-config phase (init, upgrade apply): kube-system/kubeadm-config
        cc = op["clusterConfiguration"]
        state["clusterConfiguration"] = cc
        if cc.get("kubernetesVersion"):
            state["kubernetesVersion"] = cc["kubernetesVersion"]
        result = {"uploaded": True}
    elif kind == "set_addons":
        # what the addon phase deployed: {"coredns": version, "kube-proxy": version}
        state.setdefault("addons", {}).update(op["addons"])
        result = {"addons": state["addons"]}
    elif kind == "place_dns_pods":
        # where the scheduler put CoreDNS's replicas, one node name per replica
        state["dnsPods"] = list(op["nodes"])
        state["dnsGeneration"] = state.get("dnsGeneration", 0) + 1
        result = {"dnsPods": state["dnsPods"], "dnsGeneration": state["dnsGeneration"]}
    elif kind == "delete_object":
        if op["key"] not in state["objects"]:
            raise not_found(op.get("resource", "objects"), op.get("name", op["key"]))
        del state["objects"][op["key"]]
        result = {"deleted": op["key"]}
    else:
        raise ApiError(400, "BadRequest", "unknown operation %r" % kind)
    state["revision"] = state.get("revision", 0) + 1
    return result
