"""
Nodes leaving the cluster: before Terraform destroys or rebuilds their servers
(orch.remove), and, at ``kos down``, drained and deleted best effort; which nodes the last
apply rebuilt or retired, for the converge after it.
"""

import json

from .. import distributions, ui
from ..backends import missing_outputs
from ..errors import ConvergeError, InputError
from ..salt import key_holders
from ..state import fingerprint
from .deployment import first_control_plane
from .master import orchestrated, push_trees


def in_cluster(dep, master, minions):
    """Which of ``minions`` the cluster still has as Kubernetes nodes, as its first control
    plane lists them now; all of them when it cannot tell (its answer is what counts, not
    a record: a node retired, added again and retired again leaves twice)."""
    outputs = dep.outputs() or {}
    hostnames = {m: ((outputs.get("minions") or {}).get(m) or {}).get("hostname")
                 or m.split(".")[0] for m in minions}
    _, nodes, problem = distributions.kubernetes_members(master, first_control_plane(outputs))
    if problem:
        ui.warn(f"cannot tell which of {', '.join(hostnames.values())} the cluster has "
                f"({problem}): each leaves it as if it had")
        return sorted(minions)
    return sorted(m for m, host in hostnames.items() if host in (nodes or {}))


def remove_nodes(dep, minions, replace=False):
    """orch.remove: the nodes Terraform is about to destroy leave the cluster first (drained,
    left, forgotten by the first control plane), one at a time, workers first. A node that
    does not answer cannot leave by itself; its server goes next anyway, so the cluster
    forgets it without (orch.remove's force; a kubeadm control plane's etcd member is
    removed from the first control plane). ``replace``: the nodes come back on new servers
    (kos up --replace), which is an action: it runs whenever asked. Otherwise only the
    nodes the cluster still has leave (``in_cluster``): a re-run after they left does
    nothing, and a node that came back leaves again."""
    extra = {"replace": True} if replace else {}
    with dep.master() as master:
        if not replace:
            members = in_cluster(dep, master, minions)
            gone = sorted(set(minions) - set(members))
            if gone:
                ui.ok(f"{', '.join(m.split('.')[0] for m in gone)}: not in the cluster any "
                      "more, nothing to take out")
            if not members:
                return {"left": [], "not_members": gone}
            minions = members

        def run():
            # this checkout's formula: orch.remove and the states it runs
            push_trees(master, dep.settings)
            answering, silent = master.answering(minions, timeout=30)
            done = {}
            for ids, force in ((answering, False), (silent, True)):
                if not ids:
                    continue
                if force:
                    ui.warn(f"{', '.join(ids)} do not answer: forgotten by the cluster "
                            "without leaving it themselves (their servers go next)")
                pillar = {"remove": sorted(ids), **extra, **({"force": True} if force else {})}
                summary = master.orchestrate("orch.remove", pillar, rerun="kos up")
                done[("forced" if force else "left")] = orchestrated(summary)
            return done

        return dep.steps.run(
            "replace-leave" if replace else "remove-nodes", fingerprint(sorted(minions)),
            f"take {', '.join(m.split('.')[0] for m in minions)} out of the cluster before "
            f"their servers go (salt-run state.orchestrate orch.remove "
            f"pillar='{json.dumps({'remove': sorted(minions), **extra})}')",
            run, always=True,
        )


def _last_apply(dep):
    """What the last apply recorded in its step: the hosts it ``replaced``, the minion ids
    it ``retired``."""
    return dep.steps.get(dep.backend.create_step).get("detail") or {}


def rebuilt_minions(dep):
    """The minion ids whose servers the last apply rebuilt (--replace) and whose new
    servers present new keys; the master's keys sit on its state volume and stay."""
    hosts = set(_last_apply(dep).get("replaced") or ()) - {"salt"}
    minions = (dep.outputs() or {}).get("minions") or {}
    return sorted(mid for mid, m in minions.items() if m.get("hostname") in hosts)


def refuse_replacing_the_only_control_plane(dep):
    """A rebuilt first control plane rejoins through another joined control plane
    (orch.deploy); with none, its new server would hold nothing to rejoin and the cluster
    would be gone."""
    outputs = dep.outputs() or {}
    minions = outputs.get("minions") or {}
    first = first_control_plane(outputs) if minions else None
    host = (minions.get(first) or {}).get("hostname")
    others = [m for m, i in minions.items() if i.get("role") == "control_plane" and m != first]
    if host and host in dep.settings.replace and not others:
        raise InputError(
            f"--replace {host}: {host} is the only control plane, and the cluster lives on "
            "its disk: a new server there would start another cluster",
            fix="add control planes first (k8s-cp-2 and k8s-cp-3 in kubernetes_nodes), then "
            "replace it; or "
            "bring its server back with its disk (docs/day-two.md, Nodes, Replace a node)")


def retired_minions(dep):
    """The minion ids whose servers the last apply destroyed."""
    return sorted(_last_apply(dep).get("retired") or [])



def drain(dep):
    """Best effort: drain and delete every node but the first control plane, via Salt."""
    try:
        outputs = dep.outputs()
    except Exception as exc:  # noqa: BLE001 - down must proceed without outputs
        ui.warn(f"no outputs, nodes not drained: {exc}")
        return {"drained": []}
    if not outputs or missing_outputs(outputs):
        ui.info("no infrastructure outputs: nothing to drain")
        return {"drained": []}
    first = first_control_plane(outputs)
    order = sorted(
        (mid for mid, n in outputs["kubernetes_nodes"].items() if mid != first),
        key=lambda mid: (outputs["kubernetes_nodes"][mid].get("role") != "worker", mid),
    )
    done = []
    try:
        with dep.master() as master:
            dist = distributions.detect(master, first)
            if dist.name in (outputs.get("simulated") or ()):
                ui.info("a simulated cluster runs no workloads: nothing to drain")
                return {"drained": []}
            for mid in order:
                node = outputs["minions"].get(mid, {}).get("hostname") or mid.split(".")[0]
                for verb, action in (("drain", dist.drain), ("delete", dist.delete)):
                    try:
                        out = action(master, first, node)
                        ui.ok(f"{node}: {str(out).strip() or verb}")
                    except ConvergeError as exc:
                        ui.warn(f"{node}: {verb} failed: {exc.problem}")
                done.append(node)
    except ConvergeError as exc:
        ui.warn(f"salt master unreachable, nodes not drained: {exc.problem}")
    return {"drained": done}



def _forget_ids(outputs, names):
    """Minion ids for ``names`` (host names, or minion ids), in the domain of this
    deployment's minions."""
    known = outputs.get("minions") or {}
    domain = next((mid.split(".", 1)[1] for mid in known if "." in mid), "")
    return sorted({n if "." in n or not domain else f"{n}.{domain}" for n in names})


def forget(dep, names):
    """``kos forget``: nodes whose servers are gone, forgotten by the cluster (orch.remove
    with force: microk8s remove-node --force, or the Node and any etcd member of that name
    deleted) and by the salt master (their keys, mine data). A node Terraform still lists
    is refused: it leaves by leaving kubernetes_nodes. What nothing knows any more is said, not
    an error, so a re-run after a forget that was cut short finishes it."""
    outputs = dep.require_outputs()
    ids = _forget_ids(outputs, names)
    listed = [m for m in ids if m in (outputs.get("minions") or {})]
    if listed:
        hosts = ", ".join(m.split(".")[0] for m in listed)
        raise InputError(
            f"{hosts}: Terraform still lists {'its server' if len(listed) == 1 else 'their servers'}"
            " (kos forget is for nodes whose servers are gone)",
            fix=f"retire {'it' if len(listed) == 1 else 'them'}: remove {hosts} from "
            "kubernetes_nodes (or, for a cluster described by counters, add to retired_nodes) "
            "and run kos up, which takes a node out of the cluster before its server goes")
    with dep.master() as master:
        held = key_holders(master, ids)
        members = in_cluster(dep, master, ids)
        unknown = sorted(set(ids) - set(held) - set(members))
        if unknown:
            ui.ok(f"{', '.join(m.split('.')[0] for m in unknown)}: neither the cluster nor "
                  "the salt master knows it, nothing to forget")
        done = {"forgotten": sorted(set(held) | set(members)), "cluster": members,
                "keys": held}
        if members:
            push_trees(master, dep.settings)
            with ui.step(f"the cluster forgets {', '.join(m.split('.')[0] for m in members)} "
                         "(salt-run state.orchestrate orch.remove pillar='"
                         + json.dumps({"remove": members, "force": True}) + "')"):
                summary = master.orchestrate("orch.remove", {"remove": members, "force": True},
                                             rerun="kos forget " + " ".join(names))
            done["orchestration"] = orchestrated(summary)
        if held:
            with ui.step(f"the salt master forgets {', '.join(held)} (keys, mine data)"):
                master.delete_keys(held)
    if done["forgotten"]:
        ui.info("the other nodes' /etc/hosts lose them at the next kos converge")
    return done
