"""The pillar schema on the kubeadm keys, including where CCM credentials may live."""

import copy

import pytest

from tests.unit.utils.test_kos_schema import GOOD, check

CREDENTIALS = {"application_credential_id": "0123abcd", "application_credential_secret": "s3cret"}


def pillar(roles, **kubeadm):
    data = copy.deepcopy(GOOD)
    data["kos"]["distribution"] = "kubeadm"
    data["kos"]["roles"] = roles
    data["kubeadm"] = {"ccm": {"auth_url": "https://keystone.example.com:5000/v3"}}
    for path, value in kubeadm.items():
        node = data["kubeadm"]
        keys = path.split("__")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return data


def test_control_plane_with_application_credential_is_valid():
    assert check(pillar(["control_plane", "kubernetes_node"], ccm__credentials=CREDENTIALS)) == []


def test_worker_without_credentials_is_valid():
    assert check(pillar(["worker", "kubernetes_node"])) == []


def test_credentials_on_a_worker_are_rejected():
    errors = check(pillar(["worker", "kubernetes_node"], ccm__credentials=CREDENTIALS))
    assert errors == ["pillar key 'kubeadm:ccm:credentials': is readable on a node that is no "
                      "control plane; move it into the control-plane hosts' layers "
                      "(minions/<domain>/<host>.sls)"]


def test_control_plane_needs_credentials_and_auth_url():
    data = pillar(["control_plane"])
    del data["kubeadm"]["ccm"]["auth_url"]
    errors = check(data)
    assert any(e.startswith("pillar key 'kubeadm:ccm:auth_url': is missing") for e in errors)
    assert any(e.startswith("pillar key 'kubeadm:ccm:credentials': is missing") for e in errors)
    # without the cloud controller neither is needed
    data["kubeadm"]["ccm"]["enabled"] = False
    assert check(data) == []


@pytest.mark.parametrize(
    "credentials, words",
    [
        ({**CREDENTIALS, "username": "u", "password": "p"}, "both an application credential"),
        ({"application_credential_id": "x"}, "is incomplete"),
        ({"username": "u"}, "is incomplete"),
        ({}, "is incomplete"),
    ],
)
def test_bad_credentials(credentials, words):
    errors = check(pillar(["control_plane"], ccm__credentials=credentials))
    assert len(errors) == 1 and words in errors[0], errors


@pytest.mark.parametrize(
    "path, value, key, words",
    [
        ("version", "1.31", "kubeadm:version", "not a Kubernetes version"),
        ("manage__packages", "yes", "kubeadm:manage:packages", "must be true or false"),
        ("api__lb_port", 70000, "kubeadm:api:lb_port", "70000 is out of range"),
        ("api__endpoint", "10.1.0.100", "kubeadm:api:endpoint", "is not host:port"),
        ("encryption_algorithm", "DSA", "kubeadm:encryption_algorithm", "unknown algorithm"),
        ("token__ttl", 600, "kubeadm:token:ttl", "not above kubeadm:token:min_remaining (900)"),
        ("certificate_key__min_remaining", 7200, "kubeadm:certificate_key:min_remaining",
         "use an integer 0-7199"),
        ("etcd__external__endpoints", ["http://10.1.0.31:2379"], "kubeadm:etcd:external:endpoints:0",
         "not an https:// URL"),
        ("kube_router__cluster_asn", 0, "kubeadm:kube_router:cluster_asn", "out of range"),
        ("cert_sans", [42], "kubeadm:cert_sans:0", "must be an IP address or DNS name"),
        ("ccm__enabled", "true", "kubeadm:ccm:enabled", "must be true or false"),
        ("ccm__auth_url", "keystone:5000", "kubeadm:ccm:auth_url", "not an http(s):// URL"),
        ("haproxy__pidfile", "run/haproxy.pid", "kubeadm:haproxy:pidfile", "not an absolute"),
    ],
)
def test_bad_kubeadm_keys(path, value, key, words):
    data = pillar(["worker"], token__min_remaining=900, **{path: value})
    errors = check(data)
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"pillar key '{key}': ") and words in errors[0], errors


def test_external_etcd_client_files_are_absolute_paths():
    data = pillar(["worker"], etcd__external__endpoints=["https://10.1.0.31:2379"])
    assert check(data) == []
    data["kubeadm"]["etcd"]["external"]["ca_file"] = "pki/ca.crt"
    errors = check(data)
    assert errors == ["pillar key 'kubeadm:etcd:external:ca_file': 'pki/ca.crt' is not an "
                      "absolute path; use an absolute path, e.g. /etc/kos"]
