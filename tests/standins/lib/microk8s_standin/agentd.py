"""Stand-in cluster agent daemon: HTTPS join endpoint (CLA pkg/api/v2/join.go) and the
stand-in-internal endpoints that replicate the datastore between control-plane members."""

import http.server
import json
import os
import secrets
import signal
import socket
import ssl
import sys
import threading
import time

from . import common, datastore, netinfo, pki
from . import mkcommon as mk
from .agent import JOIN_PATH, PROCESS_TAG, _read_pid, pidfile


class _Error(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        # httputil.Error upper-cases the first letter of every error message.
        self.message = message[:1].upper() + message[1:]


def _consume_token(token):
    """CLA snap.ConsumeClusterToken."""
    persistent = common.data("credentials", "persistent-cluster-tokens.txt")
    for line in common.read_file(persistent, "").splitlines():
        if line.strip() and line.split("|")[0].strip() == token:
            return True
    path = common.data("credentials", "cluster-tokens.txt")
    with common.flocked(common.data("var", "lock", ".kos-standin-cluster-tokens.lock")):
        lines = common.read_file(path, "").splitlines()
        for idx, line in enumerate(lines):
            parts = line.strip().split("|")
            if parts[0] != token or not token:
                continue
            if len(parts) > 1:
                try:
                    return time.time() < int(parts[1])
                except ValueError:
                    return False
            del lines[idx]
            common.write_file(path, "".join(line + "\n" for line in lines), mode=0o600)
            return True
    return False


def _callback_token():
    path = common.data("credentials", "callback-token.txt")
    token = common.read_file(path, "").strip()
    if not token:
        token = secrets.token_hex(32)
        common.write_file(path, token + "\n", mode=0o600)
    return token


def _bind_port():
    bind = common.get_arg("cluster-agent", "--bind") or "0.0.0.0:25000"
    return bind.rsplit(":", 1)[1]


def _version():
    rec = common.load_install() or {}
    return rec.get("version", "")


_JOIN_MUTEX = threading.Lock()


def handle_join(req, peer_ip, host_ip):
    token = str(req.get("token", ""))
    if not _consume_token(token):
        raise _Error(500, "invalid token")
    if not os.path.exists(common.lock("ha-cluster")):
        raise _Error(501, "not possible to join. This is not an HA MicroK8s cluster")
    port = _bind_port()
    if str(req.get("port", "")) != port:
        raise _Error(502, "the port of the cluster agent port has to be set to {}".format(port))
    if peer_ip == host_ip:
        raise _Error(503, "the joining node has the same IP ({}) as the node we contact".format(host_ip))
    hostname = str(req.get("hostname", ""))
    if not netinfo.hostname_resolves_to(hostname, peer_ip):
        raise _Error(
            400,
            'the hostname ({}) of the joining node does not resolve to the IP "{}". Refusing join'.format(
                hostname, peer_ip
            ),
        )
    worker = req.get("worker") in (True, "as-worker")
    extra = req.get("kos_standin") or {}
    with _JOIN_MUTEX, datastore.lock():
        ds = datastore.load()
        for m in ds["members"]:
            if m["address"].startswith(peer_ip + ":"):
                raise _Error(
                    500,
                    "failed to retrieve dqlite cluster nodes: the joining node ({}) is already known to dqlite".format(
                        peer_ip
                    ),
                )
        me = datastore.my_address()
        if len(ds["members"]) == 1 and ds["members"][0]["address"].startswith("127.0.0.1:"):
            # MaybeUpdateDqliteBindAddress: the lone member takes the address it was contacted on.
            me = "{}:{}".format(host_ip, datastore.DQLITE_PORT)
            ds["members"][0]["address"] = me
        for m in ds["members"]:
            if m["address"] == me:
                m["agent"] = "{}:{}".format(host_ip, port)
        node = datastore.find_node(ds, name=hostname.lower()) or datastore.find_node(ds, ip=peer_ip)
        if node:
            ds["nodes"].remove(node)
        ds["nodes"].append(
            datastore.node_entry(
                hostname, peer_ip, "worker" if worker else "control-plane", extra.get("version") or _version()
            )
        )
        if not worker:
            ds["members"].append(
                datastore.new_member(
                    "{}:{}".format(peer_ip, datastore.DQLITE_PORT), "{}:{}".format(peer_ip, req.get("port"))
                )
            )
            datastore.assign_roles(ds)
        ds["revision"] += 1
        datastore.save(ds, my_addr=me)
        common.touch(common.lock("no-cert-reissue"), 0o700)
        resp = {
            "ca": common.read_file(pki.certs("ca.crt")),
            "callback_token": _callback_token(),
            "apiport": common.get_arg("kube-apiserver", "--secure-port") or "16443",
            "api_authz_mode": common.get_arg("kube-apiserver", "--authorization-mode") or "AlwaysAllow",
            "kubelet_args": common.read_file(common.data("args", "kubelet"), ""),
            "hostname_override": peer_ip,
            "cluster_cidr": common.get_arg("kube-proxy", "--cluster-cidr") or "",
        }
        if worker:
            resp["ca_key"] = None
            resp["control_plane_nodes"] = [n["ip"] for n in ds["nodes"] if n["role"] == "control-plane"]
            resp["kos_standin_agents"] = [m["agent"] for m in ds["members"] if m.get("agent")]
        else:
            resp.update(
                {
                    "ca_key": common.read_file(pki.certs("ca.key")),
                    "service_account_key": common.read_file(pki.certs("serviceaccount.key")),
                    "cluster_cert": common.read_file(datastore.backend("cluster.crt")),
                    "cluster_key": common.read_file(datastore.backend("cluster.key")),
                    "voters": [m["address"] for m in ds["members"] if m["role"] == 0],
                    "kos_standin_datastore": ds,
                }
            )
    datastore.replicate(ds, exclude=("{}:{}".format(peer_ip, datastore.DQLITE_PORT),))
    return resp


def _check_cluster(req):
    if req.get("ca") != pki.ca_fingerprint():
        raise _Error(403, "not a member of this cluster")


def handle_datastore(req):
    _check_cluster(req)
    incoming = req["datastore"]
    with datastore.lock():
        local = datastore.load()
        if local and local["cluster_id"] == incoming["cluster_id"] and incoming["revision"] > local["revision"]:
            datastore.save(incoming)
    return {}


def handle_remove_member(req):
    _check_cluster(req)
    address = req["address"]
    with datastore.lock():
        ds = datastore.load()
        ds["members"] = [m for m in ds["members"] if m["address"] != address]
        datastore.assign_roles(ds)
        node = datastore.find_node(ds, ip=address.rsplit(":", 1)[0])
        if node:
            node["ready"] = False
        ds["revision"] += 1
        datastore.save(ds)
    datastore.replicate(ds, exclude=(address,))
    return {}


def handle_node_status(req):
    """A node's kubelet reporting in (worker leave: NotReady; restart after a refresh: Ready and
    the new version).  Only these fields change; spec (unschedulable) stays as it is."""
    _check_cluster(req)
    with datastore.lock():
        ds = datastore.load()
        node = datastore.find_node(ds, name=req.get("name"), ip=req.get("ip"))
        if not node:
            return {}
        node["ready"] = bool(req.get("ready"))
        if req.get("version"):
            node["version"] = req["version"]
        ds["revision"] += 1
        datastore.save(ds)
    datastore.replicate(ds)
    return {}


ROUTES = {
    "/kos-standin/v1/datastore": handle_datastore,
    "/kos-standin/v1/remove-member": handle_remove_member,
    "/kos-standin/v1/node-status": handle_node_status,
}


class _Handler(http.server.BaseHTTPRequestHandler):
    timeout = 30
    protocol_version = "HTTP/1.1"

    def _send(self, status, body, content_type="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Handler(_Handler):
    def _reply(self, status, payload):
        self._send(status, json.dumps(payload))

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(length).decode() or "{}")
        except ValueError:
            return self._reply(400, {"error": "Failed to decode request"})
        try:
            if self.path == JOIN_PATH:
                host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
                try:
                    socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
                except OSError:
                    host = self.connection.getsockname()[0]
                resp = handle_join(req, self.client_address[0], host)
            elif self.path in ROUTES:
                resp = ROUTES[self.path](req)
            else:
                raise _Error(404, "not found")
        except _Error as e:
            return self._reply(e.status, {"error": e.message})
        except Exception as e:  # keep the agent alive; real agent answers 500 too
            return self._reply(500, {"error": "internal error: {}".format(e)})
        self._reply(200, resp)


class ApiHandler(_Handler):
    """The kube-apiserver's endpoints anyone may read: the health checks
    (https://kubernetes.io/docs/reference/using-api/health-checks/) and /version, which the
    system:public-info-viewer ClusterRole grants to unauthenticated clients. Nothing else of
    the API is reproduced: a client sees the server microk8s runs on --secure-port (its
    certificate from csr.conf, through load balancers and floating IPs), not a cluster."""

    def do_GET(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/livez", "/readyz", "/healthz"):
            return self._send(200, "ok", "text/plain; charset=utf-8")
        if path == "/version":
            version = _version()
            major, minor = (version.lstrip("v").split(".") + ["", ""])[:2]
            return self._send(200, json.dumps({
                "major": major, "minor": minor, "gitVersion": version,
                "platform": "linux/amd64"}, indent=2))
        self._send(404, json.dumps({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the kos stand-in serves only /livez, /readyz, /healthz and /version",
            "reason": "NotFound", "code": 404}))

    def log_message(self, *args):
        pass


class _Server(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def _listen(host, port, handler):
    """An HTTPS server with the node's server certificate; a wildcard address binds the
    node's own (KOS_STANDIN_IP) when one is set."""
    host = host.strip("[]")
    if host in ("0.0.0.0", "", "::") and os.environ.get("KOS_STANDIN_IP"):
        host = os.environ["KOS_STANDIN_IP"]
    server = (_Server6 if ":" in host else _Server)((host, int(port)), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.certs("server.crt"), pki.certs("server.key"))
    server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    return server


def serve(root, ready_fd):
    # The CLI entry point restores SIGPIPE's default; a peer hanging up mid-TLS must not kill us.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    os.environ["KOS_STANDIN_ROOT"] = root
    ready = os.fdopen(int(ready_fd), "wb", buffering=0) if ready_fd is not None else None

    def report(msg):
        if ready:
            try:
                ready.write(msg.encode() + b"\n")
                ready.close()
            except OSError:
                pass

    try:
        bind = common.get_arg("cluster-agent", "--bind") or "0.0.0.0:25000"
        host, port = bind.rsplit(":", 1)
        servers = [_listen(host, port, Handler)]
        # kubelite serves the API on control planes; a worker's 16443 is the apiserver
        # proxy to them, which this stand-in does not run
        if not mk.is_worker():
            servers.append(_listen(common.get_arg("kube-apiserver", "--bind-address") or "0.0.0.0",
                                   common.get_arg("kube-apiserver", "--secure-port") or "16443",
                                   ApiHandler))
    except Exception as e:
        sys.stderr.write("{} cannot start: {}\n".format(PROCESS_TAG, e))
        report("error: {}".format(e))
        return 1
    path = pidfile()
    common.write_file(path, "{}\n".format(os.getpid()))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stderr.write("{} listening on {}\n".format(
        PROCESS_TAG, ", ".join("{}:{}".format(*s.server_address[:2]) for s in servers)))
    sys.stderr.flush()
    report("ok")
    # Exit once the pidfile is gone or taken over, so deleted test roots leave no daemons behind.
    while not stop.wait(1.0):
        if _read_pid(path) != os.getpid():
            break
    if _read_pid(path) == os.getpid():
        common.remove(path)
    sys.stderr.flush()
    # No graceful shutdown: serve_forever would need up to a poll interval to notice.
    os._exit(0)


