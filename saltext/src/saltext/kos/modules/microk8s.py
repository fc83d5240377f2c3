"""
Manage a MicroK8s node through the ``microk8s`` command: its status, the cluster it is
part of (join tokens, join, leave, remove-node) and its Kubernetes nodes (list, cordon,
drain). Addons, certificates and backups have their own modules (``microk8s_addons``,
``microk8s_certs``, ``microk8s_backup``).

Behaviour follows what the real CLI prints and returns (exit codes, worker-node
guards, token rules); the commands are those of
https://microk8s.io/docs/command-reference.

:depends: the ``microk8s`` snap (``/snap/bin`` on PATH)
"""

import hashlib
import json
import os
import ssl
import time

import salt.utils.files
import salt.utils.yaml
from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_cli, kos_microk8s, kos_state

__virtualname__ = "microk8s"

STOPPED_MESSAGE = "microk8s is not running, try microk8s start"
# The dqlite members this control plane last knew, kept on its disk while it is stopped: the
# node store microk8s hands the dqlite client (`dqlite -s file://.../backend/cluster.yaml` in
# https://github.com/canonical/microk8s/blob/master/scripts/wrappers/common/utils.py,
# get_dqlite_info), a YAML list of {ID, Address, Role} (NodeInfo in
# https://github.com/canonical/go-dqlite/blob/v3/internal/protocol/store.go).
DQLITE_MEMBERS = os.path.join("var", "kubernetes", "backend", "cluster.yaml")
# go-dqlite's NodeRole values, named as `microk8s status` names them
DQLITE_ROLES = {0: "voter", 1: "standby", 2: "spare"}


def __virtual__():
    return kos_microk8s.virtual(__virtualname__)


def status(wait_ready=False, timeout=None):
    """
    Return the node's state, parsed from ``microk8s status --format yaml``.

    Keys: ``running`` (bool), ``worker`` (True when the node joined a cluster as a
    worker: status then only says so), ``stopped``, ``high_availability``
    (``enabled`` and the dqlite ``nodes`` with their roles), ``addons``
    (name -> ``{"status", "repository", "version"}``) and ``message``.

    wait_ready
        Block until the node is ready (``--wait-ready``).

    timeout
        Seconds to wait with ``wait_ready`` before giving up.

    CLI Example:

    .. code-block:: bash

        salt '*' microk8s.status
    """
    key = "microk8s.status"
    if not wait_ready and key in __context__:
        return __context__[key]
    args = ["status", "--format", "yaml"]
    if wait_ready:
        args.append("--wait-ready")
        args += kos_cli.flags([("--timeout", timeout)])
    # 1 means "not ready"; the YAML is still printed.
    res = kos_microk8s.run(__salt__, args, ok_retcodes=(0, 1))
    out = res["stdout"]
    ret = {
        "running": False,
        "worker": False,
        "stopped": False,
        "high_availability": {"enabled": False, "nodes": []},
        "addons": {},
        "message": "",
    }
    if out.startswith(kos_microk8s.WORKER_MESSAGE):
        ret.update(running=None, worker=True, message=out.strip())
    elif out.strip() == STOPPED_MESSAGE:
        ret.update(stopped=True, message=out.strip())
    else:
        try:
            data = salt.utils.yaml.safe_load(out)
        except Exception as exc:  # pylint: disable=broad-except
            raise CommandExecutionError(f"unreadable microk8s status output: {exc}") from exc
        if not isinstance(data, dict) or "microk8s" not in data:
            raise CommandExecutionError(kos_cli.message(res))
        ha = data.get("high-availability") or {}
        ret["running"] = bool(data["microk8s"].get("running"))
        ret["message"] = ha.get("message", "")
        ret["high_availability"] = {
            "enabled": bool(ha.get("enabled")),
            "nodes": list(ha.get("nodes") or []),
        }
        for addon in data.get("addons") or []:
            ret["addons"][addon["name"]] = {
                "status": addon["status"],
                "repository": addon.get("repository"),
                "version": addon.get("version"),
            }
    __context__[key] = ret
    return ret


def is_worker():
    """
    True when this node joined a cluster as a worker (no control plane here).

    CLI Example:

    .. code-block:: bash

        salt '*' microk8s.is_worker
    """
    return bool(status()["worker"])


def _stored_members(snap_data=None):
    """The dqlite members a stopped control plane last knew, from its own disk."""
    path = os.path.join(kos_microk8s.snap_data(__salt__, snap_data), DQLITE_MEMBERS)
    cannot = (f"microk8s is stopped and {path} cannot be read, so whether this node is in a "
              "cluster cannot be told: start it (microk8s start) first")
    try:
        with salt.utils.files.fopen(path) as fh:
            data = salt.utils.yaml.safe_load(fh)
    except Exception as exc:  # pylint: disable=broad-except
        raise CommandExecutionError(f"{cannot} ({exc})") from exc
    if not isinstance(data, list) or not all(isinstance(m, dict) and m.get("Address")
                                             for m in data):
        raise CommandExecutionError(f"{cannot} (it holds no list of members)")
    return [{"address": m["Address"], "role": DQLITE_ROLES.get(m.get("Role"), "unknown")}
            for m in data]


def cluster_members(snap_data=None):
    """
    Return the dqlite members this control-plane node knows (address and role).

    A node that never joined or was never joined lists only itself. A stopped node
    answers no status: the members are those it last knew, read from its datastore's
    ``cluster.yaml``; when that cannot be read, it fails (start the node first).

    snap_data
        The snap's data directory (default ``/var/snap/microk8s/current``).

    CLI Example:

    .. code-block:: bash

        salt '*' microk8s.cluster_members
    """
    st = status()
    if st["stopped"]:
        return _stored_members(snap_data)
    return st["high_availability"]["nodes"]


def is_clustered(snap_data=None):
    """
    True when the node is part of a multi-node cluster: a worker that joined, or a
    control-plane node whose datastore has other members (a stopped one too: see
    ``cluster_members``).

    snap_data
        The snap's data directory (default ``/var/snap/microk8s/current``).

    CLI Example:

    .. code-block:: bash

        salt '*' microk8s.is_clustered
    """
    return bool(status()["worker"]) or len(cluster_members(snap_data)) > 1


def add_node(ttl=None, token=None):
    """
    Issue a join token (``microk8s add-node --format json``).

    Returns ``{"token": "TOKEN/CHECK", "urls": [...], "expires": unix time or None}``.
    The output is never logged.

    ttl
        Seconds the token stays valid. A TTL token can be used by many joins until
        it expires; without TTL the token is burned by its first use, even by a
        join that then fails.

    token
        Use this token (32+ characters) instead of a random one.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s.add_node ttl=3600
    """
    issued = time.time()
    flags = kos_cli.flags([("--token-ttl", ttl), ("--token", token)])
    res = kos_microk8s.run(__salt__, ["add-node", "--format", "json", *flags], secret=True)
    try:
        data = json.loads(res["stdout"])
    except ValueError as exc:
        raise CommandExecutionError("microk8s add-node printed no JSON") from exc
    data["expires"] = int(issued + int(ttl)) if ttl is not None else None
    return data


def join(connection, worker=False, skip_verify=False):
    """
    Join the cluster behind ``connection`` (``IP:PORT/TOKEN[/CHECK]``).

    Raises with the CLI's message when the join fails (exit 6: the cluster agent
    refused, e.g. ``Connection failed. Invalid token (500).``; 4: certificate check).

    worker
        Join as a worker, without control plane.

    skip_verify
        Do not check the cluster's certificate fingerprint.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-1*' microk8s.join 10.1.0.11:25000/<token>/<check> worker=True
    """
    args = ["join", connection,
            *kos_cli.flags([("--worker", worker), ("--skip-verify", skip_verify)])]
    return kos_microk8s.change(__salt__, __context__, args, secret=True)["stdout"]


def leave():
    """
    Leave the cluster (``microk8s leave``).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-1*' microk8s.leave
    """
    return kos_microk8s.change(__salt__, __context__, ["leave"])["stdout"]


def remove_node(node, force=False):
    """
    Remove a departed node from the cluster (``microk8s remove-node NODE``).

    node
        Node name or InternalIP.

    force
        Also unregister it from dqlite when it never left cleanly.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s.remove_node k8s-worker-2 force=True
    """
    args = ["remove-node", node, *kos_cli.flags([("--force", force)])]
    return kos_microk8s.change(__salt__, __context__, args)["stdout"]


def cert_check(snap_data=None):
    """
    Return the 12-character fingerprint of the server certificate that join
    connection strings carry (``/CHECK``): it changes when the certificate is
    regenerated, which invalidates published connection strings.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s.cert_check
    """
    path = os.path.join(kos_microk8s.snap_data(__salt__, snap_data), "certs", "server.crt")
    try:
        with salt.utils.files.fopen(path) as fh:
            der = ssl.PEM_cert_to_DER_cert(fh.read())
    except OSError as exc:
        raise CommandExecutionError(f"cannot read {path}: {exc}") from exc
    return hashlib.sha256(der).hexdigest()[:12]


def token_valid(token, snap_data=None):
    """
    True when ``token`` is still accepted by this node's cluster agent
    (listed in ``cluster-tokens.txt`` with a future expiry, or persistent).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s.token_valid <token>
    """
    creds = os.path.join(kos_microk8s.snap_data(__salt__, snap_data), "credentials")
    now = time.time()
    for name in ("persistent-cluster-tokens.txt", "cluster-tokens.txt"):
        try:
            with salt.utils.files.fopen(os.path.join(creds, name)) as fh:
                lines = fh.read().splitlines()
        except OSError:
            continue
        for line in lines:
            value, _, expiry = line.strip().partition("|")
            if value != token:
                continue
            if name.startswith("persistent") or not expiry or float(expiry) > now:
                return True
    return False


def remove_token(token, snap_data=None):
    """
    Withdraw a join token this node issued: its line goes from ``cluster-tokens.txt``,
    where ``add-node`` appended it. True when it was there.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s.remove_token <token>
    """
    path = os.path.join(kos_microk8s.snap_data(__salt__, snap_data), "credentials",
                        "cluster-tokens.txt")
    try:
        with salt.utils.files.fopen(path) as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise CommandExecutionError(f"cannot read {path}: {exc}") from exc
    kept = [line for line in lines if line.strip().partition("|")[0] != token]
    if len(kept) == len(lines):
        return False
    tmp = f"{path}.kos-tmp"
    with salt.utils.files.fopen(tmp, "w") as fh:
        fh.write("".join(f"{line}\n" for line in kept))
    os.chmod(tmp, os.stat(path).st_mode & 0o777)
    os.replace(tmp, path)
    return True


def start():
    """
    Start the node's services (``microk8s start``).

    CLI Example:

    .. code-block:: bash

        salt '*' microk8s.start
    """
    return kos_microk8s.change(__salt__, __context__, ["start"])["stdout"]


def version():
    """
    Return ``{"version": "v1.31.9", "revision": "8148"}`` from ``microk8s version``.

    CLI Example:

    .. code-block:: bash

        salt '*' microk8s.version
    """
    words = kos_microk8s.run(__salt__, ["version"])["stdout"].split()
    # "MicroK8s v1.31.9 revision 8148"
    if len(words) < 4 or words[0] != "MicroK8s":
        raise CommandExecutionError(f"unexpected microk8s version output: {' '.join(words)}")
    return {"version": words[1], "revision": words[3]}


def nodes():
    """
    Return the Kubernetes nodes as seen from this control-plane node:
    ``{name: {"ready": bool, "role": "control-plane"|"worker", "ip": InternalIP,
    "version": the kubelet's, "unschedulable": cordoned}}``.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s.nodes
    """
    res = kos_microk8s.run(__salt__, ["kubectl", "get", "nodes", "-o", "json"])
    if res["stdout"].startswith(kos_microk8s.WORKER_MESSAGE):
        raise CommandExecutionError("this node is a worker: ask a control-plane node")
    try:
        items = json.loads(res["stdout"])["items"]
    except (ValueError, KeyError) as exc:
        raise CommandExecutionError("kubectl printed no node list") from exc
    ret = {}
    for item in items:
        labels = item["metadata"].get("labels", {})
        conditions = item.get("status", {}).get("conditions", [])
        addresses = item.get("status", {}).get("addresses", [])
        info = item.get("status", {}).get("nodeInfo") or {}
        ret[item["metadata"]["name"]] = {
            "ready": any(c["type"] == "Ready" and c["status"] == "True" for c in conditions),
            "role": (
                "worker" if "node.kubernetes.io/microk8s-worker" in labels else "control-plane"
            ),
            "ip": next((a["address"] for a in addresses if a["type"] == "InternalIP"), None),
            "version": info.get("kubeletVersion"),
            "unschedulable": bool((item.get("spec") or {}).get("unschedulable")),
        }
    return ret


def _node_command(args):
    res = kos_microk8s.run(__salt__, ["kubectl", *args])
    if res["stdout"].startswith(kos_microk8s.WORKER_MESSAGE):
        raise CommandExecutionError("this node is a worker: run it on a control-plane node")
    return res["stdout"].strip()


def cordon(node):
    """
    Mark ``node`` unschedulable (``microk8s kubectl cordon``); run on a control plane.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s.cordon k8s-worker-1
    """
    return _node_command(["cordon", node])


def uncordon(node):
    """
    Let Pods be scheduled on ``node`` again (``microk8s kubectl uncordon``); run on a
    control plane.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s.uncordon k8s-worker-1
    """
    return _node_command(["uncordon", node])


def drain(node, timeout=None):
    """
    Cordon ``node`` and evict its Pods (``microk8s kubectl drain --ignore-daemonsets
    --delete-emptydir-data``, the documented way before a refresh); run on a control
    plane. A drain that fails or times out leaves the node cordoned.

    timeout
        Seconds to wait for evictions (kubectl waits for ever without one).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s.drain k8s-worker-1 timeout=300
    """
    args = ["drain", node, "--ignore-daemonsets", "--delete-emptydir-data"]
    if timeout is not None:
        if int(timeout) < 1:
            # kubectl reads --timeout=0s as "wait for ever"
            raise CommandExecutionError(f"drain timeout must be at least 1 s, got {timeout!r}")
        args.append(f"--timeout={int(timeout)}s")
    return _node_command(args)


def config():
    """
    Return the admin kubeconfig (``microk8s config``). Holds a client key: never logged.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s.config
    """
    return kos_microk8s.run(__salt__, ["config"], secret=True)["stdout"]


def upgrade_facts():
    """
    What orch.upgrade must know of this node before it changes anything:
    ``{"tracking": the snap's channel, "version", "revision", "held": refreshes held,
    "channel": microk8s:channel of a freshly compiled pillar (None when unset),
    "pending": the channel of an upgrade that started here and has not finished,
    "pending_cordoned": whether the node was cordoned before that upgrade drained it}``.

    CLI Example:

    .. code-block:: bash

        salt '*' microk8s.upgrade_facts
    """
    snap = __salt__["snap.list"]("microk8s").get("microk8s") or {}
    # unmasked: Salt 3008 masks pillar.items' values unless asked (pillar_mask_output)
    pillar = __salt__["pillar.items"](unmask=True)
    pending = kos_state.read_json(
        kos_state.state_file(__salt__, "upgrade-pending.json"))
    return {
        "tracking": snap.get("tracking"),
        "version": snap.get("version"),
        "revision": snap.get("rev"),
        "held": __salt__["snap.held"]("microk8s"),
        "channel": (pillar.get("microk8s") or {}).get("channel"),
        "pending": (pending or {}).get("channel"),
        "pending_cordoned": bool((pending or {}).get("cordoned")),
    }
