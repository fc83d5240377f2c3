"""Pieces shared by kubeadm init, join and reset: failures, preflight checks, PKI phases."""

import errno
import ipaddress
import os
import random
import re
import socket
import string
import sys
import time

from . import apiserver, client, config, content, env, gofmt, kubeconfig, pki, yamlish
from . import state as st

STACK_HINT = "To see the stack trace of this error execute with --v=5 or higher"
CONTROL_PLANE_LABELS = ["node-role.kubernetes.io/control-plane",
                        "node.kubernetes.io/exclude-from-external-load-balancers"]
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
KUBELET_PKI = "/var/lib/kubelet/pki"


class Failure(Exception):
    """A kubeadm error: printed on stderr with the stack-trace hint, exit status 1."""

    exit_code = 1

    def __init__(self, text):
        Exception.__init__(self, text)
        self.text = text


def config_documents(path, wanted):
    """config.load_documents, a bad file failing as kubeadm fails on it."""
    try:
        return config.load_documents(path, wanted)
    except config.ConfigError as e:
        raise Failure(str(e))


class Invalid(Failure):
    """A configuration that fails validation (a field.ErrorList, not wrapped in a phase):
    exit status 3 (util/error.go ValidationExitCode; the real v1.31.4 exits 3 for a join
    without caCertHashes) until v1.34 made every exit status 1 (kubernetes PR #132080)."""

    @property
    def exit_code(self):
        return 3 if env.version_tuple() < (1, 34, 0) else 1


def split_host_port(hostport):
    """Go's net.SplitHostPort: (host, port), or ValueError with its AddrError text."""
    def fail(why):
        raise ValueError("address %s: %s" % (hostport, why) if hostport else why)
    i = hostport.rfind(":")
    if i < 0:
        fail("missing port in address")
    j = k = 0
    if hostport[0] == "[":
        end = hostport.find("]")
        if end < 0:
            fail("missing ']' in address")
        if end + 1 == len(hostport):
            fail("missing port in address")
        if end + 1 != i:
            fail("too many colons in address" if hostport[end + 1] == ":"
                 else "missing port in address")
        host, j, k = hostport[1:end], 1, end + 1
    else:
        host = hostport[:i]
        if ":" in host:
            fail("too many colons in address")
    if "[" in hostport[j:]:
        fail("unexpected '[' in address")
    if "]" in hostport[k:]:
        fail("unexpected ']' in address")
    return host, hostport[i + 1:]


def phase_failure(phase, text):
    return Failure("error execution phase %s: %s" % (phase, text))


def confirm(action):
    """cmdutil.InteractivelyConfirmAction, asked in the preflight phase
    (https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/util/cmdutil.go):
    the prompt has no newline; the answer is the line without its end; EOF is a "no"."""
    sys.stdout.write("[%s] Are you sure you want to proceed? [y/N]: " % action)
    sys.stdout.flush()
    try:
        answer = sys.stdin.readline() if sys.stdin else ""
    except (OSError, ValueError):
        answer = ""
    if answer.rstrip("\r\n").lower() not in ("y", "yes"):
        raise phase_failure("preflight", "won't proceed; the user didn't answer (Y|y) in "
                            "order to continue")


def report(failure):
    # B.1.1: v1.34 (kubernetes PR #132080) prefixes every error with "error: "
    prefix = "error: " if env.version_tuple() >= (1, 34, 0) else ""
    sys.stderr.write("%s%s\n%s\n" % (prefix, failure.text, STACK_HINT))
    sys.stderr.flush()


def os_error_text(e):
    return (e.strerror or str(e)).lower() if isinstance(e, OSError) else str(e)


# ---------------------------------------------------------------------------
# preflight: checks named and reported as
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/preflight/checks.go does

def check_name(prefix, path):
    return prefix + "-" + path.replace("/", "-")


def file_available(path):
    exists = os.path.lexists(env.host(path))
    return (check_name("FileAvailable", path), "%s already exists" % path if exists else None)


def dir_available(path):
    p = env.host(path)
    busy = os.path.isdir(p) and bool(os.listdir(p))
    return (check_name("DirAvailable", path), "%s is not empty" % path if busy else None)


def port_check(port, in_use):
    return ("Port-%d" % port, "Port %d is in use" % port if in_use else None)


def bind_in_use(address, port):
    """Whether `address:port` is taken (Go's net.Listen sets SO_REUSEADDR too)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((address, port))
        return False
    except OSError as e:
        return e.errno == errno.EADDRINUSE
    finally:
        s.close()


def _kubelet_running():
    # The simulated kubelet runs from kubelet-start until reset wipes /var/lib/kubelet.
    return os.path.exists(env.host("/var/lib/kubelet/config.yaml"))


def _manifest(name):
    return os.path.exists(env.host("/etc/kubernetes/manifests/%s.yaml" % name))


def root_check(ignore):
    if os.geteuid() != 0:
        run_checks([("IsPrivilegedUser", "user is not running as root")], ignore)


def run_checks(checks, ignore):
    """Print ignored failures as warnings (stderr), fail on the rest, in the layout of
    https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/preflight/checks.go."""
    errors = []
    for name, msg in checks:
        if msg is None:
            continue
        if "all" in ignore or name.lower() in ignore:
            sys.stderr.write("\t[WARNING %s]: %s\n" % (name, msg))
            sys.stderr.flush()
        else:
            errors.append((name, msg))
    if errors:
        text = "[preflight] Some fatal errors occurred:\n"
        text += "".join("\t[ERROR %s]: %s\n" % e for e in errors)
        text += ("[preflight] If you know what you are doing, you can make a check non-fatal "
                 "with `--ignore-preflight-errors=...`")
        raise phase_failure("preflight", text)


def init_node_checks(cc, node, secondary=False, download_certs=False):
    """RunInitNodeChecks: ports and files a control plane needs free."""
    manifests = "/etc/kubernetes/manifests"
    port = node["bindPort"]
    api_busy = apiserver.running_pid() is not None or bind_in_use(node["advertiseAddress"], port)
    checks = [
        port_check(port, api_busy),
        port_check(10259, _manifest("kube-scheduler")),
        port_check(10257, _manifest("kube-controller-manager")),
        file_available(manifests + "/kube-apiserver.yaml"),
        file_available(manifests + "/kube-controller-manager.yaml"),
        file_available(manifests + "/kube-scheduler.yaml"),
        file_available(manifests + "/etcd.yaml"),
    ]
    if not secondary:
        checks.append(port_check(10250, _kubelet_running()))
    if config.external_etcd(cc):
        if not (secondary and download_certs):
            ext = cc["etcd"]["external"]
            for path in (ext["caFile"], ext["certFile"], ext["keyFile"]):
                if path and not os.path.exists(env.host(path)):
                    checks.append(("ExternalEtcdClientCertificates", "%s doesn't exist" % path))
    else:
        checks += [port_check(2379, _manifest("etcd")), port_check(2380, _manifest("etcd")),
                   dir_available(cc["etcd"]["local"]["dataDir"])]
    return checks


def join_node_checks(control_plane):
    """RunJoinNodeChecks: what shows that this node already belongs to a cluster (as
    v1.31.4's preflight/checks.go JoinNodeChecks lists them: no manifests directory)."""
    checks = [
        file_available("/etc/kubernetes/kubelet.conf"),
        file_available("/etc/kubernetes/bootstrap-kubelet.conf"),
        port_check(10250, _kubelet_running()),
    ]
    if not control_plane:
        checks.append(file_available("/etc/kubernetes/pki/ca.crt"))
    return checks


def ignore_set(*lists):
    out = set()
    for lst in lists:
        for item in lst or []:
            for part in str(item).split(","):
                if part.strip():
                    out.add(part.strip().lower())
    return out


# ---------------------------------------------------------------------------
# endpoints

def join_host_port(host, port):
    try:
        if ipaddress.ip_address(host).version == 6:
            return "[%s]:%d" % (host, port)
    except ValueError:
        pass
    return "%s:%d" % (host, port)


def control_plane_endpoint(cc, node):
    """kubeadm GetControlPlaneEndpoint: controlPlaneEndpoint (port defaulted) or local."""
    cpe = cc.get("controlPlaneEndpoint") or ""
    if not cpe:
        return join_host_port(node["advertiseAddress"], node["bindPort"])
    host, port = split_endpoint(cpe, node["bindPort"])
    return join_host_port(host, port)


def split_endpoint(text, default_port):
    if text.startswith("["):
        h, _, rest = text[1:].partition("]")
        return h, int(rest.lstrip(":") or default_port)
    if text.count(":") == 1:
        h, p = text.split(":")
        return h, int(p)
    return text, default_port


def local_endpoint(node):
    return join_host_port(node["advertiseAddress"], node["bindPort"])


# ---------------------------------------------------------------------------
# tokens and keys

def random_token():
    alphabet = string.ascii_lowercase + string.digits
    rnd = random.SystemRandom()
    return "%s.%s" % ("".join(rnd.choice(alphabet) for _ in range(6)),
                      "".join(rnd.choice(alphabet) for _ in range(16)))


def valid_token(text):
    return bool(re.match(r"^[a-z0-9]{6}\.[a-z0-9]{16}$", text or ""))


TOKEN_PATTERN = r"\\A([a-z0-9]{6})\\.([a-z0-9]{16})\\z"


def token_record(token, ttl_seconds, usages=None, groups=None, description=""):
    tid, secret = token.split(".", 1)
    return {"id": tid, "secret": secret, "description": description or "",
            "expires": None if not ttl_seconds else time.time() + ttl_seconds,
            "usages": list(usages if usages is not None else st.DEFAULT_TOKEN_USAGES),
            "groups": list(groups if groups is not None else st.DEFAULT_TOKEN_GROUPS)}


def new_certificate_key():
    return os.urandom(32).hex()


def cert_token_record():
    """The hidden token whose expiry drives the kubeadm-certs Secret: the Secret's owner, so it
    goes when the token expires:
    https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/phases/copycerts/copycerts.go
    """
    return token_record(random_token(), env.cert_key_ttl(), usages=[], groups=[],
                        description=st.CERT_TOKEN_DESCRIPTION)


def shared_cert_files(cc):
    """(secret key, path) of what `upload-certs` shares (copycerts.certsToTransfer)."""
    pki_dir = cc["certificatesDir"]
    files = [("ca.crt", pki_dir + "/ca.crt"), ("ca.key", pki_dir + "/ca.key"),
             ("front-proxy-ca.crt", pki_dir + "/front-proxy-ca.crt"),
             ("front-proxy-ca.key", pki_dir + "/front-proxy-ca.key"),
             ("sa.key", pki_dir + "/sa.key"), ("sa.pub", pki_dir + "/sa.pub")]
    if config.external_etcd(cc):
        ext = cc["etcd"]["external"]
        files += [("external-etcd-ca.crt", ext["caFile"]), ("external-etcd.crt", ext["certFile"]),
                  ("external-etcd.key", ext["keyFile"])]
    else:
        files += [("etcd-ca.crt", pki_dir + "/etcd/ca.crt"),
                  ("etcd-ca.key", pki_dir + "/etcd/ca.key")]
    return files


def encrypt_shared_certs(cc, key_hex, base=None):
    key = bytes.fromhex(key_hex)
    data = {}
    for name, path in shared_cert_files(cc):
        if not path:
            continue
        real = env.host(path) if base is None else os.path.join(base, os.path.basename(path))
        try:
            with open(real, "rb") as f:
                data[name] = pki.encrypt(key, f.read())
        except OSError as e:
            raise Failure("error uploading certs: failed to load %s: open %s: %s"
                          % (name, path, os_error_text(e)))
    return data


# ---------------------------------------------------------------------------
# PKI phases

def _validity(cc):
    return (config.days_of(cc.get("certificateValidityPeriod"), 365),
            config.days_of(cc.get("caCertificateValidityPeriod"), 3650))


def apiserver_sans(cc, node):
    dns = [node["name"], "kubernetes", "kubernetes.default", "kubernetes.default.svc",
           "kubernetes.default.svc." + cc["networking"]["dnsDomain"]]
    ips = [content.service_ip(cc["networking"]["serviceSubnet"], 1), node["advertiseAddress"]]
    if cc.get("controlPlaneEndpoint"):
        host, _ = split_endpoint(cc["controlPlaneEndpoint"], node["bindPort"])
        (ips if pki.is_ip(host) else dns).append(host)
    for san in cc["apiServer"].get("certSANs") or []:
        (ips if pki.is_ip(san) else dns).append(san)
    return pki.sorted_dns(dns), pki.dedup_ips(ips)


def etcd_sans(cc, node, extra_key):
    dns = [node["name"], "localhost"]
    ips = [node["advertiseAddress"], "127.0.0.1", "::1"]
    for san in cc["etcd"].get("local", {}).get(extra_key) or []:
        (ips if pki.is_ip(san) else dns).append(san)
    return pki.sorted_dns(dns), pki.dedup_ips(ips)


# The etcd client certificates and their common names (kubeadm's certs phase,
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/phases/certs/certlist.go).
ETCD_CLIENTS = {"etcd/healthcheck-client": "kube-etcd-healthcheck-client",
                "apiserver-etcd-client": "kube-apiserver-etcd-client"}


def etcd_leaves(plan, cc, node, days, clients):
    """The stacked etcd's server and peer certificates, then ``clients`` (ETCD_CLIENTS keys,
    in the order the command prints them: init and join differ)."""
    sdns, sips = etcd_sans(cc, node, "serverCertSANs")
    plan.leaf("etcd/server", "etcd/ca", node["name"], server=True, client_auth=True,
              dns=sdns, ips=sips, days=days)
    pdns, pips = etcd_sans(cc, node, "peerCertSANs")
    plan.leaf("etcd/peer", "etcd/ca", node["name"], server=True, client_auth=True,
              dns=pdns, ips=pips, days=days)
    for base in clients:
        plan.leaf(base, "etcd/ca", ETCD_CLIENTS[base], client_auth=True, days=days)


def _fmt_list(items):
    return "[" + " ".join(items) + "]"


class CertPlan:
    """Certificates to create in one phase, printed in kubeadm's order, generated in parallel."""

    def __init__(self, pki_dir, algorithm):
        self.pki_dir = pki_dir
        self.algorithm = algorithm
        self.lines = []
        self.jobs = []

    def path(self, name):
        return os.path.join(self.pki_dir, name)

    def exists(self, base):
        return os.path.exists(self.path(base + ".crt")) and os.path.exists(self.path(base + ".key"))

    def leaf(self, base, ca_base, cn, orgs=(), server=False, client_auth=False, dns=(), ips=(),
             days=365, sans_line=True):
        if self.exists(base):
            self.lines.append('[certs] Using existing %s certificate and key on disk' % base)
            return
        self.lines.append('[certs] Generating "%s" certificate and key' % base)
        if server and sans_line:
            self.lines.append("[certs] %s serving cert is signed for DNS names %s and IPs %s"
                              % (base, _fmt_list(dns), _fmt_list(ips)))
        ca_crt, ca_key = self.path(ca_base + ".crt"), self.path(ca_base + ".key")

        def job():
            cert, key = pki.signed_cert(ca_crt, ca_key, cn, orgs, days, server, client_auth,
                                        dns, ips, self.algorithm)
            pki.write_pair(self.path(base + ".crt"), self.path(base + ".key"), cert, key)
        self.jobs.append(job)

    def run(self):
        for line in self.lines:
            env.out(line)
        pki.parallel(self.jobs)
        self.lines, self.jobs = [], []


def make_ca(pki_dir, base, cn, days, algorithm):
    """Generate a CA unless one is on disk; returns the line kubeadm prints."""
    crt, key = os.path.join(pki_dir, base + ".crt"), os.path.join(pki_dir, base + ".key")
    if os.path.exists(crt) and os.path.exists(key):
        return "[certs] Using existing %s certificate authority" % base, None

    def job():
        cert, k = pki.self_signed_ca(cn, days, algorithm)
        pki.write_pair(crt, key, cert, k)
    return '[certs] Generating "%s" certificate and key' % base, job


def make_sa(pki_dir, algorithm):
    key_path = os.path.join(pki_dir, "sa.key")
    if os.path.exists(key_path) and os.path.exists(os.path.join(pki_dir, "sa.pub")):
        return '[certs] Using the existing "sa" key', None

    def job():
        key = pki.gen_key(algorithm)
        pki.write_file(key_path, key, 0o600)
        pki.write_file(os.path.join(pki_dir, "sa.pub"), pki.public_key_pem(key), 0o644)
    return '[certs] Generating "sa" key and public key', job


def admin_org():
    # kubeadm 1.29+ binds admin.conf to kubeadm:cluster-admins; super-admin.conf holds
    # system:masters
    return "kubeadm:cluster-admins" if env.minor() >= 29 else "system:masters"


def write_kubeconfigs(kube_dir, pki_dir, cc, node, names, ca_pem, algorithm, dry_run=False,
                      deferred=()):
    """Write the named kubeconfig files (admin, super-admin, kubelet, controller-manager,
    scheduler) and print kubeadm's lines; `deferred` ones are announced but written later."""
    endpoint = "https://" + control_plane_endpoint(cc, node)
    local = "https://" + local_endpoint(node)
    specs = {
        "admin.conf": ("kubernetes-admin", [admin_org()], endpoint),
        "super-admin.conf": ("kubernetes-super-admin", ["system:masters"], endpoint),
        "kubelet.conf": ("system:node:" + node["name"], ["system:nodes"], endpoint),
        "controller-manager.conf": ("system:kube-controller-manager", [], local),
        "scheduler.conf": ("system:kube-scheduler", [], local),
    }
    env.out('[kubeconfig] Using kubeconfig folder "%s"' % shown_path(kube_dir))
    jobs = []
    days = _validity(cc)[0]
    for name in names:
        path = os.path.join(kube_dir, name)
        if os.path.exists(path):
            env.out('[kubeconfig] Using existing kubeconfig file: "%s"'
                    % shown_path(path))
            continue
        env.out('[kubeconfig] Writing "%s" kubeconfig file' % name)
        if name in deferred:
            continue
        user, orgs, server = specs[name]

        def job(path=path, user=user, orgs=orgs, server=server):
            cert, key = pki.signed_cert(os.path.join(pki_dir, "ca.crt"),
                                        os.path.join(pki_dir, "ca.key"), user, orgs, days,
                                        client=True, algorithm=algorithm)
            text = kubeconfig.render(server, ca_pem, user, cc["clusterName"], cert, key)
            pki.write_file(path, text, 0o600)
        jobs.append(job)
    pki.parallel(jobs)


def shown_path(real_path):
    """The simulated path of a host path under the root (for kubeadm's messages)."""
    r = env.root()
    if r != "/" and real_path.startswith(r.rstrip("/") + "/"):
        return real_path[len(r.rstrip("/")):]
    return real_path


def write_kubelet_client(node_name, ca_crt, ca_key, algorithm, kube_conf_path, server, ca_pem,
                         cluster_name, csr_signer=None):
    """kubelet's rotatable client certificate and a kubelet.conf pointing at it.

    Without `csr_signer` (kubeadm init) the file keeps kubeadm's names; with it (TLS
    bootstrap during join) it has the names the kubelet itself writes (default-auth...).
    """
    key = pki.gen_key(algorithm)
    cn, orgs = "system:node:" + node_name, ["system:nodes"]
    if csr_signer is None:
        cert, key = pki.signed_cert(ca_crt, ca_key, cn, orgs, 365, client=True,
                                    algorithm=algorithm)
        cluster, user, context = cluster_name, cn, "%s@%s" % (cn, cluster_name)
    else:
        cert = csr_signer(pki.make_csr(key, cn, orgs))
        cluster, user, context = "default-cluster", "default-auth", "default-context"
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime())
    pki_dir = env.host(KUBELET_PKI)
    name = "kubelet-client-%s.pem" % stamp
    pki.write_file(os.path.join(pki_dir, name), cert + key, 0o600)
    current = os.path.join(pki_dir, "kubelet-client-current.pem")
    if os.path.lexists(current):
        os.unlink(current)
    os.symlink(name, current)
    ctx = {"cluster": cluster, "user": user}
    if csr_signer is not None:
        ctx["namespace"] = "default"
    if isinstance(ca_pem, str):
        ca_pem = ca_pem.encode()
    doc = {
        "apiVersion": "v1",
        "clusters": [{"cluster": {"certificate-authority-data": pki.b64(ca_pem),
                                  "server": server}, "name": cluster}],
        "contexts": [{"context": ctx, "name": context}],
        "current-context": context,
        "kind": "Config",
        "preferences": {},
        "users": [{"name": user, "user": {
            "client-certificate": KUBELET_PKI + "/kubelet-client-current.pem",
            "client-key": KUBELET_PKI + "/kubelet-client-current.pem"}}],
    }
    pki.write_file(kube_conf_path, yamlish.dump(doc), 0o600)


def node_record(name, ip, control_plane, taints, kube_proxy=True, static_pods=None):
    """The Node the kubelet registers (its version: the kubelet package's, see env.py).

    `static_pods` maps a control-plane component to the image of its static Pod: the
    mirror Pods the kubelet creates, which `kubeadm upgrade` reads versions from.
    """
    labels = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
              "kubernetes.io/os": "linux"}
    if control_plane:
        for label in CONTROL_PLANE_LABELS:
            labels[label] = ""
    if taints is None:
        taints = [dict(CONTROL_PLANE_TAINT)] if control_plane else []
    suffix = "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(5))
    return {"name": name, "labels": labels, "taints": taints, "ready": True,
            "created": time.time(),
            "unschedulable": False, "internalIP": ip, "hostname": name,
            "kubeletVersion": env.package_version("kubelet"), "uid": os.urandom(16).hex(),
            "daemonSetPods": ["kube-system/kube-proxy-" + suffix] if kube_proxy else [],
            "staticPods": dict(static_pods or {})}


def taint_string(t):
    if t.get("value"):
        return "%s=%s:%s" % (t["key"], t["value"], t["effect"])
    return "%s:%s" % (t["key"], t["effect"])


def print_mark_control_plane(name, taints):
    env.out("[mark-control-plane] Marking the node %s as control-plane by adding the labels: %s"
            % (name, _fmt_list(CONTROL_PLANE_LABELS)))
    if taints:
        env.out("[mark-control-plane] Marking the node %s as control-plane by adding the taints %s"
                % (name, _fmt_list(taint_string(t) for t in taints)))


def kubelet_check_lines():
    env.out("[kubelet-check] Waiting for a healthy kubelet at http://127.0.0.1:10248/healthz. "
            "This can take up to 4m0s")
    env.out("[kubelet-check] The kubelet is healthy after %s"
            % gofmt.format_duration(0.5 + random.random() * 0.01))


def simulated_wait(seconds):
    start = time.time()
    if seconds > 0:
        time.sleep(seconds)
    return time.time() - start


def admin_api(kubeconfig_path, timeout=10.0):
    """Client for the cluster behind a kubeconfig (kubeadm's `--kubeconfig`)."""
    try:
        kc = kubeconfig.load(kubeconfig_path)
    except FileNotFoundError as e:
        raise Failure("failed to load admin kubeconfig: open %s: %s"
                      % (kubeconfig_path, os_error_text(e)))
    except (OSError, kubeconfig.KubeconfigError, ValueError) as e:
        raise Failure("failed to load admin kubeconfig: %s" % e)
    return kc, client.Api.from_kubeconfig(kc, timeout=timeout)


def api_error_text(e):
    if isinstance(e, client.ClientError):
        return e.text
    if isinstance(e, client.HTTPError):
        return e.message
    return str(e)
