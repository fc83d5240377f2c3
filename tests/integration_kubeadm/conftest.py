"""
The kubeadm distribution on a real salt-master and real salt-minions, each minion
in its own network namespace (prefix ``kosik``, bridge 10.251.0.0/24) with the
kubeadm/kubectl stand-ins first on PATH and its own stand-in root. Every
Kubernetes node runs the real Debian haproxy in its namespace, in front of the
stand-in API servers of both control planes.

The minion and deployment helpers are the microk8s harness's (tests/integration).
"""

import os
import shutil
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.conftest import MASTER_TIMING, Deployment, NetnsMinion
from tests.netlab import NetLab, can_use_netns

REPO = Path(__file__).resolve().parents[2]
STANDINS = REPO / "tests" / "standins"
PREFIX = "kosik"
CIDR = "10.251.0.0/24"
DOMAIN = "kos-ik.test"
DOMAIN_SLS = DOMAIN.replace(".", "_")
HOSTNAMES = ["salt", "k8s-cp-1", "k8s-cp-2", "k8s-worker-1", "k8s-worker-2"]
CONTROL_PLANES = ["k8s-cp-1", "k8s-cp-2"]
# Only the control planes' own layers hold it (the validator rejects it elsewhere).
CCM_CREDENTIALS = {"application_credential_id": "kos-ik-app-cred",
                   "application_credential_secret": "kos-ik-app-secret-0123456789"}
# Processes a test host may leave running, by pidfile under its root.
DAEMONS = {"var/run/kos-standin-apiserver.pid": b"kos-standin-apiserver",
           "run/haproxy.pid": b"haproxy"}

pytestmark = [pytest.mark.integration, pytest.mark.netns]


class KubeadmDeployment(Deployment):
    """The Terraform layer for this package's hosts, domain and network."""

    distribution = "kubeadm"

    def fqdn(self, hostname):
        return f"{hostname}.{DOMAIN}"

    def from_terraform(self):
        data = super().from_terraform()
        data["kos"].update(cluster_name="kos-ik", domain=DOMAIN)
        data["kos"]["networks"].update(public_cidr="10.252.0.0/24", private_cidr=CIDR)
        return data


def instance_uuid(name):
    """A stable server UUID per test host."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.{DOMAIN}"))


def root_of(host_roots, name):
    return Path(host_roots) / name


def daemon_pid(root, pidfile, marker):
    try:
        pid = int((Path(root) / pidfile).read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if marker in cmdline else None


def stop_daemons(host_roots, hostnames=HOSTNAMES):
    """Stop what the tests started on each host, by pidfile and only if it is ours."""
    for name in hostnames:
        for pidfile, marker in DAEMONS.items():
            pid = daemon_pid(root_of(host_roots, name), pidfile, marker)
            if pid is None:
                continue
            os.kill(pid, signal.SIGTERM)
            for _ in range(50):
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.05)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture(scope="package")
def netlab():
    if not can_use_netns():
        pytest.skip("needs root and network namespaces")
    if not shutil.which("haproxy"):
        pytest.skip("needs haproxy (Debian package haproxy)")
    lab = NetLab(prefix=PREFIX, cidr=CIDR).up()
    yield lab
    lab.down()


@pytest.fixture(scope="package")
def host_roots(tmp_path_factory):
    return tmp_path_factory.mktemp("kubeadm-hosts")


@pytest.fixture(scope="package")
def pillar_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("kubeadm-pillar-layers")


def host_layer(root, name):
    layer = {
        "core": {"hosts_file": str(root / "etc" / "hosts")},
        "kos": {"state_dir": str(root / "etc" / "kos")},
        "salt_master": {"config_file": str(root / "etc/salt/master.d/kos.conf"),
                        "cachedir": str(root / "var/cache/salt/master")},
        "kubeadm": {
            "kube_dir": str(root / "etc" / "kubernetes"),
            "haproxy": {"config_file": str(root / "etc/haproxy/haproxy.cfg"),
                        "pidfile": str(root / "run/haproxy.pid")},
            "ccm": {"cloud_conf": str(root / "etc/kubernetes/cloud.conf"),
                    "instance_id_file": str(root / "var/lib/cloud/data/instance-id")},
        },
    }
    if name in CONTROL_PLANES:
        layer["kubeadm"]["ccm"]["credentials"] = dict(CCM_CREDENTIALS)
    return layer


@pytest.fixture(scope="package")
def deployment(netlab, pillar_dir, host_roots):
    for name in HOSTNAMES:
        # Everything a host talks to is on the bridge (see NetLab.add_host).
        netlab.add_host(name, default_route=False)
    dep = KubeadmDeployment(pillar_dir, netlab, HOSTNAMES)
    dep.write("_from_terraform.sls", dep.from_terraform())
    # This environment is the test machine itself: no packages, no systemd, no sysctls.
    dep.write(
        f"environments/{DOMAIN_SLS}.sls",
        {
            "core": {"manage": {key: key == "hosts" for key in (
                "sysctl", "limits", "locale", "banners", "sshd", "resolver", "hosts",
                "packages", "minion", "users")}},
            "salt_master": {"manage_service": False},
            "kubeadm": {
                "manage": {key: False for key in (
                    "packages", "services", "swap", "kernel_modules", "sysctl")},
                "ready_timeout": 30,
                "discovery_timeout": 10,
                "haproxy": {"check_interval": "1s"},
                # an ECDSA CA: the CA hash recipe that RSA-only tooling gets wrong, and
                # key generation fast enough for a test
                "encryption_algorithm": "ECDSA-P256",
                "ccm": {"auth_url": "https://keystone.kos-ik.test:5000/v3",
                        "floating_network_id": "ext-net-id"},
            },
        },
    )
    for name in HOSTNAMES:
        root = root_of(host_roots, name)
        (root / "etc").mkdir(parents=True, exist_ok=True)
        (root / "run").mkdir(parents=True, exist_ok=True)
        (root / "etc" / "hostname").write_text(f"{name}\n")
        (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
        # what cloud-init leaves on an OpenStack VM: the server's UUID
        (root / "var/lib/cloud/data").mkdir(parents=True, exist_ok=True)
        (root / "var/lib/cloud/data/instance-id").write_text(f"{instance_uuid(name)}\n")
        dep.write(f"minions/{DOMAIN_SLS}/{name}.sls", host_layer(root, name))
    yield dep
    stop_daemons(host_roots)


@pytest.fixture(scope="package")
def salt_master(salt_factories, netlab, deployment, pillar_dir):
    factory = salt_factories.salt_master_daemon(
        "kos-ik-master",
        overrides={
            "interface": netlab.gateway,
            "file_roots": {"base": [str(REPO / "salt" / "salt")]},
            "pillar_roots": {"base": [str(REPO / "pillar"), str(pillar_dir)]},
            "minion_data_cache": True,
            **MASTER_TIMING,
        },
    )
    with factory.started(start_timeout=120):
        yield factory


def minion_environ(factory, root, host):
    path = os.environ.get("PATH", "/usr/bin:/bin")
    env = dict(
        factory.environ,
        PATH=f"{STANDINS / 'bin'}:{path}",
        KOS_STANDIN_ROOT=str(root),
        KOS_STANDIN_IP=host.address,
        KOS_STANDIN_DISCOVERY_TIMEOUT="3",
    )
    if host.name.startswith("k8s-worker-"):
        # a join that takes a moment, so parallel joins overlap measurably
        env["KOS_STANDIN_DELAY"] = "1"
    return env


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
                },
            )
            # The manager hands every daemon the same environ dict: give this one its own.
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
