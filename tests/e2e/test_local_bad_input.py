"""Bad input for the rehearsal cloud: every field and its fix named, nothing created."""

import json

import pytest

from tests.bootstrap.conftest import Kos, base_env
from tests.e2e.conftest import cloud, own_leftovers

pytestmark = pytest.mark.netns

CLUSTER = "kosbadin"


def refused_up(tmp_path, ssh_agent, values):
    """``kos up --cloud local`` of ``values``, refused by preflight with no clouds.yaml
    entry written."""
    (tmp_path / "bad.tfvars.json").write_text(json.dumps(values))
    kos = Kos(tmp_path, base_env(SSH_AUTH_SOCK=ssh_agent.sock, XDG_CONFIG_HOME=tmp_path / "cfg"))
    res = kos("up", "--cloud", "local", "--var-file", "bad.tfvars.json", "--yes", timeout=300)
    assert res.returncode == 4, res.stderr
    assert not (tmp_path / "cfg" / "openstack" / "clouds.yaml").exists()
    return res


def test_unreachable_ssh_cidrs_and_admin_access_are_refused(tmp_path, ssh_agent):
    values = {
        "cluster_name": CLUSTER,
        "ssh_public_keys": [ssh_agent.public_key],
        # this machine reaches the cloud's floating IPs from 100.64.0.0/10, not from here
        "ssh_allowed_cidrs": ["203.0.113.0/24"],
        "external_network_name": "public",
        "base_image": "debian-12-rehearsal",
        "public_cidr": "10.238.0.0/24",
        "private_cidr": "10.239.0.0/24",
        "first_control_plane_access": "admin_network",
        "admin_network_name": "adm",
    }
    res = refused_up(tmp_path, ssh_agent, values)
    assert "ssh_allowed_cidrs ['203.0.113.0/24'] does not let this machine in" in res.stderr
    assert 'add "100.64.0.0/10" to ssh_allowed_cidrs for --cloud local' in res.stderr
    assert 'set first_control_plane_access = "floating_ip" for --cloud local' in res.stderr
    assert own_leftovers(CLUSTER) == []


def test_a_cluster_named_as_a_project_the_cloud_keeps_is_refused(tmp_path, ssh_agent):
    values = {"cluster_name": "service", "ssh_public_keys": [ssh_agent.public_key],
              "ssh_allowed_cidrs": ["100.64.0.0/10"], "external_network_name": "public",
              "base_image": "debian-12-rehearsal"}
    res = refused_up(tmp_path, ssh_agent, values)
    assert "cluster_name 'service' is a project the rehearsal cloud keeps" in res.stderr
    assert "choose a cluster_name other than admin or service" in res.stderr
    assert cloud().profile("service") is None  # no cluster of that name was attached
