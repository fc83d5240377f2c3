"""
What a node's highstate is made of, as digests: the state tree, each pillar section as
this node sees it, and the deployment's members. ``kos.converge_need`` compares them with
what the node's last converge noted (``kos.record_converged``); ``kos plan`` applies the
same rule to the Terraform layer it is about to change. Plain data in, plain data out
(no Salt): the bootstrapper imports this file as it is.
"""

import hashlib
import json

# Pillar keys that feed no state of a node: Salt's own, and what the orchestration passes
# to one run (kos_orchestration).
NOT_INPUTS = ("schedule", "master", "mine_functions", "beacons", "_errors", "kos_orchestration")


def digest(value):
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def inputs(pillar, me, tree=None):
    """
    ``{"tree", "pillar": {section: digest}, "members": digest}`` of minion ``me``'s
    highstate with ``pillar`` (plain dicts and lists).

    Another worker is no input: what a node knows of the others (/etc/hosts) comes from
    the mine and is refreshed on its own (``members``). Control planes are an input
    (kubeadm's load balancer lists them), and so is every operator setting but the
    orchestration's own (kos:orchestration).
    """
    kos = dict(pillar.get("kos") or {})
    nodes = kos.get("nodes") or {}
    kos["nodes"] = {n: v for n, v in nodes.items()
                    if n == me or (v or {}).get("role") == "control_plane"}
    kos.pop("orchestration", None)
    digests = {f"kos:{key}": digest(value) for key, value in kos.items()}
    for key, value in pillar.items():
        if key != "kos" and key not in NOT_INPUTS:
            digests[key] = digest(value)
    members = sorted([n, (v or {}).get("ip")] for n, v in nodes.items())
    for role in ("salt_master", "bastion"):
        host = (pillar.get("kos") or {}).get(role) or {}
        members.append([role, host.get("id"), host.get("ip")])
    return {"tree": tree, "pillar": digests, "members": digest(members)}


def changed(before, after):
    """The pillar sections whose digests differ between two ``inputs``."""
    old, new = before.get("pillar") or {}, after.get("pillar") or {}
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
