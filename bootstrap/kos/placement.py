"""
Where Nova may put the nodes: the cluster's server groups (terraform/modules/nodes,
``server_group_policies``). A hard anti-affinity group needs a compute host for each member
(in the member's zone); preflight says so before anything is built when the credential may
list the compute hosts (an admin's may: ``os-services`` is admin-only by Nova's default
policy), and a server Nova could not place names its group and the fix.
"""

from collections import Counter

from .cloud import Finding

ROLES = {"control_plane": "control plane", "worker": "worker"}


def _hosts(n):
    return f"{n} host" if n == 1 else f"{n} hosts"


def _fix(role):
    return f'add compute hosts, or set server_group_policies = {{ {role} = "soft-anti-affinity" }}'


def compute_hosts(conn):
    """``{zone: hosts}`` of the nova-compute services that are up and enabled; None when
    the credential may not list them."""
    from openstack import exceptions

    try:
        services = list(conn.compute.services())
    except exceptions.ForbiddenException:
        return None
    return Counter(s.availability_zone for s in services
                   if s.binary == "nova-compute" and s.state == "up" and s.status == "enabled")


def findings(conn, values, nodes):
    """One finding per role whose policy is anti-affinity: whether the cloud has a compute
    host for each of its nodes (those with a zone counted in it, the others anywhere)."""
    policies = values.get("server_group_policies") or {}
    hard = [role for role in ROLES if policies.get(role) == "anti-affinity"
            and any(node["role"] == role for node in nodes.values())]
    if not hard:
        return []
    hosts = compute_hosts(conn)
    if hosts is None:
        return [Finding("placement", True, "compute hosts not counted (listing them needs an "
                        "admin's credential): a server Nova cannot place in its group stops "
                        "the apply, naming the group and the fix")]
    found = []
    for role in hard:
        members = [node for node in nodes.values() if node["role"] == role]
        zoned = Counter(node["az"] for node in members if node["az"])
        short = [f"{n} in zone {zone} with {_hosts(hosts.get(zone, 0))}"
                 for zone, n in sorted(zoned.items()) if n > hosts.get(zone, 0)]
        total = sum(hosts.values())
        if len(members) > total:
            short.insert(0, f"{len(members)} in all with {_hosts(total)}")
        name = f"server_group_policies.{role}"
        if short:
            found.append(Finding(
                name, False,
                f"{name} = anti-affinity puts each of the {ROLES[role]}s on its own compute "
                f"host, and the cloud has too few: {'; '.join(short)}", _fix(role)))
        else:
            noun = ROLES[role] if len(members) == 1 else f"{ROLES[role]}s"
            found.append(Finding(name, True, f"{len(members)} {noun} to keep apart, "
                                 f"compute hosts up: {total}"))
    return found


def no_valid_host_hint(server, groups):
    """Why Nova found no host for ``server``, when a hard anti-affinity group of its is the
    reason ("" otherwise)."""
    for group in groups:
        policy = group.policy or next(iter(group.policies or []), None)
        if server.id not in (group.member_ids or []) or policy != "anti-affinity":
            continue
        role = (server.metadata or {}).get("kos_role") or "<role>"
        return (f"; server group {group.name} (anti-affinity) needs a compute host for each "
                f"of its {len(group.member_ids)} members: {_fix(role)}")
    return ""
