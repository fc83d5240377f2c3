"""
orch.upgrade on a kubeadm cluster: a real salt-master and real salt-minions (three control
planes, one worker), each in its own network namespace (prefix ``kosiu``, bridge
10.248.0.0/24) with the kubeadm/kubectl stand-ins first on PATH, its own stand-in root and
the real Debian haproxy, as tests/integration_kubeadm sets them up.

What apt and systemd would do to the Kubernetes packages and the kubelet, the minions do
through test-only Salt backends (backends/, Salt's ``providers`` option for ``pkg`` and
``service``) on the stand-in's packages.json and kubelet restart; Salt's loaders, states
and orchestration are the real ones.
"""

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.conftest import MASTER_TIMING, Deployment, NetnsMinion
from tests.integration_kubeadm.conftest import (
    REPO, host_layer, instance_uuid, minion_environ, root_of, stop_daemons,
)
from tests.netlab import NetLab, can_use_netns

PREFIX = "kosiu"
CIDR = "10.248.0.0/24"
DOMAIN = "kos-iu.test"
DOMAIN_SLS = DOMAIN.replace(".", "_")
CONTROL_PLANES = ["k8s-cp-1", "k8s-cp-2", "k8s-cp-3"]
WORKERS = ["k8s-worker-1"]
HOSTNAMES = ["salt", *CONTROL_PLANES, *WORKERS]
BACKENDS = Path(__file__).resolve().parent / "backends"
# What apt installed when each node was built (the formula's pinned release).
FIRST_PACKAGES = "1.31.4-1.1"

pytestmark = [pytest.mark.integration, pytest.mark.netns]


class UpgradeDeployment(Deployment):
    distribution = "kubeadm"

    def fqdn(self, hostname):
        return f"{hostname}.{DOMAIN}"

    def from_terraform(self):
        data = super().from_terraform()
        data["kos"].update(cluster_name="kos-iu", domain=DOMAIN)
        data["kos"]["networks"].update(public_cidr="10.247.0.0/24", private_cidr=CIDR)
        return data

    def environment(self, **kubeadm):
        """The environment's pillar layer, with the operator's kubeadm keys."""
        layer = {
            "core": {"manage": {key: key == "hosts" for key in (
                "sysctl", "limits", "locale", "banners", "sshd", "resolver", "hosts",
                "packages", "minion", "users")}},
            "salt_master": {"manage_service": False},
            "kubeadm": {
                # the test machine's own packages and services stay as they are; the
                # Kubernetes packages and the kubelet move through the test backends
                "manage": {key: False for key in (
                    "packages", "services", "swap", "kernel_modules", "sysctl")},
                "ready_timeout": 30,
                "discovery_timeout": 10,
                "haproxy": {"check_interval": "1s"},
                "encryption_algorithm": "ECDSA-P256",
                "ccm": {"auth_url": "https://keystone.kos-iu.test:5000/v3",
                        "floating_network_id": "ext-net-id"},
                **kubeadm,
            },
        }
        self.write(f"environments/{DOMAIN_SLS}.sls", layer)


@pytest.fixture(scope="package")
def netlab():
    import shutil

    if not can_use_netns():
        pytest.skip("needs root and network namespaces")
    if not shutil.which("haproxy"):
        pytest.skip("needs haproxy (Debian package haproxy)")
    lab = NetLab(prefix=PREFIX, cidr=CIDR).up()
    yield lab
    lab.down()


@pytest.fixture(scope="package")
def host_roots(tmp_path_factory):
    return tmp_path_factory.mktemp("kubeadm-upgrade-hosts")


@pytest.fixture(scope="package")
def deployment(netlab, tmp_path_factory, host_roots):
    for name in HOSTNAMES:
        netlab.add_host(name, default_route=False)
    dep = UpgradeDeployment(tmp_path_factory.mktemp("kubeadm-upgrade-pillar"), netlab, HOSTNAMES)
    dep.write("_from_terraform.sls", dep.from_terraform())
    dep.environment()
    for name in HOSTNAMES:
        root = root_of(host_roots, name)
        for sub in ("etc", "run", "var/lib/cloud/data", "var/lib/kos-standin"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "etc" / "hostname").write_text(f"{name}\n")
        (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
        (root / "var/lib/cloud/data/instance-id").write_text(f"{instance_uuid(name)}\n")
        if name != "salt":
            packages = dict.fromkeys(("kubeadm", "kubelet", "kubectl"), FIRST_PACKAGES)
            (root / "var/lib/kos-standin/packages.json").write_text(json.dumps(packages))
            (root / "var/lib/kos-standin/holds.json").write_text(json.dumps(sorted(packages)))
        layer = host_layer(root, name)
        if name in CONTROL_PLANES:
            layer["kubeadm"]["ccm"]["credentials"] = {
                "application_credential_id": "kos-iu-app-cred",
                "application_credential_secret": "kos-iu-app-secret-0123456789"}
        dep.write(f"minions/{DOMAIN_SLS}/{name}.sls", layer)
    yield dep
    stop_daemons(host_roots, HOSTNAMES)


@pytest.fixture(scope="package")
def salt_master(salt_factories, netlab, deployment):
    factory = salt_factories.salt_master_daemon(
        "kos-iu-master",
        overrides={
            "interface": netlab.gateway,
            "file_roots": {"base": [str(REPO / "salt" / "salt")]},
            "pillar_roots": {"base": [str(REPO / "pillar"), str(deployment.pillar_dir)]},
            "minion_data_cache": True,
            **MASTER_TIMING,
        },
    )
    with factory.started(start_timeout=120):
        yield factory


@pytest.fixture(scope="package")
def minions(salt_master, netlab, deployment, host_roots):
    started = {}
    try:
        for name in HOSTNAMES:
            host = netlab.hosts[name]
            factory = salt_master.salt_minion_daemon(
                deployment.fqdn(name),
                factory_class=NetnsMinion,
                netns=host.netns,
                overrides={
                    "master": netlab.gateway,
                    "interface": "0.0.0.0",
                    "module_dirs": [str(BACKENDS)],
                    "providers": {"pkg": "kos_standin_pkg", "service": "kos_standin_service"},
                },
            )
            factory.environ = minion_environ(factory, root_of(host_roots, name), host)
            started[name] = factory
        with ThreadPoolExecutor(len(started)) as pool:
            for fut in [pool.submit(f.start, start_timeout=180) for f in started.values()]:
                fut.result()
        yield started
    finally:
        with ThreadPoolExecutor(max(1, len(started))) as pool:
            list(pool.map(lambda f: f.terminate(), started.values()))


@pytest.fixture(scope="package")
def salt_run(salt_master):
    return salt_master.salt_run_cli(timeout=900)


@pytest.fixture(scope="package")
def salt_cli(salt_master):
    return salt_master.salt_cli(timeout=600)
