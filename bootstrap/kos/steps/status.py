"""``kos status``: each minion's key, answer, last highstate, Kubernetes membership and
certificates, as the salt master sees them."""

import time

from .. import ccm, cloud_cleanup
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


def api_endpoint(dep, outputs):
    """Where the API is reached and, behind a load balancer, how Octavia sees it: its
    provisioning and operating status, each pool member's (ONLINE, ERROR: its health
    checks fail, NO_MONITOR, OFFLINE), and ``problem``, what is wrong (or None)."""
    lb = outputs.get("api_load_balancer")
    if not lb:
        return {"floating_ip": outputs.get("api_floating_ip"), "load_balancer": None}
    found = {"id": lb["id"], "vip": lb["vip"]}
    try:
        conn = dep.project()
        if conn is None:
            raise LookupError("no OpenStack project to ask (an outputs file)")
        got = conn.load_balancer.get_load_balancer(lb["id"])
        found.update(provisioning=got.provisioning_status, operating=got.operating_status)
        # its own pools, from the load balancer: Octavia's pool list takes no load
        # balancer filter and would add every Service's
        found["members"] = {
            m.name or m.address: m.operating_status
            for pool in got.pools or []
            for m in conn.load_balancer.members(pool["id"])
        }
    except Exception as exc:  # noqa: BLE001 - status reports what it could not read
        found["error"] = " ".join(str(exc).split())
    found["problem"] = _endpoint_problem(found)
    return {"floating_ip": lb["floating_ip"], "load_balancer": found}


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
    endpoint = api_endpoint(dep, outputs)
    stuck = []
    if ccm.wanted(outputs):
        try:
            stuck = stuck_load_balancers(dep, dep.cluster)
        except Exception as exc:  # noqa: BLE001 - status reports what it could not read
            stuck = [{"error": " ".join(str(exc).split())}]
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
        "api_endpoint": endpoint,
        "load_balancers_in_error": stuck,
        # what the cloud could not tell is said, not counted against the cluster
        "healthy": healthy and not (endpoint["load_balancer"] or {}).get("problem")
        and not [lb for lb in stuck if not lb.get("error")],
        "kubernetes_error": k8s_error,
        "unexpected_keys": sorted((accepted | pending) - set(ids) - set(syndics)),
        "nodes": nodes,
        "salt_master_floating_ip": outputs.get("salt_master_floating_ip"),
        "syndics": {
            mid: "accepted" if mid in accepted else ("pending" if mid in pending else "missing")
            for mid in syndics
        },
    }


def stuck_load_balancers(dep, cluster):
    """The Services' load balancers Octavia holds in ERROR: the CCM (cloud-provider-openstack
    1.31, pkg/openstack/loadbalancer.go) deletes and retries one that fails as it is made,
    but stops at "not ACTIVE" on one that went to ERROR later, for good."""
    conn = dep.project()
    if conn is None or not conn.has_service("load-balancer"):
        return []
    return [
        {"id": lb.id, "name": lb.name, "service": _service_of(lb)}
        for lb in conn.load_balancer.load_balancers(provisioning_status="ERROR")
        if cloud_cleanup.ccm_load_balancer(lb, cluster)
    ]


def _service_of(lb):
    # "Kubernetes external service <namespace>/<name> from cluster <cluster>" (the CCM's)
    words = (lb.description or "").split()
    return words[3] if len(words) > 3 and "/" in words[3] else None


def _endpoint_problem(lb):
    """What is wrong with the API's load balancer as Octavia tells it, or None (also when
    it could not be asked: that is said, not counted against the cluster)."""
    if lb.get("error"):
        return None
    if lb.get("provisioning") != "ACTIVE":
        return f"it is {lb.get('provisioning')}"
    down = sorted(name for name, state in (lb.get("members") or {}).items() if state != "ONLINE")
    return f"pool members not ONLINE: {', '.join(down)}" if down else None
