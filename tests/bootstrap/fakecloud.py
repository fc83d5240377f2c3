"""
An OpenStack API double on 127.0.0.1 for the tests of the cloud-facing layer (preflight,
cleanup before destroy, and Terraform's provider during plan/destroy). It serves the
response shapes the OpenStack API references document, per call:

* Identity v3 -- api-ref identity/v3 "Version discovery" (GET /), "Password authentication
  with scoped authorization" and "Authenticating with an Application Credential"
  (POST /v3/auth/tokens: 201, token in X-Subject-Token, body token{methods, user, project,
  roles, catalog[{type, name, endpoints[{interface, region, region_id, url}]}]}).
* Compute v2.1 -- api-ref compute "List All Major Versions" / "Show Details of Specific API
  Version" (GET /, GET /v2.1), "List Flavors With Details" (GET /flavors/detail) and
  "Show Rate And Absolute Limits" (GET /limits; the v2.36+ shape without network limits).
* Networking v2.0 -- api-ref network/v2 "List API versions" (GET /), "List networks",
  "List ports", "Delete port", "List floating IPs", "Delete floating IP", "List security
  groups", "Delete security group", "List routers" (filters: name, router:external,
  network_id, tags; GET by id), and quota_details "Show quota details for a tenant"
  (GET /v2.0/quotas/{project_id}/details.json: {quota: {resource: {limit, used, reserved}}}).
* Image v2 -- api-ref image/v2 "List API versions" and "List images" (GET /v2/images with
  name/status filters: {images, schema, first}).
* Block Storage v3 -- api-ref block-storage/v3 "List All Api Versions", "List accessible
  volumes with details" (GET /v3/{project_id}/volumes/detail), "Delete a volume", "Show a
  volume's details", and "Limits: Show absolute limits for project"
  (GET /v3/{project_id}/limits: {limits: {rate: [], absolute: {maxTotalVolumes, ...}}}).
* Load Balancer v2 -- api-ref load-balancer/v2 "List Load Balancers", "Show Load Balancer
  details" and "Remove a Load Balancer" (DELETE with ?cascade=true: 204, then
  provisioning_status PENDING_DELETE until gone).

Every request is logged as (method, path, query, body) so tests can assert what was
read and that nothing was written. Anything not listed answers 404 (itemNotFound), as a
cloud without that API would; POSTs a test did not allow answer 403.
"""

import copy
import itertools
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

PROJECT_ID = "7c5e4fbb9e3a4d6c9c2f0b1a2d3e4f50"
USER_ID = "0b1b2b3b4b5b6b7b8b9b0c1c2c3c4c5c"
NOW = "2026-11-21T10:00:00.000000Z"
EXPIRES = "2099-01-01T00:00:00.000000Z"

_ids = itertools.count(1)


def new_id():
    return str(uuid.UUID(int=next(_ids) + 0x1000))


def flavor(name, vcpus, ram, disk=20):
    fid = new_id()
    return {
        "OS-FLV-DISABLED:disabled": False,
        "OS-FLV-EXT-DATA:ephemeral": 0,
        "description": None,
        "disk": disk,
        "extra_specs": {},
        "id": fid,
        "name": name,
        "os-flavor-access:is_public": True,
        "ram": ram,
        "rxtx_factor": 1.0,
        "swap": 0,
        "vcpus": vcpus,
        "links": [{"href": f"/flavors/{fid}", "rel": "self"}],
    }


def image(name, status="active"):
    iid = new_id()
    return {
        "checksum": "ee1eca47dc88f4879d8a229cc70a07c6",
        "container_format": "bare",
        "created_at": NOW,
        "disk_format": "qcow2",
        "file": f"/v2/images/{iid}/file",
        "id": iid,
        "min_disk": 0,
        "min_ram": 0,
        "name": name,
        "os_hash_algo": "sha512",
        "os_hash_value": "0" * 128,
        "os_hidden": False,
        "owner": PROJECT_ID,
        "protected": False,
        "schema": "/v2/schemas/image",
        "self": f"/v2/images/{iid}",
        "size": 13287936,
        "status": status,
        "tags": [],
        "updated_at": NOW,
        "virtual_size": None,
        "visibility": "public",
    }


def network(name, external=False, tags=()):
    nid = new_id()
    return {
        "admin_state_up": True,
        "availability_zone_hints": [],
        "availability_zones": ["nova"],
        "created_at": NOW,
        "description": "",
        "dns_domain": "",
        "id": nid,
        "ipv4_address_scope": None,
        "ipv6_address_scope": None,
        "is_default": False,
        "l2_adjacency": True,
        "mtu": 1450,
        "name": name,
        "port_security_enabled": True,
        "project_id": PROJECT_ID,
        "qos_policy_id": None,
        "revision_number": 1,
        "router:external": external,
        "shared": False,
        "status": "ACTIVE",
        "subnets": [],
        "tags": list(tags),
        "tenant_id": PROJECT_ID,
        "updated_at": NOW,
        "vlan_transparent": False,
    }


def port(name, network_id, device_owner="", device_id="", tags=()):
    pid = new_id()
    return {
        "admin_state_up": True,
        "allowed_address_pairs": [],
        "binding:vnic_type": "normal",
        "created_at": NOW,
        "description": "",
        "device_id": device_id,
        "device_owner": device_owner,
        "dns_assignment": [],
        "dns_name": "",
        "extra_dhcp_opts": [],
        "fixed_ips": [{"ip_address": "10.0.0.50", "subnet_id": new_id()}],
        "id": pid,
        "mac_address": "fa:16:3e:00:00:%02x" % (next(_ids) % 256),
        "name": name,
        "network_id": network_id,
        "port_security_enabled": True,
        "project_id": PROJECT_ID,
        "revision_number": 1,
        "security_groups": [],
        "status": "DOWN",
        "tags": list(tags),
        "tenant_id": PROJECT_ID,
        "updated_at": NOW,
    }


def floating_ip(address, description="", port_id=None, tags=()):
    return {
        "created_at": NOW,
        "description": description,
        "dns_domain": "",
        "dns_name": "",
        "fixed_ip_address": None,
        "floating_ip_address": address,
        "floating_network_id": new_id(),
        "id": new_id(),
        "port_details": None,
        "port_forwardings": [],
        "port_id": port_id,
        "project_id": PROJECT_ID,
        "qos_policy_id": None,
        "revision_number": 0,
        "router_id": None,
        "status": "DOWN",
        "tags": list(tags),
        "tenant_id": PROJECT_ID,
        "updated_at": NOW,
    }


def security_group(name, description="", tags=()):
    return {
        "created_at": NOW,
        "description": description,
        "id": new_id(),
        "name": name,
        "project_id": PROJECT_ID,
        "revision_number": 1,
        "security_group_rules": [],
        "stateful": True,
        "shared": False,
        "tags": list(tags),
        "tenant_id": PROJECT_ID,
        "updated_at": NOW,
    }


def volume(name, metadata=None, status="available", size=1):
    vid = new_id()
    return {
        "attachments": [],
        "availability_zone": "nova",
        "bootable": "false",
        "consistencygroup_id": None,
        "created_at": NOW,
        "description": "Created by OpenStack Cinder CSI driver",
        "encrypted": False,
        "id": vid,
        "links": [{"href": f"/v3/{PROJECT_ID}/volumes/{vid}", "rel": "self"}],
        "metadata": metadata or {},
        "migration_status": None,
        "multiattach": False,
        "name": name,
        "os-vol-tenant-attr:tenant_id": PROJECT_ID,
        "replication_status": None,
        "size": size,
        "snapshot_id": None,
        "source_volid": None,
        "status": status,
        "updated_at": NOW,
        "user_id": USER_ID,
        "volume_type": "__DEFAULT__",
    }


# The services the token's catalog lists; a test takes some out with
# state["without_services"].
CATALOG = (
    ("identity", "keystone"),
    ("compute", "nova"),
    ("network", "neutron"),
    ("image", "glance"),
    ("block-storage", "cinder"),
    ("volumev3", "cinderv3"),
    ("load-balancer", "octavia"),
)


def load_balancer(name, status="ACTIVE"):
    return {
        "admin_state_up": True,
        "availability_zone": None,
        "created_at": NOW,
        "description": "",
        "flavor_id": None,
        "id": new_id(),
        "listeners": [],
        "name": name,
        "operating_status": "ONLINE",
        "pools": [],
        "project_id": PROJECT_ID,
        "provider": "amphora",
        "provisioning_status": status,
        "tags": [],
        "updated_at": NOW,
        "vip_address": "10.0.0.200",
        "vip_network_id": new_id(),
        "vip_port_id": new_id(),
        "vip_qos_policy_id": None,
        "vip_subnet_id": new_id(),
    }


def default_state():
    """A small healthy project: enough flavors, one image, an external network, roomy quotas."""
    return {
        "flavors": [
            flavor("m1.small", 1, 2048),
            flavor("m1.medium", 2, 4096),
            flavor("m1.large", 4, 8192),
        ],
        "images": [image("ubuntu-24.04"), image("cirros", status="active")],
        "networks": [network("public", external=True), network("shared-admin")],
        "ports": [],
        "floatingips": [],
        "security-groups": [],
        "routers": [],
        "volumes": [],
        "loadbalancers": [],
        "compute_limits": {
            "maxImageMeta": 128,
            "maxPersonality": 5,
            "maxPersonalitySize": 10240,
            "maxServerGroupMembers": 10,
            "maxServerGroups": 10,
            "maxServerMeta": 128,
            "maxTotalCores": 40,
            "maxTotalInstances": 10,
            "maxTotalKeypairs": 100,
            "maxTotalRAMSize": 102400,
            "totalCoresUsed": 2,
            "totalInstancesUsed": 1,
            "totalRAMUsed": 2048,
            "totalServerGroupsUsed": 0,
        },
        "network_quota": {
            "floatingip": {"limit": 10, "used": 1, "reserved": 0},
            "network": {"limit": 100, "used": 1, "reserved": 0},
            "port": {"limit": 100, "used": 3, "reserved": 0},
            "rbac_policy": {"limit": 10, "used": 0, "reserved": 0},
            "router": {"limit": 10, "used": 0, "reserved": 0},
            "security_group": {"limit": 10, "used": 1, "reserved": 0},
            "security_group_rule": {"limit": 100, "used": 4, "reserved": 0},
            "subnet": {"limit": 100, "used": 1, "reserved": 0},
            "subnetpool": {"limit": -1, "used": 0, "reserved": 0},
        },
        "volume_limits": {
            "maxTotalBackupGigabytes": 1000,
            "maxTotalBackups": 10,
            "maxTotalSnapshots": 10,
            "maxTotalVolumeGigabytes": 1000,
            "maxTotalVolumes": 10,
            "totalBackupGigabytesUsed": 0,
            "totalBackupsUsed": 0,
            "totalGigabytesUsed": 0,
            "totalSnapshotsUsed": 0,
            "totalVolumesUsed": 0,
        },
    }


NEUTRON_COLLECTIONS = {
    "networks": "network",
    "ports": "port",
    "floatingips": "floatingip",
    "security-groups": "security_group",
    "routers": "router",
    "subnets": "subnet",
    "security-group-rules": "security_group_rule",
}
# What a created resource carries besides what the request set (api-ref "Create network",
# "Create security group", "Create router": status, ids, tags, revision, timestamps).
CREATE_DEFAULTS = {
    "networks": lambda: network(""),
    "security-groups": lambda: security_group(""),
    "routers": lambda: {
        "admin_state_up": True,
        "availability_zone_hints": [],
        "availability_zones": ["nova"],
        "created_at": NOW,
        "description": "",
        "distributed": False,
        "external_gateway_info": None,
        "flavor_id": None,
        "ha": False,
        "id": new_id(),
        "name": "",
        "project_id": PROJECT_ID,
        "revision_number": 1,
        "routes": [],
        "status": "ACTIVE",
        "tags": [],
        "tenant_id": PROJECT_ID,
        "updated_at": NOW,
    },
}


class FakeCloud:
    def __init__(self, password="s3cret-password", app_secret="app-cred-secret"):
        self.password = password
        self.app_credential = {"id": "ac0ffee0ac0ffee0ac0ffee0ac0ffee0", "secret": app_secret}
        self.state = default_state()
        # Neutron collections POST may create in; any other creation is refused as over quota.
        self.creatable = set()
        self.gitlab_token = "glpat-test-job-token"
        self.gitlab_states = {}
        self.requests = []
        self.token = "gAAAAAkos-fake-token"
        self.lock = threading.Lock()
        self.server = None

    # -- lifecycle -----------------------------------------------------------------

    def start(self):
        cloud = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, body, headers = cloud.handle(self.command, self.path, raw, self.headers)
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                if data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def clouds_yaml(self, directory, auth="password", name="kos-test"):
        if auth == "password":
            entry = {
                "auth_type": "password",
                "auth": {
                    "auth_url": f"{self.url}/identity/v3",
                    "username": "kos-operator",
                    "password": self.password,
                    "project_name": "kos-project",
                    "user_domain_name": "Default",
                    "project_domain_name": "Default",
                },
            }
        else:
            entry = {
                "auth_type": "v3applicationcredential",
                "auth": {
                    "auth_url": f"{self.url}/identity/v3",
                    "application_credential_id": self.app_credential["id"],
                    "application_credential_secret": self.app_credential["secret"],
                },
            }
        entry.update(region_name="RegionOne", identity_api_version=3, interface="public")
        path = Path(directory) / "clouds.yaml"
        path.write_text(yaml.safe_dump({"clouds": {name: entry}}))
        return path

    # -- assertions helpers --------------------------------------------------------

    def writes(self):
        """Every request that could change something (token requests excluded)."""
        return [
            r
            for r in self.requests
            if r[0] not in ("GET", "HEAD") and not r[1].endswith("/auth/tokens")
        ]

    def created(self):
        """``[(path, name)]`` of every creation the cloud accepted."""
        return [
            (r[1], next(iter(r[3].values())).get("name"))
            for r in self.requests
            if r[0] == "POST"
            and r[4] in (201, 202)
            and isinstance(r[3], dict)
            and r[3]
            and not r[1].endswith("/auth/tokens")
        ]

    def deleted(self, collection):
        return [
            r[1].rsplit("/", 1)[-1]
            for r in self.requests
            if r[0] == "DELETE" and f"/{collection}/" in r[1]
        ]

    # -- dispatch ------------------------------------------------------------------

    def handle(self, method, raw_path, raw_body, headers):
        parts = urlsplit(raw_path)
        path, query = parts.path.rstrip("/") or "/", parse_qs(parts.query, keep_blank_values=True)
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = None
        with self.lock:
            result = self.dispatch(method, path, query, body, headers)
            self.requests.append((method, path, {k: v for k, v in query.items()}, body, result[0]))
            return result

    def dispatch(self, method, path, query, body, headers):
        if path.startswith("/gitlab/"):
            return self.gitlab_state(method, path, body, headers)
        if path.startswith("/identity"):
            return self.identity(method, path[len("/identity") :] or "/", body)
        if headers.get("X-Auth-Token") != self.token:
            return (
                401,
                {
                    "error": {
                        "code": 401,
                        "title": "Unauthorized",
                        "message": "The request you have made requires authentication.",
                    }
                },
                {},
            )
        for prefix, handler in (
            ("/compute", self.compute),
            ("/network", self.network),
            ("/image", self.image),
            ("/volume", self.volume),
            ("/load-balancer", self.load_balancer),
        ):
            if path.startswith(prefix):
                return handler(method, path[len(prefix) :] or "/", query, body)
        return self.not_found()

    @staticmethod
    def not_found(what="resource"):
        return (
            404,
            {"itemNotFound": {"code": 404, "message": f"The {what} could not be found."}},
            {},
        )

    @staticmethod
    def neutron_error(status, kind, message):
        # Neutron's fault body, https://docs.openstack.org/api-ref/network/v2/ ("Response Codes").
        return status, {"NeutronError": {"type": kind, "message": message, "detail": ""}}, {}

    def current_version(self, status, version_id, path):
        """The version document of a service with one version, at ``{url}/{path}``."""
        link = {"rel": "self", "href": f"{self.url}/{path}"}
        return status, {"versions": [{"id": version_id, "status": "CURRENT", "links": [link]}]}, {}

    def microversioned(self, version_id, newest, updated, path, media_type):
        """The version document of a microversioned service (compute, block storage), which
        serves microversions from its version's own number up to ``newest``."""
        return {
            "id": version_id,
            "status": "CURRENT",
            "version": newest,
            "min_version": version_id.removeprefix("v"),
            "updated": updated,
            "links": [{"rel": "self", "href": f"{self.url}/{path}"}],
            "media-types": [
                {"base": "application/json", "type": f"application/vnd.openstack.{media_type}"}
            ],
        }

    def endpoint(self, service):
        return {
            "compute": f"{self.url}/compute/v2.1",
            "network": f"{self.url}/network",
            "image": f"{self.url}/image",
            "block-storage": f"{self.url}/volume/v3/{PROJECT_ID}",
            "volumev3": f"{self.url}/volume/v3/{PROJECT_ID}",
            "load-balancer": f"{self.url}/load-balancer",
            "identity": f"{self.url}/identity",
        }[service]

    # -- GitLab-managed Terraform state -------------------------------------------------
    # GitLab docs "GitLab-managed Terraform/OpenTofu state": the http backend GETs the state
    # (404 while there is none), POSTs new versions, and locks with POST/DELETE on .../lock,
    # authenticating with HTTP Basic (gitlab-ci-token and the job token).

    def gitlab_state(self, method, path, body, headers):
        import base64

        auth = headers.get("Authorization", "")
        user, _, password = base64.b64decode(auth.split(" ", 1)[-1] or "").decode().partition(":")
        if (user, password) != ("gitlab-ci-token", self.gitlab_token):
            return 401, {"message": "401 Unauthorized"}, {}
        name = path.removesuffix("/lock")
        if path.endswith("/lock"):
            return 200, None, {}
        if method == "GET":
            return (
                (200, self.gitlab_states[name], {})
                if name in self.gitlab_states
                else (404, None, {})
            )
        if method == "POST":
            self.gitlab_states[name] = body
            return 200, None, {}
        return 405, None, {}

    # -- identity --------------------------------------------------------------------

    def identity(self, method, path, body):
        v3 = {
            "id": "v3.14",
            "status": "stable",
            "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": f"{self.url}/identity/v3/"}],
            "media-types": [
                {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
            ],
        }
        if method == "GET" and path == "/":
            return 300, {"versions": {"values": [v3]}}, {}
        if method == "GET" and path == "/v3":
            return 200, {"version": v3}, {}
        if method == "POST" and path == "/v3/auth/tokens":
            return self.issue_token(body or {})
        return self.not_found()

    def issue_token(self, body):
        ident = (body.get("auth") or {}).get("identity") or {}
        methods = ident.get("methods") or []
        unauthorized = (
            401,
            {
                "error": {
                    "code": 401,
                    "title": "Unauthorized",
                    "message": "The request you have made requires authentication.",
                }
            },
            {},
        )
        token = {
            "audit_ids": ["3T2dc1CGQxyJsHdDu1xkcw"],
            "expires_at": EXPIRES,
            "issued_at": NOW,
            "is_domain": False,
            "methods": methods,
            "project": {
                "domain": {"id": "default", "name": "Default"},
                "id": PROJECT_ID,
                "name": "kos-project",
            },
            "roles": [{"id": "51cc68287d524c759f47c811e6463340", "name": "member"}],
            "user": {
                "domain": {"id": "default", "name": "Default"},
                "id": USER_ID,
                "name": "kos-operator",
                "password_expires_at": None,
            },
            "catalog": [
                {
                    "type": service,
                    "name": name,
                    "id": new_id(),
                    "endpoints": [
                        {
                            "id": new_id(),
                            "interface": "public",
                            "region": "RegionOne",
                            "region_id": "RegionOne",
                            "url": self.endpoint(service),
                        }
                    ],
                }
                for service, name in CATALOG
                if service not in self.state.get("without_services", ())
            ],
        }
        if methods == ["password"]:
            user = ident.get("password", {}).get("user", {})
            if user.get("name") != "kos-operator" or user.get("password") != self.password:
                return unauthorized
        elif methods == ["application_credential"]:
            cred = ident.get("application_credential", {})
            if (
                cred.get("id") != self.app_credential["id"]
                or cred.get("secret") != self.app_credential["secret"]
            ):
                return unauthorized
            token["application_credential"] = {
                "id": cred["id"],
                "name": "kos-ci",
                "restricted": True,
            }
        else:
            return unauthorized
        return 201, {"token": token}, {"X-Subject-Token": self.token}

    # -- compute ---------------------------------------------------------------------

    def compute(self, method, path, query, body):
        version = self.microversioned(
            "v2.1", "2.96", "2013-07-23T11:33:21Z", "compute/v2.1/", "compute+json;version=2.1"
        )
        if method == "GET" and path == "/":
            return 200, {"versions": [version]}, {}
        if method == "GET" and path == "/v2.1":
            return 200, {"version": version}, {}
        if method == "GET" and path == "/v2.1/flavors/detail":
            return 200, {"flavors": copy.deepcopy(self.state["flavors"])}, {}
        if method == "GET" and path == "/v2.1/limits":
            return 200, {"limits": {"absolute": dict(self.state["compute_limits"]), "rate": []}}, {}
        if method == "GET" and path == "/v2.1/os-services":
            # Nova's default policy keeps os_compute_api:os-services:list for admins.
            message = "Policy doesn't allow os_compute_api:os-services:list to be performed."
            return 403, {"forbidden": {"code": 403, "message": message}}, {}
        match = re.fullmatch(r"/v2\.1/os-server-groups(?:/([^/]+))?", path)
        if match:
            return self.server_groups(method, match.group(1), body)
        if method == "POST":
            return (
                403,
                {
                    "forbidden": {
                        "code": 403,
                        "message": "Quota exceeded for instances: Requested 1, "
                        "but already used 10 of 10 instances",
                    }
                },
                {},
            )
        return self.not_found()

    def server_groups(self, method, group_id, body):
        """api-ref compute "Server groups (os-server-groups)": a project member may create,
        show, list and delete its own; Nova answers a creation with 200. Before microversion
        2.64 the policy is a one-item ``policies`` list, from it a ``policy`` string."""
        groups = self.state.setdefault("server_groups", [])
        if method == "POST" and group_id is None:
            asked = (body or {}).get("server_group") or {}
            policy = asked.get("policy") or next(iter(asked.get("policies") or []), None)
            group = {"id": new_id(), "name": asked.get("name"), "policy": policy,
                     "policies": [policy], "rules": asked.get("rules") or {}, "members": [],
                     "metadata": {}, "project_id": PROJECT_ID}
            groups.append(group)
            return 200, {"server_group": copy.deepcopy(group)}, {}
        if method == "GET" and group_id is None:
            return 200, {"server_groups": copy.deepcopy(groups)}, {}
        found = next((g for g in groups if g["id"] == group_id), None)
        if found is None:
            return self.not_found("server group")
        if method == "GET":
            return 200, {"server_group": copy.deepcopy(found)}, {}
        if method == "DELETE":
            groups.remove(found)
            return 204, None, {}
        return self.not_found()

    # -- networking ------------------------------------------------------------------

    def _filter(self, items, query):
        out = []
        for item in items:
            keep = True
            for key, values in query.items():
                value = values[-1]
                if key in ("fields", "limit", "marker", "sort_key", "sort_dir"):
                    continue
                if key == "tags":
                    keep &= set(value.split(",")) <= set(item.get("tags", []))
                elif key in item:
                    have = item[key]
                    keep &= (
                        (str(have).lower() == value.lower())
                        if isinstance(have, bool)
                        else str(have) == value
                    )
            if keep:
                out.append(copy.deepcopy(item))
        return out

    def network(self, method, path, query, body):
        if method == "GET" and path == "/":
            return self.current_version(200, "v2.0", "network/v2.0/")
        match = re.fullmatch(r"/v2\.0/quotas/([^/]+)/details(?:\.json)?", path)
        if method == "GET" and match:
            if match.group(1) != PROJECT_ID:
                return self.neutron_error(403, "HTTPForbidden", "not allowed")
            return 200, {"quota": copy.deepcopy(self.state["network_quota"])}, {}
        match = re.fullmatch(r"/v2\.0/([a-z-]+?)(?:\.json)?(?:/([^/.]+))?(?:\.json)?(/tags)?", path)
        if not match or match.group(1) not in NEUTRON_COLLECTIONS:
            return self.not_found()
        collection, item_id, tags = match.groups()
        single = NEUTRON_COLLECTIONS[collection]
        items = self.state.setdefault(collection, [])
        key = collection.replace("-", "_")
        if method == "GET" and item_id is None:
            return 200, {key: self._filter(items, query)}, {}
        if method == "POST" and item_id is None:
            if collection not in self.creatable:
                return self.neutron_error(
                    409, "OverQuota", f"Quota exceeded for resources: ['{single}']."
                )
            item = CREATE_DEFAULTS[collection]()
            item.update((body or {}).get(single) or {})
            items.append(item)
            return 201, {single: copy.deepcopy(item)}, {}
        found = next((i for i in items if i["id"] == item_id), None)
        if found is None:
            return self.neutron_error(
                404, f"{single.title()}NotFound", f"{single} {item_id} could not be found."
            )
        if method == "GET":
            return 200, {single: copy.deepcopy(found)}, {}
        if method == "PUT" and tags:
            # api-ref network/v2 "Replace all tags": {"tags": [...]} in, the same out.
            found["tags"] = list((body or {}).get("tags") or [])
            return 200, {"tags": found["tags"]}, {}
        if method == "PUT":
            found.update((body or {}).get(single) or {})
            return 200, {single: copy.deepcopy(found)}, {}
        if method == "DELETE":
            items.remove(found)
            return 204, None, {}
        return self.neutron_error(403, "PolicyNotAuthorized", "not allowed")

    # -- image -----------------------------------------------------------------------

    def image(self, method, path, query, body):
        if method == "GET" and path == "/":
            return self.current_version(300, "v2.16", "image/v2/")
        if method == "GET" and path == "/v2/images":
            return (
                200,
                {
                    "images": self._filter(self.state["images"], query),
                    "schema": "/v2/schemas/images",
                    "first": "/v2/images",
                },
                {},
            )
        return self.not_found()

    # -- block storage ---------------------------------------------------------------

    def volume(self, method, path, query, body):
        version = self.microversioned(
            "v3.0", "3.70", "2023-08-31T00:00:00Z", "volume/v3/", "volume+json;version=3"
        )
        if method == "GET" and path in ("/", "/v3", f"/v3/{PROJECT_ID}"):
            return (
                (300, {"versions": [version]}, {})
                if path == "/"
                else (200, {"version": version}, {})
            )
        prefix = f"/v3/{PROJECT_ID}"
        if not path.startswith(prefix):
            return self.not_found()
        rest = path[len(prefix) :]
        if method == "GET" and rest == "/limits":
            return 200, {"limits": {"rate": [], "absolute": dict(self.state["volume_limits"])}}, {}
        if method == "GET" and rest in ("/volumes/detail", "/volumes"):
            return 200, {"volumes": copy.deepcopy(self.state["volumes"])}, {}
        match = re.fullmatch(r"/volumes/([^/]+)", rest)
        if match:
            found = next((v for v in self.state["volumes"] if v["id"] == match.group(1)), None)
            if found is None:
                return self.not_found("volume")
            if method == "GET":
                return 200, {"volume": copy.deepcopy(found)}, {}
            if method == "DELETE":
                if found["status"] == "in-use":
                    return (
                        400,
                        {
                            "badRequest": {
                                "code": 400,
                                "message": "Invalid volume: Volume status must be "
                                "available or error or error_restoring or error_extending or "
                                "error_managing and must not be migrating, attached, belong to a "
                                "group, have snapshots, awaiting a transfer, or be disassociated "
                                "from snapshots after volume transfer.",
                            }
                        },
                        {},
                    )
                self.state["volumes"].remove(found)
                return 202, None, {}
        if method == "POST":
            return (
                413,
                {
                    "overLimit": {
                        "code": 413,
                        "message": "VolumeLimitExceeded: Maximum number of volumes "
                        "allowed (10) exceeded for quota 'volumes'.",
                    }
                },
                {},
            )
        return self.not_found()

    # -- load balancer ---------------------------------------------------------------

    def load_balancer(self, method, path, query, body):
        # Octavia routes /v2.0 and /v2 to the same controller; the SDK picks either.
        path = re.sub(r"^/v2\.0(?=/)", "/v2", path)
        if method == "GET" and path == "/":
            return (
                200,
                {
                    "versions": [
                        {
                            "id": "v2.0",
                            "status": "SUPPORTED",
                            "updated": "2016-12-11T00:00:00Z",
                            "links": [{"rel": "self", "href": f"{self.url}/load-balancer/v2.0/"}],
                        },
                        {
                            "id": "v2.27",
                            "status": "CURRENT",
                            "updated": "2023-05-05T00:00:00Z",
                            "links": [{"rel": "self", "href": f"{self.url}/load-balancer/v2/"}],
                        },
                    ]
                },
                {},
            )
        if method == "GET" and path == "/v2/lbaas/loadbalancers":
            live = [
                lb for lb in self.state["loadbalancers"] if lb["provisioning_status"] != "DELETED"
            ]
            return 200, {"loadbalancers": self._filter(live, query), "loadbalancers_links": []}, {}
        if method == "GET" and path == "/v2/lbaas/providers":
            # api-ref load-balancer/v2 "List Providers"
            return 200, {"providers": [{"name": n, "description": f"The {n} driver."}
                                       for n in self.state.get("lb_providers", ("amphora",))]}, {}
        match = re.fullmatch(r"/v2/lbaas/pools/([^/]+)/members", path)
        if method == "GET" and match:
            # api-ref load-balancer/v2 "List Members"
            members = self.state.get("members", {}).get(match.group(1), [])
            return 200, {"members": members, "members_links": []}, {}
        match = re.fullmatch(r"/v2/lbaas/loadbalancers/([^/]+)", path)
        if not match:
            return self.not_found()
        lb = next((x for x in self.state["loadbalancers"] if x["id"] == match.group(1)), None)
        if lb is None or lb["provisioning_status"] == "DELETED":
            return (
                404,
                {
                    "faultcode": "Client",
                    "faultstring": f"Load Balancer {match.group(1)} not found.",
                    "debuginfo": None,
                },
                {},
            )
        if method == "GET":
            shown = copy.deepcopy(lb)
            if lb["provisioning_status"] == "PENDING_DELETE":
                # A cascade delete takes a moment: shown once as pending, then gone.
                lb["provisioning_status"] = "DELETED"
            return 200, {"loadbalancer": shown}, {}
        if method == "DELETE":
            if lb["provisioning_status"].startswith("PENDING"):
                return (
                    409,
                    {
                        "faultcode": "Client",
                        "faultstring": f"Invalid state {lb['provisioning_status']} "
                        f"of loadbalancer resource {lb['id']}",
                        "debuginfo": None,
                    },
                    {},
                )
            if lb["listeners"] and query.get("cascade", ["false"])[-1].lower() != "true":
                return (
                    400,
                    {
                        "faultcode": "Client",
                        "faultstring": f"Cannot delete Load Balancer {lb['id']} - it has children",
                        "debuginfo": None,
                    },
                    {},
                )
            lb["provisioning_status"] = "PENDING_DELETE"
            return 204, None, {}
        return self.not_found()
