"""
The kubeadm distribution on the harness of tests/integration: each minion in its own
network namespace (prefix ``kosik``, bridge 10.251.0.0/24) with the kubeadm/kubectl
stand-ins first on PATH and its own stand-in root. Every Kubernetes node runs the real
Debian haproxy in its namespace, in front of the stand-in API servers of both control
planes.
"""

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import (  # noqa: F401 (this package's own instances)
    STANDINS, TEST_MACHINE, Deployment, deployment, files_dir, host_roots, minions, netlab,
    pillar_dir, salt_cli, salt_master, salt_run,
)

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
    """This package's hosts, domain and network, with kubeadm."""

    distribution = "kubeadm"
    cluster_name = "kos-ik"
    domain = "kos-ik.test"
    prefix = "kosik"
    cidr = "10.251.0.0/24"
    public_cidr = "10.252.0.0/24"
    hostnames = HOSTNAMES
    members = HOSTNAMES
    control_planes = CONTROL_PLANES
    ccm_credentials = CCM_CREDENTIALS
    needs = ("haproxy",)

    def environment(self, **kubeadm):
        """The environment's pillar layer, with the operator's kubeadm keys: the test
        machine's own packages and services stay as they are."""
        self.write(f"environments/{self.domain_sls}.sls", {**TEST_MACHINE, "kubeadm": {
            "manage": {key: False for key in (
                "packages", "services", "swap", "kernel_modules", "sysctl")},
            "ready_timeout": 30,
            "discovery_timeout": 10,
            "haproxy": {"check_interval": "1s"},
            # an ECDSA CA: the CA hash recipe that RSA-only tooling gets wrong, and
            # key generation fast enough for a test
            "encryption_algorithm": "ECDSA-P256",
            "ccm": {"auth_url": f"https://keystone.{self.domain}:5000/v3",
                    "floating_network_id": "ext-net-id"},
            **kubeadm,
        }})

    def host(self, root, name):
        for sub in ("etc", "run", "var/lib/cloud/data"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "etc" / "hostname").write_text(f"{name}\n")
        (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
        # what cloud-init leaves on an OpenStack VM: the server's UUID
        (root / "var/lib/cloud/data/instance-id").write_text(f"{instance_uuid(name)}\n")
        layer = host_layer(root)
        if name in self.control_planes:
            layer["kubeadm"]["ccm"]["credentials"] = dict(self.ccm_credentials)
        return layer

    def minion_environ(self, environ, root, host):
        path = os.environ.get("PATH", "/usr/bin:/bin")
        env = dict(
            environ,
            PATH=f"{STANDINS / 'bin'}:{path}",
            KOS_STANDIN_ROOT=str(root),
            KOS_STANDIN_IP=host.address,
            KOS_STANDIN_DISCOVERY_TIMEOUT="3",
        )
        if host.name.startswith("k8s-worker-"):
            # a join that takes a moment, so parallel joins overlap measurably
            env["KOS_STANDIN_DELAY"] = "1"
        return env

    def clean(self, roots):
        stop_daemons(roots, self.hostnames)


@pytest.fixture(scope="package")
def distribution():
    return KubeadmDeployment


def instance_uuid(name):
    """A stable server UUID per test host."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.{KubeadmDeployment.domain}"))


def root_of(roots, name):
    return Path(roots) / name


def daemon_pid(root, pidfile, marker):
    try:
        pid = int((Path(root) / pidfile).read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if marker in cmdline else None


def stop_daemons(roots, hostnames):
    """Stop what the tests started on each host, by pidfile and only if it is ours."""
    for name in hostnames:
        for pidfile, marker in DAEMONS.items():
            pid = daemon_pid(root_of(roots, name), pidfile, marker)
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


def host_layer(root):
    return {
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
