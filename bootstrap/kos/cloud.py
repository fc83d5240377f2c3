"""
The OpenStack-facing layer, kept thin: authenticate with openstacksdk from the standard
sources (``clouds.yaml`` + ``OS_CLOUD``, or ``OS_*`` from an openrc, application
credentials included), check a plan fits the project before anything is created, and
read the servers' consoles at first boot. Everything here reads; what Kubernetes left
behind is found and deleted around ``terraform destroy`` by ``kos.cloud_cleanup``.
"""

import json
import os
import re
import time
from collections import Counter
from dataclasses import dataclass

from . import trust, ui
from .errors import ConvergeError, PreflightError

CREDENTIALS_FIX = (
    "export OS_CLOUD=<cloud> naming an entry of clouds.yaml (./clouds.yaml, "
    "~/.config/openstack/clouds.yaml or /etc/openstack/clouds.yaml), or source the "
    "project's openrc (OS_AUTH_URL, OS_USERNAME/OS_PASSWORD or "
    "OS_APPLICATION_CREDENTIAL_ID/OS_APPLICATION_CREDENTIAL_SECRET, ...)"
)


def _config_files():
    """clouds.yaml's candidates in openstacksdk's order, OS_CLIENT_CONFIG_FILE first (its
    loader's own list: https://opendev.org/openstack/openstacksdk/src/branch/master/openstack/config/loader.py),
    each with why it was not read: absent, or unreadable and skipped as the loader skips it."""
    import yaml
    from openstack.config import loader

    override = os.environ.get("OS_CLIENT_CONFIG_FILE")
    for path in ([override] if override else []) + loader.CONFIG_FILES:
        if not os.path.exists(path):
            yield path, "absent"
            continue
        try:
            with open(path) as fh:
                (json.load if path.endswith("json") else yaml.safe_load)(fh)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            yield path, f"unreadable: {' '.join(str(exc).split())}"
            continue
        yield path, None


def check_cloud_entry(cloud=None):
    """PreflightError when the named cloud (``cloud``, else OS_CLOUD) is in no clouds.yaml
    openstacksdk reads, naming the entry and every file it looked in; else None."""
    from openstack import exceptions as sdk
    from openstack.config import loader

    name = cloud or os.environ.get("OS_CLOUD")
    if not name:
        return
    try:
        config = loader.OpenStackConfig(load_yaml_config=True, load_envvars=True)
    except sdk.ConfigException as exc:
        raise PreflightError(f"OpenStack configuration: {exc}", fix=CREDENTIALS_FIX) from exc
    if name in config.get_cloud_names():
        return
    source = f"--os-cloud {name}" if cloud else f"OS_CLOUD={name}"
    read = config.config_filename
    places, bad = {}, []
    for path, why in _config_files():
        # ./clouds.yaml, ./clouds.yml, ./clouds.json: one place, written once
        stem, suffix = os.path.splitext(path)
        places.setdefault(stem if os.path.basename(stem) == "clouds" else path, []).append(
            suffix)
        if why and why != "absent":
            bad.append(f"{path} ({why})")
    looked = ", ".join(
        f"{stem}.{{{','.join(s.lstrip('.') for s in suffixes)}}}" if len(suffixes) > 1 else
        (stem if stem.endswith(tuple(suffixes)) else stem + suffixes[0])
        for stem, suffixes in places.items())
    found = (f"{read} was read and defines "
             f"{', '.join(sorted(config.get_cloud_names())) or 'no cloud'}") if read else \
        "none of them could be read"
    fix = (f"add an entry {name!r} under clouds: in {read}" if read else
           f"write a clouds.yaml with an entry {name!r} in one of those places")
    if bad:
        fix = f"make the unreadable file valid and readable YAML, or {fix}"
    raise PreflightError(
        f"{source}: no clouds.yaml defines the cloud {name!r} (looked in, in order: {looked}; "
        f"{found}" + (f"; skipped: {'; '.join(bad)}" if bad else "") + ")",
        fix=fix + " (openstacksdk reads only the first readable file), or select another "
        "entry with OS_CLOUD / --os-cloud",
    )


def connect(cloud=None):
    """An authenticated openstack.connection.Connection, or PreflightError naming the fix."""
    import openstack
    from keystoneauth1 import exceptions as ksa

    check_cloud_entry(cloud)
    try:
        conn = openstack.connect(cloud=cloud, load_yaml_config=True, load_envvars=True)
        conn.authorize()
    except openstack.exceptions.ConfigException as exc:
        raise PreflightError(f"OpenStack configuration: {exc}", fix=CREDENTIALS_FIX) from exc
    except ksa.MissingRequiredOptions as exc:
        raise PreflightError(
            "no OpenStack credentials found (neither OS_CLOUD nor OS_AUTH_URL is set)",
            fix=CREDENTIALS_FIX,
        ) from exc
    except (ksa.ClientException, openstack.exceptions.SDKException) as exc:
        # authorize() re-raises keystoneauth's errors as SDKException; the cause says which.
        cause = exc if isinstance(exc, ksa.ClientException) else exc.__context__
        if isinstance(cause, ksa.Unauthorized):
            raise PreflightError(
                f"OpenStack authentication failed: {cause}",
                fix="check the credentials of the selected cloud (password or application "
                "credential id/secret, user and project domain); an expired application "
                "credential must be re-created",
            ) from exc
        if isinstance(cause, (ksa.ConnectFailure, ksa.DiscoveryFailure, ksa.SSLError)):
            raise PreflightError(
                f"cannot reach the OpenStack identity service: {cause}",
                fix="check auth_url (OS_AUTH_URL) and the network path to it",
            ) from exc
        raise PreflightError(
            f"OpenStack authentication failed: {exc}", fix=CREDENTIALS_FIX
        ) from exc
    return conn


@dataclass
class Finding:
    check: str
    ok: bool
    message: str
    fix: str = ""


def _names(items, limit=12):
    names = sorted({getattr(i, "name", None) or "" for i in items} - {""})
    more = f" (and {len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more if names else "none"


def node_flavor(values, node):
    """The flavor a node of the node set boots with (terraform/main.tf, local.kube_nodes)."""
    return node.get("flavor") or values["kube_node_flavor"]


def plan_needs(values, nodes, flavors):
    """
    What ``terraform apply`` of these inputs creates, per quota: bastion, salt master and
    a server per Kubernetes node; the master's state volume and the nodes' boot volumes;
    ports for every server NIC, the
    router's interface on the public subnet and one DHCP port per subnet (DHCP ports
    belong to the project and count against its port quota). A top master (``top_master``)
    has a public port and a floating IP of its own; so has the API load balancer (its VIP
    port; its amphorae's ports are the load-balancer service's own).
    """
    n = len(nodes)
    node_flavors = [flavors[node_flavor(values, node)] for node in nodes.values()]
    fip_access = values.get("first_control_plane_access") == "floating_ip"
    admin_access = values.get("first_control_plane_access") == "admin_network"
    top = values.get("top_master") is not None
    octavia = values.get("api_load_balancer") == "octavia"
    master = flavors[values["salt_master_flavor"]]
    bastion = flavors[values["bastion_flavor"]]
    boot = [node["boot_volume"]["size"] for node in nodes.values() if node.get("boot_volume")]
    # a server group per role whose policy is not none (terraform/modules/nodes)
    policies = values.get("server_group_policies") or {}
    grouped = Counter(node["role"] for node in nodes.values()
                      if policies.get(node["role"], "none") != "none")
    groups = {"server_groups": len(grouped),
              "server_group_members": max(grouped.values())} if grouped else {}
    return {
        "instances": n + 2,
        "cores": sum(f.vcpus for f in node_flavors) + master.vcpus + bastion.vcpus,
        "ram": sum(f.ram for f in node_flavors) + master.ram + bastion.ram,
        "volumes": 1 + len(boot),
        "gigabytes": values["salt_master_volume_size"] + sum(boot),
        "floating_ips": 1 + int(fip_access) + int(top) + int(octavia),
        "ports": 2 + 1 + n + int(fip_access) + int(admin_access) + int(top) + 1 + 2
        + int(octavia),
        **groups,
    }


QUOTA_FIX = {
    "instances": "ask the cloud admins to raise the instances quota, or remove nodes from kubernetes_nodes",
    "cores": "ask for a larger cores quota, or choose smaller flavors / fewer nodes",
    "ram": "ask for a larger RAM quota, or choose smaller flavors / fewer nodes",
    "volumes": "ask for a larger volumes quota (the salt master keeps its keys on one volume, "
    "and each node with a boot volume boots from one)",
    "gigabytes": "ask for a larger volume gigabytes quota, or lower salt_master_volume_size or "
    "the boot volumes' sizes",
    "floating_ips": "ask for a larger floating IP quota, or release unused floating IPs",
    "ports": "ask for a larger port quota, or delete unused ports",
    "server_groups": "ask for a larger server groups quota, or set server_group_policies "
    "of a role to none",
    "server_group_members": "ask for a larger server group members quota, or set "
    "server_group_policies of the largest role to none",
}


def _free(limit, used, reserved=0):
    return None if limit is None or limit < 0 else limit - (used or 0) - (reserved or 0)


def quota_findings(conn, needs):
    free = {}
    absolute = conn.compute.get_limits().absolute
    free["instances"] = _free(absolute.instances, absolute.instances_used)
    free["cores"] = _free(absolute.total_cores, absolute.total_cores_used)
    free["ram"] = _free(absolute.total_ram, absolute.total_ram_used)
    free["server_groups"] = _free(absolute.server_groups, absolute.server_groups_used)
    # a limit per group, not a total
    free["server_group_members"] = _free(absolute.server_group_members, 0)
    quota = conn.network.get_quota(conn.current_project_id, details=True)
    for name, attr in (("ports", "ports"), ("floating_ips", "floating_ips")):
        entry = getattr(quota, attr) or {}
        free[name] = _free(entry.get("limit"), entry.get("used"), entry.get("reserved"))
    if conn.has_service("block-storage"):
        volume = conn.block_storage.get_limits().absolute
        free["volumes"] = _free(volume.max_total_volumes, volume.total_volumes_used)
        free["gigabytes"] = _free(volume.max_total_volume_gigabytes, volume.total_gigabytes_used)
    else:
        free["volumes"] = free["gigabytes"] = 0
    findings = []
    for name, need in needs.items():
        left = free.get(name)
        unit = " MiB" if name == "ram" else (" GiB" if name == "gigabytes" else "")
        # its limit is per group: the need is the largest group's
        free_word = "allowed per group" if name == "server_group_members" else "free"
        if left is None:
            findings.append(Finding(f"quota {name}", True, f"{name}: need {need}{unit}, unlimited"))
        elif left < need:
            findings.append(
                Finding(
                    f"quota {name}",
                    False,
                    f"quota {name}: this plan needs {need}{unit} but only {max(left, 0)}{unit} "
                    f"{'is ' if free_word == 'free' else ''}{free_word}",
                    QUOTA_FIX[name],
                )
            )
        else:
            findings.append(
                Finding(f"quota {name}", True,
                        f"{name}: need {need}{unit}, {left}{unit} {free_word}")
            )
    return findings


def cloud_findings(conn, values, nodes, check_quota=True):
    """Image, flavors, networks and quotas for these inputs and their node set; read-only."""
    findings = []
    image = values["base_image"]
    images = [i for i in conn.image.images(name=image) if i.status == "active"]
    if len(images) == 1:
        findings.append(Finding("image", True, f"image {image!r} is active"))
    elif not images:
        available = list(conn.image.images(status="active"))
        findings.append(
            Finding(
                "image",
                False,
                f"base_image {image!r} is not an active image visible to this project",
                f"set base_image to one of: {_names(available)}",
            )
        )
    else:
        findings.append(
            Finding(
                "image",
                False,
                f"base_image {image!r} names {len(images)} images; Terraform needs a unique name",
                "set base_image to a name only one image has (or rename the duplicates)",
            )
        )

    flavors = {f.name: f for f in conn.compute.flavors(details=True)}
    for var in ("kube_node_flavor", "salt_master_flavor", "bastion_flavor"):
        name = values[var]
        if name in flavors:
            f = flavors[name]
            findings.append(Finding(var, True, f"{var} {name!r}: {f.vcpus} vCPU, {f.ram} MiB"))
        else:
            findings.append(
                Finding(
                    var,
                    False,
                    f"{var} {name!r} is not a flavor of this cloud",
                    f"set {var} to one of: {_names(flavors.values())}",
                )
            )

    for name, node in sorted(nodes.items()):
        flavor = node.get("flavor")
        if flavor is not None and flavor not in flavors:
            findings.append(
                Finding(
                    "kubernetes_nodes",
                    False,
                    f"kubernetes_nodes: {name}'s flavor {flavor!r} is not a flavor of this cloud",
                    f"set its flavor to one of: {_names(flavors.values())}",
                )
            )

    ext = values["external_network_name"]
    nets = list(conn.network.networks(name=ext))
    if any(n.is_router_external for n in nets):
        findings.append(Finding("external network", True, f"external network {ext!r} found"))
    else:
        externals = list(conn.network.networks(is_router_external=True))
        problem = (
            f"network {ext!r} exists but is not external (router:external is false)"
            if nets
            else f"external_network_name {ext!r} is not a network of this cloud"
        )
        findings.append(
            Finding(
                "external network",
                False,
                problem,
                f"set external_network_name to one of: {_names(externals)}",
            )
        )
    if values.get("first_control_plane_access") == "admin_network":
        admin = values.get("admin_network_name")
        if not list(conn.network.networks(name=admin)):
            findings.append(
                Finding(
                    "admin network",
                    False,
                    f"admin_network_name {admin!r} is not a network of this cloud",
                    "create the admin network or correct admin_network_name",
                )
            )

    findings += load_balancer_findings(conn, values)
    from . import placement  # it builds on this module's Finding

    findings += placement.findings(conn, values, nodes)

    if check_quota:
        missing_flavor = any(
            values[v] not in flavors
            for v in ("kube_node_flavor", "salt_master_flavor", "bastion_flavor")
        ) or any(node_flavor(values, node) not in flavors for node in nodes.values())
        if missing_flavor:
            findings.append(Finding("quotas", True, "quotas not checked: a flavor is unknown"))
        else:
            findings.extend(quota_findings(conn, plan_needs(values, nodes, flavors)))
    else:
        findings.append(
            Finding(
                "quotas", True, "quotas not checked: part of this plan already exists (resumed run)"
            )
        )
    return findings


def load_balancer_findings(conn, values):
    """api_load_balancer = "octavia" needs Octavia in the cloud's catalog."""
    if values.get("api_load_balancer") != "octavia":
        return []
    if conn.has_service("load-balancer"):
        wanted = values.get("api_load_balancer_provider")
        if wanted:
            offered = sorted(p.name for p in conn.load_balancer.providers())
            if wanted not in offered:
                return [Finding(
                    "api load balancer", False,
                    f"api_load_balancer_provider {wanted!r} is not a provider of this cloud's "
                    "Octavia",
                    f"set api_load_balancer_provider to one of: {', '.join(offered) or 'none'}, "
                    "or null for the cloud's default",
                )]
        return [Finding("api load balancer", True,
                        "api_load_balancer octavia: the catalog has a load-balancer service"
                        + (f" with the provider {wanted}" if wanted else ""))]
    return [Finding(
        "api load balancer",
        False,
        'api_load_balancer is "octavia" but this cloud\'s catalog has no load-balancer '
        "service (Octavia)",
        'set api_load_balancer = "none" (each node\'s local haproxy in front of the control '
        "planes, k8s-cp-1's floating IP for operators), or ask the cloud's admins for Octavia",
    )]


def raise_on_failures(findings, what="preflight"):
    failed = [f for f in findings if not f.ok]
    for f in findings:
        (ui.ok if f.ok else ui.fail)(f.message)
    if failed:
        raise PreflightError(
            f"{what}: {len(failed)} problem(s); nothing was created",
            fix="; ".join(dict.fromkeys(f.fix for f in failed if f.fix)),
            details=[f"{f.message} -> {f.fix}" if f.fix else f.message for f in failed],
        )


# -- first boot --------------------------------------------------------------------------

FIRSTBOOT_DONE = "kos: first boot done on {fqdn}"
CLOUD_INIT_DONE = "kos: cloud-init finished on {fqdn}"
# what the boot script says of interfaces it gave up waiting for (kos-firstboot.sh.tftpl)
NO_ADDRESS = re.compile(r"kos: no DHCP lease on((?: [\w.-]+)+) after \d+ s")


def cluster_servers(conn, cluster):
    return [
        s for s in conn.compute.servers(details=True)
        if (s.metadata or {}).get("kos_cluster") == cluster
    ]


def server_faults(conn, cluster):
    """``["<name>: <Nova's fault message>"]`` of the cluster's servers in ERROR: Terraform
    says only "unexpected state 'ERROR'", the fault says why (no valid host, a port that
    could not be bound, what the hypervisor answered), and a server group that kept Nova
    from placing the server names itself and the fix."""
    found = []
    groups = None
    for server in cluster_servers(conn, cluster):
        if (server.status or "").upper() != "ERROR":
            continue
        fault = server.fault or {}
        message = fault.get("message") or "no fault recorded"
        hint = ""
        if "No valid host" in message:
            from . import placement  # it builds on this module's Finding

            if groups is None:
                groups = list(conn.compute.server_groups())
            hint = placement.no_valid_host_hint(server, groups)
        found.append(f"{server.name}: {message}"
                     + (f" ({fault['details'].strip().splitlines()[-1].strip()[:300]})"
                        if fault.get("details") else "") + hint)
    return found


def _minion_id(server):
    return (server.metadata or {}).get("kos_minion_id") or server.name


def console_record(conn, server, tail=""):
    """
    What ``server``'s console printed about its trust (``kos.trust.parse_console``), read
    from ``tail`` when the marks are in it, else from the whole console.
    """
    mid = _minion_id(server)
    record = trust.parse_console(tail, mid)
    if not record["minion_keys"]:
        whole = conn.compute.get_server_console_output(server.id).get("output") or ""
        record = trust.parse_console(whole, mid)
    return dict(record, server=server.name, server_id=server.id)


def read_consoles(conn, cluster):
    """``{minion id: trust record}`` of every active server whose console can be read."""
    from openstack import exceptions

    records = {}
    for server in cluster_servers(conn, cluster):
        if server.status != "ACTIVE":
            continue
        try:
            records[_minion_id(server)] = console_record(conn, server)
        except (exceptions.HttpException, exceptions.SDKException):
            continue
    return records


def read_master_consoles(conn, clusters):
    """
    ``{cluster: (minion id, trust record) of its active salt master, or None}`` for other
    clusters of the project: on a top master, their masters join as syndics with their
    minion keys.
    """
    from openstack import exceptions

    found = dict.fromkeys(clusters)
    for server in conn.compute.servers(details=True):
        meta = server.metadata or {}
        if (meta.get("kos_cluster") not in found or meta.get("kos_role") != "salt_master"
                or server.status != "ACTIVE"):
            continue
        try:
            found[meta["kos_cluster"]] = (_minion_id(server), console_record(conn, server))
        except (exceptions.HttpException, exceptions.SDKException):
            continue
    return found


def wait_first_boot(conn, cluster, timeout=1200, interval=3.0, record=None, booted=()):
    """
    Until every server of the cluster has run its first boot, read from the console as an
    operator would (``openstack console log show``): the boot script's last line means done;
    cloud-init's final message without it means the script failed, unless the server booted
    again since: its first boot's line further up the console, or on record (``booted``:
    the IDs of servers whose first boot kos read before), says it ran. A cloud whose
    consoles cannot be read is not waited for (the minions' keys are, later). What each
    console printed about its keys goes to ``record`` (``{minion id: trust record}``).
    """
    from openstack import exceptions

    pending = {s.id: s for s in cluster_servers(conn, cluster)}
    done, blind, records, addressless = [], [], {}, {}
    deadline = time.monotonic() + timeout
    while pending:
        for sid, server in list(pending.items()):
            fqdn = _minion_id(server)
            current = conn.compute.get_server(sid)
            if current.status == "ERROR":
                fault = (current.fault or {}).get("message", "no fault recorded")
                raise ConvergeError(
                    f"server {server.name} went to ERROR: {fault}",
                    fix="fix the cause, then re-run kos up (Terraform replaces the server)",
                )
            if current.status != "ACTIVE":
                continue
            try:
                text = conn.compute.get_server_console_output(sid, length=400).get("output") or ""
                if FIRSTBOOT_DONE.format(fqdn=fqdn) in text:
                    records[fqdn] = console_record(conn, server, text)
            except (exceptions.HttpException, exceptions.SDKException):
                blind.append(server.name)
                del pending[sid]
                continue
            if fqdn in records:
                done.append(server.name)
                del pending[sid]
                missing = NO_ADDRESS.search(text)
                if missing:
                    addressless[server.name] = missing[1].split()
            elif CLOUD_INIT_DONE.format(fqdn=fqdn) in text:
                # cloud-init runs at every boot, the first-boot script once per instance
                if sid in booted:
                    done.append(server.name)
                    del pending[sid]
                    continue
                whole = conn.compute.get_server_console_output(sid).get("output") or ""
                if FIRSTBOOT_DONE.format(fqdn=fqdn) in whole:
                    records[fqdn] = console_record(conn, server, whole)
                    done.append(server.name)
                    del pending[sid]
                    continue
                raise ConvergeError(
                    f"the first boot of {server.name} failed (cloud-init finished without it)",
                    fix=f"read its console: openstack console log show {sid}",
                    details=text.strip().splitlines()[-15:],
                )
        if pending and time.monotonic() > deadline:
            names = ", ".join(sorted(s.name for s in pending.values()))
            raise ConvergeError(
                f"first boot not finished after {timeout}s on: {names}",
                fix="read their consoles (openstack console log show <server>); re-run kos up",
            )
        if pending:
            time.sleep(interval)
    if record and records:
        record(records)
    if blind:
        ui.warn(f"consoles not readable, first boot not checked: {', '.join(sorted(blind))}")
    unmarked = sorted(mid for mid, rec in records.items() if not rec["minion_keys"])
    if unmarked:
        ui.warn(f"no minion key fingerprint on the console of: {', '.join(unmarked)}")
    for name, devs in sorted(addressless.items()):
        # kos reaches the cluster through these addresses: say where a later failure starts
        ui.warn(f"{name} booted without an address on {', '.join(devs)} (its console: no DHCP "
                f"lease): check the port's network and its DHCP agent, then reboot the server")
    return {
        "booted": sorted(done),
        "unchecked": sorted(blind),
        "fingerprints": sorted(mid for mid, rec in records.items() if rec["minion_keys"]),
        "without_address": addressless,
    }
