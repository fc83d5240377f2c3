"""
Octavia in the rehearsal cloud, as its installation guide lays it out
(https://docs.openstack.org/octavia/latest/install/install-ubuntu.html): the amphora
provider, a management network the controllers reach the amphorae on, the health manager's
port on it, and two certificate authorities
(https://docs.openstack.org/octavia/latest/admin/guides/certificates.html): one signs each
amphora's server certificate, the other the controllers' client certificate.

Here the management network is ``lb-mgmt-net``, a /26 of the cloud's own /24 (no cluster
may use it); the health manager's port ``o-hm0`` is a veth in the cloud's namespace whose
other end Neutron's Linux bridge agent plugs into that network's bridge, as devstack plugs
it; amphorae are hosts the materialiser boots from the amphora image (``amphora_layer``),
in the service project. Everything here is made once per cloud and found again by name.
"""

import datetime
import ipaddress
import resource

from . import config
from .seed import host_image_in_glance

PACKAGES = ("octavia-api", "octavia-worker", "octavia-health-manager", "octavia-housekeeping")
UNITS = ("octavia-api.service", "octavia-worker.service", "octavia-health-manager.service",
         "octavia-housekeeping.service")
CONF = "/etc/octavia/octavia.conf"
CERT_DIR = "/etc/octavia/certs"
MGMT_NET = "lb-mgmt-net"
AMP_SECGROUP = "lb-mgmt-sec-grp"
HM_SECGROUP = "lb-health-mgr-sec-grp"
HM_PORT = "octavia-health-manager-listen-port"
HM_IF = "o-hm0"
HM_PORT_NUMBER = 5555
AGENT_PORT = 9443
FLAVOR = "kos-amphora"
IMAGE = "kos-amphora"
IMAGE_TAG = "amphora"
# The amphora's size (Octavia's own image runs in 1 GiB; here a host with haproxy and
# the agent).
FLAVOR_SIZE = {"vcpus": 1, "ram": 1024, "disk": 2}


def mgmt_subnet(plan):
    """The management network: the last /26 of the cloud's /24."""
    return ipaddress.ip_network(f"{plan.block[192]}/26")


def hm_address(plan):
    return str(plan.block[194])


def connection_limit():
    """What an amphora's haproxy may accept at once. haproxy asks for about 2.5 open files
    per connection of its ``maxconn`` (Octavia's default, 50000, wants 125029), and an
    amphora here is a container that cannot raise the open-file limit it inherits from this
    machine's processes above their hard limit (no CAP_SYS_RESOURCE in every sandbox)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        return 50000
    return max(1000, min(50000, hard // 4))


def certificates(passphrase):
    """``{file name: PEM text}`` for ``CERT_DIR``: the server CA (its key encrypted with
    ``passphrase``, as the worker's local certificate generator reads it), the client CA,
    and the controllers' client certificate with its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    days = datetime.timedelta(days=3650)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kos rehearsal cloud"),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def cert(subject, key, issuer, issuer_key, ca):
        builder = (x509.CertificateBuilder().subject_name(name(subject))
                   .issuer_name(name(issuer)).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + days)
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None),
                                  critical=True))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        else:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    def pem(c):
        return c.public_bytes(serialization.Encoding.PEM).decode()

    def key_pem(k, password=None):
        enc = (serialization.BestAvailableEncryption(password.encode()) if password
               else serialization.NoEncryption())
        return k.private_bytes(serialization.Encoding.PEM,
                               serialization.PrivateFormat.TraditionalOpenSSL, enc).decode()

    keys = {n: rsa.generate_private_key(public_exponent=65537, key_size=2048)
            for n in ("server_ca", "client_ca", "client")}
    server_ca = cert("kos Octavia server CA", keys["server_ca"], "kos Octavia server CA",
                     keys["server_ca"], True)
    client_ca = cert("kos Octavia client CA", keys["client_ca"], "kos Octavia client CA",
                     keys["client_ca"], True)
    client = cert("kos Octavia controller", keys["client"], "kos Octavia client CA",
                  keys["client_ca"], False)
    return {
        "server_ca.cert.pem": pem(server_ca),
        "server_ca.key.pem": key_pem(keys["server_ca"], passphrase),
        "client_ca.cert.pem": pem(client_ca),
        "client.cert-and-key.pem": pem(client) + key_pem(keys["client"]),
    }


def conf(pw, ids, plan):
    """octavia.conf: ``pw`` the cloud's passwords and secrets, ``ids`` what ``offer`` made."""
    hm = f"{hm_address(plan)}:{HM_PORT_NUMBER}"
    return config._ini({
        "DEFAULT": {"debug": False, "transport_url": config.RABBIT, "use_stderr": False},
        "api_settings": {"bind_host": "0.0.0.0", "bind_port": 9876, "auth_strategy": "keystone",
                         "enabled_provider_drivers":
                             "amphora:The Octavia Amphora driver.",
                         "default_provider_driver": "amphora"},
        "database": {"connection": config.db_url("octavia", "octavia")},
        "health_manager": {"bind_ip": hm_address(plan), "bind_port": HM_PORT_NUMBER,
                           "controller_ip_port_list": hm,
                           "heartbeat_key": pw["octavia_heartbeat"],
                           "health_update_threads": 1, "stats_update_threads": 1},
        "keystone_authtoken": config._auth("octavia", pw["octavia"]),
        "certificates": {"cert_generator": "local_cert_generator",
                         "ca_certificate": f"{CERT_DIR}/server_ca.cert.pem",
                         "ca_private_key": f"{CERT_DIR}/server_ca.key.pem",
                         "ca_private_key_passphrase": pw["octavia_ca"],
                         "server_certs_key_passphrase": pw["octavia_server_certs"]},
        "controller_worker": {
            "workers": 1,
            "amp_image_tag": IMAGE_TAG,
            "amp_image_owner_id": ids["project"],
            "amp_flavor_id": ids["flavor"],
            "amp_boot_network_list": ids["network"],
            "amp_secgroup_list": ids["secgroup"],
            "client_ca": f"{CERT_DIR}/client_ca.cert.pem",
            "network_driver": "allowed_address_pairs_driver",
            "compute_driver": "compute_nova_driver",
            "amphora_driver": "amphora_haproxy_rest_driver",
            "loadbalancer_topology": "SINGLE",
            # the amphora's server is ACTIVE seconds after Nova's request: look every 2 s,
            # not every 10 (the default), as long in all
            "amp_active_retries": 150, "amp_active_wait_sec": 2,
            # the agent's configuration and certificates as cloud-config write_files,
            # which the hosts' cloud-init reads from the config drive
            "user_data_config_drive": True,
        },
        "haproxy_amphora": {"client_cert": f"{CERT_DIR}/client.cert-and-key.pem",
                            "server_ca": f"{CERT_DIR}/server_ca.cert.pem",
                            # an amphora is a host that boots in seconds here
                            "connection_max_retries": 120, "connection_retry_interval": 2,
                            "build_active_retries": 120, "build_retry_interval": 2,
                            "default_connection_limit": connection_limit()},
        "oslo_messaging": {"topic": "octavia_prov"},
        "service_auth": {k: v for k, v in config._client("octavia", pw["octavia"]).items()
                         if k != "valid_interfaces"},
        "nova": {"region_name": config.REGION, "endpoint_type": "internalURL"},
        "neutron": {"region_name": config.REGION, "endpoint_type": "internalURL",
                    "valid_interfaces": "internal"},
        "glance": {"region_name": config.REGION, "endpoint_type": "internalURL"},
        "cinder": {"region_name": config.REGION, "endpoint_type": "internalURL"},
        "oslo_concurrency": {"lock_path": "/var/lib/octavia/tmp"},
    })


def offer(conn, plan, amphora_image):
    """The management network, security groups, health manager port, flavor and amphora
    image, in the service project: ``{"project", "network", "secgroup", "flavor", "port",
    "mac"}``."""
    identity, network = conn.identity, conn.network
    project = identity.find_project("service", domain_id="default")
    if identity.find_role(config.LB_MEMBER_ROLE) is None:
        identity.create_role(name=config.LB_MEMBER_ROLE)
    mgmt = network.find_network(MGMT_NET, project_id=project.id) or network.create_network(
        name=MGMT_NET, project_id=project.id,
        description="Octavia's management network: controllers to amphorae")
    cidr = mgmt_subnet(plan)
    if not list(network.subnets(network_id=mgmt.id)):
        network.create_subnet(
            name=f"{MGMT_NET}-subnet", network_id=mgmt.id, project_id=project.id,
            ip_version=4, cidr=str(cidr), gateway_ip=None, is_dhcp_enabled=True,
            allocation_pools=[{"start": str(cidr[8]), "end": str(cidr[-2])}])
    groups = {}
    for name, rules in ((AMP_SECGROUP, [("tcp", AGENT_PORT), ("icmp", None)]),
                        (HM_SECGROUP, [("udp", HM_PORT_NUMBER)])):
        group = network.find_security_group(name, project_id=project.id)
        if group is None:
            group = network.create_security_group(name=name, project_id=project.id)
            for proto, port in rules:
                network.create_security_group_rule(
                    security_group_id=group.id, direction="ingress", ethertype="IPv4",
                    protocol=proto, port_range_min=port, port_range_max=port,
                    remote_ip_prefix=str(cidr), project_id=project.id)
        groups[name] = group
    port = network.find_port(HM_PORT, project_id=project.id)
    if port is None:
        subnet = next(network.subnets(network_id=mgmt.id))
        port = network.create_port(
            name=HM_PORT, network_id=mgmt.id, project_id=project.id,
            device_owner="Octavia:health-mgr", device_id=f"kos-{HM_IF}",
            binding_host_id=config.HOST, security_group_ids=[groups[HM_SECGROUP].id],
            fixed_ips=[{"subnet_id": subnet.id, "ip_address": hm_address(plan)}])
    flavor = conn.compute.find_flavor(FLAVOR)
    if flavor is None:
        flavor = conn.compute.create_flavor(name=FLAVOR, is_public=False, **FLAVOR_SIZE)
        conn.compute.flavor_add_tenant_access(flavor, project.id)
    # Octavia finds it by tag among its project's images (amp_image_tag, amp_image_owner_id)
    host_image_in_glance(conn, IMAGE, amphora_image, visibility="private", owner=project.id,
                         tags=[IMAGE_TAG])
    return {"project": project.id, "network": mgmt.id,
            "secgroup": groups[AMP_SECGROUP].id, "flavor": flavor.id,
            "port": port.id, "mac": port.mac_address}
