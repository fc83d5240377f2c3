"""
The cloud-controller-manager's credential on the rehearsal cloud (issue 13, item 3): kos
created one Keystone application credential for the kubeadm cluster (none for microk8s),
without admin and restricted; it authenticates against the real Keystone; the salt master
holds it in one 0600 layer per control plane and serves it to control planes only;
``kos rotate-ccm-credential`` replaces it and the old one stops working. (``kos down``
deleting it: the cloud-empty check of test_teardown.py's first down.)
"""

import pytest
import yaml
from kos import ccm

from tests.e2e.test_no_secret_at_rest import found_in_dot_kos, found_in_hosts

pytestmark = pytest.mark.netns

DOMAIN = "kos.internal"


def ccm_credentials(cluster):
    conn = cluster.conn()
    return [c for c in conn.identity.application_credentials(user=conn.current_user_id)
            if ccm.is_ours(c.name, cluster.name)]


def control_planes(cluster):
    return sorted(h for h in cluster.hostnames() if h.startswith("k8s-cp-"))


def layer(cluster, hostname):
    salt = cluster.host("salt")
    path = f"/srv/pillar/_ccm_{hostname}.sls"
    mode = salt.run("stat", "-c", "%a %U", path).stdout.split()
    assert mode == ["600", "root"], path
    return yaml.safe_load(salt.run("cat", path).stdout)["kubeadm"]["ccm"]


def served(cluster, hostname):
    """Which credential keys the minion's pillar holds (salt-call: its return stays on the
    node; Salt masks the values, so the keys tell)."""
    res = cluster.host(hostname).run(
        "salt-call", "--out=yaml", "pillar.get", "kubeadm:ccm:credentials", timeout=120)
    return sorted(yaml.safe_load(res.stdout)["local"] or {})


def authenticates(ccm):
    import openstack
    from keystoneauth1 import exceptions as ksa

    conn = openstack.connect(
        auth_type="v3applicationcredential", load_yaml_config=False, load_envvars=False,
        auth={"auth_url": ccm["auth_url"],
              "application_credential_id": ccm["credentials"]["application_credential_id"],
              "application_credential_secret":
                  ccm["credentials"]["application_credential_secret"]},
        region_name=ccm["region"])
    try:
        conn.authorize()
        return True
    except (ksa.Unauthorized, openstack.exceptions.SDKException):
        return False


def test_the_cloud_controller_has_a_credential_of_its_own(cluster):
    creds = ccm_credentials(cluster)
    if cluster.values["kubernetes_distribution"] != "kubeadm":
        assert creds == []
        assert not cluster.host("salt").run(
            "sh", "-c", "ls /srv/pillar/_ccm_* 2>/dev/null", check=False).stdout.strip()
        return
    assert len(creds) == 1, creds
    cred = creds[0]
    assert cred.unrestricted is False
    assert "admin" not in {r["name"] for r in cred.roles} and cred.roles
    layers = {h: layer(cluster, h) for h in control_planes(cluster)}
    assert {c["credentials"]["application_credential_id"] for c in layers.values()} == {cred.id}
    assert authenticates(layers["k8s-cp-1"])
    # the top file serves it to control planes only
    both = ["application_credential_id", "application_credential_secret"]
    assert served(cluster, "k8s-cp-2") == both
    assert served(cluster, "k8s-worker-1") == []
    assert not cluster.host("salt").path("/srv/pillar/_ccm_k8s-worker-1.sls").exists()
    cluster.extra["ccm"] = layers["k8s-cp-1"]


def test_rotation_replaces_it_and_the_old_one_stops_working(cluster):
    if cluster.values["kubernetes_distribution"] != "kubeadm":
        res = cluster.kos("rotate-ccm-credential", *cluster.args, timeout=300)
        assert res.returncode == 3 and "only a kubeadm cluster" in res.stderr, res.stderr
        return
    old = cluster.extra["ccm"]
    res = cluster.kos("rotate-ccm-credential", *cluster.args, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    new = layer(cluster, "k8s-cp-1")
    new_id = new["credentials"]["application_credential_id"]
    assert new_id != old["credentials"]["application_credential_id"]
    assert [c.id for c in ccm_credentials(cluster)] == [new_id]
    assert authenticates(new) and not authenticates(old)
    assert served(cluster, "k8s-cp-3") == ["application_credential_id",
                                           "application_credential_secret"]
    # the secrets went to the master over SSH's stdin: kos printed and logged none of them,
    # and nothing in .kos holds them
    secrets = [c["credentials"]["application_credential_secret"] for c in (old, new)]
    assert [s for s in secrets if s in res.stdout + res.stderr] == []
    assert found_in_hosts(cluster, secrets, ["/var/log"]) == {}
    assert found_in_dot_kos(cluster, secrets) == []
