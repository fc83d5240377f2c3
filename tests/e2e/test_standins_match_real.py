"""
The kubeadm stand-in is held to the real kubeadm: the scenarios of tests/standins (token
create, list and delete, the join command, certificate expiry, version, the failures of
a join and of a malformed configuration) run here against the real binary on the
rehearsal cloud's hosts, with the very assertions the stand-in passes in
tests/standins/test_kubeadm_standin.py.
"""

import pytest

from kos_local import kubernetes
from tests.standins import scenarios

pytestmark = pytest.mark.netns


class RealNode:
    """kubeadm on a host of the real cluster."""

    def __init__(self, host):
        self.host = host

    def kubeadm(self, *args):
        return self.host.run("kubeadm", *args, check=False, timeout=120)

    def read(self, path):
        return self.host.path(path).read_bytes()

    def write(self, path, text):
        self.host.path(path).write_text(text)

    def remove(self, path):
        self.host.path(path).unlink()


@pytest.fixture(scope="module")
def first(cluster):
    if cluster.values["kubernetes_distribution"] != "kubeadm":
        pytest.skip("microk8s is the stand-ins on the rehearsal cloud")
    assert cluster.up.returncode == 0, cluster.failed_up()
    return RealNode(cluster.host("k8s-cp-1"))


def test_version_as_the_stand_in_prints_it(first):
    scenarios.version(first, kubernetes.pinned_version())


def test_certificate_expiry_laid_out_as_the_stand_in_lays_it_out_on_a_joined_node(cluster, first):
    # k8s-cp-2 joined and is never rebuilt; the layout of the node that ran init is held to
    # k8s-cp-1 in test_real_kubernetes.py, before test_replace_node.py rebuilds it
    scenarios.certs_check_expiration_layout(RealNode(cluster.host("k8s-cp-2")),
                                            initialised=False)


def endpoint(cluster):
    """The controlPlaneEndpoint kos's nodes join through: the API load balancer's VIP, or
    each node's local haproxy."""
    lb = cluster.outputs().get("api_load_balancer")
    return f"{lb['vip']}:6443" if lb else "127.0.0.1:7443"


def test_tokens_as_the_stand_in_handles_them(first, cluster):
    scenarios.token_create_list_delete(first, endpoint(cluster),
                                       "/etc/kubernetes/kubeadm-config.yaml")


def test_join_failures_as_the_stand_in_prints_them(first, cluster):
    scenarios.join_failures(first, RealNode(cluster.host("k8s-worker-1")), endpoint(cluster))


def test_a_malformed_init_configuration_as_the_stand_in_reads_it(cluster, first):
    scenarios.init_config_with_a_malformed_token(RealNode(cluster.host("k8s-worker-1")))
