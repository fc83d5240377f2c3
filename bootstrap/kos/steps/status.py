"""``kos status``: each minion's key, answer, last highstate, Kubernetes membership and
certificates, as the salt master sees them."""

import time

from ..distributions import kubernetes_members
from .certificates import certificate_summary
from .converge import ConvergeStep
from .deployment import control_plane_ids, first_control_plane
from .master import STATUS_PING


def highstates_from_records(records):
    """Past the job cache's ``keep_jobs_seconds`` a node's last highstate is gone from the
    master; its own record of its last successful converge (``kos.last_converged``) still
    tells. ``records``: ``{minion: return}``; a node without a record stays unknown."""
    return {mid: {"result": "ok", "time": last["time"], "source": "the node's converge record"}
            for mid, last in converges_from_records(records).items()}


def converges_from_records(records):
    """Each node's last successful converge through kos, from its own record: when, and
    who ran it (``orchestration``: kos converge or orch.deploy; ``reactor``: the master's
    reactor, when the minion started). A highstate run by hand leaves no record."""
    return {mid: {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rec["at"])),
                  "by": rec.get("by") or "orchestration"}
            for mid, rec in records.items()
            if isinstance(rec, dict) and isinstance(rec.get("at"), int)}



def status(dep):
    outputs = dep.require_outputs()
    ids = sorted(outputs["minions"])
    first = first_control_plane(outputs)
    with dep.master() as master:
        keys = master.keys()
        answering, _ = master.answering(ids, timeout=STATUS_PING)
        highstates = master.last_highstates(ids)
        records = (master.salt(answering, "kos.last_converged", timeout=STATUS_PING)
                   if answering else {})
        # past the job cache's keep_jobs_seconds the node's own record still tells
        aged = {m: r for m, r in records.items() if m not in highstates}
        highstates.update(highstates_from_records(aged))
        converges = converges_from_records(records)
        dist_name, members, k8s_error = kubernetes_members(master, first)
        control_planes = [m for m in control_plane_ids(outputs) if m in answering]
        certs = (master.salt(control_planes, "kos.certificates", timeout=STATUS_PING)
                 if control_planes else {})
    accepted = set(keys.get("minions", []))
    pending = set(keys.get("minions_pre", []))
    # a top master's syndics (other environments' masters), as kos converge last found them
    syndics = (dep.steps.get(ConvergeStep.SYNDIC_KEYS).get("detail") or {}).get("ids") or []
    nodes = []
    for mid in ids:
        info = outputs["minions"][mid]
        entry = {
            "id": mid,
            "hostname": info.get("hostname"),
            "role": info.get("role"),
            "private_ip": info.get("private_ip"),
            "key": "accepted" if mid in accepted else ("pending" if mid in pending else "missing"),
            "reachable": mid in answering,
            "last_highstate": highstates.get(mid, {"result": "unknown"}),
            "last_converge": converges.get(mid),
        }
        if mid in outputs["kubernetes_nodes"]:
            member = members.get(info.get("hostname")) or members.get(mid)
            entry["kubernetes"] = {
                "member": bool(member),
                "ready": bool(member and member.get("ready")),
                "role": member.get("role") if member else None,
                "version": member.get("version") if member else None,
            }
        if isinstance(certs.get(mid), dict):
            entry["certificates"] = certificate_summary(certs[mid])
        nodes.append(entry)
    healthy = all(
        n["reachable"]
        and n["last_highstate"]["result"] == "ok"
        and n.get("kubernetes", {"member": True, "ready": True})["ready"]
        for n in nodes
    )
    return {
        "cluster": dep.cluster,
        "distribution": dist_name,
        # A cloud that runs this distribution as stand-ins says so in its outputs.
        "simulated": dist_name in (outputs.get("simulated") or ()),
        "api": outputs.get("api_floating_ip"),
        "healthy": healthy,
        "kubernetes_error": k8s_error,
        "unexpected_keys": sorted((accepted | pending) - set(ids) - set(syndics)),
        "nodes": nodes,
        "salt_master_floating_ip": outputs.get("salt_master_floating_ip"),
        "syndics": {
            mid: "accepted" if mid in accepted else ("pending" if mid in pending else "missing")
            for mid in syndics
        },
    }

