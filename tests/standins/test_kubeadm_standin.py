"""Tests of the kubeadm/kubectl stand-ins against the CLI reference (PART B).

Every simulated node gets its own root under tmp_path and its own loopback address;
the stand-in API servers started here are killed by pidfile when the module ends.
"""

import hashlib
import os
import random
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

BIN = Path(__file__).resolve().parent / "bin"
HINT = "To see the stack trace of this error execute with --v=5 or higher\n"
PIDFILE = "var/run/kos-standin-apiserver.pid"
MARKER = b"kos-standin-apiserver"

RESET_TAIL = """
The reset process does not clean CNI configuration. To do so, you must remove /etc/cni/net.d

The reset process does not reset or clean up iptables rules or IPVS tables.
If you wish to reset iptables, you must do so manually by using the "iptables" command.

If your cluster was setup to utilize IPVS, run ipvsadm --clear (or similar)
to reset your system's IPVS tables.

The reset process does not clean your kubeconfig files and you must remove them manually.
Please, check the contents of the $HOME/.kube/config file.
"""
RESET_FILES = ("[reset] Deleting files: [/etc/kubernetes/admin.conf /etc/kubernetes/super-admin.conf "
               "/etc/kubernetes/kubelet.conf /etc/kubernetes/bootstrap-kubelet.conf "
               "/etc/kubernetes/controller-manager.conf /etc/kubernetes/scheduler.conf]\n")
TOKEN_RE = r"[a-z0-9]{6}\.[a-z0-9]{16}"
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
    """The B.5 hash, computed independently of the stand-in."""
    cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


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

    # B.9, first control plane
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
    # v1.34 prints an "error: " prefix (B.1.1)
    r = cluster.kubeadm("token", "delete", KOS_STANDIN_KUBE_VERSION="v1.34.0")
    assert r.returncode == 1
    assert r.stderr.startswith("error: missing argument; 'token delete' is missing token of form")


def test_version(cluster):
    assert cluster.kubeadm("version", "-o", "short").stdout == "v1.31.4\n"
    assert cluster.kubeadm("version", "-o", "short",
                           KOS_STANDIN_KUBE_VERSION="v1.32.2").stdout == "v1.32.2\n"
    assert cluster.kubeadm("version").stdout.startswith(
        'kubeadm version: &version.Info{Major:"1", Minor:"31", GitVersion:"v1.31.4", ')


# ---------------------------------------------------------------------------
# certificates (D.6.1)

EXPIRY_ROW = r"[A-Z][a-z]{2} \d\d, \d{4} \d\d:\d\d UTC"


def test_certs_check_expiration_layout(cluster):
    r = cluster.kubeadm("certs", "check-expiration")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    lines = r.stdout.split("\n")
    assert lines[:3] == [
        '[check-expiration] Reading configuration from the "kubeadm-config" ConfigMap in '
        'namespace "kube-system"...',
        "[check-expiration] Use 'kubeadm init phase upload-config kubeadm --config "
        "your-config-file' to re-upload it.",
        "",
    ]
    # one tabwriter (10, 4, 3): the widest first cell is apiserver-kubelet-client (24 + 3)
    assert lines[3] == ("CERTIFICATE                EXPIRES                  RESIDUAL TIME   "
                        "CERTIFICATE AUTHORITY   EXTERNALLY MANAGED")
    names = [line.split()[0] for line in lines[4:15]]
    assert names == ["admin.conf", "apiserver", "apiserver-etcd-client",
                     "apiserver-kubelet-client", "controller-manager.conf",
                     "etcd-healthcheck-client", "etcd-peer", "etcd-server",
                     "front-proxy-client", "scheduler.conf", "super-admin.conf"]
    assert re.fullmatch(r"apiserver {18}%s   36[45]d {12}ca {22}no {6}" % EXPIRY_ROW,
                        lines[5]), repr(lines[5])
    assert lines[15:17] == ["", "CERTIFICATE AUTHORITY   EXPIRES                  "
                                "RESIDUAL TIME   EXTERNALLY MANAGED"]
    assert re.fullmatch(r"etcd-ca {17}%s   9y {14}no {6}" % EXPIRY_ROW, lines[18]), lines[18]
    assert lines[20:] == [""]


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
    assert lines[3] == "%-37s" % "!MISSING! admin.conf"  # a tab-terminated cell is padded
    # and so does the CA table's: "!MISSING! front-proxy-ca" (24 + 3)
    assert re.fullmatch(r"ca {25}%s   1d {14}no {6}" % EXPIRY_ROW, lines[16]), lines[16]
    assert lines[17] == "%-27s" % "!MISSING! etcd-ca"


RENEWED = """[renew] Reading configuration from the "kubeadm-config" ConfigMap in namespace "kube-system"...
[renew] Use 'kubeadm init phase upload-config kubeadm --config your-config-file' to re-upload it.

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
# tokens (B.4)

def test_token_create_list_delete(cluster):
    tok = "qw12er.0123456789qwerty"
    r = cluster.kubeadm("token", "create", tok, "--ttl", "2h", "--description", "kos test")
    assert (r.returncode, r.stdout, r.stderr) == (0, tok + "\n", "")
    forever = "zz9yx8.0123456789abcdef"
    assert cluster.kubeadm("token", "create", forever, "--ttl", "0").returncode == 0
    r = cluster.kubeadm("token", "create", tok)
    assert (r.returncode, r.stderr) == (1, 'a token with id "qw12er" already exists\n' + HINT)

    r = cluster.kubeadm("token", "list")
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0] == ("TOKEN                     TTL         EXPIRES                USAGES     "
                        "              DESCRIPTION                                                "
                        "EXTRA GROUPS")
    groups = "system:bootstrappers:kubeadm:default-node-token"
    row = [x for x in lines if x.startswith(tok)][0]
    assert re.fullmatch(r"%s   1h          \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ   authentication,signing"
                        r"   kos test {48}   %s" % (re.escape(tok), groups), row)
    assert ("%s   <forever>   <never>   authentication,signing   <none>%s   %s"
            % (forever, " " * 50, groups)) in lines
    proxy = [x for x in lines if "Proxy for managing TTL for the kubeadm-certs secret" in x]
    assert proxy and re.fullmatch(r"%s   1h          \S{20}   <none>                   Proxy for "
                                  r"managing TTL for the kubeadm-certs secret        <none>"
                                  % TOKEN_RE, proxy[0])

    r = cluster.kubeadm("token", "delete", tok)
    assert (r.returncode, r.stdout) == (0, 'bootstrap token "qw12er" deleted\n')
    assert tok not in cluster.kubeadm("token", "list").stdout
    r = cluster.kubeadm("token", "delete", "qw12er")
    assert (r.returncode, r.stderr) == (1, 'failed to delete bootstrap token "qw12er": secrets '
                                           '"bootstrap-token-qw12er" not found\n' + HINT)

    r = cluster.kubeadm("token", "create", "--print-join-command")
    h = ca_hash(cluster.path("/etc/kubernetes/pki/ca.crt"))
    assert re.fullmatch(r"kubeadm join %s:6443 --token %s --discovery-token-ca-cert-hash %s \n"
                        % (re.escape(cluster.ip), TOKEN_RE, h), r.stdout)
    r = cluster.kubeadm("token", "create", "--certificate-key", "ab" * 32)
    assert (r.returncode, r.stderr) == (1, "cannot use --certificate-key without "
                                           "--print-join-command\n" + HINT)


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
# join failures (B.6.3)

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
    assert 1.5 <= elapsed < 10
    assert not w.path("/etc/kubernetes/kubelet.conf").exists()


def test_join_with_wrong_or_malformed_ca_hash(cluster, lab):
    w = lab.node("w-hash")
    tok = cluster.kubeadm("token", "create").stdout.strip()
    r = w.kubeadm("join", cluster.ip + ":6443", "--token", tok,
                  "--discovery-token-ca-cert-hash", "sha256:" + "0" * 64)
    assert r.returncode == 1
    assert r.stderr == ("error execution phase preflight: couldn't validate the identity of the "
                        "API Server: cluster CA found in cluster-info ConfigMap is invalid: none "
                        'of the public keys "%s" are pinned\n' % _hash(cluster)) + HINT
    r = w.kubeadm("join", cluster.ip + ":6443", "--token", tok,
                  "--discovery-token-ca-cert-hash", "sha256:" + "a" * 62)
    assert r.stderr == ("error execution phase preflight: couldn't validate the identity of the "
                        "API Server: invalid discovery token CA certificate hash: invalid hash "
                        '"sha256:%s", expected a 32 byte SHA-256 hash, found 31 bytes\n'
                        % ("a" * 62)) + HINT
    r = w.kubeadm("join", cluster.ip + ":6443", "--token", tok)
    assert r.stderr == ('discovery.bootstrapToken: Invalid value: "": using token-based discovery '
                        'without caCertHashes can be unsafe. Set unsafeSkipCAVerification as true '
                        'in your kubeadm config file or pass '
                        '--discovery-token-unsafe-skip-ca-verification flag to continue\n') + HINT


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
# successful joins (B.6.2, B.9)

WORKER_RE = r"""\[preflight\] Running pre-flight checks
\[preflight\] Reading configuration from the "kubeadm-config" ConfigMap in namespace "kube-system"\.\.\.
\[preflight\] Use 'kubeadm init phase upload-config --config your-config\.yaml' to re-upload it\.
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
    assert nodes.stdout.splitlines()[0] == "NAME   STATUS   ROLES           AGE   VERSION"
    assert re.search(r"^w1     Ready    <none>          \d+s +v1\.31\.4$", nodes.stdout, re.M)

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

    up = cluster.kubeadm("init", "phase", "upload-certs", "--upload-certs",
                         KOS_STANDIN_CERT_KEY_TTL="1")
    assert up.returncode == 0
    lines = up.stdout.splitlines()
    assert lines[:2] == ['[upload-certs] Storing the certificates in Secret "kubeadm-certs" in '
                         'the "kube-system" Namespace', "[upload-certs] Using certificate key:"]
    stale = lines[-1]
    assert re.fullmatch(r"[0-9a-f]{64}", stale)

    wrong = cp2.kubeadm(*args, "ab" * 32)
    assert wrong.returncode == 1
    assert wrong.stderr == ("error execution phase control-plane-prepare/download-certs: error "
                            "downloading certs: error decoding secret data with provided key: "
                            "cipher: message authentication failed\n" + HINT)

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
    # B.9: shared certs from the Secret, no super-admin.conf
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


# ---------------------------------------------------------------------------
# kubectl

def test_kubectl_drain_delete_apply_get(cluster, worker, lab):
    r = cluster.kubectl("drain", "w1", "--ignore-daemonsets", "--delete-emptydir-data", "--force")
    assert (r.returncode, r.stdout) == (0, "node/w1 cordoned\nnode/w1 drained\n")
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
# reset (B.7)

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
    # /var/lib/etcd never existed on this worker, so kubeadm "cleans" it again (IsDirEmpty fails)
    assert again.stdout == ("[preflight] Running pre-flight checks\n"
                            "[reset] Deleted contents of the etcd data directory: /var/lib/etcd\n"
                            "[reset] Stopping the kubelet service\n"
                            '[reset] Unmounting mounted directories in "/var/lib/kubelet"\n'
                            "[reset] Deleting contents of directories: [/etc/kubernetes/manifests "
                            "/var/lib/kubelet /etc/kubernetes/pki]\n" + RESET_FILES + RESET_TAIL)


def test_reset_control_plane_stops_its_api_server(cluster, lab):
    cp2 = getattr(cluster, "cp2", None)
    if cp2 is None:
        pytest.skip("needs the control-plane join test")
    pid = daemon_pid(cp2.root)
    r = cp2.kubeadm("reset", "-f")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(
        '[reset] Reading configuration from the "kubeadm-config" ConfigMap in namespace '
        '"kube-system"...\n'
        "[reset] Use 'kubeadm init phase upload-config --config your-config.yaml' to re-upload "
        "it.\n[preflight] Running pre-flight checks\n"
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
