"""
The rehearsal cloud's service configuration: one OpenStack (Zed, Debian's packages) for
the clusters of this machine, every service on one machine called ``kos-cloud``, which is
also each of Nova's compute hosts.

Inside the cloud, services reach each other on 127.0.0.1 (the catalog's internal
endpoints); the machine running kos reaches the public endpoints on the cloud's
management address. MariaDB authenticates every service by its Unix user (the
``unix_socket`` plugin), so the database has no password at all; RabbitMQ listens on
loopback only. The only secrets are the Keystone passwords of the admin and the service
users: made per cloud (``secrets()``), written only into the cloud's own disk.
"""

import configparser
import io
import re
import secrets as _secrets
import string

from .. import net

HOST = "kos-cloud"
REGION = "RegionOne"
INTERNAL = "127.0.0.1"
KEYSTONE_INTERNAL = f"http://{INTERNAL}:5000/v3"
# The external (provider) network's physical network name.
PHYSNET = "external"
# The external network's bridge in the cloud's namespace (net.create_cloud_links): it holds
# the veth to this machine and the address the cloud's public endpoints answer on.
EXT_BRIDGE = net.EXT_BRIDGE
MGMT_IF = "mgmt0"
VOLUME_DIR = "/var/lib/cinder/kos-volumes"
# Where the compute driver and the machine's materialiser exchange requests.
SPOOL = "/var/lib/kos-spool"

# Nova's compute hosts and their availability zones: a nova-compute service each
# (image.COMPUTE_UNIT), so that anti-affinity and zones are real scheduling decisions. A
# host in no aggregate is in Nova's default zone, nova, where Cinder keeps its volumes; the
# other zone is a host aggregate (seed.zones).
DEFAULT_ZONE = "nova"
COMPUTE_ZONES = {"kos-compute-1": DEFAULT_ZONE, "kos-compute-2": DEFAULT_ZONE,
                 "kos-compute-3": "kos-az-2"}

SERVICE_USERS = ("glance", "placement", "nova", "neutron", "cinder", "octavia")
# What Octavia's default policy asks of a load balancer's owner
# (octavia/policies/base.py, load-balancer:member_and_owner): every tenant has it.
LB_MEMBER_ROLE = "load-balancer_member"
DATABASES = {
    "keystone": ["keystone"],
    "glance": ["glance"],
    "placement": ["placement"],
    "nova": ["nova_api", "nova", "nova_cell0"],
    "neutron": ["neutron"],
    "cinder": ["cinder"],
    "octavia": ["octavia"],
}

# (service type, name, port, path): the catalog.
ENDPOINTS = (
    ("identity", "keystone", 5000, "/v3"),
    ("image", "glance", 9292, ""),
    ("placement", "placement", 8778, ""),
    ("compute", "nova", 8774, "/v2.1"),
    ("network", "neutron", 9696, ""),
    ("volumev3", "cinderv3", 8776, "/v3/%(project_id)s"),
    ("block-storage", "cinder", 8776, "/v3/%(project_id)s"),
    ("load-balancer", "octavia", 9876, ""),
)

# uwsgi apps: one process each (the defaults are 8-16), so the cloud fits its memory budget.
# neutron's API gets one thread: more gave greenlet errors and DELETEs that never answered.
UWSGI = {
    "/etc/keystone/keystone-uwsgi.ini": (1, 8),
    "/etc/glance/glance-api-uwsgi.ini": (1, 8),
    "/etc/placement/placement-api-uwsgi.ini": (1, 4),
    "/etc/nova/nova-api-uwsgi.ini": (1, 1),
    "/etc/nova/nova-api-metadata-uwsgi.ini": (1, 2),
    "/etc/neutron/neutron-api-uwsgi.ini": (1, 1),
    "/etc/cinder/cinder-api-uwsgi.ini": (1, 4),
    "/etc/octavia/octavia-api-uwsgi.ini": (1, 4),
}


def secrets():
    """Fresh secrets for one cloud: the admin's and every service user's passwords, and
    Octavia's: the server CA key's passphrase, the amphorae's certificate key passphrase
    (32 characters of [A-Za-z0-9-_=], Octavia's rule) and the heartbeat HMAC key."""
    alphabet = string.ascii_letters + string.digits + "-_="
    return {
        **{name: _secrets.token_urlsafe(24) for name in ("admin", *SERVICE_USERS)},
        "octavia_ca": _secrets.token_urlsafe(24),
        "octavia_server_certs": "".join(_secrets.choice(alphabet) for _ in range(32)),
        "octavia_heartbeat": _secrets.token_urlsafe(24),
        # signs the instance ID Neutron's metadata agent hands to Nova's metadata API
        "metadata_proxy": _secrets.token_urlsafe(24),
    }


def db_url(user, database):
    return (
        f"mysql+pymysql://{user}@localhost/{database}"
        "?unix_socket=/run/mysqld/mysqld.sock&charset=utf8"
    )


def _auth(user, password, **extra):
    return {
        "auth_type": "password",
        "auth_url": KEYSTONE_INTERNAL,
        "www_authenticate_uri": KEYSTONE_INTERNAL,
        "project_domain_name": "Default",
        "user_domain_name": "Default",
        "project_name": "service",
        "username": user,
        "password": password,
        "region_name": REGION,
        **extra,
    }


def _client(user, password, **extra):
    auth = _auth(user, password, valid_interfaces="internal", **extra)
    del auth["www_authenticate_uri"]
    return auth


def _ini(sections):
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    for name, values in sections.items():
        parser[name] = {k: _value(v) for k, v in values.items()}
    out = io.StringIO()
    out.write("# Written by kos for its rehearsal cloud (bootstrap/kos_local/openstack/config.py).\n")
    parser.write(out)
    return out.getvalue()


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


PRIVSEP_SECTIONS = ("privsep", "privsep_dhcp_release", "privsep_ovs_vsctl", "privsep_namespace",
                    "privsep_conntrack", "privsep_link")
RABBIT = f"rabbit://guest:guest@{INTERNAL}:5672/"
COMMON = {
    "host": HOST,
    "transport_url": RABBIT,
    "debug": False,
    "use_stderr": False,
}


# The agents start with the RPC server, and a first call sent before the server's queue
# exists is lost: the L3 agent then waited out the default 60 s timeout and a back-off
# before it was alive. Calls that time out are retried with the method's timeout doubled
# (neutron_lib/rpc.py, _BackingOffContextWrapper), so a slow answer under load costs a retry.
AGENT_RPC = {"rpc_response_timeout": 15}


def files(pw):
    """``{path: text}`` of every configuration file the cloud's services read."""
    # a cloud made before the metadata service had no secret for it
    metadata_secret = pw.get("metadata_proxy", "set-per-cluster")
    return {
        "/etc/keystone/keystone.conf": _ini({
            "DEFAULT": {"debug": False},
            "database": {"connection": db_url("keystone", "keystone")},
            "token": {"provider": "fernet"},
            # bcrypt's least work: every password and application credential check (each
            # openstacksdk connection, each service's token) costs ~2 ms instead of ~0.3 s
            # of a core at the default 12 rounds. A rehearsal cloud on loopback.
            "identity": {"password_hash_rounds": 4},
        }),
        "/etc/glance/glance-api.conf": _ini({
            # 0: the API serves from its one process instead of forking a worker
            "DEFAULT": {"debug": False, "workers": 0, "enabled_backends": "file:file"},
            "database": {"connection": db_url("glance", "glance")},
            "keystone_authtoken": _auth("glance", pw["glance"]),
            "paste_deploy": {"flavor": "keystone"},
            "glance_store": {"default_backend": "file"},
            "file": {"filesystem_store_datadir": "/var/lib/glance/images/"},
            "oslo_concurrency": {"lock_path": "/var/lib/glance/tmp"},
        }),
        "/etc/placement/placement.conf": _ini({
            "DEFAULT": {"debug": False},
            "api": {"auth_strategy": "keystone"},
            "placement_database": {"connection": db_url("placement", "placement")},
            "keystone_authtoken": _auth("placement", pw["placement"]),
        }),
        "/etc/nova/nova.conf": _ini({
            "DEFAULT": {
                **COMMON,
                "my_ip": INTERNAL,
                "state_path": "/var/lib/nova",
                "compute_driver": "kos.KosDriver",
                "osapi_compute_workers": 1,
                "metadata_workers": 1,
                # Nova's own defaults are 60 s and 600 s; the rehearsal's servers change state
                # through the API, and the scheduler claims placement itself.
                "update_resources_interval": 60,
                "sync_power_state_interval": 60,
                "heal_instance_info_cache_interval": 60,
                "instance_build_timeout": 900,
                "vif_plugging_timeout": 0,
            },
            "api": {"auth_strategy": "keystone"},
            "api_database": {"connection": db_url("nova", "nova_api")},
            "database": {"connection": db_url("nova", "nova")},
            "keystone_authtoken": {**_auth("nova", pw["nova"]),
                                   "service_token_roles_required": True},
            "service_user": {**_client("nova", pw["nova"]), "send_service_user_token": True},
            "placement": _client("placement", pw["placement"]),
            "neutron": {**_client("neutron", pw["neutron"]), "service_metadata_proxy": True,
                        "metadata_proxy_shared_secret": metadata_secret},
            "glance": {"valid_interfaces": "internal", "region_name": REGION},
            "cinder": {"os_region_name": REGION, "catalog_info": "volumev3:cinderv3:internalURL",
                       "auth_type": "password", "auth_url": KEYSTONE_INTERNAL,
                       "project_domain_name": "Default", "user_domain_name": "Default",
                       "project_name": "service", "username": "nova", "password": pw["nova"]},
            "conductor": {"workers": 1},
            # the compute hosts are mapped when the cloud is set up (cloud.py)
            "scheduler": {"workers": 1, "discover_hosts_in_cells_interval": -1},
            "oslo_concurrency": {"lock_path": "/var/lib/nova/tmp"},
            "vnc": {"enabled": False},
            "kos": {"spool": SPOOL, "network_host": HOST},
        }),
        # Debian's nova-compute-* packages point this at their hypervisor; ours is the spool.
        "/etc/nova/nova-compute.conf": _ini({"DEFAULT": {"compute_driver": "kos.KosDriver"}}),
        **{compute_conf(host): _ini({"DEFAULT": {"host": host}}) for host in COMPUTE_ZONES},
        "/etc/neutron/neutron.conf": _ini({
            "DEFAULT": {
                **COMMON,
                "core_plugin": "ml2",
                "service_plugins": "router",
                "auth_strategy": "keystone",
                "allow_overlapping_ips": True,
                "notify_nova_on_port_status_changes": True,
                "notify_nova_on_port_data_changes": True,
                "api_workers": 1,
                "rpc_workers": 1,
                # state reports go to the one RPC worker: a process of its own costs 150 MiB
                "rpc_state_report_workers": 0,
                "dhcp_agents_per_network": 1,
                "interface_driver": "linuxbridge",
            },
            "database": {"connection": db_url("neutron", "neutron")},
            "keystone_authtoken": _auth("neutron", pw["neutron"]),
            "nova": _client("nova", pw["nova"]),
            "placement": _client("placement", pw["placement"]),
            "agent": {"root_helper": "sudo neutron-rootwrap /etc/neutron/rootwrap.conf",
                      "report_interval": 10},
            "experimental": {"linuxbridge": True},
            "oslo_concurrency": {"lock_path": "/var/lib/neutron/tmp"},
            # One thread per privsep daemon: with more, the eventlet-patched agents hit
            # "greenlet.error: cannot switch to a different thread" and the DHCP agent
            # never starts dnsmasq.
            **{section: {"thread_pool_size": 1} for section in PRIVSEP_SECTIONS},
        }),
        "/etc/neutron/plugins/ml2/ml2_conf.ini": _ini({
            # One machine: tenant networks are local bridges; the external network is flat
            # on the veth that leads to the machine running kos.
            "ml2": {
                "type_drivers": "flat,local",
                "tenant_network_types": "local",
                "mechanism_drivers": "linuxbridge",
                "extension_drivers": "port_security",
            },
            "ml2_type_flat": {"flat_networks": PHYSNET},
            "securitygroup": {"enable_ipset": True},
        }),
        "/etc/neutron/plugins/ml2/linuxbridge_agent.ini": _ini({
            "DEFAULT": {"host": HOST},
            # a bridge of kos's own, not an interface the agent bridges itself: it carries
            # the public endpoints' address too
            "linux_bridge": {"bridge_mappings": f"{PHYSNET}:{EXT_BRIDGE}"},
            "vxlan": {"enable_vxlan": False},
            "securitygroup": {"enable_security_group": True, "firewall_driver": "iptables"},
            "agent": {"polling_interval": 1},
        }),
        "/etc/neutron/dhcp_agent.ini": _ini({
            "DEFAULT": {
                **AGENT_RPC,
                "host": HOST,
                "interface_driver": "linuxbridge",
                "dhcp_driver": "neutron.agent.linux.dhcp.Dnsmasq",
                # the private network has no router: its DHCP namespace answers
                # 169.254.169.254 (and hands out the route to it)
                "enable_isolated_metadata": True,
            },
        }),
        "/etc/neutron/metadata_agent.ini": _ini({
            "DEFAULT": {
                **AGENT_RPC,
                "host": HOST,
                "nova_metadata_host": INTERNAL,
                "nova_metadata_port": 8775,
                "metadata_proxy_shared_secret": metadata_secret,
                # answered in the agent's own process: a worker of its own costs 70 MiB
                "metadata_workers": 0,
            },
        }),
        "/etc/neutron/l3_agent.ini": _ini({
            # a server whose default route is a router's (a control plane with a public
            # interface) reaches 169.254.169.254 through the router's proxy
            "DEFAULT": {**AGENT_RPC, "host": HOST, "interface_driver": "linuxbridge",
                        "agent_mode": "legacy", "enable_metadata_proxy": True},
        }),
        "/etc/cinder/cinder.conf": _ini({
            "DEFAULT": {
                **COMMON,
                "auth_strategy": "keystone",
                "my_ip": INTERNAL,
                "enabled_backends": "kos",
                "osapi_volume_workers": 1,
                "glance_api_servers": f"http://{INTERNAL}:9292",
                "state_path": "/var/lib/cinder",
            },
            "database": {"connection": db_url("cinder", "cinder")},
            "keystone_authtoken": {**_auth("cinder", pw["cinder"]),
                                   "service_token_roles_required": True},
            "nova": _client("nova", pw["nova"]),
            "kos": {
                "volume_driver": "cinder.volume.drivers.kos_file.KosFileDriver",
                "volume_backend_name": "kos",
                "kos_volume_dir": VOLUME_DIR,
            },
            "oslo_concurrency": {"lock_path": "/var/lib/cinder/tmp"},
        }),
    }


def compute_conf(host):
    return f"/etc/nova/nova-compute-{host}.conf"


def uwsgi_tuned(text, processes, threads):
    text = re.sub(r"(?m)^processes\s*=.*$", f"processes = {processes}", text)
    text = re.sub(r"(?m)^threads\s*=.*$", f"threads = {threads}", text)
    # uwsgi's http-socket drops a kept-alive connection after a bodyless answer (204): the
    # client's next request on it is reset. Neutron's file already says so; all of them do.
    if "Connection: close" not in text:
        text = text.rstrip("\n") + "\nadd-header = Connection: close\n"
    return text


MYSQL_TUNING = """\
# kos rehearsal cloud: a small database for one all-in-one cloud.
[mysqld]
bind-address = 127.0.0.1
innodb_buffer_pool_size = 48M
innodb_log_buffer_size = 4M
key_buffer_size = 8M
max_connections = 300
performance_schema = OFF
table_open_cache = 400
"""

RABBIT_ENV = "NODE_IP_ADDRESS=127.0.0.1\nNODENAME=rabbit@localhost\n"
RABBIT_CONF = (
    "# kos rehearsal cloud: loopback only, little memory.\n"
    "listeners.tcp.default = 127.0.0.1:5672\n"
    "vm_memory_high_watermark.absolute = 256MB\n"
    "loopback_users.guest = true\n"
)
