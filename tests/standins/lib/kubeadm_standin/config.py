"""kubeadm configuration files: loading, API version checks, defaulting, as
https://kubernetes.io/docs/reference/config-api/kubeadm-config.v1beta4/ and
https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/util/config/common.go
describe them."""

import copy

from . import env, gofmt, yamlish

GROUP = "kubeadm.k8s.io"
KUBEADM_KINDS = ("InitConfiguration", "ClusterConfiguration", "JoinConfiguration",
                 "ResetConfiguration", "UpgradeConfiguration")
DEFAULT_CRI_SOCKET = "unix:///var/run/containerd/containerd.sock"


class ConfigError(Exception):
    pass


def _v1beta4_supported():
    return env.minor() >= 31


def _convert_args(value):
    """v1beta3 maps ({flag: value}) to v1beta4 lists ([{name, value}]), sorted like kubeadm."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [{"name": k, "value": "" if value[k] is None else str(value[k])}
                for k in sorted(value)]
    out = []
    for item in value:
        if isinstance(item, dict) and "name" in item:
            out.append({"name": str(item["name"]),
                        "value": "" if item.get("value") is None else str(item["value"])})
    return out


def load_documents(path, wanted):
    """Documents of the config file keyed by kind; prints kubeadm's warnings on stderr."""
    real = env.input_file(path)
    try:
        with open(real) as f:
            text = f.read()
    except OSError as e:
        raise ConfigError('unable to read config from "%s" : open %s: %s'
                          % (path, path, (e.strerror or str(e)).lower()))
    try:
        docs = yamlish.load_all(text)
    except yamlish.YamlError as e:
        raise ConfigError("error converting YAML to JSON: yaml: %s" % e)
    found = {}
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        api_version = str(doc.get("apiVersion") or "")
        kind = str(doc.get("kind") or "")
        if not api_version or not kind:
            raise ConfigError("invalid configuration for GroupVersionKind /, Kind=: kind and "
                              "apiVersion is mandatory information that must be specified")
        group, _, version = api_version.rpartition("/")
        if group == GROUP:
            if version in ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1", "v1beta2"):
                raise ConfigError(
                    'your configuration file uses an old API spec: "%s" (kind: "%s"). Please '
                    "use kubeadm v1.22 instead and run 'kubeadm config migrate --old-config "
                    "old.yaml --new-config new.yaml', which will write the new, similar spec "
                    "using a newer API version." % (api_version, kind))
            if version == "v1beta4" and not _v1beta4_supported():
                raise ConfigError(
                    'no kind "%s" is registered for version "%s" in scheme '
                    '"k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme/scheme.go:31"'
                    % (kind, api_version))
            if version not in ("v1beta3", "v1beta4"):
                raise ConfigError('no kind "%s" is registered for version "%s" in scheme '
                                  '"k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme/'
                                  'scheme.go:31"' % (kind, api_version))
            if version == "v1beta3" and _v1beta4_supported():
                gofmt.klog("W", "common.go:101",
                           'your configuration file uses a deprecated API spec: "%s" (kind: '
                           "\"%s\"). Please use 'kubeadm config migrate --old-config old.yaml "
                           "--new-config new.yaml', which will write the new, similar spec "
                           "using a newer API version." % (api_version, kind))
            if kind not in KUBEADM_KINDS:
                raise ConfigError('no kind "%s" is registered for version "%s" in scheme '
                                  '"k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme/'
                                  'scheme.go:31"' % (kind, api_version))
            if kind not in wanted:
                gofmt.klog("W", "common.go:329", "[config] WARNING: Ignored configuration "
                           "document with GroupVersionKind %s, Kind=%s" % (api_version, kind))
                continue
            if kind == "InitConfiguration":
                _check_bootstrap_tokens(doc, api_version)
            doc = copy.deepcopy(doc)
            doc["_version"] = version
            found[kind] = doc
        elif kind in ("KubeletConfiguration", "KubeProxyConfiguration"):
            found[kind] = doc
        else:
            gofmt.klog("W", "common.go:329", "[config] WARNING: Ignored configuration document "
                       "with GroupVersionKind %s, Kind=%s" % (api_version, kind))
    return found


def _check_bootstrap_tokens(doc, api_version):
    """An InitConfiguration's bootstrapTokens[].token is a typed string that refuses to
    unmarshal when malformed: the strict decode warns, the real decode fails (v1.31.4 run
    on the rehearsal cloud)."""
    from . import common
    for item in doc.get("bootstrapTokens") or []:
        token = (item or {}).get("token") if isinstance(item, dict) else None
        if token is not None and not common.valid_token(str(token)):
            msg = ('the bootstrap token "%s" was not of the form "%s"'
                   % (token, common.TOKEN_PATTERN))
            group, _, version = api_version.rpartition("/")
            gofmt.klog("W", "initconfiguration.go:332",
                       'error unmarshaling configuration schema.GroupVersionKind{Group:"%s", '
                       'Version:"%s", Kind:"InitConfiguration"}: %s' % (group, version, msg))
            raise ConfigError(msg)


def cluster_defaults():
    return {
        "kubernetesVersion": env.version(),
        "controlPlaneEndpoint": "",
        "clusterName": "kubernetes",
        "certificatesDir": "/etc/kubernetes/pki",
        "imageRepository": "registry.k8s.io",
        "encryptionAlgorithm": "RSA-2048",
        "certificateValidityPeriod": "8760h0m0s",
        "caCertificateValidityPeriod": "87600h0m0s",
        "networking": {"serviceSubnet": "10.96.0.0/12", "dnsDomain": "cluster.local",
                       "podSubnet": ""},
        "etcd": {"local": {"dataDir": "/var/lib/etcd", "extraArgs": []}},
        "apiServer": {"certSANs": [], "extraArgs": []},
        "controllerManager": {"extraArgs": []},
        "scheduler": {"extraArgs": []},
        "dns": {"disabled": False},
        "proxy": {"disabled": False},
    }


def normalize_cluster(doc):
    cc = cluster_defaults()
    if not doc:
        return cc
    for key in ("kubernetesVersion", "controlPlaneEndpoint", "clusterName", "certificatesDir",
                "imageRepository", "encryptionAlgorithm", "certificateValidityPeriod",
                "caCertificateValidityPeriod"):
        if doc.get(key):
            cc[key] = str(doc[key])
    if cc["kubernetesVersion"] and not cc["kubernetesVersion"].startswith("v"):
        cc["kubernetesVersion"] = "v" + cc["kubernetesVersion"]
    net = doc.get("networking") or {}
    for key in ("serviceSubnet", "podSubnet", "dnsDomain"):
        if net.get(key):
            cc["networking"][key] = str(net[key])
    etcd = doc.get("etcd") or {}
    if etcd.get("external"):
        ext = etcd["external"]
        cc["etcd"] = {"external": {"endpoints": list(ext.get("endpoints") or []),
                                   "caFile": ext.get("caFile") or "",
                                   "certFile": ext.get("certFile") or "",
                                   "keyFile": ext.get("keyFile") or ""}}
    elif etcd.get("local"):
        local = etcd["local"]
        cc["etcd"]["local"]["dataDir"] = local.get("dataDir") or "/var/lib/etcd"
        cc["etcd"]["local"]["extraArgs"] = _convert_args(local.get("extraArgs"))
        for key in ("serverCertSANs", "peerCertSANs"):
            if local.get(key):
                cc["etcd"]["local"][key] = [str(x) for x in local[key]]
    api = doc.get("apiServer") or {}
    cc["apiServer"]["certSANs"] = [str(x) for x in api.get("certSANs") or []]
    cc["apiServer"]["extraArgs"] = _convert_args(api.get("extraArgs"))
    for comp in ("controllerManager", "scheduler"):
        cc[comp]["extraArgs"] = _convert_args((doc.get(comp) or {}).get("extraArgs"))
    for comp in ("dns", "proxy"):
        if (doc.get(comp) or {}).get("disabled"):
            cc[comp]["disabled"] = True
    return cc


def external_etcd(cc):
    return "external" in cc["etcd"]


def normalize_node_registration(doc, node_name_flag=None, cri_flag=None):
    nr = (doc or {}).get("nodeRegistration") or {}
    name = node_name_flag or nr.get("name") or env.hostname()
    return {
        "name": str(name).lower(),
        "criSocket": cri_flag or nr.get("criSocket") or DEFAULT_CRI_SOCKET,
        "kubeletExtraArgs": _convert_args(nr.get("kubeletExtraArgs")),
        "taints": nr.get("taints"),
        "ignorePreflightErrors": [str(x) for x in nr.get("ignorePreflightErrors") or []],
    }


def duration_seconds(value, default):
    if value is None or value == "":
        return default
    if isinstance(value, (int, float)):
        return float(value)
    return gofmt.parse_duration(str(value))


def days_of(duration_text, default_days):
    try:
        secs = gofmt.parse_duration(duration_text)
    except (gofmt.DurationError, TypeError):
        return default_days
    return max(1, int((secs + 86399) // 86400))
