"""`kubeadm join`: token discovery, TLS bootstrap, control-plane join
(https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-join/)."""

import binascii
import os
import sys
import time

from . import apiserver, client, common, config, content, env, kubeconfig, pki
from . import state as st, yamlish

CLUSTER_INFO = "/api/v1/namespaces/kube-public/configmaps/cluster-info"
IDENTITY = "couldn't validate the identity of the API Server: "
DEFAULT_DISCOVERY_TIMEOUT = 300.0

WORKER_DONE = """
This node has joined the cluster:
* Certificate signing request was sent to apiserver and a response was received.
* The Kubelet was informed of the new secure connection details.

Run 'kubectl get nodes' on the control-plane to see this node join the cluster.
"""

CONTROL_PLANE_DONE = """
This node has joined the cluster and a new control plane instance was created:

* Certificate signing request was sent to apiserver and approval was received.
* The Kubelet was informed of the new secure connection details.
* Control plane label and taint were applied to the new node.
* The Kubernetes control plane instances scaled up.
{etcd}
To start administering your cluster from this node, you need to run the following as a regular user:

\tmkdir -p $HOME/.kube
\tsudo cp -i /etc/kubernetes/admin.conf $HOME/.kube/config
\tsudo chown $(id -u):$(id -g) $HOME/.kube/config

Run 'kubectl get nodes' to see this node join the cluster.
"""

NOT_READY_FOR_CONTROL_PLANE = """
One or more conditions for hosting a new control plane instance is not satisfied.

{error}

Please ensure that:
* The cluster has a stable controlPlaneEndpoint address.
* The certificates that must be shared among control plane instances are provided.

"""


class JoinSpec:
    """The effective JoinConfiguration (flags or --config)."""

    def __init__(self, values, pos):
        jc = {}
        if values["config"]:
            docs = common.config_documents(values["config"], ("JoinConfiguration",))
            jc = docs.get("JoinConfiguration") or {}
        disc = jc.get("discovery") or {}
        bt = disc.get("bootstrapToken")
        token = values["discovery-token"] or values["token"]
        self.file = values["discovery-file"] or (disc.get("file") or {}).get("kubeConfigPath")
        if bt is None and (token or pos) and not self.file:
            bt = {}
        self.bootstrap = bt is not None
        bt = bt or {}
        self.endpoint = (pos[0] if pos else None) or bt.get("apiServerEndpoint") or ""
        self.token = token or bt.get("token") or ""
        self.tls_token = (values["tls-bootstrap-token"] or values["token"]
                          or disc.get("tlsBootstrapToken") or self.token)
        self.hashes = values["discovery-token-ca-cert-hash"] or list(bt.get("caCertHashes") or [])
        self.unsafe = values["discovery-token-unsafe-skip-ca-verification"] or bool(
            bt.get("unsafeSkipCAVerification"))
        cp = jc.get("controlPlane")
        self.control_plane = bool(values["control-plane"]) or cp is not None
        cp = cp or {}
        lep = cp.get("localAPIEndpoint") or {}
        self.certificate_key = values["certificate-key"] or cp.get("certificateKey") or ""
        self.node = config.normalize_node_registration(jc, values["node-name"],
                                                       values["cri-socket"])
        self.node["advertiseAddress"] = str(values["apiserver-advertise-address"]
                                            or lep.get("advertiseAddress") or env.node_ip())
        self.node["bindPort"] = int(values["apiserver-bind-port"] or lep.get("bindPort") or 6443)
        self.ca_cert_path = jc.get("caCertPath") or "/etc/kubernetes/pki/ca.crt"
        self.skip_phases = set(values["skip-phases"]) | set(jc.get("skipPhases") or [])
        timeout = (jc.get("timeouts") or {}).get("discovery")
        if timeout is None:
            timeout = disc.get("timeout")  # v1beta3
        configured = config.duration_seconds(timeout, DEFAULT_DISCOVERY_TIMEOUT)
        # The one compression of real time: discovery retries for min(configured, cap).
        self.discovery_timeout = min(configured, env.discovery_timeout_cap())
        self.ignore = common.ignore_set(values["ignore-preflight-errors"],
                                        self.node["ignorePreflightErrors"])

    def validate(self):
        """apis/kubeadm/validation ValidateDiscovery, in its order and field paths."""
        errors = []
        if not self.bootstrap and not self.file:
            errors.append('discovery: Invalid value: "": bootstrapToken or file must be set')
        if self.bootstrap and self.file:
            errors.append('discovery: Invalid value: "": bootstrapToken and file cannot both be '
                          'set')
        if self.bootstrap:
            field = "discovery.bootstrapToken"
            if not self.endpoint:
                errors.append("%s: Required value: APIServerEndpoint is not set" % field)
            if not self.hashes and not self.unsafe:
                errors.append('%s.caCertHashes: Invalid value: "": using token-based '
                              'discovery without caCertHashes can be unsafe. Set '
                              'unsafeSkipCAVerification as true in your kubeadm config file or '
                              'pass --discovery-token-unsafe-skip-ca-verification flag to '
                              'continue' % field)
            if not common.valid_token(self.token):
                errors.append('%s.token: Invalid value: "%s": the bootstrap token is invalid'
                              % (field, self.token))
            try:
                common.split_host_port(self.endpoint or "")
            except ValueError as e:
                errors.append('%s.apiServerEndpoint: Invalid value: "%s": %s'
                              % (field, self.endpoint or "", e))
        if (self.bootstrap or (self.file and self.tls_token)) \
                and not common.valid_token(self.tls_token):
            errors.append('discovery.tlsBootstrapToken: Invalid value: "%s": the bootstrap '
                          'token is invalid' % self.tls_token)
        if len(errors) == 1:
            raise common.Invalid(errors[0])
        if errors:
            raise common.Invalid("[" + ", ".join(errors) + "]")


# ---------------------------------------------------------------------------
# discovery
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/discovery/token/token.go

def _check_pins(hashes):
    pins = set()
    for h in hashes:
        parts = h.split(":")
        if len(parts) != 2:
            raise ValueError('invalid hash, expected "format:hex-value". Known format(s) are: '
                             'sha256')
        fmt, value = parts[0].lower(), parts[1]
        if fmt != "sha256":
            raise ValueError('unknown hash format "%s". Known format(s) are: sha256' % fmt)
        if len(value) // 2 != 32:
            raise ValueError('invalid hash "%s", expected a 32 byte SHA-256 hash, found %d bytes'
                             % (h, len(value) // 2))
        try:
            binascii.unhexlify(value)
        except (binascii.Error, ValueError):
            bad = next((c for c in value if c not in "0123456789abcdefABCDEF"), "?")
            raise ValueError("invalid hash \"%s\", could not decode SHA-256 from hex: "
                             "encoding/hex: invalid byte: U+%04X '%s'" % (h, ord(bad), bad))
        pins.add(value.lower())
    return pins


def _poll_cluster_info(endpoint, token_id, timeout, ca_pem=None):
    deadline = time.time() + timeout
    interval = min(0.5, timeout) if timeout > 0 else 0
    while True:
        remaining = max(0.2, deadline - time.time())
        try:
            cm = client.request(endpoint, "GET", CLUSTER_INFO, ca_pem=ca_pem,
                                insecure=ca_pem is None, timeout=min(10.0, remaining),
                                query_timeout=10)
            if ("jws-kubeconfig-" + token_id) in (cm.get("data") or {}):
                return cm
            last = ('could not find a JWS signature in the cluster-info ConfigMap for token '
                    'ID "%s"' % token_id)
        except client.ClientError as e:
            last = "failed to request the cluster-info ConfigMap: " + e.text
        except client.HTTPError as e:
            last = "failed to request the cluster-info ConfigMap: " + e.message
        now = time.time()
        if now >= deadline:
            raise common.phase_failure("preflight", IDENTITY + last)
        time.sleep(min(interval, deadline - now))


def discover(spec):
    """(server URL, CA PEM) of the cluster, validated like kubeadm's token discovery."""
    if spec.file:
        try:
            kc = kubeconfig.load(spec.file)
        except (OSError, kubeconfig.KubeconfigError) as e:
            raise common.phase_failure("preflight", IDENTITY + str(e))
        return kc.server, kc.ca_pem
    token_id, secret = spec.token.split(".", 1)
    cm = _poll_cluster_info(spec.endpoint, token_id, spec.discovery_timeout)
    try:
        pins = _check_pins(spec.hashes)
    except ValueError as e:
        raise common.phase_failure("preflight", IDENTITY +
                                   "invalid discovery token CA certificate hash: %s" % e)
    info = cm["data"].get("kubeconfig") or ""
    if not info:
        raise common.phase_failure("preflight", IDENTITY + "there is no kubeconfig key in the "
                                   "cluster-info ConfigMap. This API Server isn't set up for "
                                   "token bootstrapping, can't connect")
    if cm["data"]["jws-kubeconfig-" + token_id] != st.jws_detached(info, token_id, secret):
        raise common.phase_failure("preflight", IDENTITY + "failed to verify JWS signature of "
                                   "received cluster info object, can't trust this API Server")
    kc = kubeconfig.parse(info)
    if not pins:
        return kc.server, kc.ca_pem
    actual = pki.ca_cert_hash(kc.ca_pem)
    if actual.split(":", 1)[1] not in pins:
        raise common.phase_failure("preflight", IDENTITY + 'cluster CA found in cluster-info '
                                   'ConfigMap is invalid: none of the public keys "%s" are pinned'
                                   % actual)
    secure = _poll_cluster_info(spec.endpoint, token_id, spec.discovery_timeout, kc.ca_pem)
    if secure["data"].get("kubeconfig") != info:
        raise common.phase_failure("preflight", IDENTITY + "the second kubeconfig from the "
                                   "cluster-info ConfigMap (using validated TLS) was different "
                                   "from the first")
    return kc.server, kc.ca_pem


def _hostport(server):
    return server.split("://", 1)[-1].rstrip("/")


# ---------------------------------------------------------------------------

def _upload_config_hint(prefix):
    # v1.31.4 itself prints the older pair (cmd/kubeadm/app/util/config/cluster.go); the
    # ConfigMap wording came with 1.32
    if env.minor() <= 31:
        env.out("[%s] Reading configuration from the cluster..." % prefix)
        env.out("[%s] FYI: You can look at this config file with 'kubectl -n kube-system get cm "
                "kubeadm-config -o yaml'" % prefix)
        return
    env.out('[%s] Reading configuration from the "kubeadm-config" ConfigMap in namespace '
            '"kube-system"...' % prefix)
    if env.minor() >= 34:
        hint = "kubeadm init phase upload-config kubeadm --config your-config-file"
    elif env.minor() == 33:
        hint = "kubeadm init phase upload-config --config your-config-file"
    else:
        hint = "kubeadm init phase upload-config --config your-config.yaml"
    env.out("[%s] Use '%s' to re-upload it." % (prefix, hint))


def _download_certs(api, cc, key_hex, pki_dir_shown):
    phase = "control-plane-prepare/download-certs"
    env.out('[download-certs] Downloading the certificates in Secret "kubeadm-certs" in the '
            '"kube-system" Namespace')
    try:
        key = bytes.fromhex(key_hex)
    except ValueError:
        bad = next((c for c in key_hex if c not in "0123456789abcdefABCDEF"), None)
        detail = ("encoding/hex: invalid byte: U+%04X '%s'" % (ord(bad), bad) if bad
                  else "encoding/hex: odd length hex string")
        raise common.phase_failure(phase, "error downloading certs: error decoding certificate "
                                   "key: " + detail)
    try:
        secret = api.get("/api/v1/namespaces/kube-system/secrets/kubeadm-certs")
    except client.HTTPError as e:
        if e.code == 404:
            raise common.phase_failure(
                phase, 'error downloading certs: error downloading the secret: Secret '
                '"kubeadm-certs" was not found in the "kube-system" Namespace. This Secret might '
                'have expired. Please, run `kubeadm init phase upload-certs --upload-certs` on a '
                'control plane to generate a new one')
        raise common.phase_failure(phase, "error downloading certs: error downloading the "
                                   "secret: " + e.message)
    except client.ClientError as e:
        raise common.phase_failure(phase, "error downloading certs: error downloading the "
                                   "secret: " + e.text)
    if len(key) not in (16, 24, 32):
        raise common.phase_failure(phase, "error downloading certs: error decoding secret data "
                                   "with provided key: crypto/aes: invalid key size %d" % len(key))
    files = dict(common.shared_cert_files(cc))
    decoded = {}
    try:
        for name, blob in secret["data"].items():
            decoded[name] = pki.decrypt(key, blob)
    except pki.AuthError as e:
        raise common.phase_failure(phase, "error downloading certs: error decoding secret data "
                                   "with provided key: %s" % e)
    env.out('[download-certs] Saving the certificates to the folder: "%s"' % pki_dir_shown)
    for name, data in decoded.items():
        if name in files and files[name]:
            pki.write_file(env.host(files[name]), data,
                           0o600 if name.endswith(".key") else 0o644)


def _shared_certs_present(cc):
    """certs.SharedCertificateExists, for a control-plane join without --certificate-key.

    The wording of kubeadm's message for this case was not verified; it names the file.
    """
    for _, path in common.shared_cert_files(cc):
        if path and not os.path.exists(env.host(path)):
            return ("failure loading shared certificate: couldn't load the file %s: open %s: "
                    "no such file or directory" % (path, path))
    return None


def _control_plane_certs(cc, node):
    algorithm = cc["encryptionAlgorithm"]
    days = config.days_of(cc["certificateValidityPeriod"], 365)
    plan = common.CertPlan(env.host(cc["certificatesDir"]), algorithm)
    plan.lines.append('[certs] Using certificateDir folder "%s"' % cc["certificatesDir"])
    if not config.external_etcd(cc):
        common.etcd_leaves(plan, cc, node, days,
                           ("apiserver-etcd-client", "etcd/healthcheck-client"))
    dns, ips = common.apiserver_sans(cc, node)
    plan.leaf("apiserver", "ca", "kube-apiserver", server=True, dns=dns, ips=ips, days=days)
    plan.leaf("apiserver-kubelet-client", "ca", "kube-apiserver-kubelet-client",
              [common.admin_org()], client_auth=True, days=days)
    plan.leaf("front-proxy-client", "front-proxy-ca", "front-proxy-client", client_auth=True,
              days=days)
    plan.lines.append('[certs] Valid certificates and keys now exist in "%s"'
                      % cc["certificatesDir"])
    plan.lines.append('[certs] Using the existing "sa" key')
    plan.run()


def cmd_join(args, parse_for, validate_mixed):
    values, set_names, pos = parse_for(["join"], args)
    validate_mixed(values, set_names)
    spec = JoinSpec(values, pos)
    spec.validate()
    node = spec.node

    env.out("[preflight] Running pre-flight checks")
    common.root_check(spec.ignore)
    common.run_checks(common.join_node_checks(spec.control_plane), spec.ignore)
    server, ca_pem = discover(spec)
    endpoint = _hostport(server)
    bootstrap_api = client.Api(endpoint, ca_pem=ca_pem, bearer=spec.tls_token)

    _upload_config_hint("preflight")
    try:
        cm = bootstrap_api.get("/api/v1/namespaces/kube-system/configmaps/kubeadm-config")
        cc = config.normalize_cluster(yamlish.load(cm["data"]["ClusterConfiguration"]))
        kubelet_cm = bootstrap_api.get("/api/v1/namespaces/kube-system/configmaps/"
                                       "kubelet-config")
        kubelet_doc = yamlish.load(kubelet_cm["data"]["kubelet"]) or {}
    except (client.ClientError, client.HTTPError) as e:
        raise common.phase_failure("preflight", "unable to fetch the kubeadm-config ConfigMap: "
                                   "failed to get config map: %s" % common.api_error_text(e))

    if spec.control_plane:
        problem = None
        if not cc["controlPlaneEndpoint"]:
            problem = ("unable to add a new control plane instance to a cluster that doesn't "
                       "have a stable controlPlaneEndpoint address")
        elif not spec.certificate_key:
            problem = _shared_certs_present(cc)
        if problem:
            raise common.phase_failure("preflight",
                                       NOT_READY_FOR_CONTROL_PLANE.format(error=problem))
        env.out("[preflight] Running pre-flight checks before initializing the new control "
                "plane instance")
        common.run_checks(common.init_node_checks(cc, node, secondary=True,
                                                  download_certs=bool(spec.certificate_key)),
                          spec.ignore)
        env.out("[preflight] Pulling images required for setting up a Kubernetes cluster")
        env.out("[preflight] This might take a minute or two, depending on the speed of your "
                "internet connection")
        env.out("[preflight] You can also perform this action beforehand using 'kubeadm config "
                "images pull'")
        if spec.certificate_key:
            _download_certs(bootstrap_api, cc, spec.certificate_key, cc["certificatesDir"])
        try:
            _control_plane_certs(cc, node)
        except pki.PKIError as e:
            raise common.phase_failure("control-plane-prepare/certs", str(e))
        pki_dir = env.host(cc["certificatesDir"])
        env.out("[kubeconfig] Generating kubeconfig files")
        common.write_kubeconfigs(env.host("/etc/kubernetes"), pki_dir, cc, node,
                                 ["admin.conf", "controller-manager.conf", "scheduler.conf"],
                                 ca_pem, cc["encryptionAlgorithm"])
        env.out('[control-plane] Using manifest folder "/etc/kubernetes/manifests"')
        manifests = env.host("/etc/kubernetes/manifests")
        for comp, text in (("kube-apiserver", content.apiserver_manifest(cc, node)),
                           ("kube-controller-manager", content.controller_manager_manifest(cc)),
                           ("kube-scheduler", content.scheduler_manifest(cc))):
            env.out('[control-plane] Creating static Pod manifest for "%s"' % comp)
            pki.write_file(os.path.join(manifests, comp + ".yaml"), text, 0o600)
        if not config.external_etcd(cc):
            env.out("[check-etcd] Checking that the etcd cluster is healthy")

    # kubelet-start: bootstrap kubeconfig and CA first, as kubeadm does
    bootstrap_conf = env.host("/etc/kubernetes/bootstrap-kubelet.conf")
    pki.write_file(bootstrap_conf, kubeconfig.render(server, ca_pem, "tls-bootstrap-token-user",
                                                     cc["clusterName"],
                                                     token=spec.tls_token), 0o600)
    if not os.path.exists(env.host(spec.ca_cert_path)):
        pki.write_file(env.host(spec.ca_cert_path), ca_pem, 0o644)
    try:
        existing = bootstrap_api.get("/api/v1/nodes/" + node["name"])
    except client.HTTPError as e:
        existing = None
        if e.code != 404:
            raise common.phase_failure("kubelet-start", 'cannot get Node "%s": %s'
                                       % (node["name"], e.message))
    except client.ClientError as e:
        raise common.phase_failure("kubelet-start", 'cannot get Node "%s": %s'
                                   % (node["name"], e.text))
    if existing and existing.get("ready"):
        raise common.phase_failure(
            "kubelet-start", 'a Node with name "%s" and status "Ready" already exists in the '
            'cluster. You must delete the existing Node or change the name of this new joining '
            'Node' % node["name"])
    env.out('[kubelet-start] Writing kubelet configuration to file '
            '"/var/lib/kubelet/config.yaml"')
    pki.write_file(env.host("/var/lib/kubelet/config.yaml"),
                   content.kubelet_config(cc, kubelet_doc))
    env.out('[kubelet-start] Writing kubelet environment file with flags to file '
            '"/var/lib/kubelet/kubeadm-flags.env"')
    pki.write_file(env.host("/var/lib/kubelet/kubeadm-flags.env"),
                   content.kubeadm_flags_env(node, cc, env.hostname()))
    env.out("[kubelet-start] Starting the kubelet")
    common.kubelet_check_lines()
    common.simulated_wait(env.delay())
    env.out("[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap")

    def sign(csr):
        try:
            return bootstrap_api.post("/apis/certificates.k8s.io/v1/certificatesigningrequests",
                                      {"csr": csr.decode()})["certificate"].encode()
        except (client.ClientError, client.HTTPError) as e:
            raise common.phase_failure("kubelet-start", "failed while waiting for the kubelet "
                                       "to start: the kubelet TLS bootstrap failed: %s"
                                       % common.api_error_text(e))

    common.write_kubelet_client(node["name"], None, None, cc["encryptionAlgorithm"],
                                env.host("/etc/kubernetes/kubelet.conf"), server, ca_pem,
                                cc["clusterName"], csr_signer=sign)
    os.unlink(bootstrap_conf)
    os.makedirs(env.host("/etc/kubernetes/manifests"), exist_ok=True)
    kube_proxy = not cc["proxy"]["disabled"]
    record = common.node_record(node["name"], node["advertiseAddress"], spec.control_plane,
                                node["taints"], kube_proxy,
                                content.static_pod_images(cc) if spec.control_plane else None)
    try:
        bootstrap_api.post("/api/v1/nodes", {"node": record, "force": True})
    except (client.ClientError, client.HTTPError) as e:
        raise common.phase_failure("kubelet-start", "failed to register node: %s"
                                   % common.api_error_text(e))

    if not spec.control_plane:
        sys.stdout.write(WORKER_DONE)
        sys.stdout.flush()
        return

    _, admin = common.admin_api("/etc/kubernetes/admin.conf")
    external = config.external_etcd(cc)
    if not external and env.take_fault("join-fails-at-etcd"):
        # the etcd member add fails (etcd refuses it while unhealthy): the node is already
        # registered and kubelet.conf written (kubelet-start comes before control-plane-join:
        # https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-join/)
        raise common.phase_failure("control-plane-join/etcd", "error creating local etcd "
                                   "static pod manifest file: etcdserver: unhealthy cluster")
    try:
        members = admin.post("/kos/v1/members", {"member": {
            "name": node["name"], "url": "https://" + common.local_endpoint(node)}})["members"]
        snapshot = admin.get("/kos/v1/state")
    except (client.ClientError, client.HTTPError) as e:
        raise common.phase_failure("control-plane-join/etcd", "error creating local etcd static "
                                   "pod manifest file: %s" % common.api_error_text(e))
    if not external:
        env.out("[etcd] Announced new etcd member joining to the existing etcd cluster")
        initial = ",".join("%s=https://%s:2380" % (m["name"], _hostport(m["url"]).rsplit(":", 1)[0])
                           for m in members)
        pki.write_file(env.host("/etc/kubernetes/manifests/etcd.yaml"),
                       content.etcd_manifest(cc, node, initial, "existing"), 0o600)
        data_dir = env.host(cc["etcd"]["local"]["dataDir"])
        os.makedirs(os.path.join(data_dir, "member", "snap"), exist_ok=True)
        pki.write_file(os.path.join(data_dir, "member", "snap", "db"), b"", 0o600)
        env.out('[etcd] Creating static Pod manifest for "etcd"')
        env.out("[etcd] Waiting for the new etcd member to join the cluster. This can take up to "
                "40s")
    st.save(snapshot)
    apiserver.stop()
    error = apiserver.start(node["name"], node["advertiseAddress"], node["bindPort"])
    if error:
        raise common.phase_failure("control-plane-join/etcd", "error waiting for the API server "
                                   "on %s: %s" % (common.local_endpoint(node), error))
    taints = node["taints"] if node["taints"] is not None else [common.CONTROL_PLANE_TAINT]
    common.print_mark_control_plane(node["name"], taints)
    etcd_line = "" if external else \
        "* A new etcd member was added to the local/stacked etcd cluster.\n"
    sys.stdout.write(CONTROL_PLANE_DONE.format(etcd=etcd_line))
    sys.stdout.flush()
