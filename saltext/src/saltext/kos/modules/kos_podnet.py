"""
The routed pod network of a kubeadm cluster (pillar ``kubeadm:network:mode: routed``):
each node's pods on a bridge with the pod CIDR the API gave the node (the CNI ``bridge``
and ``host-local`` plugins, https://www.cni.dev/plugins/current/main/bridge/), a route to
every other node's pod CIDR via its InternalIP, and masquerading of what leaves the
cluster.

:depends: ``ip`` (iproute2), ``iptables`` and ``kubectl`` on PATH
"""

import json
import os

import salt.utils.files
from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_cli, kos_kubeadm

__virtualname__ = "kos_podnet"

# The routes kos keeps carry this iproute2 protocol number (unassigned in
# /etc/iproute2/rt_protos), so they are told apart from everyone else's; the pods' bridge
# and the CNI configuration that makes it.
POD_ROUTE_PROTO = "149"
POD_BRIDGE = "kos0"
POD_CNI_CONF = "/etc/cni/net.d/10-kos-routed.conflist"
POD_EGRESS_COMMENT = "kos: pod egress"


def __virtual__():
    return kos_cli.virtual(__virtualname__, "ip", "is iproute2 installed?")


def _run(binary, args, ok_retcodes=(0,)):
    return kos_cli.run(__salt__, [binary, *args], ok_retcodes=ok_retcodes)


def _ip(args, ok_retcodes=(0,)):
    return _run("ip", args, ok_retcodes)


def _cni_conf(pod_cidr):
    conf = {
        "cniVersion": "1.0.0",
        "name": "kos-routed",
        "plugins": [
            {
                "type": "bridge", "bridge": POD_BRIDGE, "isGateway": True,
                # other nodes' pods see this pod's own address: no NAT inside the cluster
                "ipMasq": False, "hairpinMode": True,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_cidr}]],
                         "routes": [{"dst": "0.0.0.0/0"}]},
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2, sort_keys=True) + "\n"


def pod_routes():
    """
    Return the pod routes kos keeps on this node: ``{pod CIDR: via}``.

    CLI Example:

    .. code-block:: bash

        salt '*' kos_podnet.pod_routes
    """
    res = _ip(["-j", "route", "show", "proto", POD_ROUTE_PROTO])
    try:
        rows = json.loads(res["stdout"] or "[]")
    except ValueError as exc:
        raise CommandExecutionError("ip printed no route list") from exc
    return {row["dst"]: row.get("gateway") for row in rows}


def sync_pod_network(node_name, cluster_cidr, kube_dir=None, cni_conf=POD_CNI_CONF, test=False):
    """
    Bring this node's routed pod network in line with the API's nodes (read with the
    kubelet's own credential): the CNI configuration for this node's pod CIDR, a route to
    every other node's pod CIDR via its InternalIP (routes of gone nodes removed), and
    masquerading of what the pods send out of the cluster. Returns ``{"pod_cidr",
    "changes"}``; ``test`` changes nothing.

    node_name
        This node's name in Kubernetes.

    cluster_cidr
        The cluster's pod network (kubeadm's podSubnet).

    cni_conf
        Where the CNI configuration goes.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-1*' kos_podnet.sync_pod_network k8s-worker-1 10.244.0.0/16
    """
    kubeconfig = os.path.join(kos_kubeadm.kube_dir(__salt__, kube_dir),
                              "kubelet.conf")
    if not os.path.exists(kubeconfig):
        raise CommandExecutionError(f"{kubeconfig} is missing: this node has not joined")
    found = __salt__["kos_kubectl.nodes"](kubeconfig=kubeconfig, refresh=True)
    mine = found.get(node_name) or {}
    if not mine.get("pod_cidr"):
        raise CommandExecutionError(f"the API gives node {node_name} no pod CIDR (yet)")
    changes = {}
    conf = _cni_conf(mine["pod_cidr"])
    try:
        with salt.utils.files.fopen(cni_conf) as fh:
            old_conf = fh.read()
    except OSError:
        old_conf = None
    if old_conf != conf:
        old = json.loads(old_conf)["plugins"][0]["ipam"]["ranges"][0][0]["subnet"] if (
            old_conf and POD_BRIDGE in old_conf) else None
        changes["cni"] = {"old": old, "new": mine["pod_cidr"]}
        if not test:
            os.makedirs(os.path.dirname(cni_conf), exist_ok=True)
            with salt.utils.files.fopen(cni_conf + ".tmp", "w") as fh:
                fh.write(conf)
            os.replace(cni_conf + ".tmp", cni_conf)
    want = {
        n["pod_cidr"]: n["ip"] for name, n in found.items()
        if name != node_name and n.get("pod_cidr") and n.get("ip")
    }
    have = pod_routes()
    add = {dst: via for dst, via in want.items() if have.get(dst) != via}
    gone = sorted(dst for dst in have if dst not in want)
    if add or gone:
        changes["routes"] = {"old": have, "new": want}
    if not test:
        for dst, via in sorted(add.items()):
            _ip(["route", "replace", dst, "via", via, "proto", POD_ROUTE_PROTO])
        for dst in gone:
            _ip(["route", "del", dst, "proto", POD_ROUTE_PROTO], ok_retcodes=(0, 2))
    rule = ["-s", cluster_cidr, "!", "-d", cluster_cidr, "-m", "comment", "--comment",
            POD_EGRESS_COMMENT, "-j", "MASQUERADE"]
    present = _run("iptables", ["-t", "nat", "-C", "POSTROUTING", *rule],
                   ok_retcodes=(0, 1))["retcode"] == 0
    if not present:
        changes["egress"] = {"old": None, "new": f"masquerade {cluster_cidr} leaving it"}
        if not test:
            _run("iptables", ["-t", "nat", "-A", "POSTROUTING", *rule])
    return {"pod_cidr": mine["pod_cidr"], "changes": changes}
