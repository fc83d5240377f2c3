"""
What the rehearsal cloud's operator does once, in code (openstacksdk): the catalog and the
service users, then what a cloud offers a tenant — standard flavors, an image, an external
network for floating IPs — and the tenant: a project, its user, generous quotas and an
application credential that the deployment (kos, Terraform) uses, as it would use one on
any other cloud. Every step finds what exists before it creates, so it is safe to re-run.
"""

import json
import time

from keystoneauth1 import exceptions as ksa_exceptions
from openstack import exceptions as sdk_exceptions

from kos.errors import ConvergeError
from . import config

FLAVORS = {
    # name: (vcpus, ram MiB, disk GiB), the sizes every OpenStack cloud knows them by.
    "m1.tiny": (1, 512, 1),
    "m1.small": (1, 2048, 20),
    "m1.medium": (2, 4096, 40),
    "m1.large": (4, 8192, 80),
    "m1.xlarge": (8, 16384, 160),
}
IMAGE = "debian-12-rehearsal"
EXTERNAL = "public"
QUOTAS = {
    "compute": {"instances": 120, "cores": 1000, "ram": 1024000,
                "server_groups": 10, "server_group_members": 120},
    "network": {"ports": 800, "floating_ips": 20, "networks": 20, "subnets": 20,
                "routers": 10, "security_groups": 100, "security_group_rules": 2000},
    # a volume per server at most (boot volumes), beside the salt master's
    "volume": {"volumes": 120, "gigabytes": 2000, "snapshots": 20},
}


def connect(auth_url, password, project="admin", user="admin"):
    import openstack

    return openstack.connect(
        auth_url=auth_url, username=user, password=password, project_name=project,
        user_domain_name="Default", project_domain_name="Default",
        region_name=config.REGION, interface="public", identity_api_version="3",
        load_yaml_config=False, load_envvars=False, connect_retries=3,
    )


def catalog(conn, public_host, passwords):
    """Services, endpoints (public on the management address, internal on loopback) and
    the service users."""
    identity = conn.identity
    service_project = _find_or(identity.find_project("service", domain_id="default"),
                               lambda: identity.create_project(name="service", domain_id="default",
                                                               description="OpenStack services"))
    # The service role marks service tokens (OSSA-2023-003): Cinder lets only a service
    # delete an in-use attachment, so Nova's user needs it to detach a volume.
    roles = [identity.find_role("admin"),
             _find_or(identity.find_role("service"), lambda: identity.create_role(name="service"))]
    for user in config.SERVICE_USERS:
        found = identity.find_user(user, domain_id="default")
        if found:
            identity.update_user(found, password=passwords[user])
        else:
            found = identity.create_user(name=user, domain_id="default", password=passwords[user])
        for role in roles:
            identity.assign_project_role_to_user(service_project, found, role)
    services = list(identity.services())
    endpoints = list(identity.endpoints())
    for kind, name, port, path in config.ENDPOINTS:
        svc = next((s for s in services if s.type == kind and s.name == name), None)
        if svc is None:
            svc = identity.create_service(type=kind, name=name, is_enabled=True)
        urls = {
            "public": f"http://{public_host}:{port}{path}",
            "internal": f"http://{config.INTERNAL}:{port}{path}",
            "admin": f"http://{config.INTERNAL}:{port}{path}",
        }
        for interface, url in urls.items():
            ep = next((e for e in endpoints if e.service_id == svc.id and e.interface == interface), None)
            if ep is None:
                identity.create_endpoint(service_id=svc.id, interface=interface, url=url,
                                         region_id=config.REGION)
            elif ep.url != url:
                identity.update_endpoint(ep, url=url)


def _find_or(found, create):
    return found if found is not None else create()


def _until(missing, timeout):
    """Calls ``missing()`` (what is not there yet, a list) every 2 s until it is empty;
    services still starting answer 5xx or refuse connections, which counts as missing.
    What was still missing at ``timeout``, or None."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            still = missing()
        except (ksa_exceptions.ClientException, sdk_exceptions.SDKException) as exc:
            still = [f"API ({type(exc).__name__}: {str(exc)[:160]})"]
        if not still:
            return None
        if time.monotonic() >= deadline:
            return still
        time.sleep(2)


def _services_missing(conn, compute_hosts):
    missing = []
    up = {s.host for s in conn.compute.services() if s.binary == "nova-compute" and s.state == "up"}
    wanted = set(compute_hosts)
    if not up or not wanted <= up:
        missing.append(f"nova-compute on {', '.join(sorted(wanted - up)) or 'a compute host'}")
    else:
        providers = {p.name for p in conn.placement.resource_providers()}
        if not providers or not wanted <= providers:
            missing.append("the compute hosts in placement")
    agents = {a.agent_type for a in conn.network.agents() if a.is_alive}
    missing += [kind for kind in ("Linux bridge agent", "DHCP agent", "L3 agent")
                if kind not in agents]
    volumes = [s for s in conn.block_storage.services() if s.binary == "cinder-volume"]
    if not any(s.state == "up" for s in volumes):
        missing.append("cinder-volume")
    elif not list(conn.block_storage.backend_pools()):
        # "up" comes from the service's heartbeat; the scheduler places volumes only once
        # the backend has reported its capabilities ("No valid backend")
        missing.append("cinder-volume's pool in the scheduler")
    return missing


def wait_services(conn, compute_hosts, timeout=600):
    """Until Nova has each of ``compute_hosts`` (any one if none are named) in Placement,
    Neutron's agents are alive and Cinder's scheduler knows cinder-volume's pool: then a
    server and its volume can be built."""
    missing = _until(lambda: _services_missing(conn, compute_hosts), timeout)
    if missing:
        raise ConvergeError(
            f"the rehearsal cloud's services did not come up in {timeout}s: still waiting "
            f"for {', '.join(missing)}",
            fix="read the cloud's logs under /var/log in its disk (kos prints the path), "
            "then re-run kos up",
        )


def zones(conn, compute_zones):
    """Each compute host outside the default zone in a host aggregate of its zone (named as
    the zone), as an operator makes availability zones in Nova; safe to re-run."""
    aggregates = {a.name: a for a in conn.compute.aggregates()}
    for host, zone in sorted(compute_zones.items()):
        if zone == config.DEFAULT_ZONE:
            continue
        agg = aggregates.get(zone)
        if agg is None:
            agg = aggregates[zone] = conn.compute.create_aggregate(name=zone,
                                                                   availability_zone=zone)
        if host not in (agg.hosts or []):
            aggregates[zone] = conn.compute.add_host_to_aggregate(agg, host)


def wait_load_balancers(conn, timeout=300):
    """Until Octavia's API lists its providers (its services started last)."""
    missing = _until(lambda: [] if list(conn.load_balancer.providers()) else ["providers"],
                     timeout)
    if missing:
        raise ConvergeError(
            f"Octavia's API of the rehearsal cloud did not answer in {timeout}s "
            f"({', '.join(missing)})",
            fix="read /var/log/octavia in the cloud's disk (kos prints the path), then "
            "re-run kos up",
        )


def host_image_in_glance(conn, name, stack, **attrs):
    """Image ``name`` in Glance whose data is the manifest of the layer ``stack`` the
    materialiser boots its servers from; an image of another manifest goes."""
    manifest = json.dumps({"kos_host_image": [str(p) for p in stack]}, sort_keys=True)
    images = list(conn.image.images(name=name))
    current = [i for i in images if (i.properties or {}).get("kos_manifest") == manifest]
    for old in images:
        if old not in current:
            conn.image.delete_image(old, ignore_missing=True)
    if not current:
        conn.image.create_image(
            name=name, data=manifest.encode(), disk_format="raw", container_format="bare",
            allow_duplicates=True, kos_manifest=manifest, **attrs)


def offer(conn, plan, host_image):
    """Flavors, the hosts' image and the external network: what a cloud offers tenants."""
    have = {f.name for f in conn.compute.flavors()}
    for name, (vcpus, ram, disk) in FLAVORS.items():
        if name not in have:
            conn.compute.create_flavor(name=name, vcpus=vcpus, ram=ram, disk=disk, is_public=True)
    host_image_in_glance(conn, IMAGE, host_image, visibility="public", os_distro="debian",
                         os_version="12")
    net = conn.network.find_network(EXTERNAL)
    if net is None:
        net = conn.network.create_network(
            name=EXTERNAL, is_router_external=True, is_shared=False,
            provider_network_type="flat", provider_physical_network=config.PHYSNET,
            description="the rehearsal cloud's outside world: the machine running kos",
        )
    if not list(conn.network.subnets(network_id=net.id)):
        start, end = plan.pool
        conn.network.create_subnet(
            name=f"{EXTERNAL}-subnet", network_id=net.id, ip_version=4,
            cidr=str(plan.external), gateway_ip=plan.gateway, is_dhcp_enabled=False,
            allocation_pools=[{"start": start, "end": end}],
        )


def tenant(conn, name, password):
    """The deployment's project and user (member), with quotas for a big rehearsal."""
    identity = conn.identity
    project = _find_or(identity.find_project(name, domain_id="default"),
                       lambda: identity.create_project(name=name, domain_id="default",
                                                       description="kos rehearsal deployment"))
    user = identity.find_user(name, domain_id="default")
    if user:
        identity.update_user(user, password=password, default_project_id=project.id)
    else:
        user = identity.create_user(name=name, domain_id="default", password=password,
                                    default_project_id=project.id)
    for role in ("member", "reader", config.LB_MEMBER_ROLE):
        found = identity.find_role(role)
        if found:
            identity.assign_project_role_to_user(project, user, found)
    conn.set_compute_quotas(project.id, **QUOTAS["compute"])
    conn.network.update_quota(project.id, **QUOTAS["network"])
    conn.set_volume_quotas(project.id, **QUOTAS["volume"])
    return project, user


def application_credential(auth_url, name, password):
    """A fresh application credential of the deployment's user: (id, secret)."""
    conn = connect(auth_url, password, project=name, user=name)
    user_id = conn.current_user_id
    for old in conn.identity.application_credentials(user=user_id):
        if old.name == f"kos-{name}":
            conn.identity.delete_application_credential(user_id, old)
    # unrestricted: kos creates the cloud-controller-manager's credential with it, which
    # Keystone allows an application credential only when it is
    cred = conn.identity.create_application_credential(
        user_id, name=f"kos-{name}", description="kos: the rehearsal deployment's credential",
        unrestricted=True,
    )
    return cred.id, cred.secret


def remove_tenant(conn, name):
    """The cluster's user (its application credentials go with it) and project. Neutron
    keeps a project's default security group after the project is gone, so it goes
    first; anything else of the project left here is kos's to have removed before."""
    identity = conn.identity
    removed = []
    project = identity.find_project(name, domain_id="default")
    if project is not None:
        # all of them, filtered here: asked for one project's, Neutron makes its default
        # group when there is none
        for group in conn.network.security_groups():
            if group.project_id == project.id:
                conn.network.delete_security_group(group, ignore_missing=True)
    user = identity.find_user(name, domain_id="default")
    if user is not None:
        identity.delete_user(user, ignore_missing=True)
        removed.append(f"user {name}")
    if project is not None:
        identity.delete_project(project, ignore_missing=True)
        removed.append(f"project {name}")
    return removed
