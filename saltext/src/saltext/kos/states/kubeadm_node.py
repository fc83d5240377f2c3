"""
What a kubeadm node runs besides its membership (``kubeadm``): the manifests applied to
the cluster, container images imported from archives, the control plane's certificates
renewed before they expire, the routed pod network, and replicas spread over nodes.
"""

import glob
import hashlib
import os
import time

import yaml
from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_state

__virtualname__ = "kubeadm_node"


def __virtual__():
    # Loads without the kubeadm command too: a test run on a node whose packages are
    # not installed yet predicts instead of failing as "state not found".
    return __virtualname__


def _manifest_objects(text):
    """The ``(kind, name, namespace)`` of each object in a manifest's text."""
    objects = []
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and doc.get("kind"):
            meta = doc.get("metadata") or {}
            objects.append((doc["kind"], meta.get("name"), meta.get("namespace")))
    return objects


def _recorded(path):
    """The digest ``manifest_applied`` recorded at the last apply, or None."""
    text = kos_state.read_text(path)
    return None if text is None else text.strip()


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
    ret = kos_state.ret(name)
    if "kubeadm.init_status" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm", f"apply {name}")
    record = record or kos_state.state_file(
        __salt__, os.path.join("applied", os.path.basename(name) + ".sha256"))
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
        return kos_state.fail(ret, f"cannot read manifest {name}: {exc}")
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
            recorded = _recorded(record)
            if not missing and recorded == digest:
                ret["comment"] = f"{len(objects)} objects applied and unchanged"
                return ret
            ret["result"] = None
            ret["changes"] = {"objects": {"old": {"missing": missing}, "new": "applied"}}
            ret["comment"] = f"{name} would be applied"
            return ret
        verdicts = __salt__["kos_kubectl.apply"](name, kubeconfig=kubeconfig)
        changed = {obj: verdict for obj, verdict in verdicts.items() if verdict != "unchanged"}
        if _recorded(record) != digest:
            kos_state.write_file(record, digest)
    except (OSError, CommandExecutionError) as exc:
        return kos_state.fail(ret, f"kubectl apply -f {name} failed: {exc}")
    if changed:
        ret["changes"] = {"objects": changed}
        ret["comment"] = f"applied {name}: {len(changed)} of {len(verdicts)} objects changed"
    else:
        ret["comment"] = f"{len(verdicts)} objects applied and unchanged"
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
    ``restart_wait``; the API answers again before the state returns. Certificates
    signed by an external CA are left to it; the CAs themselves are never renewed (ten
    years).

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
    ret = kos_state.ret(name)
    if "kubeadm.init_status" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm",
                                        "renew the control plane's certificates")
    try:
        found = __salt__["kos_certs.certificates"](kube_dir)
    except CommandExecutionError as exc:
        return kos_state.fail(ret, exc)
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
        return kos_state.fail(ret, exc)
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
    ret = kos_state.ret(name)
    if "kubeadm.init_status" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm",
                                        f"import the images of {name}")
    try:
        archives = sorted(glob.glob(os.path.join(name, "*.tar")))
        if not archives:
            return kos_state.fail(ret, f"no image archives (*.tar) in {name}")
        have = set(__salt__["kos_images.images"](namespace))
        missing = {}
        for path in archives:
            refs = __salt__["kos_images.archive_images"](path)
            if not refs:
                return kos_state.fail(ret, f"{path} names no image")
            if not set(refs) <= have:
                missing[path] = refs
        if not missing:
            ret["comment"] = f"every image of {len(archives)} archives is in containerd"
            return ret
        wanted = sorted(ref for refs in missing.values() for ref in refs)
        if kos_state.predicted(
                ret, __opts__, {"images": {"old": sorted(set(wanted) & have), "new": wanted}},
                f"would import {', '.join(wanted)}"):
            return ret
        for path in missing:
            __salt__["kos_images.import_images"](path, namespace)
        ret["comment"] = f"imported {', '.join(wanted)}"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"importing images from {name} failed: {exc}")
    return ret


def pod_network_routed(name, cluster_cidr, timeout=60, kube_dir=None):
    """
    Ensure node ``name``'s routed pod network matches the API
    (``kos_podnet.sync_pod_network``: the CNI configuration for its pod CIDR, routes to
    the other nodes' pod CIDRs, egress masquerading). Waits up to ``timeout`` seconds for
    the controller manager to give the node its pod CIDR.
    """
    ret = kos_state.ret(name)
    if "kubeadm.init_status" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubeadm",
                                        f"set up the routed pod network of {name}")
    # the kubelet's kubeconfig, where the execution module looks for it
    kubelet_conf = os.path.join(__salt__["kubeadm.get_kube_dir"](kube_dir), "kubelet.conf")
    if not os.path.exists(kubelet_conf):
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"would set up the routed pod network of {name} once it joined"
            return ret
        return kos_state.fail(ret, f"{kubelet_conf} is missing: {name} has not joined")
    deadline = time.time() + float(timeout)
    while True:
        try:
            res = __salt__["kos_podnet.sync_pod_network"](
                name, cluster_cidr, kube_dir=kube_dir, test=__opts__["test"])
            break
        except CommandExecutionError as exc:
            if "no pod CIDR" not in str(exc) or time.time() > deadline:
                return kos_state.fail(ret, f"the routed pod network of {name}: {exc}")
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


# What kubeadm's CoreDNS Deployment tolerates
# (cmd/kubeadm/app/phases/addons/dns/manifests.go): the control planes' taint and
# CriticalAddonsOnly. A node with any other NoSchedule or NoExecute taint cannot take it.
TOLERATED = ("node-role.kubernetes.io/control-plane", "CriticalAddonsOnly")


def _can_host(record, tolerated):
    return record["ready"] and not record["unschedulable"] and all(
        t.get("key") in tolerated or t.get("effect") == "PreferNoSchedule"
        for t in record["taints"])


def replicas_spread(name, selector, namespace="kube-system", tolerated=TOLERATED, timeout=180,
                    kubeconfig=None):
    """
    Ensure the replicas of Deployment ``name`` (its Pods: label ``selector``) do not all
    sit on one node while another node could take them, so that losing one node leaves
    one running. The scheduler spreads them only as it places them (kubeadm's CoreDNS
    prefers other nodes than its siblings'), and kubeadm deploys CoreDNS while the first
    control plane is the only node: both replicas stay there through every join.
    A rolling restart (``kubectl rollout restart``) places them again.

    tolerated
        Taint keys the Pods tolerate (kubeadm's CoreDNS: the control planes' and
        CriticalAddonsOnly); nodes with other NoSchedule or NoExecute taints do not count.
    """
    ret = kos_state.ret(name)
    if "kos_kubectl.pods" not in __salt__:
        return kos_state.missing_module(ret, __opts__, "kubectl",
                                        f"spread the replicas of {name}")
    try:
        placed = __salt__["kos_kubectl.pods"](selector, namespace, kubeconfig=kubeconfig)
        nodes = __salt__["kos_kubectl.nodes"](kubeconfig=kubeconfig, refresh=True)
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"cannot read where {name} runs: {exc}")
    hosts = sorted({p["node"] for p in placed.values() if p["node"]})
    others = sorted(n for n, rec in nodes.items()
                    if n not in hosts and _can_host(rec, tolerated))
    why = ("fewer than two replicas" if len(placed) < 2 else
           "already spread" if len(hosts) > 1 else
           "not scheduled yet" if not hosts else
           "no other node can take one" if not others else None)
    if why:
        ret["comment"] = f"{name}: {len(placed)} replicas on {', '.join(hosts) or 'no node'} " \
                         f"({why})"
        return ret
    changes = {"nodes": {"old": hosts, "new": f"spread over {', '.join(hosts + others)}"}}
    if kos_state.predicted(ret, __opts__, changes,
                           f"would restart {name}: every replica is on {hosts[0]}"):
        return ret
    try:
        __salt__["kos_kubectl.rollout_restart"](name, namespace, timeout=timeout,
                                               kubeconfig=kubeconfig)
        now = sorted({p["node"] for p in __salt__["kos_kubectl.pods"](
            selector, namespace, kubeconfig=kubeconfig).values() if p["node"]})
    except CommandExecutionError as exc:
        return kos_state.fail(ret, f"restarting {name} to spread it: {exc}",
                              made={"restarted": name})
    ret["changes"] = {"nodes": {"old": hosts, "new": now}}
    if len(now) < 2:
        return kos_state.fail(ret, f"{name} restarted, and the scheduler put every replica on "
                                   f"{', '.join(now)} again", made=ret["changes"])
    ret["comment"] = f"{name} restarted: its replicas were all on {hosts[0]}, now on " \
                     f"{', '.join(now)}"
    return ret
