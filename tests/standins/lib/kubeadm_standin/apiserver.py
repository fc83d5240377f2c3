"""The stand-in API server: a detached HTTPS daemon holding the cluster state.

`kubeadm init` starts one on the first control plane, `kubeadm join --control-plane`
starts one on every further control plane; `kubeadm reset` stops it.  It serves plain
TLS on `advertiseAddress:bindPort` with the node's `pki/apiserver.crt`, so a haproxy in
TCP mode can balance across several of them exactly as it would across kube-apiservers.

Clients authenticate like in Kubernetes: anonymously for `kube-public/cluster-info`, with
a bootstrap token (`Authorization: Bearer id.secret`) for what a joining node needs, or
with any client certificate signed by the cluster CA for everything else.

Replication between control planes: every server keeps a full copy of the state.  A
write goes to the first reachable member in join order (the "leader"; requests that
arrive elsewhere are forwarded), which applies it, saves it, and pushes the whole state
to every other member before answering.  A server that starts pulls the newest copy from
its peers.  This is far simpler than etcd's raft, but it keeps reads consistent on every
control plane while any one of them is up, which is what the tests and haproxy need.

Run as `python3 -m kubeadm_standin.apiserver kos-standin-apiserver --name NODE --bind IP
--port PORT [--ready-fd N]`; `kos-standin-apiserver` in argv identifies the process.
"""

import argparse
import json
import os
import select
import signal
import socket
import ssl
import sys
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import client, env, pki, state as st, yamlish

MARKER = "kos-standin-apiserver"
PEER_TIMEOUT = 2.0


def _pki(name):
    return env.host("/etc/kubernetes/pki/" + name)


def _log(msg):
    try:
        path = env.host(env.DAEMON_LOG)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as f:
            f.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), msg))
    except OSError:
        pass


class Store:
    """The local copy of the state plus the replication logic."""

    def __init__(self, name, url):
        self.name = name
        self.url = url
        self.lock = threading.RLock()
        self.state = st.load()

    def _peer_api(self, url):
        with open(_pki("ca.crt"), "rb") as f:
            ca = f.read()
        with open(_pki("apiserver-kubelet-client.crt"), "rb") as f:
            cert = f.read()
        with open(_pki("apiserver-kubelet-client.key"), "rb") as f:
            key = f.read()
        hostport = url.split("://", 1)[-1]
        return client.Api(hostport, ca_pem=ca, cert_pem=cert, key_pem=key,
                          timeout=PEER_TIMEOUT)

    def snapshot(self):
        with self.lock:
            return json.loads(json.dumps(self.state))

    def pull_from_peers(self):
        for member in list(self.state.get("members", [])):
            if member["name"] == self.name:
                continue
            try:
                other = self._peer_api(member["url"]).get("/kos/v1/state")
            except (client.ClientError, client.HTTPError, OSError):
                continue
            self.adopt(other)

    def adopt(self, other):
        with self.lock:
            if other.get("revision", 0) > self.state.get("revision", 0):
                self.state = other
                st.save(self.state)
                return True
            return False

    def _push(self, snapshot):
        for member in snapshot.get("members", []):
            if member["name"] == self.name:
                continue
            try:
                self._peer_api(member["url"]).put("/kos/v1/state", snapshot)
            except (client.ClientError, client.HTTPError, OSError) as e:
                _log("replication to %s failed: %s" % (member["name"], e))

    def apply_local(self, op):
        with self.lock:
            result = st.apply_op(self.state, op)
            st.save(self.state)
            snapshot = json.loads(json.dumps(self.state))
            # pushing under the lock keeps the peers' copies in write order
            self._push(snapshot)
        return result

    def mutate(self, op):
        members = self.snapshot().get("members", [])
        for member in members:
            if member["name"] == self.name:
                return self.apply_local(op)
            try:
                return self._peer_api(member["url"]).post("/kos/v1/ops", op)
            except client.ClientError:
                continue  # that member is down: the next one in join order leads
            except client.HTTPError as e:
                raise st.ApiError(e.code, e.reason or "InternalError", e.message)
        return self.apply_local(op)


class Handler(BaseHTTPRequestHandler):
    server_version = "kos-standin-apiserver"

    def log_message(self, fmt, *args):
        _log("%s %s" % (self.client_address[0], fmt % args))

    # -- helpers ---------------------------------------------------------
    def _send(self, code, body):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if isinstance(body, str)
                         else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, err):
        self._send(err.code, err.status())

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n).decode() or "null") if n else None

    def _has_client_cert(self):
        try:
            return bool(self.connection.getpeercert())
        except (AttributeError, ValueError):
            return False

    def _auth(self, allow_token):
        if self._has_client_cert():
            return "cert"
        auth = self.headers.get("Authorization", "")
        if allow_token and auth.startswith("Bearer "):
            tok = st.authenticate_token(self.server.store.snapshot(), auth[7:].strip(),
                                        time.time())
            if tok is not None:
                return "token"
        if auth:
            raise st.ApiError(403, "Forbidden", "forbidden")
        raise st.ApiError(401, "Unauthorized", "Unauthorized")

    # -- dispatch --------------------------------------------------------
    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _dispatch(self, method):
        parsed = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(parsed.query)
        parts = [p for p in parsed.path.split("/") if p]
        try:
            self._route(method, parsed.path, parts, query)
        except st.ApiError as e:
            self._fail(e)
        except Exception:  # noqa: BLE001 - a stand-in must answer, not hang
            _log(traceback.format_exc())
            self._fail(st.ApiError(500, "InternalError", "internal error"))

    def _route(self, method, path, parts, query):
        store = self.server.store
        now = time.time()
        if path in ("/healthz", "/livez", "/readyz"):
            return self._send(200, "ok")
        if path == "/version":
            v = store.snapshot().get("kubernetesVersion", env.version())
            major, minor, _ = env.version_tuple(v)
            return self._send(200, {"major": str(major), "minor": str(minor), "gitVersion": v,
                                    "platform": "linux/amd64"})
        if path == "/api/v1/namespaces/kube-public/configmaps/cluster-info" and method == "GET":
            return self._send(200, st.cluster_info_configmap(store.snapshot(), now))
        if path == "/api/v1/namespaces/kube-system/configmaps/kubeadm-config" and method == "PUT":
            self._auth(allow_token=False)
            return self._send(200, store.mutate({
                "op": "upload_config",
                "clusterConfiguration": self._body()["clusterConfiguration"]}))
        if path == "/api/v1/namespaces/kube-system/configmaps/kubeadm-config" and method == "GET":
            self._auth(allow_token=True)
            cfg = store.snapshot()["clusterConfiguration"]
            return self._send(200, {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "kubeadm-config",
                                                 "namespace": "kube-system"},
                                    "data": {"ClusterConfiguration": yamlish.dump(cfg)}})
        if path == "/api/v1/namespaces/kube-system/configmaps/kubelet-config" and method == "GET":
            self._auth(allow_token=True)
            kubelet = store.snapshot().get("kubeletConfiguration") or {}
            return self._send(200, {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "kubelet-config",
                                                 "namespace": "kube-system"},
                                    "data": {"kubelet": yamlish.dump(kubelet)}})
        if path == "/api/v1/namespaces/kube-system/secrets":
            self._auth(allow_token=False)
            if method == "GET":
                tokens = st.live_tokens(store.snapshot(), now)
                items = [tokens[k] for k in sorted(tokens)]
                return self._send(200, {"kind": "SecretList", "items": items})
            if method == "POST":
                return self._send(201, store.mutate({"op": "create_token",
                                                     "token": self._body()["token"]}))
        if len(parts) == 6 and parts[:5] == ["api", "v1", "namespaces", "kube-system", "secrets"]:
            name = parts[5]
            if name == "kubeadm-certs":
                if method == "GET":
                    self._auth(allow_token=True)
                    certs = st.live_certs(store.snapshot(), now)
                    if certs is None:
                        raise st.not_found("secrets", "kubeadm-certs")
                    return self._send(200, {"kind": "Secret", "data": certs["data"]})
                if method == "PUT":
                    self._auth(allow_token=False)
                    body = self._body()
                    return self._send(200, store.mutate({"op": "upload_certs",
                                                         "ownerToken": body["ownerToken"],
                                                         "data": body["data"]}))
            if name.startswith("bootstrap-token-") and method == "DELETE":
                self._auth(allow_token=False)
                return self._send(200, store.mutate({"op": "delete_token",
                                                     "id": name[len("bootstrap-token-"):]}))
        if path == "/apis/certificates.k8s.io/v1/certificatesigningrequests" and method == "POST":
            self._auth(allow_token=True)
            body = self._body()
            cert = pki.sign_csr(body["csr"].encode(), _pki("ca.crt"), _pki("ca.key"),
                                server=body.get("server", False))
            return self._send(201, {"certificate": cert.decode()})
        if parts[:3] == ["api", "v1", "nodes"]:
            if len(parts) == 3:
                if method == "GET":
                    self._auth(allow_token=True)
                    nodes = store.snapshot()["nodes"]
                    return self._send(200, {"items": [nodes[k] for k in sorted(nodes)]})
                if method == "POST":
                    self._auth(allow_token=True)
                    body = self._body()
                    op = {"op": "register_node", "node": body["node"],
                          "force": bool(body.get("force")),
                          "keepCreated": bool(body.get("keepCreated"))}
                    return self._send(201, store.mutate(op))
            if len(parts) == 4:
                name = parts[3]
                if method == "GET":
                    self._auth(allow_token=True)
                    node = store.snapshot()["nodes"].get(name)
                    if node is None:
                        raise st.not_found("nodes", name)
                    return self._send(200, node)
                if method == "PATCH":
                    self._auth(allow_token=False)
                    return self._send(200, store.mutate({"op": "patch_node", "name": name,
                                                         "patch": self._body()}))
                if method == "DELETE":
                    self._auth(allow_token=False)
                    return self._send(200, store.mutate({"op": "delete_node", "name": name}))
        if path == "/kos/v1/objects":
            self._auth(allow_token=False)
            if method == "GET":
                return self._send(200, store.snapshot()["objects"])
            if method == "POST":
                body = self._body()
                return self._send(200, store.mutate({"op": "apply_object", "key": body["key"],
                                                     "object": body["object"]}))
            if method == "DELETE":
                return self._send(200, store.mutate({"op": "delete_object",
                                                     "key": query.get("key", [""])[0],
                                                     "resource": query.get("resource", [""])[0],
                                                     "name": query.get("name", [""])[0]}))
        if path == "/kos/v1/addons" and method == "PUT":
            self._auth(allow_token=False)
            return self._send(200, store.mutate({"op": "set_addons",
                                                 "addons": self._body()["addons"]}))
        if path == "/kos/v1/dns-pods" and method == "PUT":
            self._auth(allow_token=False)
            return self._send(200, store.mutate({"op": "place_dns_pods",
                                                 "nodes": self._body()["nodes"]}))
        if path == "/kos/v1/members":
            self._auth(allow_token=False)
            if method == "GET":
                return self._send(200, store.snapshot()["members"])
            if method == "POST":
                return self._send(200, store.mutate({"op": "add_member",
                                                     "member": self._body()["member"]}))
        if len(parts) == 4 and parts[:3] == ["kos", "v1", "members"] and method == "DELETE":
            self._auth(allow_token=False)
            return self._send(200, store.mutate({"op": "remove_member", "name": parts[3]}))
        if path == "/kos/v1/state":
            self._auth(allow_token=False)
            if method == "GET":
                return self._send(200, store.snapshot())
            if method == "PUT":
                return self._send(200, {"adopted": store.adopt(self._body())})
        if path == "/kos/v1/ops" and method == "POST":
            self._auth(allow_token=False)
            return self._send(200, store.apply_local(self._body()))
        raise st.ApiError(404, "NotFound", "the server could not find the requested resource")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, store, ssl_ctx):
        family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.address_family = family
        self.store = store
        self.ssl_ctx = ssl_ctx
        ThreadingHTTPServer.__init__(self, addr, Handler)

    def finish_request(self, request, client_address):
        # The TLS handshake runs in the worker thread: a stuck client (or a haproxy TCP
        # health check that just connects and closes) must not block accept().
        request.settimeout(30)
        try:
            tls = self.ssl_ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            request.close()
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        _log("error serving %s: %s" % (client_address, sys.exc_info()[1]))


def _ssl_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(_pki("apiserver.crt"), _pki("apiserver.key"))
    ctx.load_verify_locations(_pki("ca.crt"))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def serve(name, bind, port, ready_fd=None):
    def ready(msg):
        if ready_fd is not None:
            try:
                os.write(ready_fd, msg.encode())
                os.close(ready_fd)
            except OSError:
                pass

    try:
        store = Store(name, "https://%s:%d" % (bind, port))
        httpd = Server((bind, port), store, _ssl_context())
    except Exception as e:  # noqa: BLE001 - reported to the starting kubeadm
        ready("error: %s" % e)
        return 1
    pidfile = env.host(env.PIDFILE)
    os.makedirs(os.path.dirname(pidfile), exist_ok=True)
    with open(pidfile, "w") as f:
        f.write("%d\n" % os.getpid())
    store.pull_from_peers()

    def stop(signum, frame):
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _log("serving %s on %s:%d" % (name, bind, port))
    ready("ok")
    httpd.serve_forever(poll_interval=0.2)
    try:
        with open(pidfile) as f:
            if f.read().strip() == str(os.getpid()):
                os.unlink(pidfile)
    except OSError:
        pass
    return 0


# ---------------------------------------------------------------------------
# process management, used by kubeadm

def _lib_dir():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def running_pid():
    """PID of this root's daemon if it runs, else None."""
    try:
        with open(env.host(env.PIDFILE)) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_ours(pid) else None


def _is_ours(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read()
        with open("/proc/%d/status" % pid) as f:
            if "\nState:\tZ" in f.read():
                return False
    except OSError:
        return False
    return MARKER.encode() in cmdline


def start(name, bind, port, timeout=15.0):
    """Start the daemon fully detached; returns None or an error text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(r)
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            # drop every descriptor a caller may have shared (output pipes above all)
            os.closerange(3, w)
            os.closerange(w + 1, 65536)
            os.set_inheritable(w, True)
            os.chdir("/")
            child_env = dict(os.environ)
            child_env["PYTHONPATH"] = _lib_dir()
            child_env["KOS_STANDIN_ROOT"] = env.root()
            os.execve(sys.executable, [sys.executable, "-m", "kubeadm_standin.apiserver",
                                       MARKER, "--name", name, "--bind", bind,
                                       "--port", str(port), "--ready-fd", str(w)], child_env)
        finally:
            os._exit(127)
    os.close(w)
    os.waitpid(pid, 0)
    deadline = time.time() + timeout
    buf = b""
    while time.time() < deadline:
        ready_fds, _, _ = select.select([r], [], [], max(0.0, deadline - time.time()))
        if not ready_fds:
            break
        chunk = os.read(r, 4096)
        if not chunk:
            break
        buf += chunk
    os.close(r)
    text = buf.decode(errors="replace").strip()
    if text == "ok":
        return None
    return text or "the stand-in API server did not start"


def stop(timeout=5.0):
    """Stop this root's daemon if it runs (SIGTERM, then SIGKILL)."""
    pid = running_pid()
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return False
    deadline = time.time() + timeout
    while time.time() < deadline and _is_ours(pid):
        time.sleep(0.05)
    if _is_ours(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.unlink(env.host(env.PIDFILE))
    except OSError:
        pass
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(prog=MARKER)
    parser.add_argument("marker")
    parser.add_argument("--name", required=True)
    parser.add_argument("--bind", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ready-fd", type=int)
    args = parser.parse_args(argv)
    return serve(args.name, args.bind, args.port, args.ready_fd)


if __name__ == "__main__":
    sys.exit(main())
