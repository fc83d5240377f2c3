"""
What a cluster's Kubernetes left in the OpenStack project, removed around ``terraform
destroy`` (``kos down``); ``kos.cloud`` connects.

Only what carries the cluster's name is deleted: load balancers
``kube_service_<cluster>_<namespace>_<service>`` (the OpenStack cloud-controller-manager's
naming), their floating IPs and security groups (by the CCM's descriptions), Cinder CSI
volumes with metadata ``cinder.csi.openstack.org/cluster=<cluster>``, and ports/floating IPs
tagged ``kos-cluster=<cluster>``. The CCM and the CSI driver must run with
``--cluster-name``/``--cluster`` set to the kos cluster name for that to find them.
"""

from dataclasses import dataclass

from . import ui
from .errors import CleanupError

CSI_CLUSTER_KEY = "cinder.csi.openstack.org/cluster"
FIP_DESCRIPTION = "Floating IP for Kubernetes external service "
SG_DESCRIPTION = "Security Group for "
# Ports Neutron itself owns on a network; they go with the subnet/router, not by hand.
NETWORK_OWNED = ("network:",)


def cluster_tag(cluster):
    return f"kos-cluster={cluster}"


@dataclass
class Leftovers:
    load_balancers: list
    floating_ips: list
    volumes: list
    security_groups: list
    ports: list
    blocking_ports: list
    blocking_load_balancers: list


def ccm_load_balancer(lb, cluster):
    """One of the load balancers the CCM made for this cluster's Services."""
    return (lb.name or "").startswith(f"kube_service_{cluster}_")


def _ccm_fip(ip, cluster):
    desc = ip.description or ""
    return desc.startswith(FIP_DESCRIPTION) and desc.endswith(f" from cluster {cluster}")


def _ccm_sg(sg, cluster):
    desc = sg.description or ""
    return desc.startswith(SG_DESCRIPTION) and desc.endswith(
        f" Service LoadBalancer in cluster {cluster}"
    )


def _uses_networks(conn, lb, networks, subnets):
    """Whether ``lb`` has its VIP or a pool member on the cluster's networks: its amphora
    then has a port there that holds the subnet until the load balancer goes."""
    if lb.vip_network_id in networks:
        return True
    return any(m.subnet_id in subnets for pool in lb.pools or []
               for m in conn.load_balancer.members(pool["id"]))


def find_leftovers(conn, cluster):
    """What Kubernetes and earlier runs left in the project for this cluster."""
    tag = cluster_tag(cluster)
    networks = list(conn.network.networks(tags=tag))
    lbs, vip_ports, foreign = [], set(), []
    if conn.has_service("load-balancer"):
        every = list(conn.load_balancer.load_balancers())
        lbs = [lb for lb in every if ccm_load_balancer(lb, cluster)]
        # A load balancer's VIP port goes with it (Terraform's API load balancer included).
        vip_ports = {lb.vip_port_id for lb in every}
        # one kos did not make (not the CCM's, not Terraform's) on the cluster's networks
        net_ids = {n.id for n in networks}
        subnet_ids = {s for n in networks for s in n.subnet_ids or []}
        foreign = [lb for lb in every if not ccm_load_balancer(lb, cluster) and tag not in (lb.tags or [])
                   and _uses_networks(conn, lb, net_ids, subnet_ids)]
    ips = list(conn.network.ips())
    fips = [ip for ip in ips if _ccm_fip(ip, cluster) or tag in (ip.tags or [])]
    volumes = []
    if conn.has_service("block-storage"):
        volumes = [
            v
            for v in conn.block_storage.volumes(details=True)
            if (v.metadata or {}).get(CSI_CLUSTER_KEY) == cluster
        ]
    sgs = [sg for sg in conn.network.security_groups() if _ccm_sg(sg, cluster)]
    ports, blocking = [], []
    project = conn.current_project_id
    for net in networks:
        for port in conn.network.ports(network_id=net.id):
            owner = port.device_owner or ""
            if tag in (port.tags or []) or owner.startswith(NETWORK_OWNED) or port.id in vip_ports:
                continue
            # A server of the cloud's own on the cluster's network: an Octavia amphora, its
            # port made in the service's project; it goes with its load balancer.
            if owner.startswith("compute:") and port.project_id not in (None, project):
                continue
            # Unbound ports and the VIP ports of load balancers that are gone are debris; a
            # server's port is not ours.
            (blocking if owner.startswith("compute:") else ports).append(port)
    return Leftovers(lbs, fips, volumes, sgs, ports, blocking, foreign)


def _waiting(what, timeout, wait, *args, **kwargs):
    """One of openstacksdk's waits (``wait_for_status``, ``wait_for_delete``), its timeout told
    as what kos waited for; a resource that went away is done waiting for."""
    from openstack import exceptions

    try:
        wait(*args, wait=timeout, **kwargs)
    except exceptions.NotFoundException:
        pass
    except exceptions.ResourceTimeout:
        raise CleanupError(
            f"timed out after {timeout}s waiting for {what}",
            fix="check the resource's status in the cloud, then re-run kos down",
        ) from None


def _delete_load_balancer(conn, lb, timeout):
    from openstack import exceptions

    # Octavia answers 409 to a change of a load balancer in an immutable (PENDING_*) state
    # (https://docs.openstack.org/api-ref/load-balancer/v2/); ACTIVE and ERROR take a delete.
    try:
        _waiting(
            f"load balancer {lb.name} to leave its PENDING state",
            timeout,
            conn.load_balancer.wait_for_load_balancer,
            lb.id,
            failures=["ERROR", "DELETED"],
        )
    except exceptions.ResourceFailure:
        pass
    conn.load_balancer.delete_load_balancer(lb.id, ignore_missing=True, cascade=True)
    # A cascade delete, then wait_for_delete, as openstacksdk's own _service_cleanup does
    # (https://opendev.org/openstack/openstacksdk/src/branch/master/openstack/load_balancer/v2/_proxy.py).
    _waiting(
        f"load balancer {lb.name} to be deleted", timeout, conn.load_balancer.wait_for_delete, lb
    )


def cleanup_before_destroy(conn, cluster, timeout=600):
    """
    Remove what would make ``terraform destroy`` fail or leak: the CCM's load balancers
    (their VIP ports sit on the cluster's subnet), the CCM's floating IPs, debris ports on
    the cluster's networks, and detached CSI volumes. Volumes still attached go after the
    servers are destroyed (``cleanup_after_destroy``).
    """
    left = find_leftovers(conn, cluster)
    if left.blocking_ports:
        names = ", ".join(f"{p.name or p.id} (server {p.device_id})" for p in left.blocking_ports)
        raise CleanupError(
            f"servers kos did not create are attached to the cluster's networks: {names}",
            fix="delete those servers or detach their ports, then re-run kos down",
        )
    if left.blocking_load_balancers:
        names = ", ".join(f"{lb.name or '(no name)'} ({lb.id})" for lb in left.blocking_load_balancers)
        raise CleanupError(
            f"load balancers kos did not create use the cluster's networks: {names}",
            fix="delete those load balancers, or move their VIP and members off the cluster's "
            "networks, then re-run kos down",
        )
    done = {"load_balancers": [], "floating_ips": [], "ports": [], "volumes": []}
    for lb in left.load_balancers:
        ui.detail(f"deleting load balancer {lb.name}")
        _delete_load_balancer(conn, lb, timeout)
        done["load_balancers"].append(lb.name)
    # Only the CCM's: the tagged ones are Terraform's own until its destroy has run.
    for ip in [ip for ip in left.floating_ips if _ccm_fip(ip, cluster)]:
        ui.detail(f"releasing floating IP {ip.floating_ip_address} ({ip.description})")
        conn.network.delete_ip(ip, ignore_missing=True)
        done["floating_ips"].append(ip.floating_ip_address)
    for port in left.ports:
        ui.detail(f"deleting port {port.name or port.id} ({port.device_owner or 'unbound'})")
        conn.network.delete_port(port, ignore_missing=True)
        done["ports"].append(port.name or port.id)
    for vol in left.volumes:
        if vol.status in ("available", "error"):
            ui.detail(f"deleting volume {vol.name or vol.id}")
            conn.block_storage.delete_volume(vol, ignore_missing=True)
            done["volumes"].append(vol.name or vol.id)
        else:
            ui.detail(f"volume {vol.name or vol.id} is {vol.status}: deleted after its server")
    return done


def cleanup_after_destroy(conn, cluster, timeout=300):
    """Delete what outlived ``terraform destroy``; fail when anything still remains."""
    from openstack import exceptions

    tag = cluster_tag(cluster)
    done = {"volumes": [], "security_groups": [], "ports": [], "floating_ips": []}
    left = find_leftovers(conn, cluster)
    for vol in left.volumes:
        try:
            _waiting(
                f"volume {vol.name or vol.id} to detach",
                timeout,
                conn.block_storage.wait_for_status,
                vol,
                status="available",
                failures=["error"],
            )
        except exceptions.ResourceFailure:
            pass  # a volume in error is deleted as it is
        conn.block_storage.delete_volume(vol, ignore_missing=True)
        done["volumes"].append(vol.name or vol.id)
    for sg in left.security_groups:
        conn.network.delete_security_group(sg, ignore_missing=True)
        done["security_groups"].append(sg.name)
    for port in conn.network.ports(tags=tag):
        conn.network.delete_port(port, ignore_missing=True)
        done["ports"].append(port.name or port.id)
    for ip in conn.network.ips(tags=tag):
        conn.network.delete_ip(ip, ignore_missing=True)
        done["floating_ips"].append(ip.floating_ip_address)
    remaining = [
        f"{kind} {item.name or item.id}"
        for kind, items in (
            ("network", conn.network.networks(tags=tag)),
            ("router", conn.network.routers(tags=tag)),
            ("security group", conn.network.security_groups(tags=tag)),
        )
        for item in items
    ]
    if remaining:
        raise CleanupError(
            f"still in the project after destroy: {', '.join(remaining)}",
            fix="delete them by hand (they carry the tag " + tag + ") or re-run kos down",
        )
    return done

