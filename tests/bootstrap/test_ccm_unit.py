"""
The cloud-controller-manager's credential without a cloud (kos.ccm): which nodes get it,
the layer the master serves them, and a repository pillar that holds a credential refused
before anything changes. Keystone's side runs on the rehearsal cloud (tests/e2e).
"""

import datetime
from pathlib import Path

import pytest
import yaml
from kos import ccm
from kos.errors import InputError

REPO_PILLAR = Path(__file__).resolve().parents[2] / "pillar"


def outputs(distribution="kubeadm"):
    minions = {
        "salt.example.com": {"hostname": "salt", "role": "salt_master"},
        "k8s-cp-1.example.com": {"hostname": "k8s-cp-1", "role": "control_plane"},
        "k8s-cp-2.example.com": {"hostname": "k8s-cp-2", "role": "control_plane"},
        "k8s-worker-1.example.com": {"hostname": "k8s-worker-1", "role": "worker"},
    }
    kube = {m: i for m, i in minions.items() if m.startswith("k8s-")}
    return {"minions": minions, "kubernetes_nodes": kube,
            "salt_pillar": yaml.safe_dump({"kos": {"distribution": distribution}})}


def test_only_control_planes_get_the_credential():
    assert ccm.control_planes(outputs()) == ["k8s-cp-1", "k8s-cp-2"]
    assert ccm.layer_name("k8s-cp-1") == "_ccm_k8s-cp-1.sls"


@pytest.mark.parametrize("distribution,wanted", [("kubeadm", True), ("microk8s", False)])
def test_only_kubeadm_runs_the_cloud_controller(distribution, wanted):
    assert ccm.wanted(outputs(distribution)) is wanted


def test_the_layer_is_what_the_formula_reads():
    cred = {"id": "c0ffee", "secret": "s3cr3t-value", "auth_url": "https://ks:5000/v3",
            "region": "RegionTwo"}
    doc = yaml.safe_load(ccm.layer(cred))
    assert doc == {"kubeadm": {"ccm": {
        "auth_url": "https://ks:5000/v3", "region": "RegionTwo",
        "credentials": {"application_credential_id": "c0ffee",
                        "application_credential_secret": "s3cr3t-value"}}}}
    created = datetime.datetime(2026, 11, 24, 20, 1, 2, tzinfo=datetime.timezone.utc)
    assert ccm.name("prod", created) == "kos-prod-ccm-20261124T200102Z"
    # a rotation's two credentials are both the cluster's, another cluster's are not
    assert ccm.is_ours("kos-prod-ccm-20261124T200102Z", "prod")
    assert not ccm.is_ours("kos-prod-ccm-20261124T200102Z", "pro")
    assert not ccm.is_ours("kos-prod-ccm-extra-20261124T200102Z", "prod")


def test_the_repositorys_pillar_holds_no_credential():
    assert ccm.repository_credentials(REPO_PILLAR) == []
    ccm.refuse_repository_credentials(REPO_PILLAR)


def test_a_credential_committed_to_a_layer_is_refused_by_name(tmp_path):
    layer = tmp_path / "minions" / "prod_example_com" / "k8s-cp-1.sls"
    layer.parent.mkdir(parents=True)
    layer.write_text("kubeadm:\n  ccm:\n    credentials:\n"
                     "      application_credential_id: abc\n"
                     "      application_credential_secret: do-not-commit-me\n")
    # a Jinja layer is read for its literal keys
    (tmp_path / "derived.sls").write_text("{%- set x = 1 %}\nkubeadm:\n  ccm:\n    region: R\n")
    with pytest.raises(InputError) as err:
        ccm.refuse_repository_credentials(tmp_path)
    assert "minions/prod_example_com/k8s-cp-1.sls" in err.value.problem
    assert "do-not-commit-me" not in err.value.problem + err.value.fix
    assert "kos creates the cloud-controller-manager's application credential" in err.value.fix
