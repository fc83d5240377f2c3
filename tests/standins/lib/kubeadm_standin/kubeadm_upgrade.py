"""`kubeadm upgrade plan|apply|node`, as
https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/ describes them and
https://github.com/kubernetes/kubernetes/tree/v1.31.0/cmd/kubeadm/app/cmd/upgrade implements them.

What the stand-in models:

* The cluster version is the `kubernetesVersion` of the ClusterConfiguration in
  kube-system/kubeadm-config (what init stored, what `upgrade apply` rewrites). The
  kubeadm version is the kubeadm package's (env.py, packages.json).
* Control-plane component versions per node come from the node's mirror Pods: the
  stand-in keeps the image of each static Pod in the Node record (`staticPods`), set at
  init/join and updated when an upgrade moves a new manifest in (the kubelet's part).
* There is no internet: `plan` without a version prints kubeadm's klog warnings and falls
  back to its own version for every release label, like an air-gapped host
  (https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/util/version.go).
* The CreateJob health check passes when a schedulable node is Ready (no Pod runs); with no
  schedulable node it is skipped with kubeadm's klog warning
  (https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/phases/upgrade/health.go).
* Nothing waits: the kubelet "restarts" a component as soon as its manifest moves.
"""

import copy
import os
import re
import shutil
import sys
import time

from . import client, common, config, content, env, gofmt, kubeadm_certs, pki, yamlish
from .common import Failure
from .kubeadm_init import _go_temp_dir
from .kubeadm_join import _upload_config_hint
from .kubeadm_reset import _node_name

ADMIN_CONF = "/etc/kubernetes/admin.conf"
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
MANIFESTS = "/etc/kubernetes/manifests"
TMP = "/etc/kubernetes/tmp"
KUBELET_DIR = "/var/lib/kubelet"
KUBEADM_CONFIG = "/api/v1/namespaces/kube-system/configmaps/kubeadm-config"
KUBELET_CONFIG = "/api/v1/namespaces/kube-system/configmaps/kubelet-config"
CP_LABEL = "node-role.kubernetes.io/control-plane"
COMPONENTS = content.CONTROL_PLANE_COMPONENTS
UPGRADE_TIMEOUT = "5m0s"
SEPARATOR = "_" * 69
KUBELET_SKEW = 3  # constants.MaximumAllowedMinorVersionKubeletSkew (n-3 since 1.28)
ENDPOINT_ANNOTATION = "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"

MANUAL = ("Components that must be upgraded manually after you have upgraded the control plane "
          "with 'kubeadm upgrade apply':")
COMPONENT_CONFIGS = """
The table below shows the current state of component configs as understood by this version of kubeadm.
Configs that have a "yes" mark in the "MANUAL UPGRADE REQUIRED" column require manual config upgrade or
resetting to kubeadm defaults before a successful upgrade can be performed. The version to manually
upgrade to is denoted in the "PREFERRED VERSION" column.

"""
PULL = ("[upgrade/preflight] Pulling images required for setting up a Kubernetes cluster",
        "[upgrade/preflight] This might take a minute or two, depending on the speed of your "
        "internet connection",
        "[upgrade/preflight] You can also perform this action beforehand using 'kubeadm config "
        "images pull'")
BOOTSTRAP_TOKEN = (
    "[upgrade/bootstrap-token] Configuring bootstrap token and cluster-info RBAC rules",
    "[bootstrap-token] Configured RBAC rules to allow Node Bootstrap tokens to get nodes",
    "[bootstrap-token] Configured RBAC rules to allow Node Bootstrap tokens to post CSRs in order "
    "for nodes to get long term certificate credentials",
    "[bootstrap-token] Configured RBAC rules to allow the csrapprover controller automatically "
    "approve CSRs from a Node Bootstrap Token",
    "[bootstrap-token] Configured RBAC rules to allow certificate rotation for all node client "
    "certificates in the cluster")


# ---------------------------------------------------------------------------
# versions (k8s.io/apimachinery/pkg/util/version, cmd/kubeadm/app/util/version.go)

_SEMVER = re.compile(r"^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
                     r"(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
_BUILD = re.compile(r"^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-0-9a-zA-Z_.+]*)?$")
_LABEL = re.compile(r"^((latest|stable)+(-[1-9](\.[1-9]([0-9])?)?)?)$")


class Version:
    """A semantic version compared the way version.ParseSemantic's values are."""

    def __init__(self, text):
        m = _SEMVER.match(str(text).strip())
        if not m:
            raise ValueError('could not parse "%s" as version' % text)
        self.text = str(text)
        self.major, self.minor, self.patch = (int(m.group(i)) for i in (1, 2, 3))
        self.pre = m.group(4) or ""

    def _key(self):
        ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                    for p in self.pre.split(".")) if self.pre else ()
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, ids)

    def __lt__(self, other):
        return self._key() < other._key()

    def __le__(self, other):
        return self._key() <= other._key()

    def __eq__(self, other):
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


def _client_version():
    """kubeadmVersion(): kubeadm's own version as a release (a pre-release of patch N > 0
    counts as patch N-1)."""
    v = Version(env.version())
    if v.pre and v.patch > 0:
        return "v%d.%d.%d" % (v.major, v.minor, v.patch - 1)
    return "v%d.%d.%d%s" % (v.major, v.minor, v.patch, "-" + v.pre if v.pre else "")


def _offline_label(label):
    """kubernetesReleaseVersion for a label without internet: two klog warnings, then
    kubeadm's own version (the air-gapped fallback of
    https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/util/version.go)."""
    url = "https://dl.k8s.io/release/%s.txt" % label
    line = 108 if env.minor() >= 34 else 109
    gofmt.klog("W", "version.go:%d" % line,
               'could not fetch a Kubernetes version from the internet: unable to get URL "%s": '
               'Get "%s": context deadline exceeded (Client.Timeout exceeded while awaiting '
               'headers)' % (url, url))
    ver = _client_version()
    gofmt.klog("W", "version.go:%d" % (line + 1),
               "falling back to the local client version: %s" % ver)
    return ver


def release_version(text):
    """util.KubernetesReleaseVersion: `1.32.1` -> `v1.32.1`; labels resolve offline."""
    text = str(text).strip()
    if _BUILD.match(text):
        return text if text.startswith("v") else "v" + text
    if _LABEL.match(text):
        return _offline_label(text)
    raise Failure('version "%s" doesn\'t match patterns for neither semantic version nor labels '
                  '(stable, latest, ...)' % text)


def _tag(image):
    last = (image or "").rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else ""


# ---------------------------------------------------------------------------
# configuration and cluster access

def _upgrade_config(path, section):
    """The `section` (plan, apply, node) of an UpgradeConfiguration given with --config."""
    if not path:
        return {}
    docs = common.config_documents(path, ("UpgradeConfiguration",))
    return ((docs.get("UpgradeConfiguration") or {}).get(section)) or {}


def _option(values, set_names, flag, ucfg, field):
    """ValueFromFlagsOrConfig: a flag given on the command line wins over the file."""
    if flag not in set_names and ucfg.get(field) is not None:
        return ucfg[field]
    return values[flag]


def _client(path):
    try:
        _, api = common.admin_api(path)
    except Failure as f:
        raise Failure('couldn\'t create a Kubernetes client from file "%s": %s' % (path, f.text))
    return api


def _fetch_config(api):
    """(stored ClusterConfiguration document, normalized copy) from kubeadm-config."""
    cm = api.get(KUBEADM_CONFIG)
    raw = yamlish.load(cm["data"]["ClusterConfiguration"]) or {}
    return raw, config.normalize_cluster(raw)


def _nodes(api):
    return api.get("/api/v1/nodes")["items"]


def _is_control_plane(rec):
    return CP_LABEL in (rec.get("labels") or {})


def _read_manifest(path):
    try:
        with open(path) as f:
            return yamlish.load(f.read())
    except (OSError, yamlish.YamlError):
        return None


def _manifest_path(component):
    return env.host("%s/%s.yaml" % (MANIFESTS, component))


def _image(pod):
    try:
        return pod["spec"]["containers"][0]["image"]
    except (KeyError, IndexError, TypeError):
        return ""


def _local_node():
    """This node as kubeadm finds it: its name from the kubelet's client certificate, its
    API endpoint from the kube-apiserver Pod's advertise-address annotation."""
    node = {"name": _node_name(), "advertiseAddress": env.node_ip(), "bindPort": 6443}
    pod = _read_manifest(_manifest_path("kube-apiserver")) or {}
    endpoint = ((pod.get("metadata") or {}).get("annotations") or {}).get(ENDPOINT_ANNOTATION)
    if endpoint:
        host, port = common.split_endpoint(str(endpoint), 6443)
        node["advertiseAddress"], node["bindPort"] = host, int(port)
    return node


def _without_prefix(failure, prefix="error execution phase preflight: ", replacement=""):
    text = failure.text
    return Failure(replacement + text[len(prefix):] if text.startswith(prefix) else text)


# ---------------------------------------------------------------------------
# health checks
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/phases/upgrade/health.go

def _health_checks(api, ignore, plan=False):
    env.out("[upgrade] Running cluster health checks")
    checks = []
    try:
        nodes = _nodes(api)
    except (client.ClientError, client.HTTPError) as e:
        text = common.api_error_text(e)
        checks.append(("CreateJob", "could not check if there is at least one Node that can "
                       "schedule a test Pod: " + text))
        checks.append(("ControlPlaneNodesReady", 'could not list nodes labeled with "%s": %s'
                       % (CP_LABEL, text)))
        nodes = None
    if nodes is not None:
        schedulable = [n for n in nodes if not n.get("unschedulable")]
        if not schedulable:
            gofmt.klog("W", "health.go:135", 'The preflight check "CreateJob" was skipped because '
                       "there are no schedulable Nodes in the cluster.")
            checks.append(("CreateJob", None))
        elif not any(n.get("ready", True) for n in schedulable):
            # the test Pod never runs: the Job times out
            checks.append(("CreateJob", 'Job "upgrade-health-check-%d" in the namespace '
                           '"kube-system" did not complete in 15s: no condition of type Complete'
                           % int(time.time() * 1000)))
        else:
            checks.append(("CreateJob", None))
        not_ready = [n["name"] for n in nodes if _is_control_plane(n) and not n.get("ready", True)]
        checks.append(("ControlPlaneNodesReady",
                       "there are NotReady control-planes in the cluster: [%s]" % " ".join(not_ready)
                       if not_ready else None))
    missing = [MANIFESTS + "/%s.yaml" % c for c in COMPONENTS
               if not os.path.exists(_manifest_path(c))]
    checks.append(("StaticPodManifest", None if not missing else (
        "The control plane seems to be Static Pod-hosted, but some of the manifests don't seem to "
        "exist on disk. This probably means you're running 'kubeadm upgrade' on a remote machine, "
        "which is not supported for a Static Pod-hosted cluster. Manifest files not found: [%s]"
        % " ".join(missing))))
    try:
        common.run_checks(checks, ignore)
    except Failure as f:
        if plan:
            raise _without_prefix(f, replacement="[upgrade/health] FATAL: ")
        raise


# ---------------------------------------------------------------------------
# version policy: EnforceVersionPolicies in
# https://github.com/kubernetes/kubernetes/blob/v1.32.1/cmd/kubeadm/app/phases/upgrade/policy.go

def _kubelet_versions(nodes):
    """{kubelet version: [node names]} in the API's node order."""
    versions = {}
    for n in nodes:
        versions.setdefault(n.get("kubeletVersion") or env.default_version(), []).append(n["name"])
    return versions


def _errors_text(errors):
    return "".join("\t- %s\n" % e for e in errors)


def _enforce_policies(nodes, cc, target, allow_experimental, allow_rc, force):
    env.out('[upgrade/preflight] You have chosen to upgrade the cluster version to "%s"' % target)
    cluster_str = cc["kubernetesVersion"]
    env.out("[upgrade/versions] Cluster version: %s" % cluster_str)
    kubeadm_str = env.version()
    env.out("[upgrade/versions] kubeadm version: %s" % kubeadm_str)
    mandatory, skippable = [], []
    try:
        cluster = Version(cluster_str)
    except ValueError as e:
        raise common.phase_failure("preflight", "the version argument is invalid due to these "
                                   "fatal errors:\n\n%s\nPlease fix the misalignments highlighted "
                                   "above and try upgrading again" % _errors_text(
                                       ["Unable to fetch cluster version: Couldn't parse cluster "
                                        "version: %s" % e]))
    kubeadm = Version(kubeadm_str)
    new = Version(target)
    minimum = Version("v%d.%d.0" % (kubeadm.major, kubeadm.minor - 1))
    if new < minimum:
        mandatory.append('Specified version to upgrade to "%s" is equal to or lower than the '
                         'minimum supported version "%s". Please specify a higher version to '
                         'upgrade to' % (target, cluster_str))
    if new.minor > cluster.minor + 1:
        (skippable if new.pre else mandatory).append(
            'Specified version to upgrade to "%s" is too high; kubeadm can upgrade only 1 minor '
            'version at a time' % target)
    if new.minor < cluster.minor - 1:
        (skippable if new.pre else mandatory).append(
            'Specified version to downgrade to "%s" is too low; kubeadm can downgrade only 1 minor '
            'version at a time' % target)
    if kubeadm < new:
        if new.minor > kubeadm.minor:
            (skippable if new.pre else mandatory).append(
                'Specified version to upgrade to "%s" is at least one minor release higher than the '
                'kubeadm minor release (%d > %d). Such an upgrade is not supported'
                % (target, new.minor, kubeadm.minor))
        else:
            skippable.append('Specified version to upgrade to "%s" is higher than the kubeadm '
                             'version "%s". Upgrade kubeadm first using the tool you used to '
                             'install kubeadm' % (target, kubeadm_str))
    if kubeadm.major > new.major or kubeadm.minor > new.minor:
        skippable.append("Kubeadm version %s can only be used to upgrade to Kubernetes version "
                         "%d.%d" % (kubeadm_str, kubeadm.major, kubeadm.minor))
    if new.pre and not allow_experimental and not (new.pre.startswith("rc") and allow_rc):
        skippable.append('Specified version to upgrade to "%s" is an unstable version and such '
                         'upgrades weren\'t allowed via setting the --allow-*-upgrades flags'
                         % target)
    too_old = []
    for v in _kubelet_versions(nodes):
        try:
            if new.minor > Version(v).minor + KUBELET_SKEW:
                too_old.append(v)
        except ValueError:
            continue
    if too_old:
        skippable.append("There are kubelets in this cluster that are too old that have these "
                         "versions [%s]" % " ".join(sorted(too_old)))
    if mandatory:
        raise common.phase_failure(
            "preflight", "the version argument is invalid due to these fatal errors:\n\n%s\n"
            "Please fix the misalignments highlighted above and try upgrading again"
            % _errors_text(mandatory))
    if skippable:
        if not force:
            raise common.phase_failure(
                "preflight", "the version argument is invalid due to these errors:\n\n%s\n"
                "Can be bypassed if you pass the --force flag" % _errors_text(skippable))
        sys.stdout.write("[upgrade/preflight] Found %d potential version compatibility errors but "
                         "skipping since the --force flag is set: \n\n%s"
                         % (len(skippable), _errors_text(skippable)))
        sys.stdout.flush()


# ---------------------------------------------------------------------------
# static Pod upgrade
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/phases/upgrade/staticpods.go

class _Rollback(Exception):
    pass


def _shown(real):
    return common.shown_path(real)


def _timestamp_dirs(prefixes):
    """CreateTimestampDir for each prefix (same second). A real upgrade takes minutes, so two
    never start in one second; the stand-in waits for the next second instead of failing."""
    parent = env.host(TMP)
    os.makedirs(parent, exist_ok=True)
    while True:
        stamp = time.strftime("%Y-%m-%d-%H-%M-%S")
        paths = [os.path.join(parent, "%s-%s" % (p, stamp)) for p in prefixes]
        if not any(os.path.exists(p) for p in paths):
            for p in paths:
                os.mkdir(p, 0o700)
            return paths
        time.sleep(0.2)


_CERT_ROWS = {row[0]: row for row in kubeadm_certs.CERTIFICATES}


def _component_certs(component, external):
    """renewCertsByComponent: what the upgrade of each component renews."""
    if component == "etcd":
        return [] if external else ["etcd-server", "etcd-peer", "etcd-healthcheck-client"]
    if component == "kube-apiserver":
        certs = ["apiserver", "apiserver-kubelet-client", "front-proxy-client"]
        return certs if external else certs + ["apiserver-etcd-client"]
    return {"kube-controller-manager": ["controller-manager.conf"],
            "kube-scheduler": ["scheduler.conf"]}[component]


def _renew(name):
    """RenewUsingLocalCA: False for an external CA (no key on disk)."""
    _, relative, ca = _CERT_ROWS[name]
    if not os.path.exists(env.host("/etc/kubernetes/%s.key"
                                   % dict(kubeadm_certs.AUTHORITIES)[ca])):
        return False
    kubeadm_certs._renew(name, relative, ca)
    return True


def _upgrade_static_pods(api, cc, node, etcd_upgrade, renew):
    """The control-plane phase of apply and node: the static Pods, then the line that says so."""
    try:
        StaticPodUpgrade(api, cc, node, etcd_upgrade, renew).run()
    except Failure as f:
        raise common.phase_failure("control-plane", f.text)
    env.out("[upgrade/control-plane] The control plane instance for this node was "
            "successfully upgraded!")


class StaticPodUpgrade:
    def __init__(self, api, cc, node, etcd_upgrade, renew):
        self.api = api
        self.cc = cc
        self.node = node
        self.etcd_upgrade = etcd_upgrade
        self.renew = renew
        self.external = config.external_etcd(cc)
        self.recover = {}

    def _report_mirror_pod(self, component, image):
        """The kubelet restarts the component and updates its mirror Pod; returns how many
        Pods carry the label component=<component> (WaitForPodsWithLabel)."""
        name = self.node["name"]
        try:
            rec = self.api.get("/api/v1/nodes/" + name)
            pods = dict(rec.get("staticPods") or {})
            pods[component] = image
            self.api.patch("/api/v1/nodes/" + name, {"staticPods": pods})
            nodes = _nodes(self.api)
        except client.HTTPError as e:
            if e.code == 404:
                raise _Rollback("static Pod hash for component %s on Node %s did not change after "
                                "%s: timed out waiting for the condition"
                                % (component, name, UPGRADE_TIMEOUT))
            raise _Rollback(e.message)
        except client.ClientError as e:
            raise _Rollback(e.text)
        count = 0
        for n in nodes:
            if component in (n.get("staticPods") or {}):
                count += 1
            elif "staticPods" not in n and _is_control_plane(n) and \
                    (component != "etcd" or not self.external):
                count += 1  # a node registered before the stand-in kept mirror Pods
        return count

    def component(self, component, tmp_dir, backup_dir):
        """upgradeComponent."""
        env.out('[upgrade/staticpods] Preparing for "%s" upgrade' % component)
        current = _manifest_path(component)
        new = os.path.join(tmp_dir, component + ".yaml")
        backup = os.path.join(backup_dir, component + ".yaml")
        self.recover[component] = backup
        current_pod = _read_manifest(current)
        if current_pod is None:
            raise Failure('failed to read manifest for "%s": open %s: no such file or directory'
                          % (_shown(current), _shown(current)))
        new_pod = _read_manifest(new)
        if current_pod == new_pod:
            env.out("[upgrade/staticpods] Current and new manifests of %s are equal, skipping "
                    "upgrade" % component)
            return
        if self.renew:
            for cert in _component_certs(component, self.external):
                env.out("[upgrade/staticpods] Renewing %s certificate" % cert)
                try:
                    renewed = _renew(cert)
                except (pki.PKIError, OSError) as e:
                    raise _Rollback('failed to renew certificates for component "%s": %s'
                                    % (component, e))
                if not renewed:
                    env.out("[upgrade/staticpods] External CA detected, %s certificate can't be "
                            "renewed" % cert)
        shutil.move(current, backup)
        shutil.move(new, current)
        env.out('[upgrade/staticpods] Moving new manifest to "%s" and backing up old manifest to '
                '"%s"' % (_shown(current), _shown(backup)))
        env.out("[upgrade/staticpods] Waiting for the kubelet to restart the component")
        env.out("[upgrade/staticpods] This can take up to %s" % UPGRADE_TIMEOUT)
        count = self._report_mirror_pod(component, _image(new_pod))
        env.out("[apiclient] Found %d Pods for label selector component=%s" % (count, component))
        env.out('[upgrade/staticpods] Component "%s" upgraded successfully!' % component)

    def _etcd_manifest(self, tag):
        """The etcd manifest for the new version; the member keeps its --initial-cluster."""
        initial = "%s=https://%s:2380" % (self.node["name"], self.node["advertiseAddress"])
        state = "new"
        pod = _read_manifest(_manifest_path("etcd")) or {}
        try:
            command = pod["spec"]["containers"][0]["command"]
        except (KeyError, IndexError, TypeError):
            command = []
        for arg in command:
            if str(arg).startswith("--initial-cluster="):
                initial = str(arg).split("=", 1)[1]
            elif str(arg).startswith("--initial-cluster-state="):
                state = str(arg).split("=", 1)[1]
        return content.etcd_manifest(self.cc, self.node, initial, state, image_tag=tag)

    def etcd(self, tmp_dir, backup_dir, etcd_backup_dir):
        """performEtcdStaticPodUpgrade: back up the data, refuse a downgrade, upgrade."""
        data_dir = self.cc["etcd"]["local"]["dataDir"]
        src = env.host(data_dir)
        if not os.path.isdir(src):
            raise Failure("failed to back up etcd data, output: \"cp: cannot stat '%s': No such "
                          "file or directory\\n\"" % data_dir)
        shutil.copytree(src, os.path.join(etcd_backup_dir, os.path.basename(data_dir.rstrip("/"))),
                        symlinks=True)
        desired = content.etcd_image_tag(self.cc["kubernetesVersion"])
        current_pod = _read_manifest(_manifest_path("etcd"))
        if current_pod is None:
            raise Failure("failed to retrieve the current etcd version: open %s/etcd.yaml: no such "
                          "file or directory" % MANIFESTS)
        current = _tag(_image(current_pod))
        try:
            older = Version(desired) < Version(current)
        except ValueError:
            older = False
        if older:
            env.out('[upgrade/etcd] Non fatal issue encountered during upgrade: the desired etcd '
                    'version "%s" is older than the currently installed "%s". Skipping etcd '
                    'upgrade' % (desired, current))
            return
        pki.write_file(os.path.join(tmp_dir, "etcd.yaml"), self._etcd_manifest(desired), 0o600)
        self.component("etcd", tmp_dir, backup_dir)
        env.out("[upgrade/etcd] Waiting for etcd to become available")

    def _rollback(self):
        for component, backup in self.recover.items():
            if os.path.exists(backup):
                shutil.move(backup, _manifest_path(component))

    def run(self):
        """StaticPodControlPlane; a failure is `couldn't complete the static pod upgrade: …`."""
        parent = env.host(TMP)
        os.makedirs(parent, exist_ok=True)
        tmp_dir = _go_temp_dir(parent, "kubeadm-upgraded-manifests")
        backup_dir, etcd_backup_dir = _timestamp_dirs(("kubeadm-backup-manifests",
                                                       "kubeadm-backup-etcd"))
        env.out('[upgrade/staticpods] Writing new Static Pod manifests to "%s"' % _shown(tmp_dir))
        for component, text in (
                ("kube-apiserver", content.apiserver_manifest(self.cc, self.node)),
                ("kube-controller-manager", content.controller_manager_manifest(self.cc)),
                ("kube-scheduler", content.scheduler_manifest(self.cc))):
            pki.write_file(os.path.join(tmp_dir, component + ".yaml"), text, 0o600)
        try:
            if not self.external and self.etcd_upgrade:
                self.etcd(tmp_dir, backup_dir, etcd_backup_dir)
            for component in COMPONENTS:
                self.component(component, tmp_dir, backup_dir)
            if self.renew:
                # the client certificates of admin.conf (and super-admin.conf), silently
                for name in ("admin.conf", "super-admin.conf"):
                    if name == "admin.conf" or os.path.exists(env.host("/etc/kubernetes/" + name)):
                        if not _renew(name):
                            env.out("[upgrade/staticpods] External CA detected, %s certificate "
                                    "can't be renewed" % name)
        except _Rollback as e:
            self._rollback()
            raise Failure("couldn't complete the static pod upgrade: couldn't upgrade control "
                          "plane. kubeadm has tried to recover everything into the earlier state. "
                          "Errors faced: %s" % e)
        except Failure as f:
            raise Failure("couldn't complete the static pod upgrade: " + f.text)
        # CleanupDirs: the new manifests' directory goes, the backups stay (the etcd one only
        # when etcd was upgraded and is not an external multi-endpoint cluster)
        shutil.rmtree(tmp_dir, ignore_errors=True)
        ha_external = self.external and len(self.cc["etcd"]["external"]["endpoints"]) > 1
        if not (self.etcd_upgrade and not ha_external):
            shutil.rmtree(etcd_backup_dir, ignore_errors=True)


def _dry_run_manifests(cc, node):
    """DryRunStaticPodUpgrade: print the new manifests as if written to the manifest dir."""
    for component, text in (("kube-apiserver", content.apiserver_manifest(cc, node)),
                            ("kube-controller-manager", content.controller_manager_manifest(cc)),
                            ("kube-scheduler", content.scheduler_manifest(cc))):
        env.out('[dryrun] Would write file "%s/%s.yaml" with content:' % (MANIFESTS, component))
        for line in text.rstrip("\n").split("\n"):
            env.out("\t" + line)


# ---------------------------------------------------------------------------
# phases shared by apply and node

def _kubelet_config_phase(api, cc):
    """Back up /var/lib/kubelet/config.yaml, write it again from kubelet-config, as
    https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/phases/upgrade/postupgrade.go
    does."""
    parent = env.host(TMP)
    os.makedirs(parent, exist_ok=True)
    real = _go_temp_dir(parent, "kubeadm-kubelet-config")
    shown = _shown(real)
    gofmt.klog("W", "postupgrade.go:%d" % (116 if env.minor() >= 34 else 117),
               "Using temporary directory %s for kubelet config. To override it set the "
               "environment variable KUBEADM_UPGRADE_DRYRUN_DIR" % shown)
    env.out("[upgrade] Backing up kubelet config file to %s/config.yaml" % shown)
    try:
        shutil.copyfile(env.host(KUBELET_DIR + "/config.yaml"), os.path.join(real, "config.yaml"))
    except OSError as e:
        raise common.phase_failure("kubelet-config", "error backing up the kubelet config file: "
                                   "open %s/config.yaml: %s" % (KUBELET_DIR,
                                                                common.os_error_text(e)))
    try:
        kubelet_doc = yamlish.load(api.get(KUBELET_CONFIG)["data"]["kubelet"]) or {}
    except (client.ClientError, client.HTTPError) as e:
        raise common.phase_failure("kubelet-config", "failed to get config map: %s"
                                   % common.api_error_text(e))
    if env.minor() >= 34:
        env.out('[kubelet-start] Writing kubelet environment file with flags to file '
                '"%s/kubeadm-flags.env"' % KUBELET_DIR)
        env.out('[kubelet-start] Writing kubelet configuration to file "%s/instance-config.yaml"'
                % KUBELET_DIR)
        pki.write_file(env.host(KUBELET_DIR + "/instance-config.yaml"), yamlish.dump({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "containerRuntimeEndpoint": config.DEFAULT_CRI_SOCKET}))
        env.out('[patches] Applied patch of type "application/strategic-merge-patch+json" to '
                'target "kubeletconfiguration"')
    env.out('[kubelet-start] Writing kubelet configuration to file "%s/config.yaml"' % KUBELET_DIR)
    pki.write_file(env.host(KUBELET_DIR + "/config.yaml"), content.kubelet_config(cc, kubelet_doc))
    env.out("[upgrade/kubelet-config] The kubelet configuration for this node was successfully "
            "upgraded!")


def _unupgraded_control_planes(api, node_name):
    """UnupgradedControlPlaneInstances: the nodes whose kube-apiserver image differs from ours."""
    images = {}
    for n in _nodes(api):
        image = (n.get("staticPods") or {}).get("kube-apiserver")
        if image:
            images[n["name"]] = image
    if not images:
        raise Failure("cannot find any pods with label selector component=kube-apiserver")
    mine = images.get(node_name)
    if not mine:
        raise Failure("failed to find the kube-apiserver pod on node %s" % node_name)
    return sorted(n for n, image in images.items() if image != mine)


def _addon_phase(api, cc, node_name, control_plane, skip, target):
    applied = {}
    for sub, label, disabled in (("coredns", "CoreDNS", cc["dns"]["disabled"]),
                                 ("kube-proxy", "kube-proxy", cc["proxy"]["disabled"])):
        if "addon" in skip or "addon/" + sub in skip:
            continue
        if not control_plane:
            env.out("[upgrade/addon] Skipping the addon/%s phase. Not a control plane node." % sub)
            continue
        if disabled:
            env.out("[upgrade/addon] Skipping the addon/%s phase. The addon is disabled." % sub)
            continue
        try:
            unupgraded = _unupgraded_control_planes(api, node_name)
        except (client.ClientError, client.HTTPError) as e:
            raise common.phase_failure("addon/" + sub, "failed to determine whether all the control "
                                       "plane instances have been upgraded: %s"
                                       % common.api_error_text(e))
        except Failure as f:
            raise common.phase_failure("addon/" + sub, "failed to determine whether all the control "
                                       "plane instances have been upgraded: %s" % f.text)
        if unupgraded:
            env.out("[upgrade/addon] Skipping upgrade of addons because control plane instances "
                    "[%s] have not been upgraded" % " ".join(unupgraded))
            continue
        env.out("[addons] Applied essential addon: %s" % label)
        applied[sub] = content.coredns_version() if sub == "coredns" else target
    if applied:
        try:
            api.put("/kos/v1/addons", {"addons": applied})
        except (client.ClientError, client.HTTPError) as e:
            raise common.phase_failure("addon", common.api_error_text(e))


def _ignore(values, ucfg):
    return common.ignore_set(values["ignore-preflight-errors"], ucfg.get("ignorePreflightErrors"))


def _skip(values, set_names, ucfg):
    if "skip-phases" in set_names:
        return set(values["skip-phases"])
    return set(ucfg.get("skipPhases") or [])


# ---------------------------------------------------------------------------
# kubeadm upgrade apply
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/upgrade/apply.go

def cmd_apply(args, parse_for):
    values, set_names, pos = parse_for(["upgrade", "apply"], args)
    if len(pos) > 1:
        raise Failure("accepts at most 1 arg(s), received %d" % len(pos))
    ucfg = _upgrade_config(values["config"], "apply")
    version_arg = pos[0] if pos else str(ucfg.get("kubernetesVersion") or "")
    if not version_arg:
        raise Failure("missing one or more required arguments. Required arguments: [version]")

    def opt(flag, field):
        return _option(values, set_names, flag, ucfg, field)

    force, dry_run = opt("force", "forceUpgrade"), opt("dry-run", "dryRun")
    etcd_upgrade, renew = opt("etcd-upgrade", "etcdUpgrade"), opt("certificate-renewal",
                                                                  "certificateRenewal")
    allow_experimental = opt("allow-experimental-upgrades", "allowExperimentalUpgrades")
    allow_rc = opt("allow-release-candidate-upgrades", "allowRCUpgrades")
    ignore, skip = _ignore(values, ucfg), _skip(values, set_names, ucfg)
    kubeconfig_path = values["kubeconfig"] or ADMIN_CONF

    api = _client(kubeconfig_path)
    _upload_config_hint("upgrade")
    try:
        raw, cc = _fetch_config(api)
    except client.HTTPError as e:
        if e.code == 404:
            env.out('[upgrade] In order to upgrade, a ConfigMap called "kubeadm-config" in the '
                    '"kube-system" namespace must exist.')
            env.out("[upgrade] Use 'kubeadm init phase upload-config --config your-config.yaml' "
                    "to re-upload it.")
            raise Failure('[upgrade] FATAL: the ConfigMap "kubeadm-config" in the "kube-system" '
                          'namespace was not found')
        raise Failure("[upgrade] FATAL: failed to get config map: %s" % e.message)
    except client.ClientError as e:
        raise Failure("[upgrade] FATAL: failed to get config map: %s" % e.text)
    node = _local_node()

    if "preflight" in skip:
        target = release_version(version_arg)
    else:
        env.out("[upgrade/preflight] Running preflight checks")
        common.root_check(ignore)
        _health_checks(api, ignore)
        try:
            target = release_version(version_arg)
        except Failure as f:
            raise common.phase_failure("preflight", f.text)
        try:
            nodes = _nodes(api)
        except (client.ClientError, client.HTTPError):
            nodes = []
        _enforce_policies(nodes, cc, target, allow_experimental, allow_rc, force)
        if not (values["yes"] or force or dry_run):
            common.confirm("upgrade")
        if dry_run:
            env.out("[upgrade/preflight] Would pull the required images (like 'kubeadm config "
                    "images pull')")
        else:
            for line in PULL:
                env.out(line)

    new_cc = copy.deepcopy(cc)
    new_cc["kubernetesVersion"] = target
    if "control-plane" not in skip:
        if dry_run:
            sys.stdout.write('[dryrun] Would upgrade your static Pod-hosted control plane to '
                             'version "%s"' % target)
            _dry_run_manifests(new_cc, node)
        else:
            env.out('[upgrade/control-plane] Upgrading your static Pod-hosted control plane to '
                    'version "%s" (timeout: %s)...' % (target, UPGRADE_TIMEOUT))
            _upgrade_static_pods(api, new_cc, node, etcd_upgrade, renew)
    if dry_run:
        # the later phases' dry-run dumps of the fake client are not modelled
        env.out("[upgrade/successful] Finished dryrunning successfully!")
        return

    if "upload-config" not in skip:
        env.out('[upload-config] Storing the configuration used in ConfigMap "kubeadm-config" in '
                'the "kube-system" Namespace')
        stored = dict(raw)
        stored["kubernetesVersion"] = target
        try:
            api.put(KUBEADM_CONFIG, {"clusterConfiguration": stored})
        except (client.ClientError, client.HTTPError) as e:
            raise common.phase_failure("upload-config", "error uploading the kubeadm "
                                       "ClusterConfiguration: %s" % common.api_error_text(e))
        env.out('[kubelet] Creating a ConfigMap "kubelet-config" in namespace kube-system with the '
                'configuration for the kubelets in the cluster')
    if "kubeconfig" not in skip:
        # 1.32 prints "upgrad" (sic), fixed in 1.33 (seen in real runs)
        env.out("[%s/kubeconfig] The kubeconfig files for this node were successfully upgraded!"
                % ("upgrad" if env.minor() <= 32 else "upgrade"))
    if "kubelet-config" not in skip:
        _kubelet_config_phase(api, new_cc)
    if "bootstrap-token" not in skip:
        for line in BOOTSTRAP_TOKEN:
            env.out(line)
    _addon_phase(api, new_cc, node["name"], True, skip, target)
    env.out()
    env.out('[upgrade] SUCCESS! A control plane node of your cluster was upgraded to "%s".'
            % target)
    env.out()
    env.out("[upgrade] Now please proceed with upgrading the rest of the nodes by following the "
            "right order.")


# ---------------------------------------------------------------------------
# kubeadm upgrade node
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/upgrade/node.go

def cmd_node(args, parse_for):
    values, set_names, pos = parse_for(["upgrade", "node"], args)
    if pos:
        raise Failure('unknown command "%s" for "kubeadm upgrade node"' % pos[0])
    ucfg = _upgrade_config(values["config"], "node")

    def opt(flag, field):
        return _option(values, set_names, flag, ucfg, field)

    dry_run, etcd_upgrade = opt("dry-run", "dryRun"), opt("etcd-upgrade", "etcdUpgrade")
    renew = opt("certificate-renewal", "certificateRenewal")
    ignore, skip = _ignore(values, ucfg), _skip(values, set_names, ucfg)
    # a control-plane node is one with a kube-apiserver manifest; workers use kubelet.conf
    control_plane = os.path.exists(_manifest_path("kube-apiserver"))
    kubeconfig_path = values["kubeconfig"] or (ADMIN_CONF if control_plane else KUBELET_CONF)

    api = _client(kubeconfig_path)
    _upload_config_hint("upgrade")
    try:
        _, cc = _fetch_config(api)
    except (client.ClientError, client.HTTPError) as e:
        raise Failure("unable to fetch the kubeadm-config ConfigMap: failed to get config map: %s"
                      % common.api_error_text(e))
    target = cc["kubernetesVersion"]

    if "preflight" not in skip:
        env.out("[upgrade/preflight] Running pre-flight checks")
        common.root_check(ignore)
        if not control_plane:
            env.out("[upgrade/preflight] Skipping prepull. Not a control plane node.")
        elif dry_run:
            env.out("[upgrade/preflight] Would pull the required images (like 'kubeadm config "
                    "images pull')")
        else:
            for line in PULL:
                env.out(line)
    node = _local_node()
    if "control-plane" not in skip:
        if not control_plane:
            env.out("[upgrade/control-plane] Skipping phase. Not a control plane node.")
        else:
            env.out('[upgrade/control-plane] Upgrading your Static Pod-hosted control plane '
                    'instance to version "%s"...' % target)
            if dry_run:
                _dry_run_manifests(cc, node)
            else:
                _upgrade_static_pods(api, cc, node, etcd_upgrade, renew)
    if dry_run:
        return  # the later phases' dry-run output is not modelled
    if "kubeconfig" not in skip:
        if control_plane:
            env.out("[upgrade/kubeconfig] The kubeconfig files for this node were successfully "
                    "upgraded!")
        else:
            env.out("[upgrade/kubeconfig] Skipping phase. Not a control plane node.")
    if "kubelet-config" not in skip:
        _kubelet_config_phase(api, cc)
    _addon_phase(api, cc, node["name"], control_plane, skip, target)


# ---------------------------------------------------------------------------
# kubeadm upgrade plan
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/upgrade/plan.go

def _component_versions(nodes, cc, external):
    """{component: {version: [node names]}} from the mirror Pods of the control planes."""
    out = {c: {} for c in COMPONENTS + ("etcd",)}
    for n in nodes:
        pods = n.get("staticPods")
        if pods is None:
            if not _is_control_plane(n):
                continue
            # registered before the stand-in kept mirror Pods: assume init's versions
            pods = content.static_pod_images(cc)
        for component, image in pods.items():
            if component in out and not (component == "etcd" and external):
                out[component].setdefault(_tag(image), []).append(n["name"])
    return out


def _can_upgrade_kubelets(kubelets, target):
    if len(kubelets) > 1:
        return True
    return bool(kubelets) and target not in kubelets


def _table(rows):
    return gofmt.tabwrite("".join("\t".join(r) + "\n" for r in rows), 10, 4, 3)


def _print_plan(sections, before, external):
    text = ""
    for sec in sections:
        rows = [["COMPONENT", "NODE", "CURRENT", "TARGET"]]
        if _can_upgrade_kubelets(before["kubelets"], sec["kube"]):
            for ver in sorted(before["kubelets"]):
                rows += [["kubelet", n, ver, sec["kube"]] for n in before["kubelets"][ver]]
        text += MANUAL + "\n" + _table(rows)
        text += "\nUpgrade to the latest %s:\n\n" % sec["description"]
        rows = [["COMPONENT", "NODE", "CURRENT", "TARGET"]]
        for component in COMPONENTS:
            for ver in sorted(before[component]):
                rows += [[component, n, ver, sec["kube"]] for n in before[component][ver]]
        rows.append(["kube-proxy", "", before["kube"], sec["kube"]])
        rows.append(["CoreDNS", "", before["dns"], sec["dns"]])
        if not external:
            for ver in sorted(before["etcd"]):
                rows += [["etcd", n, ver, sec["etcd"]] for n in before["etcd"][ver]]
        text += _table(rows)
        pre = Version(sec["kube"]).pre
        flag = "" if not pre else (" --allow-release-candidate-upgrades" if pre.startswith("rc")
                                   else " --allow-experimental-upgrades")
        text += ("\nYou can now apply the upgrade by executing the following command:\n\n"
                 "\tkubeadm upgrade apply %s%s\n\n" % (sec["kube"], flag))
        if before["kubeadm"] != sec["kubeadm"]:
            text += ("Note: Before you can perform this upgrade, you have to update kubeadm to "
                     "%s.\n\n" % sec["kubeadm"])
        text += SEPARATOR + "\n\n"
    text += COMPONENT_CONFIGS
    text += _table([["API GROUP", "CURRENT VERSION", "PREFERRED VERSION",
                     "MANUAL UPGRADE REQUIRED"],
                    ["kubeproxy.config.k8s.io", "v1alpha1", "v1alpha1", "no"],
                    ["kubelet.config.k8s.io", "v1beta1", "v1beta1", "no"]])
    text += SEPARATOR + "\n\n"
    sys.stdout.write(text)
    sys.stdout.flush()


def cmd_plan(args, parse_for):
    values, set_names, pos = parse_for(["upgrade", "plan"], args)
    if len(pos) > 1:
        raise Failure("accepts at most 1 arg(s), received %d" % len(pos))
    if values["output"] not in ("", "text"):
        raise Failure("the stand-in prints kubeadm's text output only (-o text)")
    ucfg = _upgrade_config(values["config"], "plan")
    requested = pos[0] if pos else str(ucfg.get("kubernetesVersion") or "")
    ignore = _ignore(values, ucfg)

    env.out("[preflight] Running pre-flight checks.")
    try:
        common.root_check(ignore)
    except Failure as f:
        raise _without_prefix(f)  # plan is not a phase workflow
    api = _client(values["kubeconfig"] or ADMIN_CONF)
    _upload_config_hint("upgrade/config")
    try:
        _, cc = _fetch_config(api)
        nodes = _nodes(api)
        state = api.get("/kos/v1/state")
    except (client.ClientError, client.HTTPError) as e:
        raise Failure("[upgrade/config] FATAL: failed to get config map: %s"
                      % common.api_error_text(e))
    _health_checks(api, ignore, plan=True)

    # GetAvailableUpgrades (phases/upgrade/compute.go)
    env.out("[upgrade] Fetching available versions to upgrade to")
    cluster_str = cc["kubernetesVersion"].lstrip("v")
    env.out("[upgrade/versions] Cluster version: %s" % cluster_str)
    kubeadm_str = env.version()
    env.out("[upgrade/versions] kubeadm version: %s" % kubeadm_str)

    def label_version(label):
        # NewOfflineVersionGetter: a version given to plan answers every label
        return requested if requested else _offline_label(label)

    try:
        cluster, kubeadm = Version(cluster_str), Version(kubeadm_str)
        stable_str = label_version("stable")
        stable = Version(stable_str)
    except ValueError as e:
        raise Failure("[upgrade/versions] FATAL: %s" % e)
    env.out("[upgrade/versions] Target version: %s" % stable_str)
    external = config.external_etcd(cc)
    sections = []
    can_do_minor = cluster < stable
    if cluster <= stable:  # patchVersionBranchExists
        branch = "%d.%d" % (cluster.major, cluster.minor)
        description = "version in the v%s series" % branch
        patch_str = label_version("stable-" + branch)
        try:
            patch = Version(patch_str)
        except ValueError as e:
            raise Failure("[upgrade/versions] FATAL: %s" % e)
        env.out("[upgrade/versions] Latest %s: %s" % (description, patch_str))
        can_do_minor = patch < stable
        if cluster < patch:
            sections.append({"description": description, "kube": patch_str,
                             "kubeadm": kubeadm_str if patch <= kubeadm else patch_str})
    if can_do_minor:
        sections.append({"description": "stable version", "kube": stable_str,
                         "kubeadm": stable_str})
    env.out()
    if not sections:
        return  # "Awesome, you're up-to-date! Enjoy!" is only logged at --v=1
    for sec in sections:
        sec["dns"] = content.coredns_version()
        sec["etcd"] = content.etcd_image_tag(sec["kube"])
    before = _component_versions(nodes, cc, external)
    before.update(kubelets=_kubelet_versions(nodes), kube=cluster_str, kubeadm=kubeadm_str,
                  dns=(state.get("addons") or {}).get("coredns") or content.coredns_version(
                      cc["kubernetesVersion"]))
    _print_plan(sections, before, external)
