"""
orch.upgrade on a kubeadm cluster: three control planes and one worker (prefix ``kosiu``,
bridge 10.248.0.0/24), set up as tests/integration/kubeadm sets up its own.

What apt and systemd would do to the Kubernetes packages and the kubelet, the minions do
through test-only Salt backends (backends/, Salt's ``providers`` option for ``pkg`` and
``service``) on the stand-in's packages.json and kubelet restart; Salt's loaders, states
and orchestration are the real ones.
"""

import json
from pathlib import Path

import pytest

from tests.integration.kubeadm.conftest import (  # noqa: F401 (this package's own instances)
    KubeadmDeployment, deployment, files_dir, host_roots, minions, netlab, pillar_dir, salt_cli,
    salt_master, salt_run,
)

CONTROL_PLANES = ["k8s-cp-1", "k8s-cp-2", "k8s-cp-3"]
WORKERS = ["k8s-worker-1"]
HOSTNAMES = ["salt", *CONTROL_PLANES, *WORKERS]
BACKENDS = Path(__file__).resolve().parent / "backends"
# What apt installed when each node was built (the formula's pinned release).
FIRST_PACKAGES = "1.31.4-1.1"

pytestmark = [pytest.mark.integration, pytest.mark.netns]


class UpgradeDeployment(KubeadmDeployment):
    cluster_name = "kos-iu"
    domain = "kos-iu.test"
    prefix = "kosiu"
    cidr = "10.248.0.0/24"
    public_cidr = "10.247.0.0/24"
    hostnames = HOSTNAMES
    members = HOSTNAMES
    control_planes = CONTROL_PLANES
    ccm_credentials = {"application_credential_id": "kos-iu-app-cred",
                       "application_credential_secret": "kos-iu-app-secret-0123456789"}

    def host(self, root, name):
        layer = super().host(root, name)
        (root / "var/lib/kos-standin").mkdir(parents=True, exist_ok=True)
        if name != "salt":
            packages = dict.fromkeys(("kubeadm", "kubelet", "kubectl"), FIRST_PACKAGES)
            (root / "var/lib/kos-standin/packages.json").write_text(json.dumps(packages))
            (root / "var/lib/kos-standin/holds.json").write_text(json.dumps(sorted(packages)))
        return layer

    def minion_overrides(self):
        return {"module_dirs": [str(BACKENDS)],
                "providers": {"pkg": "kos_standin_pkg", "service": "kos_standin_service"}}


@pytest.fixture(scope="package")
def distribution():
    return UpgradeDeployment
