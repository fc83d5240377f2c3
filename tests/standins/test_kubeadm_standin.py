"""Tests of the kubeadm/kubectl stand-ins against what the real kubeadm and kubectl print.

Every simulated node gets its own root under tmp_path and its own loopback address;
the stand-in API servers started here are killed by pidfile when the module ends.
"""

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from tests.standins import scenarios

BIN = Path(__file__).resolve().parent / "bin"
sys.path.insert(0, str(BIN.parent / "lib"))

# The tail real kubeadm prints after a reset, held once, in the stand-in (cited there).
from kubeadm_standin.kubeadm_reset import RESET_TAIL  # noqa: E402

HINT = scenarios.HINT
PIDFILE = "var/run/kos-standin-apiserver.pid"
MARKER = b"kos-standin-apiserver"

RESET_FILES = ("[reset] Deleting files: [/etc/kubernetes/admin.conf /etc/kubernetes/super-admin.conf "
               "/etc/kubernetes/kubelet.conf /etc/kubernetes/bootstrap-kubelet.conf "
               "/etc/kubernetes/controller-manager.conf /etc/kubernetes/scheduler.conf]\n")
TOKEN_RE = scenarios.TOKEN_RE
KLOG_RE = r"[IWE]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [a-z_]+\.go:\d+\] "


def _free_base():
    """A random 127.x.y. prefix whose .1-.9 addresses have nothing on port 6443."""
    for _ in range(50):
        base = "127.%d.%d." % (random.randint(64, 250), random.randint(1, 250))
        free = True
        for host in range(1, 10):
            with socket.socket() as s:
                s.settimeout(0.2)
                if s.connect_ex((base + str(host), 6443)) == 0:
                    free = False
                    break
        if free:
            return base
    raise RuntimeError("no free loopback range")


def ca_hash(cert_path):
    return scenarios.ca_hash(Path(cert_path).read_bytes())


def alive(pid):
    """Running and not a zombie (the daemons are double-forked: pid 1 reaps them)."""
    try:
        return "\nState:\tZ" not in Path("/proc/%d/status" % pid).read_text()
    except OSError:
        return False


def _kill_daemon(root):
    pidfile = Path(root) / PIDFILE
    try:
        pid = int(pidfile.read_text().strip())
        if MARKER not in Path("/proc/%d/cmdline" % pid).read_bytes():
            return
    except (OSError, ValueError):
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(60):
        if not alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def daemon_pid(root):
    try:
        pid = int((Path(root) / PIDFILE).read_text().strip())
        return pid if MARKER in Path("/proc/%d/cmdline" % pid).read_bytes() else None
    except (OSError, ValueError):
        return None


class Node:
    def __init__(self, root, ip, name):
        self.root = Path(root)
        self.ip = ip
        self.name = name
        (self.root / "etc").mkdir(parents=True, exist_ok=True)
        (self.root / "etc" / "hostname").write_text(name + "\n")

    def path(self, p):
        return self.root / p.lstrip("/")

    def read(self, p):
        return self.path(p).read_bytes()

    def write(self, p, text):
        self.path(p).parent.mkdir(parents=True, exist_ok=True)
        self.path(p).write_text(text)

    def remove(self, p):
        self.path(p).unlink()

    def _env(self, extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("KOS_STANDIN_")}
        env.update(KOS_STANDIN_ROOT=str(self.root), KOS_STANDIN_IP=self.ip,
                   KOS_STANDIN_DISCOVERY_TIMEOUT="2")
        env.update(extra)
        return env

    def kubeadm(self, *args, stdin=subprocess.DEVNULL, **extra):
        return subprocess.run([str(BIN / "kubeadm")] + list(args), env=self._env(extra),
                              stdin=stdin, capture_output=True, text=True, timeout=60)

    def kubectl(self, *args, **extra):
        return subprocess.run([str(BIN / "kubectl"), "--kubeconfig", "/etc/kubernetes/admin.conf"]
                              + list(args), env=self._env(extra), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)

    def run(self, program, *args, **extra):
        return subprocess.run([str(BIN / program)] + list(args), env=self._env(extra),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60)

    def packages(self, **versions):
        """What apt installed: $ROOT/var/lib/kos-standin/packages.json."""
        path = self.path("/var/lib/kos-standin/packages.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(versions))


class Lab:
    """Simulated hosts of one test module."""

    def __init__(self, tmp):
        self.tmp = Path(tmp)
        self.base = _free_base()
        self.nodes = []

    def node(self, name):
        n = Node(self.tmp / name, self.base + str(len(self.nodes) + 1), name)
        self.nodes.append(n)
        return n

    def cleanup(self):
        for n in self.nodes:
            _kill_daemon(n.root)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("kubeadm-standin"))
    yield lab
    lab.cleanup()


def init_config(ip, cpe=True, extra_cluster=""):
    return (
        "apiVersion: kubeadm.k8s.io/v1beta4\n"
        "kind: InitConfiguration\n"
        "localAPIEndpoint:\n"
        "  advertiseAddress: %s\n"
        "  bindPort: 6443\n"
        "---\n"
        "apiVersion: kubeadm.k8s.io/v1beta4\n"
        "kind: ClusterConfiguration\n"
        "kubernetesVersion: v1.31.4\n"
        "%s"
        "networking:\n"
        "  podSubnet: 10.244.0.0/16\n%s" % (ip, "controlPlaneEndpoint: %s:6443\n" % ip
                                             if cpe else "", extra_cluster))


@pytest.fixture(scope="module")
def cluster(lab):
    """First control plane: RSA CA, controlPlaneEndpoint, --upload-certs (case B)."""
    cp1 = lab.node("cp1")
    cfg = lab.tmp / "cp1.yaml"
    cfg.write_text(init_config(cp1.ip))
    result = cp1.kubeadm("init", "--config", str(cfg), "--upload-certs")
    assert result.returncode == 0, result.stderr
    cp1.init_result = result
    cp1.config = cfg
    return cp1


def parse_init(stdout):
    token = re.search(r"\[bootstrap-token\] Using token: (%s)" % TOKEN_RE, stdout).group(1)
    key_match = re.search(r"\[upload-certs\] Using certificate key:\n([0-9a-f]{64})\n", stdout)
    return token, key_match.group(1) if key_match else None


# ---------------------------------------------------------------------------
# init

def test_init_output_files_and_daemon(cluster):
    r = cluster.init_result
    assert r.stderr == ""
    token, key = parse_init(r.stdout)
    h = ca_hash(cluster.path("/etc/kubernetes/pki/ca.crt"))
    ep = cluster.ip + ":6443"
    lines = r.stdout.split("\n")
    kubelet_i = lines.index([x for x in lines if x.startswith("[kubelet-check] The kubelet is")][0])
    assert re.fullmatch(r"\[kubelet-check\] The kubelet is healthy after [0-9.]+ms", lines[kubelet_i])
    api_line = [x for x in lines if x.startswith("[api-check] The API server is healthy")][0]
    assert re.fullmatch(r"\[api-check\] The API server is healthy after [0-9.]+m?s", api_line)
    normalized = r.stdout.replace(lines[kubelet_i], "KUBELET").replace(api_line, "API")
    expected = f"""[init] Using Kubernetes version: v1.31.4
[preflight] Running pre-flight checks
[preflight] Pulling images required for setting up a Kubernetes cluster
[preflight] This might take a minute or two, depending on the speed of your internet connection
[preflight] You can also perform this action beforehand using 'kubeadm config images pull'
[certs] Using certificateDir folder "/etc/kubernetes/pki"
[certs] Generating "ca" certificate and key
[certs] Generating "apiserver" certificate and key
[certs] apiserver serving cert is signed for DNS names [cp1 kubernetes kubernetes.default kubernetes.default.svc kubernetes.default.svc.cluster.local] and IPs [10.96.0.1 {cluster.ip}]
[certs] Generating "apiserver-kubelet-client" certificate and key
[certs] Generating "front-proxy-ca" certificate and key
[certs] Generating "front-proxy-client" certificate and key
[certs] Generating "etcd/ca" certificate and key
[certs] Generating "etcd/server" certificate and key
[certs] etcd/server serving cert is signed for DNS names [cp1 localhost] and IPs [{cluster.ip} 127.0.0.1 ::1]
[certs] Generating "etcd/peer" certificate and key
[certs] etcd/peer serving cert is signed for DNS names [cp1 localhost] and IPs [{cluster.ip} 127.0.0.1 ::1]
[certs] Generating "etcd/healthcheck-client" certificate and key
[certs] Generating "apiserver-etcd-client" certificate and key
[certs] Generating "sa" key and public key
[kubeconfig] Using kubeconfig folder "/etc/kubernetes"
[kubeconfig] Writing "admin.conf" kubeconfig file
[kubeconfig] Writing "super-admin.conf" kubeconfig file
[kubeconfig] Writing "kubelet.conf" kubeconfig file
[kubeconfig] Writing "controller-manager.conf" kubeconfig file
[kubeconfig] Writing "scheduler.conf" kubeconfig file
[etcd] Creating static Pod manifest for local etcd in "/etc/kubernetes/manifests"
[control-plane] Using manifest folder "/etc/kubernetes/manifests"
[control-plane] Creating static Pod manifest for "kube-apiserver"
[control-plane] Creating static Pod manifest for "kube-controller-manager"
[control-plane] Creating static Pod manifest for "kube-scheduler"
[kubelet-start] Writing kubelet environment file with flags to file "/var/lib/kubelet/kubeadm-flags.env"
[kubelet-start] Writing kubelet configuration to file "/var/lib/kubelet/config.yaml"
[kubelet-start] Starting the kubelet
[wait-control-plane] Waiting for the kubelet to boot up the control plane as static Pods from directory "/etc/kubernetes/manifests"
[kubelet-check] Waiting for a healthy kubelet at http://127.0.0.1:10248/healthz. This can take up to 4m0s
KUBELET
[api-check] Waiting for a healthy API server. This can take up to 4m0s
API
[upload-config] Storing the configuration used in ConfigMap "kubeadm-config" in the "kube-system" Namespace
[kubelet] Creating a ConfigMap "kubelet-config" in namespace kube-system with the configuration for the kubelets in the cluster
[upload-certs] Storing the certificates in Secret "kubeadm-certs" in the "kube-system" Namespace
[upload-certs] Using certificate key:
{key}
[mark-control-plane] Marking the node cp1 as control-plane by adding the labels: [node-role.kubernetes.io/control-plane node.kubernetes.io/exclude-from-external-load-balancers]
[mark-control-plane] Marking the node cp1 as control-plane by adding the taints [node-role.kubernetes.io/control-plane:NoSchedule]
[bootstrap-token] Using token: {token}
[bootstrap-token] Configuring bootstrap tokens, cluster-info ConfigMap, RBAC Roles
[bootstrap-token] Configured RBAC rules to allow Node Bootstrap tokens to get nodes
[bootstrap-token] Configured RBAC rules to allow Node Bootstrap tokens to post CSRs in order for nodes to get long term certificate credentials
[bootstrap-token] Configured RBAC rules to allow the csrapprover controller automatically approve CSRs from a Node Bootstrap Token
[bootstrap-token] Configured RBAC rules to allow certificate rotation for all node client certificates in the cluster
[bootstrap-token] Creating the "cluster-info" ConfigMap in the "kube-public" namespace
[kubelet-finalize] Updating "/etc/kubernetes/kubelet.conf" to point to a rotatable kubelet client certificate and key
[addons] Applied essential addon: CoreDNS
[addons] Applied essential addon: kube-proxy

Your Kubernetes control-plane has initialized successfully!

To start using your cluster, you need to run the following as a regular user:

  mkdir -p $HOME/.kube
  sudo cp -i /etc/kubernetes/admin.conf $HOME/.kube/config
  sudo chown $(id -u):$(id -g) $HOME/.kube/config

Alternatively, if you are the root user, you can run:

  export KUBECONFIG=/etc/kubernetes/admin.conf

You should now deploy a pod network to the cluster.
Run "kubectl apply -f [podnetwork].yaml" with one of the options listed at:
  https://kubernetes.io/docs/concepts/cluster-administration/addons/

You can now join any number of control-plane nodes running the following command on each as root:

  kubeadm join {ep} --token {token} \\
\t--discovery-token-ca-cert-hash {h} \\
\t--control-plane --certificate-key {key}

Please note that the certificate-key gives access to cluster sensitive data, keep it secret!
As a safeguard, uploaded-certs will be deleted in two hours; If necessary, you can use
"kubeadm init phase upload-certs --upload-certs" to reload certs afterward.

Then you can join any number of worker nodes by running the following on each as root:

kubeadm join {ep} --token {token} \\
\t--discovery-token-ca-cert-hash {h} 
"""
    assert normalized == expected

    # the files of a first control plane
    for f in ["admin.conf", "super-admin.conf", "kubelet.conf", "controller-manager.conf",
              "scheduler.conf", "manifests/kube-apiserver.yaml",
              "manifests/kube-controller-manager.yaml", "manifests/kube-scheduler.yaml",
              "manifests/etcd.yaml"] + ["pki/%s.%s" % (b, ext) for b in (
                  "ca", "apiserver", "apiserver-kubelet-client", "front-proxy-ca",
                  "front-proxy-client", "apiserver-etcd-client", "etcd/ca", "etcd/server",
                  "etcd/peer", "etcd/healthcheck-client") for ext in ("crt", "key")] + \
            ["pki/sa.key", "pki/sa.pub"]:
        assert cluster.path("/etc/kubernetes/" + f).is_file(), f
    for f in ("/var/lib/kubelet/config.yaml", "/var/lib/kubelet/kubeadm-flags.env"):
        assert cluster.path(f).is_file()
    assert os.listdir(cluster.path("/var/lib/etcd"))
    assert "server: https://%s" % ep in cluster.path("/etc/kubernetes/admin.conf").read_text()
    assert b"BEGIN RSA PRIVATE KEY" in cluster.path("/etc/kubernetes/pki/ca.key").read_bytes()

    pid = daemon_pid(cluster.root)
    assert pid, "stand-in API server not running"
    with socket.create_connection((cluster.ip, 6443), timeout=2):
        pass


def test_second_init_fails_preflight(cluster):
    r = cluster.kubeadm("init", "--config", str(cluster.config), "--upload-certs")
    assert r.returncode == 1
    assert r.stdout == "[init] Using Kubernetes version: v1.31.4\n[preflight] Running pre-flight checks\n"
    assert r.stderr == """error execution phase preflight: [preflight] Some fatal errors occurred:
\t[ERROR Port-6443]: Port 6443 is in use
\t[ERROR Port-10259]: Port 10259 is in use
\t[ERROR Port-10257]: Port 10257 is in use
\t[ERROR FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml]: /etc/kubernetes/manifests/kube-apiserver.yaml already exists
\t[ERROR FileAvailable--etc-kubernetes-manifests-kube-controller-manager.yaml]: /etc/kubernetes/manifests/kube-controller-manager.yaml already exists
\t[ERROR FileAvailable--etc-kubernetes-manifests-kube-scheduler.yaml]: /etc/kubernetes/manifests/kube-scheduler.yaml already exists
\t[ERROR FileAvailable--etc-kubernetes-manifests-etcd.yaml]: /etc/kubernetes/manifests/etcd.yaml already exists
\t[ERROR Port-10250]: Port 10250 is in use
\t[ERROR Port-2379]: Port 2379 is in use
\t[ERROR Port-2380]: Port 2380 is in use
\t[ERROR DirAvailable--var-lib-etcd]: /var/lib/etcd is not empty
[preflight] If you know what you are doing, you can make a check non-fatal with `--ignore-preflight-errors=...`
""" + HINT


def test_config_mixed_with_flags_and_unknown_flag(cluster):
    r = cluster.kubeadm("init", "--config", str(cluster.config), "--pod-network-cidr",
                        "10.0.0.0/8", "--token-ttl", "1h")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == "can not mix '--config' with arguments [pod-network-cidr token-ttl]\n" + HINT
    r = cluster.kubeadm("init", "--bogus")
    assert (r.returncode, r.stderr) == (1, "unknown flag: --bogus\n" + HINT)
    # v1.34 prints an "error: " prefix before its message (seen in real runs)
    r = cluster.kubeadm("token", "delete", KOS_STANDIN_KUBE_VERSION="v1.34.0")
    assert r.returncode == 1
    assert r.stderr.startswith("error: missing argument; 'token delete' is missing token of form")


def test_version(cluster):
    scenarios.version(cluster)
    assert cluster.kubeadm("version", "-o", "short",
                           KOS_STANDIN_KUBE_VERSION="v1.32.2").stdout == "v1.32.2\n"


# ---------------------------------------------------------------------------
# certificates
# https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-certs/

EXPIRY_ROW = scenarios.EXPIRY_ROW


def test_certs_check_expiration_layout(cluster):
    scenarios.certs_check_expiration_layout(cluster)


def test_certs_check_expiration_on_a_dead_api_server_and_a_missing_file(lab):
    node = lab.node("certs-nocluster")
    pki = node.path("/etc/kubernetes/pki")
    pki.mkdir(parents=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=kubernetes", "-keyout", str(pki / "ca.key"),
                    "-out", str(pki / "ca.crt")], check=True, capture_output=True)
    r = node.kubeadm("certs", "check-expiration")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0] == ("[check-expiration] Error reading configuration from the Cluster. "
                        "Falling back to default configuration")
    assert lines[1] == ""
    # a missing file's cell widens the first column: "!MISSING! apiserver-kubelet-client"
    assert lines[2].startswith("CERTIFICATE" + " " * 26 + "EXPIRES")
    # a missing row's empty cells are padded to their columns: with no dates below them,
    # as wide as the headers (EXPIRES at the minimum width, 10)
    assert lines[3] == "%-37s%-10s%-16s%-24s" % ("!MISSING! admin.conf", "", "", "")
    # and so does the CA table's: "!MISSING! front-proxy-ca" (24 + 3)
    assert re.fullmatch(r"ca {25}%s   1d {14}no {6}" % EXPIRY_ROW, lines[16]), lines[16]
    assert lines[17] == "%-27s%-25s%-16s" % ("!MISSING! etcd-ca", "", "")


RENEWED = """[renew] Reading configuration from the cluster...
[renew] FYI: You can look at this config file with 'kubectl -n kube-system get cm kubeadm-config -o yaml'

certificate embedded in the kubeconfig file for the admin to use and for kubeadm itself renewed
certificate for serving the Kubernetes API renewed
certificate the apiserver uses to access etcd renewed
certificate for the API server to connect to kubelet renewed
certificate embedded in the kubeconfig file for the controller manager to use renewed
certificate for liveness probes to healthcheck etcd renewed
certificate for etcd nodes to communicate with each other renewed
certificate for serving etcd renewed
certificate for the front proxy client renewed
certificate embedded in the kubeconfig file for the scheduler manager to use renewed
certificate embedded in the kubeconfig file for the super-admin renewed

Done renewing certificates. You must restart the kube-apiserver, kube-controller-manager, kube-scheduler and etcd, so that they can use the new certificates.
"""


def test_certs_renew_all_keeps_subjects_and_sans_and_the_admin_credential_works(cluster):
    apiserver = cluster.path("/etc/kubernetes/pki/apiserver.crt")
    before = x509.load_pem_x509_certificate(apiserver.read_bytes())
    admin_before = cluster.path("/etc/kubernetes/admin.conf").read_text()
    ca_before = cluster.path("/etc/kubernetes/pki/ca.crt").read_bytes()
    r = cluster.kubeadm("certs", "renew", "all")
    assert (r.returncode, r.stdout, r.stderr) == (0, RENEWED, "")
    after = x509.load_pem_x509_certificate(apiserver.read_bytes())
    assert after.serial_number != before.serial_number
    assert after.subject == before.subject
    san = x509.SubjectAlternativeName
    assert after.extensions.get_extension_for_class(san).value == \
        before.extensions.get_extension_for_class(san).value
    assert after.not_valid_after_utc >= before.not_valid_after_utc
    # CAs are never renewed; the kubeconfig's new client certificate is accepted
    assert cluster.path("/etc/kubernetes/pki/ca.crt").read_bytes() == ca_before
    assert cluster.path("/etc/kubernetes/admin.conf").read_text() != admin_before
    nodes = cluster.kubectl("get", "nodes")
    assert nodes.returncode == 0, nodes.stderr


def test_certs_renew_one_prints_one_line(cluster):
    r = cluster.kubeadm("certs", "renew", "apiserver")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[3:] == ["certificate for serving the Kubernetes API renewed", ""]
    bad = cluster.kubeadm("certs", "renew")
    assert bad.returncode == 1
    assert bad.stderr.startswith('missing subcommand; "certs renew" is not meant to be run on its own')


# ---------------------------------------------------------------------------
# tokens
# https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-token/

def test_token_create_list_delete(cluster):
    scenarios.token_create_list_delete(cluster, f"{cluster.ip}:6443", str(cluster.config))


def test_v1beta3_config_warns_on_stderr(cluster, lab):
    cfg = lab.tmp / "v1beta3.yaml"
    cfg.write_text("apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\n"
                   "bootstrapTokens:\n- token: b3b3b3.0123456789abcdef\n  ttl: 10m\n")
    r = cluster.kubeadm("token", "create", "--config", str(cfg))
    assert (r.returncode, r.stdout) == (0, "b3b3b3.0123456789abcdef\n")
    assert re.fullmatch(KLOG_RE + re.escape(
        'your configuration file uses a deprecated API spec: "kubeadm.k8s.io/v1beta3" (kind: '
        "\"InitConfiguration\"). Please use 'kubeadm config migrate --old-config old.yaml "
        "--new-config new.yaml', which will write the new, similar spec using a newer API "
        "version.") + "\n", r.stderr)


# ---------------------------------------------------------------------------
# join failures
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/discovery/token/token.go

def _hash(cluster):
    return ca_hash(cluster.path("/etc/kubernetes/pki/ca.crt"))


def test_join_with_expired_token_fails_after_discovery_timeout(cluster, lab):
    tok = cluster.kubeadm("token", "create", "--ttl", "1s").stdout.strip()
    time.sleep(1.2)
    w = lab.node("w-expired")
    start = time.time()
    r = w.kubeadm("join", cluster.ip + ":6443", "--token", tok, "--discovery-token-ca-cert-hash",
                  _hash(cluster), KOS_STANDIN_DISCOVERY_TIMEOUT="1.5")
    elapsed = time.time() - start
    assert r.returncode == 1
    assert r.stdout == "[preflight] Running pre-flight checks\n"
    assert r.stderr == ('error execution phase preflight: couldn\'t validate the identity of the '
                        'API Server: could not find a JWS signature in the cluster-info ConfigMap '
                        'for token ID "%s"\n' % tok.split(".")[0]) + HINT
    assert elapsed >= 1.5  # it waited out the discovery timeout before giving up
    assert not w.path("/etc/kubernetes/kubelet.conf").exists()


def test_join_connection_refused(lab):
    w = lab.node("w-refused")
    dead = lab.base + "9"
    r = w.kubeadm("join", dead + ":6443", "--token", "abcdef.0123456789abcdef",
                  "--discovery-token-ca-cert-hash", "sha256:" + "0" * 64,
                  KOS_STANDIN_DISCOVERY_TIMEOUT="0.5")
    assert r.returncode == 1
    assert r.stderr == ('error execution phase preflight: couldn\'t validate the identity of the '
                        'API Server: failed to request the cluster-info ConfigMap: Get '
                        '"https://{0}:6443/api/v1/namespaces/kube-public/configmaps/cluster-info'
                        '?timeout=10s": dial tcp {0}:6443: connect: connection refused\n'
                        .format(dead)) + HINT


# ---------------------------------------------------------------------------
# successful joins
# https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-join/

WORKER_RE = r"""\[preflight\] Running pre-flight checks
\[preflight\] Reading configuration from the cluster\.\.\.
\[preflight\] FYI: You can look at this config file with 'kubectl -n kube-system get cm kubeadm-config -o yaml'
\[kubelet-start\] Writing kubelet configuration to file "/var/lib/kubelet/config\.yaml"
\[kubelet-start\] Writing kubelet environment file with flags to file "/var/lib/kubelet/kubeadm-flags\.env"
\[kubelet-start\] Starting the kubelet
\[kubelet-check\] Waiting for a healthy kubelet at http://127\.0\.0\.1:10248/healthz\. This can take up to 4m0s
\[kubelet-check\] The kubelet is healthy after [0-9.]+ms
\[kubelet-start\] Waiting for the kubelet to perform the TLS Bootstrap

This node has joined the cluster:
\* Certificate signing request was sent to apiserver and a response was received\.
\* The Kubelet was informed of the new secure connection details\.

Run 'kubectl get nodes' on the control-plane to see this node join the cluster\.
"""


@pytest.fixture(scope="module")
def worker(cluster, lab):
    w = lab.node("w1")
    tok = cluster.kubeadm("token", "create").stdout.strip()
    r = w.kubeadm("join", cluster.ip + ":6443", "--token", tok, "--discovery-token-ca-cert-hash",
                  _hash(cluster))
    w.join_result = r
    w.join_args = ("join", cluster.ip + ":6443", "--token", tok,
                   "--discovery-token-ca-cert-hash", _hash(cluster))
    return w


def test_join_failures_as_the_real_kubeadm_prints_them(cluster, worker):
    scenarios.join_failures(cluster, worker, cluster.ip + ":6443")


def test_init_config_with_a_malformed_token_as_the_real_kubeadm_reads_it(lab):
    scenarios.init_config_with_a_malformed_token(lab.node("bad-token"))


def test_worker_join(cluster, worker):
    r = worker.join_result
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert re.fullmatch(WORKER_RE, r.stdout), r.stdout
    assert worker.path("/etc/kubernetes/kubelet.conf").is_file()
    assert worker.path("/etc/kubernetes/pki/ca.crt").read_bytes() == \
        cluster.path("/etc/kubernetes/pki/ca.crt").read_bytes()
    assert not worker.path("/etc/kubernetes/pki/ca.key").exists()
    assert not worker.path("/etc/kubernetes/bootstrap-kubelet.conf").exists()
    assert not worker.path("/etc/kubernetes/admin.conf").exists()
    for f in ("/var/lib/kubelet/config.yaml", "/var/lib/kubelet/kubeadm-flags.env",
              "/var/lib/kubelet/pki/kubelet-client-current.pem"):
        assert worker.path(f).exists(), f
    assert daemon_pid(worker.root) is None

    nodes = cluster.kubectl("get", "nodes")
    assert nodes.returncode == 0
    header, *rows = nodes.stdout.splitlines()
    # kubectl pads each column to its widest cell: the ages' width follows how long the
    # nodes have been up (a loaded machine reaches "119s" or "2m5s")
    age = max(len(row.split()[3]) for row in rows)
    assert header == "NAME   STATUS   ROLES           " + "AGE".ljust(age) + "   VERSION"
    assert re.search(r"^w1     Ready    <none>          \S+ +v1\.31\.4$", nodes.stdout, re.M)

    again = worker.kubeadm(*worker.join_args)
    assert again.returncode == 1
    assert again.stderr == """error execution phase preflight: [preflight] Some fatal errors occurred:
\t[ERROR FileAvailable--etc-kubernetes-kubelet.conf]: /etc/kubernetes/kubelet.conf already exists
\t[ERROR Port-10250]: Port 10250 is in use
\t[ERROR FileAvailable--etc-kubernetes-pki-ca.crt]: /etc/kubernetes/pki/ca.crt already exists
[preflight] If you know what you are doing, you can make a check non-fatal with `--ignore-preflight-errors=...`
""" + HINT


def test_control_plane_join_stale_then_fresh_certificate_key(cluster, lab):
    cp2 = lab.node("cp2")
    tok = cluster.kubeadm("token", "create").stdout.strip()
    args = ("join", cluster.ip + ":6443", "--token", tok, "--discovery-token-ca-cert-hash",
            _hash(cluster), "--control-plane", "--certificate-key")

    up = cluster.kubeadm("init", "phase", "upload-certs", "--upload-certs")
    assert up.returncode == 0
    lines = up.stdout.splitlines()
    assert lines[:2] == ['[upload-certs] Storing the certificates in Secret "kubeadm-certs" in '
                         'the "kube-system" Namespace', "[upload-certs] Using certificate key:"]
    assert re.fullmatch(r"[0-9a-f]{64}", lines[-1])

    # while the Secret lasts (its default two hours: a loaded machine takes seconds here)
    wrong = cp2.kubeadm(*args, "ab" * 32)
    assert wrong.returncode == 1
    assert wrong.stderr == ("error execution phase control-plane-prepare/download-certs: error "
                            "downloading certs: error decoding secret data with provided key: "
                            "cipher: message authentication failed\n" + HINT)

    short = cluster.kubeadm("init", "phase", "upload-certs", "--upload-certs",
                            KOS_STANDIN_CERT_KEY_TTL="1")
    assert short.returncode == 0
    stale = short.stdout.splitlines()[-1]
    time.sleep(1.2)
    r = cp2.kubeadm(*args, stale)
    assert r.returncode == 1
    assert r.stdout.endswith('[download-certs] Downloading the certificates in Secret '
                             '"kubeadm-certs" in the "kube-system" Namespace\n')
    assert r.stderr == (
        "error execution phase control-plane-prepare/download-certs: error downloading certs: "
        'error downloading the secret: Secret "kubeadm-certs" was not found in the "kube-system" '
        "Namespace. This Secret might have expired. Please, run `kubeadm init phase upload-certs "
        "--upload-certs` on a control plane to generate a new one\n") + HINT

    fresh = cluster.kubeadm("init", "phase", "upload-certs", "--upload-certs").stdout.splitlines()[-1]
    assert fresh != stale
    r = cp2.kubeadm(*args, fresh)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "[download-certs] Saving the certificates to the folder: \"/etc/kubernetes/pki\"\n" in r.stdout
    assert r.stdout.endswith("""[etcd] Announced new etcd member joining to the existing etcd cluster
[etcd] Creating static Pod manifest for "etcd"
[etcd] Waiting for the new etcd member to join the cluster. This can take up to 40s
[mark-control-plane] Marking the node cp2 as control-plane by adding the labels: [node-role.kubernetes.io/control-plane node.kubernetes.io/exclude-from-external-load-balancers]
[mark-control-plane] Marking the node cp2 as control-plane by adding the taints [node-role.kubernetes.io/control-plane:NoSchedule]

This node has joined the cluster and a new control plane instance was created:

* Certificate signing request was sent to apiserver and approval was received.
* The Kubelet was informed of the new secure connection details.
* Control plane label and taint were applied to the new node.
* The Kubernetes control plane instances scaled up.
* A new etcd member was added to the local/stacked etcd cluster.

To start administering your cluster from this node, you need to run the following as a regular user:

\tmkdir -p $HOME/.kube
\tsudo cp -i /etc/kubernetes/admin.conf $HOME/.kube/config
\tsudo chown $(id -u):$(id -g) $HOME/.kube/config

Run 'kubectl get nodes' to see this node join the cluster.
""")
    # shared certs from the kubeadm-certs Secret, no super-admin.conf
    for f in ("pki/ca.key", "pki/sa.key", "pki/front-proxy-ca.key", "pki/etcd/ca.key",
              "pki/apiserver.crt", "admin.conf", "kubelet.conf", "manifests/etcd.yaml",
              "manifests/kube-apiserver.yaml"):
        assert cp2.path("/etc/kubernetes/" + f).is_file(), f
    assert not cp2.path("/etc/kubernetes/super-admin.conf").exists()
    assert cp2.path("/etc/kubernetes/pki/ca.crt").read_bytes() == \
        cluster.path("/etc/kubernetes/pki/ca.crt").read_bytes()

    # its own API server shares the state
    assert daemon_pid(cp2.root)
    direct = cp2.kubectl("--server", "https://%s:6443" % cp2.ip, "get", "nodes", "-o", "name")
    assert direct.returncode == 0, direct.stderr
    assert {"node/cp1", "node/cp2"} <= set(direct.stdout.split())
    assert re.search(r"^cp2 +Ready +control-plane ", cluster.kubectl("get", "nodes").stdout, re.M)
    cluster.cp2 = cp2


def test_certs_check_expiration_layout_on_a_joined_control_plane(cluster):
    cp2 = getattr(cluster, "cp2", None)
    assert cp2 is not None, "the control-plane join above did not finish"
    scenarios.certs_check_expiration_layout(cp2, initialised=False)


# ---------------------------------------------------------------------------
# kubectl

def _dns_nodes(cluster):
    r = cluster.kubectl("get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns", "-o", "json")
    assert r.returncode == 0, r.stderr
    return sorted(p["spec"]["nodeName"] for p in json.loads(r.stdout)["items"])


def test_kubectl_rollout_restart_spreads_coredns(cluster, worker):
    """kubeadm deploys CoreDNS's two replicas (constants.CoreDNSReplicas) while the first
    control plane is the only node; a rolling restart places them again, and its
    preferred anti-affinity (cmd/kubeadm/app/phases/addons/dns/manifests.go) spreads them."""
    assert _dns_nodes(cluster) == ["cp1", "cp1"]
    r = cluster.kubectl("rollout", "restart", "deployment/coredns", "-n", "kube-system")
    assert (r.returncode, r.stdout) == (0, "deployment.apps/coredns restarted\n"), r.stderr
    spread = _dns_nodes(cluster)
    assert len(set(spread)) == 2 and set(spread) <= {"cp1", "cp2", "w1"}, spread
    r = cluster.kubectl("rollout", "status", "deployment", "coredns", "-n", "kube-system",
                        "--timeout=60s")
    assert (r.returncode, r.stdout) == (0, 'deployment "coredns" successfully rolled out\n')
    r = cluster.kubectl("rollout", "restart", "deployment/nope", "-n", "kube-system")
    assert (r.returncode, r.stderr) == (
        1, 'Error from server (NotFound): deployments.apps "nope" not found\n')


def test_kubectl_drain_delete_apply_get(cluster, worker, lab):
    r = cluster.kubectl("drain", "w1", "--ignore-daemonsets", "--delete-emptydir-data", "--force")
    # the CoreDNS replica the rollout above put on w1 is evicted and placed elsewhere
    assert r.returncode == 0 and re.fullmatch(
        r"node/w1 cordoned\nevicting pod kube-system/(coredns-\w+-\w+)\npod/\1 evicted\n"
        r"node/w1 drained\n", r.stdout), r.stdout
    assert "w1" not in _dns_nodes(cluster)
    assert re.fullmatch(r"Warning: ignoring DaemonSet-managed Pods: kube-system/kube-proxy-\w{5}\n",
                        r.stderr)
    assert re.search(r"^w1 +Ready,SchedulingDisabled +<none> ",
                     cluster.kubectl("get", "nodes").stdout, re.M)

    manifest = lab.tmp / "m.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kos\n---\n"
                        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: cni\n"
                        "  namespace: kos\nspec:\n  template: {}\n---\n"
                        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
                        "metadata:\n  name: cni\n")
    r = cluster.kubectl("apply", "-f", str(manifest))
    assert (r.returncode, r.stdout) == (0, "namespace/kos created\ndaemonset.apps/cni created\n"
                                           "clusterrole.rbac.authorization.k8s.io/cni created\n")
    r = cluster.kubectl("apply", "-f", str(manifest))
    assert r.stdout == ("namespace/kos unchanged\ndaemonset.apps/cni unchanged\n"
                        "clusterrole.rbac.authorization.k8s.io/cni unchanged\n")
    manifest.write_text(manifest.read_text().replace("template: {}", "template: {x: 1}"))
    assert "daemonset.apps/cni configured\n" in cluster.kubectl("apply", "-f", str(manifest)).stdout
    r = cluster.kubectl("get", "-n", "kos", "daemonset", "cni")
    assert r.returncode == 0 and re.fullmatch(r"NAME   AGE\ncni    \d+s\n", r.stdout)
    r = cluster.kubectl("get", "-n", "kos", "ds", "nope")
    assert (r.returncode, r.stderr) == (1, 'Error from server (NotFound): daemonsets.apps "nope" '
                                           'not found\n')

    r = cluster.kubectl("delete", "node", "w1")
    assert (r.returncode, r.stdout) == (0, 'node "w1" deleted\n')
    r = cluster.kubectl("delete", "node", "w1")
    assert (r.returncode, r.stderr) == (1, 'Error from server (NotFound): nodes "w1" not found\n')


# ---------------------------------------------------------------------------
# reset
# https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-reset/

def test_reset_removes_files_and_is_idempotent(cluster, lab):
    w = lab.node("w-reset")
    tok = cluster.kubeadm("token", "create").stdout.strip()
    assert w.kubeadm("join", cluster.ip + ":6443", "--token", tok,
                     "--discovery-token-ca-cert-hash", _hash(cluster)).returncode == 0

    r = w.kubeadm("reset")
    assert r.returncode == 1
    assert r.stdout == "[reset] Are you sure you want to proceed? [y/N]: "
    assert re.fullmatch(KLOG_RE + re.escape("[reset] WARNING: Changes made to this host by "
                                            "'kubeadm init' or 'kubeadm join' will be reverted.")
                        + "\nerror execution phase preflight: won't proceed; the user didn't "
                        + re.escape("answer (Y|y) in order to continue\n" + HINT), r.stderr)
    assert w.path("/etc/kubernetes/kubelet.conf").exists()

    r = w.kubeadm("reset", "-f")
    assert r.returncode == 0
    assert r.stdout == ("[preflight] Running pre-flight checks\n"
                        "[reset] Deleted contents of the etcd data directory: /var/lib/etcd\n"
                        "[reset] Stopping the kubelet service\n"
                        '[reset] Unmounting mounted directories in "/var/lib/kubelet"\n'
                        "[reset] Deleting contents of directories: [/etc/kubernetes/manifests "
                        "/var/lib/kubelet /etc/kubernetes/pki]\n" + RESET_FILES + RESET_TAIL)
    assert re.fullmatch(KLOG_RE + re.escape("[reset] No kubeadm config, using etcd pod spec to "
                                            "get data directory") + "\n", r.stderr)
    left = sorted(str(p.relative_to(w.root)) for p in w.root.rglob("*") if p.is_file())
    assert left == ["etc/hostname"]
    assert re.search(r"^w-reset +NotReady +<none> ", cluster.kubectl("get", "nodes").stdout, re.M)

    again = w.kubeadm("reset", "-f")
    assert again.returncode == 0
    # /var/lib/etcd never existed on this worker, so kubeadm "cleans" it again (IsDirEmpty
    # fails) and prints the first reset's lines once more.
    assert again.stdout == r.stdout


def test_reset_control_plane_stops_its_api_server(cluster, lab):
    cp2 = getattr(cluster, "cp2", None)
    if cp2 is None:
        pytest.skip("needs the control-plane join test")
    pid = daemon_pid(cp2.root)
    r = cp2.kubeadm("reset", "-f")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(
        "[reset] Reading configuration from the cluster...\n"
        "[reset] FYI: You can look at this config file with 'kubectl -n kube-system get cm "
        "kubeadm-config -o yaml'\n[preflight] Running pre-flight checks\n"
        "[reset] Deleted contents of the etcd data directory: /var/lib/etcd\n")
    assert daemon_pid(cp2.root) is None and not alive(pid)
    assert not cp2.path("/etc/kubernetes/admin.conf").exists()
    nodes = cluster.kubectl("get", "nodes")
    assert nodes.returncode == 0
    assert re.search(r"^cp2 +NotReady +control-plane ", nodes.stdout, re.M)


# ---------------------------------------------------------------------------
# ECDSA and dry-run

ECDSA = "encryptionAlgorithm: ECDSA-P256\n"


def test_ecdsa_ca_hash_and_case_a_output(lab):
    cp = lab.node("ec1")
    cfg = lab.tmp / "ec1.yaml"
    cfg.write_text(init_config(cp.ip, cpe=False, extra_cluster=ECDSA))
    r = cp.kubeadm("init", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    ca = x509.load_pem_x509_certificate(cp.path("/etc/kubernetes/pki/ca.crt").read_bytes())
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey)
    h = ca_hash(cp.path("/etc/kubernetes/pki/ca.crt"))
    token, key = parse_init(r.stdout)
    assert key is None
    assert "[upload-certs] Skipping phase. Please see --upload-certs\n" in r.stdout
    assert r.stdout.endswith("""  https://kubernetes.io/docs/concepts/cluster-administration/addons/

Then you can join any number of worker nodes by running the following on each as root:

kubeadm join %s:6443 --token %s \\
\t--discovery-token-ca-cert-hash %s 
""" % (cp.ip, token, h))

    w = lab.node("ec-w1")
    r = w.kubeadm("join", cp.ip + ":6443", "--token", token, "--discovery-token-ca-cert-hash", h)
    assert r.returncode == 0, r.stderr


def test_dry_run_changes_no_file(lab):
    cp = lab.node("dry")
    cfg = lab.tmp / "dry.yaml"
    cfg.write_text(init_config(cp.ip, extra_cluster=ECDSA))
    r = cp.kubeadm("init", "--config", str(cfg), "--dry-run")
    assert r.returncode == 0, r.stderr
    m = re.search(r'\[certs\] Using certificateDir folder "(/etc/kubernetes/tmp/'
                  r'kubeadm-init-dryrun\d+)"', r.stdout)
    assert m
    assert "[preflight] Would pull the required images (like 'kubeadm config images pull')\n" in r.stdout
    assert ('[dryrun] Would write file "/etc/kubernetes/manifests/kube-apiserver.yaml" with '
            'content:\n\tapiVersion: v1\n') in r.stdout
    assert "  sudo cp -i %s/admin.conf $HOME/.kube/config\n" % m.group(1) in r.stdout
    top = sorted(str(p.relative_to(cp.root)) for p in cp.root.rglob("*")
                 if p.is_file() and "kubeadm-init-dryrun" not in str(p))
    assert top == ["etc/hostname"]
    assert daemon_pid(cp.root) is None


# ---------------------------------------------------------------------------
# kubeadm upgrade (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/):
# a 1.31.4 cluster of two control planes and a worker, kubeadm moved to 1.32.1 by its
# package (packages.json)

UP_HEAD = ('[upgrade] Reading configuration from the "kubeadm-config" ConfigMap in namespace '
           '"kube-system"...\n'
           "[upgrade] Use 'kubeadm init phase upload-config --config your-config.yaml' to "
           "re-upload it.\n")
PULL = ("[upgrade/preflight] Pulling images required for setting up a Kubernetes cluster\n"
        "[upgrade/preflight] This might take a minute or two, depending on the speed of your "
        "internet connection\n"
        "[upgrade/preflight] You can also perform this action beforehand using 'kubeadm config "
        "images pull'\n")
APPLY_PREFLIGHT = (UP_HEAD + "[upgrade/preflight] Running preflight checks\n"
                   "[upgrade] Running cluster health checks\n"
                   '[upgrade/preflight] You have chosen to upgrade the cluster version to "{v}"\n'
                   "[upgrade/versions] Cluster version: v1.31.4\n"
                   "[upgrade/versions] kubeadm version: v1.32.1\n")
COMPONENT_CERTS = {"etcd": ["etcd-server", "etcd-peer", "etcd-healthcheck-client"],
                   "kube-apiserver": ["apiserver", "apiserver-kubelet-client",
                                      "front-proxy-client", "apiserver-etcd-client"],
                   "kube-controller-manager": ["controller-manager.conf"],
                   "kube-scheduler": ["scheduler.conf"]}
BOOTSTRAP_TOKEN_LINES = """[upgrade/bootstrap-token] Configuring bootstrap token and cluster-info RBAC rules
[bootstrap-token] Configured RBAC rules to allow Node Bootstrap tokens to get nodes
[bootstrap-token] Configured RBAC rules to allow Node Bootstrap tokens to post CSRs in order for nodes to get long term certificate credentials
[bootstrap-token] Configured RBAC rules to allow the csrapprover controller automatically approve CSRs from a Node Bootstrap Token
[bootstrap-token] Configured RBAC rules to allow certificate rotation for all node client certificates in the cluster
"""
KUBELET_CONFIG_LINES = """[upgrade] Backing up kubelet config file to /etc/kubernetes/tmp/kubeadm-kubelet-config{N}/config.yaml
[kubelet-start] Writing kubelet configuration to file "/var/lib/kubelet/config.yaml"
[upgrade/kubelet-config] The kubelet configuration for this node was successfully upgraded!
"""
KUBELET_TMP_KLOG = (KLOG_RE.replace("[a-z_]+\\.go:\\d+", "postupgrade\\.go:117")
                    + r"Using temporary directory /etc/kubernetes/tmp/kubeadm-kubelet-config\d+ "
                    r"for kubelet config\. To override it set the environment variable "
                    r"KUBEADM_UPGRADE_DRYRUN_DIR\n")


def _pattern(text):
    """A regex for `text` with {N} (a random number) and {TS} (a timestamp) as wildcards."""
    rx = re.escape(text)
    return rx.replace(re.escape("{N}"), r"\d+").replace(
        re.escape("{TS}"), r"\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d")


def _staticpods(count, changed=True, etcd=True):
    """The [upgrade/staticpods] block of a real `kubeadm upgrade apply` for etcd and the three
    components."""
    text = '[upgrade/staticpods] Writing new Static Pod manifests to "/etc/kubernetes/tmp/kubeadm-upgraded-manifests{N}"\n'
    for comp in (["etcd"] if etcd else []) + ["kube-apiserver", "kube-controller-manager",
                                              "kube-scheduler"]:
        text += '[upgrade/staticpods] Preparing for "%s" upgrade\n' % comp
        if not changed:
            text += ("[upgrade/staticpods] Current and new manifests of %s are equal, skipping "
                     "upgrade\n" % comp)
        else:
            text += "".join("[upgrade/staticpods] Renewing %s certificate\n" % c
                            for c in COMPONENT_CERTS[comp])
            text += ('[upgrade/staticpods] Moving new manifest to "/etc/kubernetes/manifests/%s.yaml" '
                     'and backing up old manifest to "/etc/kubernetes/tmp/kubeadm-backup-manifests-'
                     '{TS}/%s.yaml"\n' % (comp, comp))
            text += ("[upgrade/staticpods] Waiting for the kubelet to restart the component\n"
                     "[upgrade/staticpods] This can take up to 5m0s\n"
                     "[apiclient] Found %d Pods for label selector component=%s\n"
                     '[upgrade/staticpods] Component "%s" upgraded successfully!\n'
                     % (count, comp, comp))
        if comp == "etcd":
            text += "[upgrade/etcd] Waiting for etcd to become available\n"
    return text


def _apply_output(staticpods, addons, cluster="v1.31.4"):
    return (APPLY_PREFLIGHT.format(v="v1.32.1").replace("v1.31.4", cluster) + PULL
            + '[upgrade/control-plane] Upgrading your static Pod-hosted control plane to version '
              '"v1.32.1" (timeout: 5m0s)...\n' + staticpods
            + "[upgrade/control-plane] The control plane instance for this node was successfully "
              "upgraded!\n"
              '[upload-config] Storing the configuration used in ConfigMap "kubeadm-config" in the '
              '"kube-system" Namespace\n'
              '[kubelet] Creating a ConfigMap "kubelet-config" in namespace kube-system with the '
              "configuration for the kubelets in the cluster\n"
              "[upgrad/kubeconfig] The kubeconfig files for this node were successfully upgraded!\n"
            + KUBELET_CONFIG_LINES + BOOTSTRAP_TOKEN_LINES + addons
            + '\n[upgrade] SUCCESS! A control plane node of your cluster was upgraded to "v1.32.1".\n'
              "\n[upgrade] Now please proceed with upgrading the rest of the nodes by following "
              "the right order.\n")


def _row(*cells):
    """A row of kubeadm's plan tables: tabwriter columns of the given widths."""
    return "".join(c.ljust(w) for c, w in cells[:-1]) + cells[-1][0] + "\n"


def _manifests(node):
    return {p.name: p.read_text() for p in node.path("/etc/kubernetes/manifests").iterdir()}


def _stored_version(node, server=None):
    args = ["get", "configmap", "kubeadm-config", "-n", "kube-system", "-o",
            "jsonpath={.data.ClusterConfiguration}"]
    r = node.kubectl(*(["--server", server] if server else []), *args)
    assert r.returncode == 0, r.stderr
    return re.search(r"^kubernetesVersion: (\S+)$", r.stdout, re.M).group(1)


def _node_versions(node):
    r = node.kubectl("get", "nodes", "-o", "json")
    assert r.returncode == 0, r.stderr
    return {n["metadata"]["name"]: n["status"]["nodeInfo"]["kubeletVersion"]
            for n in json.loads(r.stdout)["items"] if n["metadata"]["name"].startswith("up-")}


@pytest.fixture(scope="module")
def upgrade_cluster(lab):
    """up-cp1 (init), up-cp2 (control-plane join), up-w1 (worker), all v1.31.4 packages."""
    cp1, cp2, w1 = lab.node("up-cp1"), lab.node("up-cp2"), lab.node("up-w1")
    cfg = lab.tmp / "up-cp1.yaml"
    cfg.write_text(init_config(cp1.ip, extra_cluster=ECDSA))
    r = cp1.kubeadm("init", "--config", str(cfg), "--upload-certs")
    assert r.returncode == 0, r.stderr
    token, key = parse_init(r.stdout)
    join = ("join", cp1.ip + ":6443", "--token", token, "--discovery-token-ca-cert-hash",
            ca_hash(cp1.path("/etc/kubernetes/pki/ca.crt")))
    r = cp2.kubeadm(*join, "--control-plane", "--certificate-key", key)
    assert r.returncode == 0, r.stderr
    r = w1.kubeadm(*join)
    assert r.returncode == 0, r.stderr
    return cp1, cp2, w1


def test_upgrade_plan_offline_with_a_newer_kubeadm_package(upgrade_cluster):
    cp1, _, _ = upgrade_cluster
    assert cp1.kubeadm("version", "-o", "short").stdout == "v1.31.4\n"
    cp1.packages(kubeadm="v1.32.1", kubelet="v1.31.4", kubectl="v1.31.4")
    assert cp1.kubeadm("version", "-o", "short").stdout == "v1.32.1\n"

    cols, comp = (12, 10, 10), (26, 10, 11)
    expected = (
        "[preflight] Running pre-flight checks.\n"
        + UP_HEAD.replace("[upgrade]", "[upgrade/config]")
        + "[upgrade] Running cluster health checks\n"
        "[upgrade] Fetching available versions to upgrade to\n"
        "[upgrade/versions] Cluster version: 1.31.4\n"
        "[upgrade/versions] kubeadm version: v1.32.1\n"
        "[upgrade/versions] Target version: v1.32.1\n"
        "[upgrade/versions] Latest version in the v1.31 series: v1.32.1\n"
        "\n"
        "Components that must be upgraded manually after you have upgraded the control plane "
        "with 'kubeadm upgrade apply':\n"
        + _row(*zip(("COMPONENT", "NODE", "CURRENT"), cols), ("TARGET",))
        + "".join(_row(*zip(("kubelet", n, "v1.31.4"), cols), ("v1.32.1",))
                  for n in ("up-cp1", "up-cp2", "up-w1"))
        + "\nUpgrade to the latest version in the v1.31 series:\n\n"
        + _row(*zip(("COMPONENT", "NODE", "CURRENT"), comp), ("TARGET",))
        + "".join(_row(*zip((c, n, "v1.31.4"), comp), ("v1.32.1",))
                  for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
                  for n in ("up-cp1", "up-cp2"))
        + _row(*zip(("kube-proxy", "", "1.31.4"), comp), ("v1.32.1",))
        + _row(*zip(("CoreDNS", "", "v1.11.3"), comp), ("v1.11.3",))
        + "".join(_row(*zip(("etcd", n, "3.5.15-0"), comp), ("3.5.16-0",))
                  for n in ("up-cp1", "up-cp2"))
        + "\nYou can now apply the upgrade by executing the following command:\n\n"
        "\tkubeadm upgrade apply v1.32.1\n\n" + "_" * 69 + "\n\n\n"
        "The table below shows the current state of component configs as understood by this "
        "version of kubeadm.\n"
        'Configs that have a "yes" mark in the "MANUAL UPGRADE REQUIRED" column require manual '
        "config upgrade or\n"
        "resetting to kubeadm defaults before a successful upgrade can be performed. The version "
        "to manually\n"
        'upgrade to is denoted in the "PREFERRED VERSION" column.\n\n'
        "API GROUP                 CURRENT VERSION   PREFERRED VERSION   MANUAL UPGRADE REQUIRED\n"
        "kubeproxy.config.k8s.io   v1alpha1          v1alpha1            no\n"
        "kubelet.config.k8s.io     v1beta1           v1beta1             no\n"
        + "_" * 69 + "\n\n")
    r = cp1.kubeadm("upgrade", "plan")
    assert r.returncode == 0, r.stderr
    assert r.stdout == expected
    # no internet: kubeadm falls back to its own version for both labels
    # (https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/util/version.go)
    fetch = (KLOG_RE + r'could not fetch a Kubernetes version from the internet: unable to get '
             r'URL "https://dl\.k8s\.io/release/%s\.txt": .+\n' + KLOG_RE
             + r"falling back to the local client version: v1\.32\.1\n")
    assert re.fullmatch(fetch % "stable" + fetch % r"stable-1\.31", r.stderr), r.stderr
    assert "version.go:109] " in r.stderr
    # a version given to plan answers every label: no lookup at all
    r = cp1.kubeadm("upgrade", "plan", "v1.32.1")
    assert (r.returncode, r.stdout, r.stderr) == (0, expected, "")


def test_upgrade_apply_refuses_a_skipped_minor_and_changes_nothing(upgrade_cluster):
    cp1, _, _ = upgrade_cluster
    before = _manifests(cp1)
    r = cp1.kubeadm("upgrade", "apply", "v1.33.0", "--yes", "--force")
    assert r.returncode == 1
    assert r.stdout == APPLY_PREFLIGHT.format(v="v1.33.0")
    assert r.stderr == (
        "error execution phase preflight: the version argument is invalid due to these fatal "
        "errors:\n\n"
        '\t- Specified version to upgrade to "v1.33.0" is too high; kubeadm can upgrade only 1 '
        "minor version at a time\n"
        '\t- Specified version to upgrade to "v1.33.0" is at least one minor release higher than '
        "the kubeadm minor release (33 > 32). Such an upgrade is not supported\n"
        "\nPlease fix the misalignments highlighted above and try upgrading again\n" + HINT)
    # a skippable error (the real v1.32.1 run of D.2.4)
    r = cp1.kubeadm("upgrade", "apply", "v1.31.5", "-y")
    assert r.returncode == 1
    assert r.stderr == (
        "error execution phase preflight: the version argument is invalid due to these errors:\n"
        "\n\t- Kubeadm version v1.32.1 can only be used to upgrade to Kubernetes version 1.32\n"
        "\nCan be bypassed if you pass the --force flag\n" + HINT)
    assert _manifests(cp1) == before
    assert not cp1.path("/etc/kubernetes/tmp").exists()
    assert _stored_version(cp1) == "v1.31.4"


def test_upgrade_apply_without_yes_refuses_on_eof(upgrade_cluster):
    cp1, _, _ = upgrade_cluster
    before = _manifests(cp1)
    r = cp1.kubeadm("upgrade", "apply", "v1.32.1")
    assert r.returncode == 1
    assert r.stdout == (APPLY_PREFLIGHT.format(v="v1.32.1")
                        + "[upgrade] Are you sure you want to proceed? [y/N]: ")
    assert r.stderr == ("error execution phase preflight: won't proceed; the user didn't answer "
                        "(Y|y) in order to continue\n" + HINT)
    assert _manifests(cp1) == before and _stored_version(cp1) == "v1.31.4"


def test_upgrade_apply_moves_the_first_control_plane_then_skips_equal_manifests(upgrade_cluster):
    cp1, cp2, _ = upgrade_cluster
    old = _manifests(cp1)
    skip_addons = ("[upgrade/addon] Skipping upgrade of addons because control plane instances "
                   "[up-cp2] have not been upgraded\n") * 2
    r = cp1.kubeadm("upgrade", "apply", "v1.32.1", "--yes")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(_pattern(_apply_output(_staticpods(2), skip_addons)), r.stdout), r.stdout
    assert re.fullmatch(KUBELET_TMP_KLOG, r.stderr), r.stderr

    manifests = cp1.path("/etc/kubernetes/manifests")
    for comp in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert "image: registry.k8s.io/%s:v1.32.1\n" % comp in (manifests / (comp + ".yaml")).read_text()
    assert "image: registry.k8s.io/etcd:3.5.16-0\n" in (manifests / "etcd.yaml").read_text()
    tmp = cp1.path("/etc/kubernetes/tmp")
    backup = [p for p in tmp.iterdir() if p.name.startswith("kubeadm-backup-manifests-")]
    assert len(backup) == 1
    assert {p.name: p.read_text() for p in backup[0].iterdir()} == old
    assert [p for p in tmp.iterdir() if p.name.startswith("kubeadm-backup-etcd-")][0].joinpath(
        "etcd/member/snap/db").is_file()
    assert not [p for p in tmp.iterdir() if p.name.startswith("kubeadm-upgraded-manifests")]
    assert [p for p in tmp.iterdir() if p.name.startswith("kubeadm-kubelet-config")][0].joinpath(
        "config.yaml").is_file()
    # the new kubeadm-config, replicated to the second control plane's API server
    assert _stored_version(cp1) == "v1.32.1"
    assert _stored_version(cp1, server="https://%s:6443" % cp2.ip) == "v1.32.1"
    # the kubelets are not touched: upgrading them is a step of its own in
    # https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/
    assert set(_node_versions(cp1).values()) == {"v1.31.4"}

    # again: every manifest is equal, nothing is renewed or moved
    new = _manifests(cp1)
    r = cp1.kubeadm("upgrade", "apply", "v1.32.1", "-y")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(_pattern(_apply_output(_staticpods(2, changed=False), skip_addons,
                                               cluster="v1.32.1")), r.stdout), r.stdout
    assert _manifests(cp1) == new
    backups = sorted(p for p in tmp.iterdir() if p.name.startswith("kubeadm-backup-manifests-"))
    assert len(backups) == 2 and not list(backups[1].iterdir())


def test_upgrade_node_on_the_last_control_plane_applies_the_addons(upgrade_cluster):
    cp1, cp2, _ = upgrade_cluster
    cp2.packages(kubeadm="v1.32.1", kubelet="v1.31.4", kubectl="v1.31.4")
    r = cp2.kubeadm("upgrade", "node")
    assert r.returncode == 0, r.stderr
    expected = (UP_HEAD + "[upgrade/preflight] Running pre-flight checks\n" + PULL
                + '[upgrade/control-plane] Upgrading your Static Pod-hosted control plane instance '
                  'to version "v1.32.1"...\n' + _staticpods(2)
                + "[upgrade/control-plane] The control plane instance for this node was "
                  "successfully upgraded!\n"
                  "[upgrade/kubeconfig] The kubeconfig files for this node were successfully "
                  "upgraded!\n" + KUBELET_CONFIG_LINES
                + "[addons] Applied essential addon: CoreDNS\n"
                  "[addons] Applied essential addon: kube-proxy\n")
    assert re.fullmatch(_pattern(expected), r.stdout), r.stdout
    assert re.fullmatch(KUBELET_TMP_KLOG, r.stderr), r.stderr
    etcd = cp2.path("/etc/kubernetes/manifests/etcd.yaml").read_text()
    assert "image: registry.k8s.io/etcd:3.5.16-0\n" in etcd
    assert "--initial-cluster-state=existing" in etcd and "up-cp1=https://" in etcd

    # a re-run changes nothing
    r = cp2.kubeadm("upgrade", "node")
    assert r.returncode == 0, r.stderr
    assert "[upgrade/staticpods] Current and new manifests of kube-apiserver are equal, skipping " \
           "upgrade\n" in r.stdout and "Renewing" not in r.stdout

    # every control plane runs v1.32.1: nothing left to plan (output ends after the versions)
    r = cp1.kubeadm("upgrade", "plan", "v1.32.1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith("[upgrade/versions] Cluster version: 1.32.1\n"
                             "[upgrade/versions] kubeadm version: v1.32.1\n"
                             "[upgrade/versions] Target version: v1.32.1\n"
                             "[upgrade/versions] Latest version in the v1.32 series: v1.32.1\n\n")


def test_upgrade_node_on_a_worker(upgrade_cluster):
    _, _, w1 = upgrade_cluster
    w1.packages(kubeadm="v1.32.1", kubelet="v1.31.4", kubectl="v1.31.4")
    old = w1.path("/var/lib/kubelet/config.yaml").read_text()
    expected = (UP_HEAD + "[upgrade/preflight] Running pre-flight checks\n"
                "[upgrade/preflight] Skipping prepull. Not a control plane node.\n"
                "[upgrade/control-plane] Skipping phase. Not a control plane node.\n"
                "[upgrade/kubeconfig] Skipping phase. Not a control plane node.\n"
                + KUBELET_CONFIG_LINES
                + "[upgrade/addon] Skipping the addon/coredns phase. Not a control plane node.\n"
                  "[upgrade/addon] Skipping the addon/kube-proxy phase. Not a control plane node.\n")
    for _ in range(2):  # idempotent
        r = w1.kubeadm("upgrade", "node")
        assert r.returncode == 0, r.stderr
        assert re.fullmatch(_pattern(expected), r.stdout), r.stdout
        assert re.fullmatch(KUBELET_TMP_KLOG, r.stderr), r.stderr
    backups = list(w1.path("/etc/kubernetes/tmp").glob("kubeadm-kubelet-config*/config.yaml"))
    assert len(backups) == 2 and all(b.read_text() == old for b in backups)
    assert not w1.path("/etc/kubernetes/manifests/kube-apiserver.yaml").exists()


def test_upgrade_apply_version_policy_force_and_dry_run(upgrade_cluster):
    cp1, _, _ = upgrade_cluster
    before, tmp_before = _manifests(cp1), sorted(os.listdir(cp1.path("/etc/kubernetes/tmp")))
    preflight = APPLY_PREFLIGHT.replace("v1.31.4", "v1.32.1")
    r = cp1.kubeadm("upgrade", "apply", "v1.30.0", "-y")
    assert (r.returncode, r.stdout) == (1, preflight.format(v="v1.30.0"))
    assert r.stderr == (
        "error execution phase preflight: the version argument is invalid due to these fatal "
        'errors:\n\n\t- Specified version to upgrade to "v1.30.0" is equal to or lower than the '
        'minimum supported version "v1.32.1". Please specify a higher version to upgrade to\n'
        '\t- Specified version to downgrade to "v1.30.0" is too low; kubeadm can downgrade only 1 '
        "minor version at a time\n\nPlease fix the misalignments highlighted above and try "
        "upgrading again\n" + HINT)
    # --force turns skippable errors into a notice; --dry-run writes nothing
    r = cp1.kubeadm("upgrade", "apply", "1.32.2-rc.1", "--force", "--dry-run")
    assert r.returncode == 0, r.stderr
    errors = ('\t- Specified version to upgrade to "v1.32.2-rc.1" is higher than the kubeadm '
              'version "v1.32.1". Upgrade kubeadm first using the tool you used to install kubeadm\n'
              '\t- Specified version to upgrade to "v1.32.2-rc.1" is an unstable version and such '
              "upgrades weren't allowed via setting the --allow-*-upgrades flags\n")
    assert r.stdout.startswith(
        preflight.format(v="v1.32.2-rc.1")
        + "[upgrade/preflight] Found 2 potential version compatibility errors but skipping since "
          "the --force flag is set: \n\n" + errors
        + "[upgrade/preflight] Would pull the required images (like 'kubeadm config images pull')\n"
          '[dryrun] Would upgrade your static Pod-hosted control plane to version "v1.32.2-rc.1"'
          '[dryrun] Would write file "/etc/kubernetes/manifests/kube-apiserver.yaml" with content:\n'
          "\tapiVersion: v1\n")
    assert "\t    image: registry.k8s.io/kube-scheduler:v1.32.2-rc.1\n" in r.stdout
    assert r.stdout.endswith("[upgrade/successful] Finished dryrunning successfully!\n")
    assert _manifests(cp1) == before and _stored_version(cp1) == "v1.32.1"
    assert sorted(os.listdir(cp1.path("/etc/kubernetes/tmp"))) == tmp_before


def test_node_version_follows_the_kubelet_package_after_a_restart(upgrade_cluster):
    cp1, _, w1 = upgrade_cluster
    assert _node_versions(cp1) == {"up-cp1": "v1.31.4", "up-cp2": "v1.31.4", "up-w1": "v1.31.4"}
    w1.packages(kubeadm="v1.32.1", kubelet="v1.32.1", kubectl="v1.32.1")
    assert _node_versions(cp1)["up-w1"] == "v1.31.4"  # installed, not restarted yet
    r = w1.run("kubeadm-standin-kubelet-restart")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    assert _node_versions(cp1) == {"up-cp1": "v1.31.4", "up-cp2": "v1.31.4", "up-w1": "v1.32.1"}
    r = w1.run("kubectl", "version", "--client")
    assert r.stdout.startswith("Client Version: v1.32.1\n")
    # the plan now lists the kubelets by version (two versions: every row is shown)
    r = cp1.kubeadm("upgrade", "plan", "v1.32.2")
    assert r.returncode == 0, r.stderr
    assert ("kubelet     up-cp1    v1.31.4   v1.32.2\nkubelet     up-cp2    v1.31.4   v1.32.2\n"
            "kubelet     up-w1     v1.32.1   v1.32.2\n") in r.stdout
    assert "Note: Before you can perform this upgrade, you have to update kubeadm to v1.32.2.\n" \
        in r.stdout
    # a node that never joined: the kubelet would crash-loop, nothing to report
    r = cp1.run("kubeadm-standin-kubelet-restart", KOS_STANDIN_ROOT=str(w1.root / "nowhere"))
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
