"""
Scenarios of kubeadm's command-line behaviour that run against any kubeadm: the
stand-in (tests/standins/test_kubeadm_standin.py) and the real binary on the rehearsal
cloud's kubeadm cluster (tests/e2e/test_standins_match_real.py), so the stand-in is held
to the real thing with the very same assertions.

``node`` offers ``kubeadm(*args)`` (a finished process: returncode, stdout, stderr),
``read(path)`` (bytes of a file on the node), ``write(path, text)`` and ``remove(path)``; ``endpoint`` is the address the node's join
commands name (its controlPlaneEndpoint).
"""

import hashlib
import re

from cryptography import x509
from cryptography.hazmat.primitives import serialization

HINT = "To see the stack trace of this error execute with --v=5 or higher\n"
TOKEN_RE = r"[a-z0-9]{6}\.[a-z0-9]{16}"
EXPIRY_ROW = r"[A-Z][a-z]{2} \d\d, \d{4} \d\d:\d\d UTC"


def ca_hash(pem):
    """The --discovery-token-ca-cert-hash of a CA certificate (sha256 over its public key info,
    as https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-join/ defines it),
    computed independently of any kubeadm."""
    cert = x509.load_pem_x509_certificate(pem)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def version(node, want="v1.31.4"):
    assert node.kubeadm("version", "-o", "short").stdout == want + "\n"
    major, minor = want.lstrip("v").split(".")[:2]
    assert node.kubeadm("version").stdout.startswith(
        f'kubeadm version: &version.Info{{Major:"{major}", Minor:"{minor}", '
        f'GitVersion:"{want}", ')


def certs_check_expiration_layout(node, initialised=True):
    """``initialised``: the node ran ``kubeadm init``. Only that node holds super-admin.conf
    (1.29+); a control plane that joined lists it as missing, and that wider cell widens
    the whole first column."""
    r = node.kubeadm("certs", "check-expiration")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    lines = r.stdout.split("\n")
    # as v1.31 prints them (cmd/kubeadm/app/util/config/cluster.go)
    assert lines[:3] == [
        "[check-expiration] Reading configuration from the cluster...",
        "[check-expiration] FYI: You can look at this config file with 'kubectl -n "
        "kube-system get cm kubeadm-config -o yaml'",
        "",
    ]
    # one tabwriter (10, 4, 3): the widest first cell is apiserver-kubelet-client (24 + 3),
    # or on a joined node "!MISSING! super-admin.conf" (26 + 3)
    first = 27 if initialised else 29
    assert lines[3] == ("%-*s%-25s%-16s%-24sEXTERNALLY MANAGED"
                        % (first, "CERTIFICATE", "EXPIRES", "RESIDUAL TIME",
                           "CERTIFICATE AUTHORITY")), repr(lines[3])
    names = [line.split()[0] for line in lines[4:15]]
    assert names == ["admin.conf", "apiserver", "apiserver-etcd-client",
                     "apiserver-kubelet-client", "controller-manager.conf",
                     "etcd-healthcheck-client", "etcd-peer", "etcd-server",
                     "front-proxy-client", "scheduler.conf",
                     "super-admin.conf" if initialised else "!MISSING!"]
    assert re.fullmatch(r"apiserver {%d}%s   36[45]d {12}ca {22}no {6}" % (first - 9, EXPIRY_ROW),
                        lines[5]), repr(lines[5])
    if not initialised:
        # the row's empty cells are padded to their columns too
        assert lines[14] == "%-*s%-25s%-16s%-24s" % (first, "!MISSING! super-admin.conf",
                                                     "", "", ""), repr(lines[14])
    assert lines[15:17] == ["", "CERTIFICATE AUTHORITY   EXPIRES                  "
                                "RESIDUAL TIME   EXTERNALLY MANAGED"]
    assert re.fullmatch(r"etcd-ca {17}%s   9y {14}no {6}" % EXPIRY_ROW, lines[18]), lines[18]
    assert lines[20:] == [""]


def _tokens(node):
    return set(re.findall(r"^(%s) " % TOKEN_RE, node.kubeadm("token", "list").stdout, re.M))


def token_create_list_delete(node, endpoint, config):
    """``config``: the node's kubeadm configuration file (for upload-certs)."""
    before = _tokens(node)
    # the certificates uploaded for control planes to join: a hidden token owns them
    r = node.kubeadm("init", "phase", "upload-certs", "--upload-certs", "--config", config)
    assert r.returncode == 0 and re.search(r"\[upload-certs\] Using certificate key:\n"
                                           r"[0-9a-f]{64}\n", r.stdout), r.stderr
    tok = "qw12er.0123456789qwerty"
    r = node.kubeadm("token", "create", tok, "--ttl", "2h", "--description", "kos test")
    assert (r.returncode, r.stdout, r.stderr) == (0, tok + "\n", "")
    forever = "zz9yx8.0123456789abcdef"
    assert node.kubeadm("token", "create", forever, "--ttl", "0").returncode == 0
    try:
        r = node.kubeadm("token", "create", tok)
        assert (r.returncode, r.stderr) == (1, 'a token with id "qw12er" already exists\n' + HINT)

        r = node.kubeadm("token", "list")
        assert r.returncode == 0 and r.stderr == ""
        lines = r.stdout.splitlines()
        assert lines[0] == ("TOKEN                     TTL         EXPIRES                USAGES "
                            "                  DESCRIPTION                                        "
                            "        EXTRA GROUPS")
        groups = "system:bootstrappers:kubeadm:default-node-token"
        row = [x for x in lines if x.startswith(tok)][0]
        assert re.fullmatch(r"%s   1h          \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ   "
                            r"authentication,signing   kos test {48}   %s"
                            % (re.escape(tok), groups), row), row
        assert ("%s   <forever>   <never>   authentication,signing   <none>%s   %s"
                % (forever, " " * 50, groups)) in lines
        proxy = [x for x in lines if "Proxy for managing TTL for the kubeadm-certs secret" in x]
        assert proxy and re.fullmatch(r"%s   1h          \S{20}   <none>                   Proxy "
                                      r"for managing TTL for the kubeadm-certs secret        "
                                      r"<none>" % TOKEN_RE, proxy[0]), proxy

        r = node.kubeadm("token", "delete", tok)
        assert (r.returncode, r.stdout) == (0, 'bootstrap token "qw12er" deleted\n')
        assert tok not in node.kubeadm("token", "list").stdout
        r = node.kubeadm("token", "delete", "qw12er")
        assert (r.returncode, r.stderr) == (1, 'failed to delete bootstrap token "qw12er": '
                                               'secrets "bootstrap-token-qw12er" not found\n'
                                               + HINT)

        r = node.kubeadm("token", "create", "--print-join-command")
        h = ca_hash(node.read("/etc/kubernetes/pki/ca.crt"))
        assert re.fullmatch(r"kubeadm join %s --token %s --discovery-token-ca-cert-hash %s \n"
                            % (re.escape(endpoint), TOKEN_RE, h), r.stdout), r.stdout
        joiner = re.search(TOKEN_RE, r.stdout).group(0)
        node.kubeadm("token", "delete", joiner)
        r = node.kubeadm("token", "create", "--certificate-key", "ab" * 32)
        assert (r.returncode, r.stderr) == (1, "cannot use --certificate-key without "
                                               "--print-join-command\n" + HINT)
    finally:
        for token in _tokens(node) - before:
            node.kubeadm("token", "delete", token)


# The preflight findings of a node that has joined already: under
# --ignore-preflight-errors=all they are warnings, in this order (v1.31.4's JoinNodeChecks).
# Other warnings name programs missing from the machine's PATH (FileExisting-crictl and
# the like), which depends on the machine, not on kubeadm.
JOINED_WORKER_WARNINGS = [
    "\t[WARNING FileAvailable--etc-kubernetes-kubelet.conf]: /etc/kubernetes/kubelet.conf "
    "already exists",
    "\t[WARNING Port-10250]: Port 10250 is in use",
    "\t[WARNING FileAvailable--etc-kubernetes-pki-ca.crt]: /etc/kubernetes/pki/ca.crt "
    "already exists",
]


def _discovery_failure(r, error):
    """A join that failed in discovery: every check a warning, then ``error``."""
    assert (r.returncode, r.stdout) == (1, "[preflight] Running pre-flight checks\n"), r
    lines = r.stderr.split("\n")
    warnings = [x for x in lines if x.startswith("\t[WARNING ")]
    assert [x for x in warnings if "[WARNING FileExisting-" not in x] == JOINED_WORKER_WARNINGS
    assert lines[len(warnings):] == [
        "error execution phase preflight: couldn't validate the identity of the API Server: "
        + error, HINT.rstrip("\n"), ""], r.stderr


def join_failures(control_plane, joiner, endpoint):
    """The failures of a worker join
    (https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-join/), tried from
    ``joiner``, a worker of the cluster: preflight's findings on it are warnings
    (``--ignore-preflight-errors=all``) and each case fails before anything is written."""
    h = ca_hash(control_plane.read("/etc/kubernetes/pki/ca.crt"))
    tok = control_plane.kubeadm("token", "create", "--ttl", "10m").stdout.strip()
    ignore = "--ignore-preflight-errors=all"
    try:
        r = joiner.kubeadm("join", endpoint, "--token", tok,
                           "--discovery-token-ca-cert-hash", "sha256:" + "0" * 64, ignore)
        _discovery_failure(r, "cluster CA found in cluster-info ConfigMap is invalid: none of "
                              'the public keys "%s" are pinned' % h)
        r = joiner.kubeadm("join", endpoint, "--token", tok,
                           "--discovery-token-ca-cert-hash", "sha256:" + "a" * 62, ignore)
        _discovery_failure(r, 'invalid discovery token CA certificate hash: invalid hash '
                              '"sha256:%s", expected a 32 byte SHA-256 hash, found 31 bytes'
                              % ("a" * 62))
        # an unknown token: discovery retries (every 5 s) until its timeout, here 7 s
        joiner.write("/var/tmp/kos-join-unknown-token.yaml", (
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n"
            "  bootstrapToken:\n    apiServerEndpoint: %s\n    token: zzzzzz.0123456789abcdef\n"
            "    caCertHashes: [\"%s\"]\ntimeouts:\n  discovery: 7s\nnodeRegistration:\n"
            "  ignorePreflightErrors: [all]\n") % (endpoint, h))
        r = joiner.kubeadm("join", "--config", "/var/tmp/kos-join-unknown-token.yaml")
        joiner.remove("/var/tmp/kos-join-unknown-token.yaml")
        _discovery_failure(r, 'could not find a JWS signature in the cluster-info ConfigMap for '
                              'token ID "zzzzzz"')
    finally:
        control_plane.kubeadm("token", "delete", tok)

    # validation (before preflight): a field.ErrorList, exit status 3 until v1.34
    r = joiner.kubeadm("join", endpoint, "--token", tok)
    assert (r.returncode, r.stdout) == (3, "")
    assert r.stderr == ('discovery.bootstrapToken.caCertHashes: Invalid value: "": using '
                        'token-based discovery without caCertHashes can be unsafe. Set '
                        'unsafeSkipCAVerification as true in your kubeadm config file or pass '
                        '--discovery-token-unsafe-skip-ca-verification flag to continue\n'
                        + HINT)
    host = endpoint.rsplit(":", 1)[0]
    r = joiner.kubeadm("join", host, "--token", "bad", "--discovery-token-ca-cert-hash", h)
    assert (r.returncode, r.stdout) == (3, "")
    assert r.stderr == (
        '[discovery.bootstrapToken.token: Invalid value: "bad": the bootstrap token is invalid, '
        'discovery.bootstrapToken.apiServerEndpoint: Invalid value: "{0}": address {0}: missing '
        'port in address, discovery.tlsBootstrapToken: Invalid value: "bad": the bootstrap token '
        'is invalid]\n'.format(host) + HINT)


def init_config_with_a_malformed_token(node):
    """An InitConfiguration whose bootstrap token is malformed fails as it is read."""
    node.write("/var/tmp/kos-init-bad-token.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\n"
               "kind: InitConfiguration\nbootstrapTokens:\n- token: bad\n")
    r = node.kubeadm("init", "--dry-run", "--config", "/var/tmp/kos-init-bad-token.yaml")
    node.remove("/var/tmp/kos-init-bad-token.yaml")
    msg = ('the bootstrap token "bad" was not of the form '
           r'"\\A([a-z0-9]{6})\\.([a-z0-9]{16})\\z"')
    assert (r.returncode, r.stdout) == (1, "")
    lines = r.stderr.split("\n")
    assert re.fullmatch(r"W\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ initconfiguration\.go:332\] "
                        + re.escape('error unmarshaling configuration schema.GroupVersionKind'
                                    '{Group:"kubeadm.k8s.io", Version:"v1beta4", '
                                    'Kind:"InitConfiguration"}: ' + msg), lines[0]), lines[0]
    assert lines[1:] == [msg, HINT.rstrip("\n"), ""]
