"""
What kos asks of a kubeadm cluster's API through ``kubectl``: its nodes (read, drain,
uncordon, delete), manifests applied, objects looked up, and whether the API answers.
kubectl runs with kubeadm's admin kubeconfig unless told another.

:depends: ``kubectl`` on PATH
"""

import json
import time

import salt.utils.yaml
from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_cli, kos_kubeadm

__virtualname__ = "kos_kubectl"


def __virtual__():
    return kos_cli.virtual(
        __virtualname__, "kubectl", "are the kubeadm packages installed?"
    )


def _kubectl(args, kubeconfig=None, ok_retcodes=(0,)):
    return kos_cli.run(
        __salt__,
        ["kubectl", "--kubeconfig", kos_kubeadm.admin_conf(__salt__, kubeconfig),
         *args],
        ok_retcodes=ok_retcodes, describe=kos_kubeadm.message,
    )


def _flags(table):
    return kos_cli.flags(table, joined=True)


def _forget():
    kos_cli.forget(__context__, __virtualname__)


def nodes(kubeconfig=None, refresh=False):
    """
    Return the cluster's nodes as seen with the admin kubeconfig:
    ``{name: {"ready", "roles", "ip", "unschedulable", "taints", "version"}}`` (version: the
    kubelet's, as the node reports it).

    kubeconfig
        Default ``<kube_dir>/admin.conf``.

    refresh
        Ask the API again rather than answer from what this run read before.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.nodes
    """
    key = f"kos_kubectl.nodes:{kubeconfig}"
    if key in __context__ and not refresh:
        return __context__[key]
    res = _kubectl(["get", "nodes", "-o", "json"], kubeconfig)
    try:
        items = json.loads(res["stdout"])["items"]
    except (ValueError, KeyError) as exc:
        raise CommandExecutionError("kubectl printed no node list") from exc
    ret = {item["metadata"]["name"]: _node_record(item) for item in items}
    __context__[key] = ret
    return ret


def _node_record(item):
    """One Node object as ``nodes`` returns it."""
    labels = item["metadata"].get("labels") or {}
    status = item.get("status") or {}
    spec = item.get("spec") or {}
    return {
        "ready": any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])
        ),
        "roles": sorted(
            k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")
        ),
        "ip": next(
            (a["address"] for a in status.get("addresses", []) if a["type"] == "InternalIP"),
            None,
        ),
        "unschedulable": bool(spec.get("unschedulable")),
        "taints": spec.get("taints") or [],
        "version": (status.get("nodeInfo") or {}).get("kubeletVersion"),
        "pod_cidr": spec.get("podCIDR"),
    }


def node(name, kubeconfig=None):
    """
    Return Node ``name`` as ``nodes`` describes each (None: not registered), read by name:
    from v1.32 the Node authorizer lets a kubelet's credential (kubelet.conf) read its own
    Node, not list them all.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-1*' kos_kubectl.node k8s-worker-1 kubeconfig=/etc/kubernetes/kubelet.conf
    """
    res = _kubectl(["get", "node", name, "-o", "json"], kubeconfig, ok_retcodes=(0, 1))
    if res["retcode"] != 0:
        if "NotFound" in (res.get("stderr") or "") or "not found" in (res.get("stderr") or ""):
            return None
        raise CommandExecutionError(kos_kubeadm.message(res))
    try:
        return _node_record(json.loads(res["stdout"]))
    except (ValueError, KeyError) as exc:
        raise CommandExecutionError(f"kubectl printed no node {name}") from exc


def evictable_pods(node, kubeconfig=None):
    """
    Return the Pods on ``node`` that ``drain`` (as this module runs it) evicts and that
    are still there: every Pod bound to the node except DaemonSet Pods, static Pods'
    mirrors and Pods that already finished (kubectl's drain filters,
    https://github.com/kubernetes/kubectl/blob/v0.31.0/pkg/drain/filters.go), as
    ``namespace/name``.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.evictable_pods k8s-worker-2
    """
    out = _kubectl(["get", "pods", "--all-namespaces", "--field-selector",
                    f"spec.nodeName={node}", "-o", "json"], kubeconfig)["stdout"]
    try:
        items = json.loads(out)["items"]
    except (ValueError, KeyError) as exc:
        raise CommandExecutionError("kubectl printed no pod list") from exc
    left = []
    for pod in items:
        meta = pod.get("metadata") or {}
        owners = {o.get("kind") for o in meta.get("ownerReferences") or []}
        mirror = "kubernetes.io/config.mirror" in (meta.get("annotations") or {})
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if "DaemonSet" in owners or mirror or finished:
            continue
        left.append(f"{meta.get('namespace', 'default')}/{meta.get('name')}")
    return sorted(left)


def pods(selector, namespace="kube-system", kubeconfig=None):
    """
    Return the Pods of ``namespace`` that the label ``selector`` picks and that are not
    on their way out (no deletion timestamp): ``{name: {"node", "phase", "ready"}}``
    (node: None while unscheduled).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.pods k8s-app=kube-dns
    """
    out = _kubectl(["get", "pods", "--namespace", namespace, "--selector", selector,
                    "-o", "json"], kubeconfig)["stdout"]
    try:
        items = json.loads(out)["items"]
    except (ValueError, KeyError) as exc:
        raise CommandExecutionError("kubectl printed no pod list") from exc
    ret = {}
    for pod in items:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        status = pod.get("status") or {}
        ret[meta.get("name")] = {
            "node": (pod.get("spec") or {}).get("nodeName"),
            "phase": status.get("phase"),
            "ready": any(c.get("type") == "Ready" and c.get("status") == "True"
                         for c in status.get("conditions") or []),
        }
    return ret


def rollout_restart(deployment, namespace="kube-system", timeout=180, kubeconfig=None):
    """
    Replace a Deployment's Pods the way its rolling update does (``kubectl rollout
    restart``) and wait until the rollout is done (``kubectl rollout status``), so the
    scheduler places each new Pod against the nodes as they are now.

    timeout
        Seconds the rollout may take.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.rollout_restart coredns
    """
    where = ["--namespace", namespace]
    _kubectl(["rollout", "restart", f"deployment/{deployment}", *where], kubeconfig)
    return _kubectl(["rollout", "status", f"deployment/{deployment}", *where,
                     f"--timeout={kos_kubeadm.duration(timeout)}"], kubeconfig)["stdout"]


def drain(node, timeout=None, kubeconfig=None):
    """
    Cordon ``node`` and evict its Pods (``kubectl drain --ignore-daemonsets
    --delete-emptydir-data --force``): DaemonSet Pods stay, emptyDir data and
    unmanaged Pods go, as a node that is about to be reset requires.

    timeout
        Seconds to wait for evictions (default: no limit).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.drain k8s-worker-2
    """
    args = ["drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force"]
    args += _flags([("--timeout", None if timeout is None else kos_kubeadm.duration(timeout))])
    try:
        return _kubectl(args, kubeconfig)["stdout"]
    finally:
        _forget()


def uncordon(node, kubeconfig=None):
    """
    Let ``node`` take Pods again (``kubectl uncordon``).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.uncordon k8s-worker-2
    """
    try:
        return _kubectl(["uncordon", node], kubeconfig)["stdout"]
    finally:
        _forget()


def delete_node(node, ignore_not_found=False, kubeconfig=None):
    """
    Delete the Node object (``kubectl delete node``). ``kubeadm reset`` leaves it
    behind; a kubelet still running would register it again, so reset first.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.delete_node k8s-worker-2
    """
    args = ["delete", "node", node] + _flags([("--ignore-not-found", ignore_not_found)])
    try:
        return _kubectl(args, kubeconfig)["stdout"]
    finally:
        _forget()


def apply(path, kubeconfig=None):
    """
    Apply a manifest file (``kubectl apply -f``) and return what happened to each
    object: ``{"<kind>/<name>": "created"|"configured"|"unchanged"}``.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.apply /etc/kubernetes/addons/kube-router.yaml
    """
    try:
        out = _kubectl(["apply", "-f", path], kubeconfig)["stdout"]
    finally:
        _forget()
    ret = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 2:
            ret[words[0]] = words[1]
    return ret


def object_exists(kind, name, namespace=None, kubeconfig=None):
    """
    True when the object exists (``kubectl get KIND NAME --ignore-not-found``).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.object_exists daemonset kube-router namespace=kube-system
    """
    args = ["get", kind, name, "-o", "name", "--ignore-not-found"]
    args += _flags([("--namespace", namespace)])
    return bool(_kubectl(args, kubeconfig)["stdout"].strip())


def api_ready(timeout=60, kubeconfig=None, interval=1):
    """
    Wait until the API answers through ``kubeconfig`` (``kubectl version``) and
    return True; False after ``timeout`` seconds. After ``init`` the local load
    balancer needs a health check or two before it routes to the new API server.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.api_ready timeout=30
    """
    deadline = time.time() + float(timeout)
    while True:
        try:
            out = _kubectl(["version", "-o", "json"], kubeconfig)["stdout"]
            if json.loads(out).get("serverVersion"):
                return True
        except (CommandExecutionError, ValueError):
            pass
        if time.time() >= deadline:
            return False
        time.sleep(interval)


def etcd_members(kubeconfig=None):
    """
    Return the names of the nodes that run a kubeadm etcd member: kubeadm writes a
    node's etcd static Pod only after it added the member (phase control-plane-join/etcd in
    https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/phases/join/controlplanejoin.go),
    and finds the cluster's etcd endpoints the same way, from these Pods.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.etcd_members
    """
    out = _kubectl(["get", "pods", "--namespace", "kube-system", "-l",
                    "component=etcd,tier=control-plane", "-o", "json"], kubeconfig)["stdout"]
    try:
        items = json.loads(out)["items"]
    except (ValueError, KeyError) as exc:
        raise CommandExecutionError("kubectl printed no pod list") from exc
    return sorted({(i.get("spec") or {}).get("nodeName") for i in items} - {None})


def cluster_version(kubeconfig=None):
    """
    Return the cluster's version as kubeadm stored it: ``kubernetesVersion`` of the
    ClusterConfiguration in ``kube-system/kubeadm-config`` (``upgrade apply`` rewrites it).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_kubectl.cluster_version
    """
    out = _kubectl(["get", "configmap", "kubeadm-config", "-n", "kube-system", "-o",
                    "jsonpath={.data.ClusterConfiguration}"], kubeconfig)["stdout"]
    try:
        return (salt.utils.yaml.safe_load(out) or {}).get("kubernetesVersion")
    except (salt.utils.yaml.parser.ParserError, salt.utils.yaml.scanner.ScannerError,
            AttributeError) as exc:
        raise CommandExecutionError("kubeadm-config holds no ClusterConfiguration") from exc
