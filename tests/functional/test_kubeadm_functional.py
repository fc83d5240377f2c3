"""
The kubeadm execution and state modules through Salt's real loaders, against the
kubeadm/kubectl stand-ins (tests/standins, held to what the real kubeadm and kubectl print), and
the formula's templates rendered from pillar the way a minion renders them.

Each simulated node has its own stand-in root and loopback address; the stand-in
API servers started here are stopped by pidfile when the module ends.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from saltfactories.utils.functional import Loaders

# a free 127.x.y. prefix for the stand-in API servers, found as the stand-ins' own tests find it
from tests.standins.test_kubeadm_standin import _free_base

REPO = Path(__file__).resolve().parents[2]
STANDINS = REPO / "tests" / "standins"
PIDFILE = "var/run/kos-standin-apiserver.pid"
TOKEN_RE = re.compile(r"[a-z0-9]{6}\.[a-z0-9]{16}")
MINION_ID = "k8s-cp-1.kos-fn.test"
INSTANCE_ID = "6f1c2d5e-8a4b-4c3d-9e2f-0a1b2c3d4e5f"
CREDENTIALS = {"application_credential_id": "app-cred-id",
               "application_credential_secret": 'se"cr;et#1'}


def stop_apiserver(root):
    pidfile = Path(root) / PIDFILE
    try:
        pid = int(pidfile.read_text().strip())
        if b"kos-standin-apiserver" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.05)


class Node:
    def __init__(self, base_dir, name, ip):
        self.name = name
        self.ip = ip
        self.root = Path(base_dir) / name
        (self.root / "etc").mkdir(parents=True, exist_ok=True)
        (self.root / "etc" / "hostname").write_text(name + "\n")
        self.kube_dir = str(self.root / "etc" / "kubernetes")
        # what cloud-init leaves on an OpenStack VM
        (self.root / "var/lib/cloud/data").mkdir(parents=True, exist_ok=True)
        (self.root / "var/lib/cloud/data/instance-id").write_text(INSTANCE_ID + "\n")
        self.state_dir = str(self.root / "etc" / "kos")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("kubeadm-fn")
    prefix = _free_base()
    nodes = {name: Node(base, name, prefix + str(i + 1))
             for i, name in enumerate(["k8s-cp-1", "k8s-worker-1", "ec-cp", "half-cp",
                                       "k8s-cp-2"])}
    yield nodes
    for node in nodes.values():
        stop_apiserver(node.root)


@pytest.fixture(scope="module")
def environ(lab):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{STANDINS / 'bin'}:{os.environ['PATH']}")
        mp.setenv("KOS_STANDIN_DISCOVERY_TIMEOUT", "1")
        yield mp


@contextlib.contextmanager
def on(node):
    """Run stand-in commands as ``node`` (its root and address)."""
    saved = {k: os.environ.get(k) for k in ("KOS_STANDIN_ROOT", "KOS_STANDIN_IP")}
    os.environ["KOS_STANDIN_ROOT"] = str(node.root)
    os.environ["KOS_STANDIN_IP"] = node.ip
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def pillar_for(lab, **kubeadm):
    cp, worker = lab["k8s-cp-1"], lab["k8s-worker-1"]
    data = {
        "kos": {
            "distribution": "kubeadm",
            "cluster_name": "kos-fn",
            "domain": "kos-fn.test",
            "networks": {"private_cidr": "127.0.0.0/8", "pod_cidr": "10.244.0.0/16",
                         "service_cidr": "10.96.0.0/12"},
            "salt_master": {"id": "salt.kos-fn.test"},
            "nodes": {
                MINION_ID: {"role": "control_plane", "ip": cp.ip},
                "k8s-worker-1.kos-fn.test": {"role": "worker", "ip": worker.ip},
            },
            "first_control_plane": MINION_ID,
            "api": {"floating_ip": "203.0.113.10"},
            "roles": ["control_plane", "kubernetes_node", "first_control_plane"],
            "state_dir": cp.state_dir,
        },
        "kubeadm": {
            # this machine is no node: nothing installed, no systemd, no sysctls
            "manage": {key: False for key in ("packages", "services", "swap",
                                              "kernel_modules", "sysctl")},
            "kube_dir": cp.kube_dir,
            "api": {"endpoint": f"{cp.ip}:6443"},
            "haproxy": {"config_file": str(cp.root / "etc/haproxy/haproxy.cfg"), "user": None},
            "ccm": {"auth_url": "https://keystone.example.com:5000/v3",
                    "cloud_conf": str(cp.root / "etc/kubernetes/cloud.conf"),
                    "instance_id_file": str(cp.root / "var/lib/cloud/data/instance-id"),
                    "floating_network_id": "ext-net-id",
                    "credentials": CREDENTIALS},
        },
    }
    for key, value in kubeadm.items():
        data["kubeadm"][key] = value
    return data


@pytest.fixture(scope="module")
def minion_opts(salt_factories, tmp_path_factory, lab, environ, release_root):
    pillar_dir = tmp_path_factory.mktemp("kubeadm-fn-pillar")
    (pillar_dir / "top.sls").write_text("base:\n  '*':\n    - fn\n")
    (pillar_dir / "fn.sls").write_text(yaml.safe_dump(pillar_for(lab)))
    factory = salt_factories.salt_minion_daemon(
        MINION_ID,
        overrides={
            "file_client": "local",
            "file_roots": {"base": [str(REPO / "salt" / "salt"), str(release_root)]},
            "pillar_roots": {"base": [str(pillar_dir)]},
        },
    )
    return factory.config.copy()


@pytest.fixture(scope="module")
def loaders(minion_opts):
    return Loaders(minion_opts)


def render(loaders, path):
    return loaders.modules.slsutil.renderer(f"salt://{path}", default_renderer="jinja")


def write_config(loaders, node):
    path = Path(node.kube_dir) / "kubeadm-config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(loaders, "kubeadm/files/kubeadm-config.yaml.jinja"))
    return str(path)


# --- rendered from pillar ---------------------------------------------------------------------

def test_modules_load_only_with_kubeadm_on_path(loaders):
    assert "kubeadm.init" in loaders.modules
    assert "kos_join.token_create" in loaders.modules
    assert "kubeadm.initialized" in loaders.states
    assert "kubeadm_join.credential_present" in loaders.states
    assert "kubeadm_node.manifest_applied" in loaders.states


def test_kubeadm_config_is_v1beta4_with_external_cloud_provider(loaders, lab):
    docs = list(yaml.safe_load_all(render(loaders, "kubeadm/files/kubeadm-config.yaml.jinja")))
    init, cluster = docs
    assert init["apiVersion"] == cluster["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert init["nodeRegistration"]["name"] == "k8s-cp-1"
    assert {"name": "cloud-provider", "value": "external"} in init["nodeRegistration"][
        "kubeletExtraArgs"]
    # the server is named <cluster>-k8s-cp-1, the node k8s-cp-1: the CCM finds it by UUID
    assert {"name": "provider-id", "value": f"openstack:///{INSTANCE_ID}"} in init[
        "nodeRegistration"]["kubeletExtraArgs"]
    assert init["localAPIEndpoint"] == {"advertiseAddress": lab["k8s-cp-1"].ip, "bindPort": 6443}
    assert init["bootstrapTokens"] == [{"description": "kos: node join", "ttl": "10m0s"}]
    assert cluster["controlPlaneEndpoint"] == f"{lab['k8s-cp-1'].ip}:6443"
    assert cluster["networking"] == {"podSubnet": "10.244.0.0/16",
                                     "serviceSubnet": "10.96.0.0/12", "dnsDomain": "cluster.local"}
    assert cluster["apiServer"]["certSANs"] == ["203.0.113.10"]
    assert cluster["controllerManager"]["extraArgs"] == [{"name": "cloud-provider",
                                                          "value": "external"}]
    assert cluster["proxy"] == {"disabled": True}  # kube-router is the service proxy
    assert "etcd" not in cluster and cluster["clusterName"] == "kos-fn"


def test_kube_router_daemonset(loaders):
    docs = {d["kind"]: d for d in yaml.safe_load_all(render(loaders,
                                                           "kubeadm/files/kube-router.yaml.jinja"))}
    assert set(docs) == {"ConfigMap", "DaemonSet", "ServiceAccount", "ClusterRole",
                         "ClusterRoleBinding"}
    spec = docs["DaemonSet"]["spec"]["template"]["spec"]
    tolerations = spec["tolerations"]
    assert {"key": "node.cloudprovider.kubernetes.io/uninitialized", "operator": "Equal",
            "value": "true", "effect": "NoSchedule"} in tolerations
    assert {"operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
            "effect": "NoSchedule"} in tolerations
    assert spec["hostNetwork"] is True
    args = spec["containers"][0]["args"]
    for flag in ("--run-router=true", "--run-service-proxy=true", "--enable-overlay=false",
                 "--service-cluster-ip-range=10.96.0.0/12", "--cluster-asn=64512"):
        assert flag in args
    json.loads(docs["ConfigMap"]["data"]["cni-conf.json"])
    kubeconfig = yaml.safe_load(docs["ConfigMap"]["data"]["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"].endswith(":6443")


def test_ccm_static_pod_mounts_cloud_conf(loaders, lab):
    pod = yaml.safe_load(render(loaders,
                                "kubeadm/files/openstack-cloud-controller-manager.yaml.jinja"))
    assert pod["kind"] == "Pod" and pod["metadata"]["namespace"] == "kube-system"
    container = pod["spec"]["containers"][0]
    assert "--cloud-provider=openstack" in container["args"]
    config_arg = next(a for a in container["args"] if a.startswith("--cloud-config="))
    mount = next(m for m in container["volumeMounts"]
                 if m["mountPath"] == config_arg.split("=", 1)[1])
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["hostPath"] == {"path": str(lab["k8s-cp-1"].root / "etc/kubernetes/cloud.conf"),
                                  "type": "File"}
    assert mount["readOnly"] is True
    assert pod["spec"]["hostNetwork"] is True
    # a rotated credential changes the manifest, so the kubelet restarts the Pod
    digest = pod["metadata"]["annotations"]["kos/cloud-conf-sha256"]
    assert re.fullmatch(r"[0-9a-f]{64}", digest), digest


def test_cloud_conf_quotes_credentials(loaders):
    text = render(loaders, "kubeadm/files/cloud.conf.jinja")
    assert 'application-credential-id="app-cred-id"' in text
    assert 'application-credential-secret="se\\"cr;et#1"' in text
    assert 'auth-url="https://keystone.example.com:5000/v3"' in text
    assert 'floating-network-id="ext-net-id"' in text
    assert "password" not in text and "username" not in text


def test_cloud_conf_load_balancers_are_monitored_by_default(loaders):
    """Services of type LoadBalancer: a health monitor on every pool unless the pillar says
    otherwise (the CCM's own default is none), the CCM's durations with their unit."""
    lb = render(loaders, "kubeadm/files/cloud.conf.jinja").split("[LoadBalancer]")[1]
    lines = lb.split()
    for line in ('lb-method="ROUND_ROBIN"', "internal-lb=false", "create-monitor=true",
                 "monitor-delay=5s", "monitor-timeout=3s", "monitor-max-retries=1",
                 "monitor-max-retries-down=3"):
        assert line in lines, lb
    assert not [line for line in lines if line.startswith("lb-provider")]


def test_ccm_rbac_binds_the_controller_manager_identity(loaders):
    docs = list(yaml.safe_load_all(render(
        loaders, "kubeadm/files/openstack-cloud-controller-manager-rbac.yaml.jinja")))
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                    "name": "system:kube-controller-manager"}]


def test_cinder_csi_controller_has_the_ccm_credential_and_the_nodes_none(loaders, lab):
    """The controller reads the cloud controller's cloud.conf from its control plane's disk
    (one credential for both, never a Secret); the node service, on every node, has no
    credential and no API token."""
    docs = {d["kind"]: d for d in yaml.safe_load_all(render(loaders,
                                                           "kubeadm/files/cinder-csi.yaml.jinja"))}
    assert docs["CSIDriver"]["metadata"]["name"] == "cinder.csi.openstack.org"
    assert "Secret" not in docs
    controller = docs["Deployment"]["spec"]["template"]["spec"]
    assert controller["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert controller["serviceAccountName"] == "csi-cinder-controller-sa"
    plugin = next(c for c in controller["containers"] if c["name"] == "cinder-csi-plugin")
    assert {"--cloud-config=/etc/config/cloud.conf", "--cluster=kos-fn",
            "--provide-node-service=false"} <= set(plugin["args"])
    cloud_conf = next(v for v in controller["volumes"] if v["name"] == "cloud-config")
    assert cloud_conf["hostPath"]["path"] == str(lab["k8s-cp-1"].root / "etc/kubernetes/cloud.conf")
    defaults = yaml.safe_load((REPO / "salt/salt/kubeadm/defaults.yaml").read_text())["csi"]
    images = {c["name"]: c["image"] for c in controller["containers"]}
    assert images == {"csi-provisioner": defaults["images"]["provisioner"],
                      "csi-attacher": defaults["images"]["attacher"],
                      "csi-resizer": defaults["images"]["resizer"],
                      "cinder-csi-plugin": defaults["images"]["plugin"]}
    assert all("--leader-election=true" in c["args"] for c in controller["containers"]
               if c["name"] != "cinder-csi-plugin")
    # a rotated credential rolls the controller
    digest = docs["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert re.fullmatch(r"[0-9a-f]{64}", digest["kos/cloud-conf-sha256"])

    node = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert node["automountServiceAccountToken"] is False
    assert node["tolerations"] == [{"operator": "Exists"}]
    plugin = next(c for c in node["containers"] if c["name"] == "cinder-csi-plugin")
    assert "--node-service-no-os-client=true" in plugin["args"]
    assert not [a for a in plugin["args"] if a == "--cloud-config=/etc/config/cloud.conf"]
    assert not [v for v in node["volumes"] if "cloud.conf" in json.dumps(v)]
    registrar = next(c for c in node["containers"] if c["name"] == "node-driver-registrar")
    assert registrar["image"] == defaults["images"]["registrar"]
    assert ("--kubelet-registration-path=/var/lib/kubelet/plugins/cinder.csi.openstack.org/"
            "csi.sock") in registrar["args"]
    conf = docs["ConfigMap"]["data"]["cinder-csi.conf"]
    assert "ignore-volume-az=false" in conf and "search-order=metadataService" in conf


def test_storage_classes_one_per_entry_the_default_annotated(loaders):
    docs = list(yaml.safe_load_all(render(loaders,
                                          "kubeadm/files/cinder-csi-storage-classes.yaml.jinja")))
    docs = [d for d in docs if d]
    assert [d["metadata"]["name"] for d in docs] == ["cinder"]
    sc = docs[0]
    assert sc["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert sc["provisioner"] == "cinder.csi.openstack.org"
    # Cinder's default type, in the zone of the first Pod's node
    assert sc["parameters"] == {"csi.storage.k8s.io/fstype": "ext4"}
    assert sc["allowVolumeExpansion"] is True and sc["reclaimPolicy"] == "Delete"
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"


def test_the_csi_goes_with_the_first_control_plane_and_needs_the_ccm(loaders):
    ids = low_ids(loaders, "kubeadm.master")
    assert "kubeadm-csi-kubeadm_node-manifest_applied-cinder-csi" in ids
    applied = ids["kubeadm-csi-kubeadm_node-manifest_applied-cinder-csi-storage-classes"]
    assert {"kubeadm_node": "kubeadm-csi-kubeadm_node-manifest_applied-cinder-csi"} in applied[
        "require"]
    off = low_ids(loaders, "kubeadm.master", pillar={"kubeadm": {"ccm": {"enabled": False}}})
    assert not [i for i in off if i.startswith("kubeadm-csi-")]


@pytest.mark.skipif(not shutil.which("haproxy"), reason="needs haproxy")
def test_haproxy_config_is_valid(loaders, tmp_path):
    text = loaders.modules.slsutil.renderer(
        "salt://kubeadm/files/haproxy.cfg.jinja", default_renderer="jinja",
        backends=[{"name": "k8s-cp-1", "address": "10.1.0.11"},
                  {"name": "k8s-cp-2", "address": "10.1.0.12"}])
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(text)
    res = subprocess.run(["haproxy", "-c", "-f", str(cfg)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "server k8s-cp-2 10.1.0.12:6443 check verify none" in text
    assert "bind 127.0.0.1:7443" in text


def test_master_sls_renders_and_issues_no_credential(loaders):
    chunks = loaders.modules.state.show_low_sls("kubeadm.master")
    assert isinstance(chunks, list), chunks
    ids = [c["__id__"] for c in sorted(chunks, key=lambda c: c["order"])]
    for state_id in ("kubeadm-master-kubeadm-initialized",
                     "kubeadm-cni-kubeadm_node-manifest_applied-kube_router",
                     "kubeadm-ccm-file-managed-static_pod",
                     "kubeadm-haproxy-file-managed-config",
                     "kubeadm-master-kubeadm_join-credentials_absent-shared"):
        assert state_id in ids, ids
    # join credentials are the orchestration's, per node: never a highstate's
    assert not [i for i in ids if "credential_present" in i]


def test_credentials_sls_issues_one_per_named_node_with_its_terraform_role(loaders, lab):
    worker = "k8s-worker-1.kos-fn.test"
    wanted = {"kos_orchestration": {"join_nodes": [worker]}}
    config = Path(lab["k8s-cp-1"].kube_dir) / "kubeadm-config.yaml"
    kept = config.read_text() if config.exists() else None
    config.unlink(missing_ok=True)
    try:
        # an issuer that never ran kubeadm.master (a control plane that joined) writes the
        # configuration the certificate upload reads first
        ids = low_ids(loaders, "kubeadm.credentials", pillar=wanted)
        written = ids.pop("kubeadm-credentials-file-managed-config")
        assert written["name"] == str(config)
        state = ids.pop(f"kubeadm-credentials-kubeadm_join-credential_present-{worker}")
        assert (state["name"], state["role"], state["node_name"]) == (worker, "worker",
                                                                      "k8s-worker-1")
        assert state["config"] == str(config)
        assert {"file": "kubeadm-credentials-file-managed-config"} in state["require"]
        assert ids == {}
        # where it is written already, it is left to kubeadm.master
        write_config(loaders, lab["k8s-cp-1"])
        again = low_ids(loaders, "kubeadm.credentials", pillar=wanted)
        assert list(again) == [f"kubeadm-credentials-kubeadm_join-credential_present-{worker}"]
    finally:
        if kept is None:
            config.unlink(missing_ok=True)
        else:
            config.write_text(kept)
    bad = low_ids(loaders, "kubeadm.credentials", pillar={"kos_orchestration": {
        "join_nodes": ["k8s-cp-9.kos-fn.test", MINION_ID]}})
    assert list(bad) == ["kubeadm-credentials-test-fail_without_changes-unknown"]


MANAGED = {"kubeadm": {"manage": {key: True for key in ("packages", "services", "swap",
                                                         "kernel_modules", "sysctl")}}}


def low_ids(loaders, sls, pillar=None):
    chunks = loaders.modules.state.show_low_sls(sls, pillar=pillar)
    assert isinstance(chunks, list), chunks
    return {c["__id__"]: c for c in chunks}


def test_node_preparation_on_a_real_node(loaders):
    ids = low_ids(loaders, "kubeadm", pillar=MANAGED)
    pkgs = ids["kubeadm-prepare-pkg-installed-kubernetes"]
    assert pkgs["hold"] is True and pkgs["reload_modules"] is True
    assert pkgs["pkgs"] == [{"kubelet": "1.31.4-1.1"}, {"kubeadm": "1.31.4-1.1"},
                            {"kubectl": "1.31.4-1.1"}]
    assert ids["kubeadm-prepare-pkgrepo-managed-kubernetes"]["name"].startswith(
        "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/")
    for state_id in ("kubeadm-prepare-kmod-present-br_netfilter",
                     "kubeadm-prepare-sysctl-present-net.ipv4.ip_forward",
                     "kubeadm-prepare-cmd-run-swapoff", "kubeadm-prepare-service-running-containerd",
                     "kubeadm-haproxy-service-running", "kubeadm-haproxy-pkg-installed"):
        assert state_id in ids, sorted(ids)
    assert "kubeadm-haproxy-cmd-run-start" not in ids


def test_a_joined_node_keeps_its_kubernetes_packages_where_they_are(loaders, tmp_path):
    """A highstate must not move a joined node's kubelet behind orch.upgrade's back (the
    skew policy: no kubelet newer than the API server): it keeps the packages installed and
    held, at whatever version they are; a node not joined yet installs the pillar's."""
    kube_dir = tmp_path / "kubernetes"
    kube_dir.mkdir()
    pillar = {"kubeadm": {**MANAGED["kubeadm"], "kube_dir": str(kube_dir),
                          "version": "v1.32.1", "package_version": "1.32.1-1.1"}}
    fresh = low_ids(loaders, "kubeadm.prepare", pillar=pillar)["kubeadm-prepare-pkg-installed-kubernetes"]
    assert fresh["pkgs"] == [{"kubelet": "1.32.1-1.1"}, {"kubeadm": "1.32.1-1.1"},
                             {"kubectl": "1.32.1-1.1"}]
    assert fresh["hold"] is True and fresh["update_holds"] is True
    (kube_dir / "kubelet.conf").write_text("apiVersion: v1\nkind: Config\n")
    joined = low_ids(loaders, "kubeadm.prepare", pillar=pillar)["kubeadm-prepare-pkg-installed-kubernetes"]
    assert joined["pkgs"] == ["kubelet", "kubeadm", "kubectl"]
    assert joined["hold"] is True and "update_holds" not in joined


def test_the_upgrade_moves_the_repository_line_then_kubeadm_first(loaders):
    """Where kos owns the packages, the node's pkgs.k8s.io line moves to the target's minor
    before the kubeadm package; kubelet and kubectl follow kubeadm upgrade."""
    run = {"kos_upgrade": {
        "node": "k8s-worker-1", "version": "v1.32.1", "package_version": "1.32.1-1.1",
        "repo": {"url": "https://pkgs.k8s.io/core:/stable:/v1.32/deb/",
                 "key_url": "https://pkgs.k8s.io/core:/stable:/v1.32/deb/Release.key",
                 "keyring": "/etc/apt/keyrings/kubernetes-apt-keyring.gpg"},
        "first": False, "drain_timeout": 300, "ready_timeout": 300, "cordoned": False}}
    chunks = loaders.modules.state.show_low_sls("kubeadm.upgrade.node", pillar={**MANAGED, **run})
    assert isinstance(chunks, list), chunks
    order = [c["__id__"] for c in sorted(chunks, key=lambda c: c["order"])]
    assert order == ["kubeadm-upgrade-node-pkgrepo-managed-kubernetes",
                     "kubeadm-upgrade-node-kubeadm_upgrade-packages-kubeadm",
                     "kubeadm-upgrade-node-kubeadm_upgrade-upgraded",
                     "kubeadm-upgrade-node-kubeadm_upgrade-packages-kubelet",
                     "kubeadm-upgrade-node-kubeadm_upgrade-kubelet_restarted"]
    ids = {c["__id__"]: c for c in chunks}
    assert ids["kubeadm-upgrade-node-pkgrepo-managed-kubernetes"]["name"] == (
        "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] "
        "https://pkgs.k8s.io/core:/stable:/v1.32/deb/ /")
    assert ids["kubeadm-upgrade-node-kubeadm_upgrade-packages-kubeadm"]["name"] == "1.32.1-1.1"
    unmanaged = {c["__id__"] for c in loaders.modules.state.show_low_sls(
        "kubeadm.upgrade.node", pillar=run)}
    assert "kubeadm-upgrade-node-pkgrepo-managed-kubernetes" not in unmanaged
    assert "kubeadm-upgrade-node-kubeadm_node-images_imported" not in unmanaged
    # without a registry (the rehearsal cloud), the target's images go in before kubeadm
    archives = "/var/lib/kos-mirror/kubernetes/core:/stable:/v1.32/images"
    run["kos_upgrade"]["archive_dir"] = archives
    chunks = loaders.modules.state.show_low_sls("kubeadm.upgrade.node", pillar=run)
    order = [c["__id__"] for c in sorted(chunks, key=lambda c: c["order"])]
    imported = order.index("kubeadm-upgrade-node-kubeadm_node-images_imported")
    assert imported < order.index("kubeadm-upgrade-node-kubeadm_upgrade-upgraded")
    assert chunks[[c["__id__"] for c in chunks].index(
        "kubeadm-upgrade-node-kubeadm_node-images_imported")]["name"] == archives


@pytest.mark.parametrize("content", [None, "iid-datasource-none\n"], ids=["missing", "not-uuid"])
def test_no_instance_uuid_stops_the_node_before_it_joins(loaders, tmp_path, content):
    """Without a provider ID the cloud controller would look for a server named like the
    node, which is not the server's name (and not unique across clusters)."""
    path = tmp_path / "instance-id"
    if content is not None:
        path.write_text(content)
    ids = low_ids(loaders, "kubeadm.joined",
                  pillar={"kubeadm": {"ccm": {"instance_id_file": str(path)}}})
    check = ids["kubeadm-prepare-test-fail_without_changes-provider_id"]
    assert str(path) in check["name"] and "kubeadm:ccm:enabled" in check["name"]
    assert {"sls": "kubeadm.prepare"} in ids["kubeadm-joined-kubeadm-joined"]["require"]
    args = ids["kubeadm-joined-kubeadm-joined"]["kubelet_extra_args"]
    assert not any(a["name"] == "provider-id" for a in args)
    off = low_ids(loaders, "kubeadm.joined", pillar={"kubeadm": {"ccm": {
        "enabled": False, "instance_id_file": str(path)}}})
    assert "kubeadm-prepare-test-fail_without_changes-provider_id" not in off


def test_node_preparation_switched_off_runs_haproxy_from_a_pidfile(loaders):
    ids = low_ids(loaders, "kubeadm")
    assert sorted(ids) == ["kubeadm-haproxy-cmd-run-reload", "kubeadm-haproxy-cmd-run-start",
                           "kubeadm-haproxy-file-managed-config",
                           "kubeadm-prepare-file-directory-kube_dir"]
    assert "-p " in ids["kubeadm-haproxy-cmd-run-start"]["name"]


@pytest.mark.parametrize("sls", ["kubeadm.joined", "kubeadm.revoke", "kubeadm.reset",
                                 "kubeadm.clean", "kubeadm.drain", "kubeadm.delete",
                                 "kubeadm.etcd_forget"])
def test_every_sls_renders(loaders, sls):
    assert low_ids(loaders, sls, pillar={"kubeadm_node": "k8s-worker-1"})


@pytest.mark.parametrize("extra, words", [
    ({}, "is the first control plane: it stays (kos up --replace rebuilds it; a cluster never "
         "retires it)"),
    # this deployment has one control plane: nothing would keep the cluster meanwhile
    ({"replace": True}, "is the only control plane left: no other one keeps the cluster while "
                        "it is rebuilt"),
])
def test_remove_orchestration_keeps_the_first_control_plane_and_changes_nothing(loaders, extra,
                                                                               words):
    """orch.remove refuses before it asks any minion (one node at a time, workers first, is
    tests/integration/kubeadm's)."""
    data = loaders.modules.state.show_sls(
        "orch.remove", pillar={"remove": ["k8s-worker-1.kos-fn.test", MINION_ID], **extra})
    assert list(data) == ["kos-orch-remove-options"], list(data)
    step = dict(kv for item in data["kos-orch-remove-options"]["test"]
                if isinstance(item, dict) for kv in item.items())
    assert step["name"] == f"nothing changed: {MINION_ID} {words}"


@pytest.mark.parametrize("distribution, pillar, words", [
    ("kubeadm", {"version": "1.32"},
     "pillar key 'version' must be a Kubernetes release such as v1.32.1, got \"1.32\""),
    ("kubeadm", {"version": "v1.32.1", "package_version": "latest"},
     "pillar key 'package_version' must be a Debian package version such as 1.32.1-1.1"),
    ("microk8s", {"version": "latest/edge"},
     "pillar key 'version' must be a microk8s track such as 1.32"),
])
def test_upgrade_orchestration_refuses_bad_options_before_asking_a_minion(
        loaders, distribution, pillar, words):
    data = loaders.modules.state.show_sls("orch.upgrade", pillar={
        **pillar, "kos": {"distribution": distribution}})
    assert list(data) == ["kos-orch-upgrade-options"], data
    step = dict(kv for item in data["kos-orch-upgrade-options"]["test"]
                if isinstance(item, dict) for kv in item.items())
    assert words in step["name"], step["name"]


@pytest.mark.parametrize("orch", ["deploy", "certificates", "restore", "backup", "remove",
                                  "upgrade"])
@pytest.mark.parametrize("value, words", [
    (None, "kos:distribution is not in the pillar"),
    ("k3s", 'kos:distribution is "k3s", not microk8s or kubeadm'),
])
def test_an_orchestration_without_the_distribution_stops_saying_where_it_comes_from(
        loaders, orch, value, words):
    # No default: a kubeadm cluster run as microk8s would be worse than no run.
    data = loaders.modules.state.show_sls(f"orch.{orch}", pillar={
        "kos": {"distribution": value}})
    assert isinstance(data, list) and len(data) == 1, data
    assert words in data[0] and "set kubernetes_distribution to microk8s or kubeadm" in data[0]


def test_master_in_test_mode_on_a_fresh_node_changes_nothing(loaders, lab):
    cp = lab["k8s-cp-1"]
    before = sorted(str(p) for p in cp.root.rglob("*"))
    with on(cp):
        ret = loaders.modules.state.sls("kubeadm.master", test=True)
    results = ret.raw
    failed = {k: v["comment"] for k, v in results.items() if v["result"] is False}
    assert not failed, failed
    predicted = {v["__id__"] for v in results.values() if v["result"] is None}
    assert {"kubeadm-master-kubeadm-initialized",
            "kubeadm-cni-kubeadm_node-manifest_applied-kube_router"} <= predicted
    assert sorted(str(p) for p in cp.root.rglob("*")) == before


# --- against the stand-ins --------------------------------------------------------------------

@pytest.fixture(scope="module")
def initialized(loaders, lab):
    cp = lab["k8s-cp-1"]
    config = write_config(loaders, cp)
    with on(cp):
        dry = loaders.states.kubeadm.initialized(name=config, kube_dir=cp.kube_dir, test=True)
        ret = loaders.states.kubeadm.initialized(name=config, kube_dir=cp.kube_dir, timeout=30)
        again = loaders.states.kubeadm.initialized(name=config, kube_dir=cp.kube_dir)
    return {"dry": dry, "ret": ret, "again": again, "config": config}


def test_initialized_dry_run_then_init_then_nothing(initialized, lab):
    cp = lab["k8s-cp-1"]
    assert initialized["dry"].result is None, initialized["dry"]
    assert "--dry-run passed" in initialized["dry"].comment
    assert not (Path(cp.kube_dir) / "tmp").exists() or not any((Path(cp.kube_dir) / "tmp").iterdir())
    assert initialized["ret"].result is True, initialized["ret"]
    assert initialized["ret"].changes == {"control_plane": {"old": None, "new": "initialized"}}
    assert initialized["again"].result is True and initialized["again"].changes == {}
    flags = (cp.root / "var/lib/kubelet/kubeadm-flags.env").read_text()
    assert "--cloud-provider=external" in flags and f"--node-ip={cp.ip}" in flags
    assert f"--provider-id=openstack:///{INSTANCE_ID}" in flags


def test_ca_hash_agrees_with_kubeadm(loaders, initialized, lab):
    cp = lab["k8s-cp-1"]
    with on(cp):
        printed = loaders.modules.kos_join.join_command(ttl=60)
        ours = loaders.modules.kos_join.ca_cert_hash()
    assert printed["ca_cert_hash"] == ours
    assert printed["api_server_endpoint"] == f"{cp.ip}:6443"


def test_certificates_are_what_the_files_say(loaders, initialized, lab):
    cp = lab["k8s-cp-1"]
    with on(cp):
        found = loaders.modules.kos_certs.certificates()
    certs, cas = found["certificates"], found["authorities"]
    # where init ran, every leaf check-expiration lists exists, super-admin.conf included
    assert sorted(certs) == sorted([
        "admin.conf", "apiserver", "apiserver-etcd-client", "apiserver-kubelet-client",
        "controller-manager.conf", "etcd-healthcheck-client", "etcd-peer", "etcd-server",
        "front-proxy-client", "scheduler.conf", "super-admin.conf"])
    assert all(entry and 364 <= entry["days"] <= 365 for entry in certs.values()), certs
    assert sorted(cas) == ["ca", "etcd-ca", "front-proxy-ca"]
    assert all(3649 <= entry["days"] <= 3650 for entry in cas.values()), cas
    assert certs["etcd-peer"]["authority"] == "etcd-ca"
    # to the minute kubeadm prints, the file's own notAfter
    pem = (Path(cp.kube_dir) / "pki" / "apiserver.crt").read_bytes()
    not_after = x509.load_pem_x509_certificate(pem).not_valid_after_utc.timestamp()
    assert 0 <= not_after - certs["apiserver"]["expires"] < 60


def test_ca_hash_agrees_with_kubeadm_for_an_ecdsa_ca(loaders, lab, tmp_path):
    node = lab["ec-cp"]
    config = tmp_path / "ec.yaml"
    config.write_text(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n"
        f"  advertiseAddress: {node.ip}\n---\napiVersion: kubeadm.k8s.io/v1beta4\n"
        "kind: ClusterConfiguration\nencryptionAlgorithm: ECDSA-P256\n")
    with on(node):
        loaders.modules.kubeadm.init(str(config), kube_dir=node.kube_dir)
        printed = loaders.modules.kos_join.join_command(ttl=60)
    ca = Path(node.kube_dir) / "pki" / "ca.crt"
    assert b"BEGIN CERTIFICATE" in ca.read_bytes()
    assert loaders.modules.kos_join.ca_cert_hash(str(ca)) == printed["ca_cert_hash"]
    stop_apiserver(node.root)


WORKER_ID = "k8s-worker-1.kos-fn.test"


def credential(lab, minion):
    return Path(lab["k8s-cp-1"].state_dir) / "join" / f"{minion}.json"


@pytest.fixture(scope="module")
def published(loaders, initialized, lab):
    """A worker's credential, and a control plane's (issued for this minion: the functional
    loaders are one minion, which the control-plane join below plays)."""
    cp = lab["k8s-cp-1"]
    with on(cp):
        token = loaders.states.kubeadm_join.credential_present(
            name=WORKER_ID, role="worker", node_name="k8s-worker-1", ttl=1800,
            min_remaining=600, kube_dir=cp.kube_dir)
        cert = loaders.states.kubeadm_join.credential_present(
            name=MINION_ID, role="control_plane", node_name="k8s-cp-2", ttl=1800,
            min_remaining=600, config=initialized["config"], kube_dir=cp.kube_dir)
    return {"token": token, "cert": cert, "join": credential(lab, WORKER_ID),
            "key": credential(lab, MINION_ID)}


def test_credentials_published_and_never_in_the_return(published, loaders, lab):
    assert published["token"].result is True and published["token"].changes, published["token"]
    assert published["cert"].result is True and published["cert"].changes, published["cert"]
    doc = json.loads(published["join"].read_text())
    cp_doc = json.loads(published["key"].read_text())
    assert "certificate_key" not in doc  # a worker's credential unlocks no CA key
    for ret in (published["token"], published["cert"]):
        text = json.dumps(ret.changes) + ret.comment
        assert doc["token"] not in text and cp_doc["certificate_key"] not in text
        assert cp_doc["token"] not in text
    assert oct(published["join"].stat().st_mode & 0o777) == "0o600"
    assert doc["expires"] > time.time() + 1500
    cp = lab["k8s-cp-1"]
    with on(cp):
        listed = {t["id"]: t for t in loaders.modules.kos_join.token_list()}
        assert listed[doc["token_id"]]["description"] == "kos: node join k8s-worker-1"
        assert listed[cp_doc["owner_token_id"]]["description"] == \
            "Proxy for managing TTL for the kubeadm-certs secret"
        # what was issued is reused on a second run: no change
        again = loaders.states.kubeadm_join.credential_present(
            name=MINION_ID, role="control_plane", node_name="k8s-cp-2", kube_dir=cp.kube_dir)
        assert again.result is True and again.changes == {}, again


def test_token_gone_from_the_cluster_is_replaced(published, loaders, lab):
    cp = lab["k8s-cp-1"]
    old = json.loads(published["join"].read_text())
    kwargs = dict(name=WORKER_ID, role="worker", node_name="k8s-worker-1", kube_dir=cp.kube_dir)
    with on(cp):
        loaders.modules.kos_join.token_delete(old["token_id"])
        predicted = loaders.states.kubeadm_join.credential_present(test=True, **kwargs)
        ret = loaders.states.kubeadm_join.credential_present(**kwargs)
    assert predicted.result is None and "gone from the cluster" in predicted.comment
    assert ret.result is True and "gone from the cluster" in ret.comment
    assert json.loads(published["join"].read_text())["token_id"] != old["token_id"]


def test_worker_joins_with_the_published_credentials(published, loaders, lab):
    cp, worker = lab["k8s-cp-1"], lab["k8s-worker-1"]
    doc = json.loads(published["join"].read_text())
    with on(worker):
        out = loaders.modules.kubeadm.join(
            f"{cp.ip}:6443", doc["token"], doc["ca_cert_hash"], node_name="k8s-worker-1",
            kubelet_extra_args=[{"name": "cloud-provider", "value": "external"}])
        assert loaders.modules.kubeadm.is_joined("k8s-worker-1", kube_dir=worker.kube_dir)
    assert "This node has joined the cluster" in out and doc["token"] not in out
    assert "--cloud-provider=external" in (worker.root / "var/lib/kubelet/kubeadm-flags.env").read_text()
    with on(cp):
        nodes = loaders.modules.kos_kubectl.nodes()
    assert set(nodes) == {"k8s-cp-1", "k8s-worker-1"}
    assert nodes["k8s-cp-1"]["roles"] == ["control-plane"]


def test_coredns_is_spread_once_a_second_node_joined(published, loaders, lab):
    """Both replicas went to the first control plane, the only node when kubeadm deployed
    them; with the worker joined the state restarts CoreDNS and they part."""
    cp = lab["k8s-cp-1"]
    admin = str(Path(cp.kube_dir) / "admin.conf")
    spread = loaders.states.kubeadm_node.replicas_spread
    with on(cp):
        before = loaders.modules.kos_kubectl.pods("k8s-app=kube-dns", kubeconfig=admin)
        predicted = spread(name="coredns", selector="k8s-app=kube-dns", kubeconfig=admin,
                           test=True)
        ret = spread(name="coredns", selector="k8s-app=kube-dns", kubeconfig=admin)
        again = spread(name="coredns", selector="k8s-app=kube-dns", kubeconfig=admin)
        after = loaders.modules.kos_kubectl.pods("k8s-app=kube-dns", kubeconfig=admin)
    assert sorted(p["node"] for p in before.values()) == ["k8s-cp-1", "k8s-cp-1"]
    assert predicted.result is None and predicted.changes["nodes"]["old"] == ["k8s-cp-1"]
    assert ret.result is True, ret
    assert ret.changes == {"nodes": {"old": ["k8s-cp-1"], "new": ["k8s-cp-1", "k8s-worker-1"]}}
    assert sorted(p["node"] for p in after.values()) == ["k8s-cp-1", "k8s-worker-1"]
    assert again.result is True and again.changes == {} and "already spread" in again.comment


def arm(node, fault):
    """Make the stand-in fail once the way `fault` says (tests/standins/lib/kubeadm_standin)."""
    path = node.root / "kos-standin-faults" / fault
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def test_a_control_plane_join_that_failed_at_etcd_is_redone(published, loaders, lab):
    """kubeadm wrote kubelet.conf and registered the node, then the etcd member add failed:
    the old check (kubelet.conf exists) called that joined, forever."""
    cp, cp2 = lab["k8s-cp-1"], lab["k8s-cp-2"]
    # the credential issued for this minion, as a control plane, is in the (masterless) mine
    arm(cp2, "join-fails-at-etcd")
    kwargs = dict(name=MINION_ID, api_server_endpoint=f"{cp.ip}:6443", role="control_plane",
                  node_name="k8s-cp-2", advertise_address=cp2.ip, bind_port=6443,
                  kubelet_extra_args=[{"name": "node-ip", "value": cp2.ip}], timeout=20,
                  kube_dir=cp2.kube_dir)
    with on(cp2):
        failed = loaders.states.kubeadm.joined(**kwargs)
        assert (Path(cp2.kube_dir) / "kubelet.conf").exists()
        predicted = loaders.states.kubeadm.joined(test=True, **kwargs)
        redone = loaders.states.kubeadm.joined(**kwargs)
        again = loaders.states.kubeadm.joined(**kwargs)
    assert failed.result is False and "etcdserver: unhealthy cluster" in failed.comment, failed
    assert predicted.result is None and "runs no etcd member" in predicted.comment, predicted
    assert redone.result is True, redone
    assert redone.changes["cluster"]["old"].startswith("half-joined: node k8s-cp-2 is registered")
    assert "runs no etcd member" in redone.comment
    assert again.result is True and again.changes == {}
    with on(cp):
        assert loaders.modules.kos_kubectl.etcd_members() == ["k8s-cp-1", "k8s-cp-2"]
    stop_apiserver(cp2.root)


def test_a_half_done_init_is_reset_and_redone(loaders, lab, tmp_path):
    """kubeadm init killed after its control-plane phase: the manifests are there, nothing
    else is. The old check (the kube-apiserver manifest exists) called that initialized."""
    node = lab["half-cp"]
    config = tmp_path / "half.yaml"
    config.write_text(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n"
        f"  advertiseAddress: {node.ip}\n---\napiVersion: kubeadm.k8s.io/v1beta4\n"
        f"kind: ClusterConfiguration\ncontrolPlaneEndpoint: {node.ip}:6443\n"
        "encryptionAlgorithm: ECDSA-P256\n")
    record = str(Path(node.state_dir) / "kubeadm-init.json")
    kwargs = dict(name=str(config), kube_dir=node.kube_dir, record=record, timeout=10)
    arm(node, "init-killed-after-control-plane")
    with on(node):
        killed = loaders.states.kubeadm.initialized(**kwargs)
        assert (Path(node.kube_dir) / "manifests" / "kube-apiserver.yaml").exists()
        predicted = loaders.states.kubeadm.initialized(test=True, **kwargs)
        redone = loaders.states.kubeadm.initialized(**kwargs)
        again = loaders.states.kubeadm.initialized(**kwargs)
        status = loaders.modules.kubeadm.init_status(node.kube_dir)
    stop_apiserver(node.root)
    assert killed.result is False, killed
    assert predicted.result is None and "would run again" in predicted.comment, predicted
    assert "does not answer" in predicted.comment
    assert redone.result is True, redone
    assert redone.changes["control_plane"]["old"].startswith("half-initialized: the API does "
                                                             "not answer")
    assert again.result is True and again.changes == {}
    assert status["initialized"] and not Path(record).exists()


def test_expired_token_fails_a_join_with_kubeadms_error(published, loaders, lab):
    cp, worker = lab["k8s-cp-1"], lab["k8s-worker-1"]
    with on(cp):
        short = loaders.modules.kos_join.token_create(ttl=1)
        ca = loaders.modules.kos_join.ca_cert_hash()
    time.sleep(1.2)
    with on(worker):
        with pytest.raises(Exception, match="could not find a JWS signature") as exc:
            loaders.modules.kubeadm.join(f"{cp.ip}:6443", short, ca, discovery_timeout=1,
                                         ignore_preflight_errors=["all"])
    assert short not in str(exc.value)


def test_manifest_applied_then_unchanged(loaders, initialized, lab):
    cp = lab["k8s-cp-1"]
    path = Path(cp.kube_dir) / "addons" / "kube-router.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(loaders, "kubeadm/files/kube-router.yaml.jinja"))
    record = str(cp.root / "applied.sha256")
    admin = str(Path(cp.kube_dir) / "admin.conf")
    with on(cp):
        predicted = loaders.states.kubeadm_node.manifest_applied(
            name=str(path), record=record, kubeconfig=admin, test=True)
        first = loaders.states.kubeadm_node.manifest_applied(name=str(path), record=record,
                                                             kubeconfig=admin)
        second = loaders.states.kubeadm_node.manifest_applied(name=str(path), record=record,
                                                              kubeconfig=admin)
        predicted_again = loaders.states.kubeadm_node.manifest_applied(
                name=str(path), record=record, kubeconfig=admin, test=True)
        assert loaders.modules.kos_kubectl.object_exists("DaemonSet", "kube-router",
                                                     namespace="kube-system", kubeconfig=admin)
    assert predicted.result is None and "DaemonSet/kube-router" in json.dumps(predicted.changes)
    assert first.result is True and first.changes["objects"]["daemonset.apps/kube-router"] == \
        "created"
    assert second.result is True and second.changes == {}, second
    assert predicted_again.result is True and predicted_again.changes == {}


def test_drain_reset_delete_a_worker(published, loaders, lab):
    cp, worker = lab["k8s-cp-1"], lab["k8s-worker-1"]
    admin = str(Path(cp.kube_dir) / "admin.conf")
    with on(cp):
        drained = loaders.states.kubeadm.node_drained(name="k8s-worker-1", kubeconfig=admin)
    with on(worker):
        predicted = loaders.states.kubeadm.reset(name="k8s-worker-1", kube_dir=worker.kube_dir, test=True)
        assert loaders.modules.kubeadm.is_joined("k8s-worker-1", kube_dir=worker.kube_dir)
        reset = loaders.states.kubeadm.reset(name="k8s-worker-1", kube_dir=worker.kube_dir)
        reset_again = loaders.states.kubeadm.reset(name="k8s-worker-1", kube_dir=worker.kube_dir)
    with on(cp):
        deleted = loaders.states.kubeadm.node_absent(name="k8s-worker-1", kubeconfig=admin)
        nodes = loaders.modules.kos_kubectl.nodes(kubeconfig=admin)
    assert drained.result is True and drained.changes, drained
    assert predicted.result is None, predicted
    assert reset.result is True and reset.changes, reset
    assert reset_again.changes == {}
    assert deleted.result is True and deleted.changes, deleted
    assert "k8s-worker-1" not in nodes


def test_revoke_deletes_tokens_and_the_certs_secret(published, loaders, lab):
    cp = lab["k8s-cp-1"]
    cp_doc = json.loads(published["key"].read_text())
    with on(cp):
        ret = loaders.states.kubeadm_join.credentials_absent(
            name="creds", nodes=[WORKER_ID, MINION_ID], kube_dir=cp.kube_dir)
        again = loaders.states.kubeadm_join.credentials_absent(
            name="creds", nodes=[WORKER_ID, MINION_ID], kube_dir=cp.kube_dir)
        listed = loaders.modules.kos_join.token_list()
        mine = loaders.modules.mine.get(MINION_ID, f"kos_join_{MINION_ID}")
    assert ret.result is True and ret.changes, ret
    assert again.changes == {}
    assert not any(t["description"].startswith("kos: node join") for t in listed)
    assert not any(t["id"] == cp_doc["owner_token_id"] for t in listed)
    assert not published["join"].exists() and not published["key"].exists()
    assert mine == {}


def test_certificates_orchestration_goes_one_control_plane_at_a_time(loaders):
    data = loaders.modules.state.show_sls("orch.certificates", pillar={"force": True})
    order = sorted(data, key=lambda k: data[k]["salt"][-1]["order"])
    assert order == ["kos-orch-certificates-extension", f"kos-orch-certificates-{MINION_ID}"]
    run = dict(kv for item in data[order[-1]]["salt"] if isinstance(item, dict)
               for kv in item.items())
    assert run["tgt"] == MINION_ID and run["sls"] == "kubeadm.certificates"
    assert run["pillar"] == {"kos_orchestration": {"force_renewal": True}}
    assert run["require"] == [{"salt": "kos-orch-certificates-extension"}]
    bad = loaders.modules.state.show_sls("orch.certificates", pillar={"force": "yes"})
    assert list(bad) == ["kos-orch-certificates-options"]


def test_certificates_renewed_on_the_standin_then_nothing_to_do(loaders, initialized, lab):
    cp = lab["k8s-cp-1"]
    apiserver = Path(cp.kube_dir) / "pki" / "apiserver.crt"
    serial = x509.load_pem_x509_certificate(apiserver.read_bytes()).serial_number
    manifests = sorted(p.name for p in (Path(cp.kube_dir) / "manifests").iterdir())
    with on(cp):
        predicted = loaders.states.kubeadm_node.certificates_renewed(
            name="c", force=True, restart_wait=0, kube_dir=cp.kube_dir, test=True)
        ret = loaders.states.kubeadm_node.certificates_renewed(
            name="c", force=True, restart_wait=0, kube_dir=cp.kube_dir)
        again = loaders.states.kubeadm_node.certificates_renewed(
            name="c", restart_wait=0, kube_dir=cp.kube_dir)
        nodes = loaders.modules.kos_kubectl.nodes()
    assert predicted.result is None and predicted.changes["certificates"]["new"] == "renewed"
    assert ret.result is True, ret
    assert set(ret.changes["certificates"]["new"]) == set(ret.changes["certificates"]["old"])
    assert all(d in (364, 365) for d in ret.changes["certificates"]["new"].values())
    assert x509.load_pem_x509_certificate(apiserver.read_bytes()).serial_number != serial
    # every manifest back where the kubelet reads it; the renewed admin credential works
    assert sorted(p.name for p in (Path(cp.kube_dir) / "manifests").iterdir()) == manifests
    assert "k8s-cp-1" in nodes
    assert again.result is True and again.changes == {}


def test_upgrade_in_test_mode_is_kubeadms_dry_run_and_changes_nothing(loaders, initialized, lab):
    """kubeadm_upgrade.upgraded with test=True on the first control plane, its kubeadm
    package already on the next minor: kubeadm upgrade apply --dry-run passes, and neither the
    manifests nor the stored cluster version move."""
    cp = lab["k8s-cp-1"]
    admin = str(Path(cp.kube_dir) / "admin.conf")
    packages = cp.root / "var/lib/kos-standin/packages.json"
    packages.parent.mkdir(parents=True, exist_ok=True)
    packages.write_text(json.dumps({"kubeadm": "1.32.1-1.1"}))
    manifests = Path(cp.kube_dir) / "manifests"
    before = {p.name: p.read_text() for p in manifests.iterdir()}
    try:
        with on(cp):
            ret = loaders.states.kubeadm_upgrade.upgraded(
                name="v1.32.1", node="k8s-cp-1", first=True, kubeconfig=admin, test=True)
            stored = loaders.modules.kos_kubectl.cluster_version(kubeconfig=admin)
    finally:
        packages.unlink()
    assert ret.result is None, ret
    assert ret.comment == "kubeadm upgrade apply v1.32.1 would run (its dry run passed)"
    assert ret.changes["cluster"] == {"old": "v1.31.4", "new": "v1.32.1"}
    assert {p.name: p.read_text() for p in manifests.iterdir()} == before
    assert stored == "v1.31.4"
