"""Bad input for the local cloud: the field and the fix are named, nothing is created."""

import json
import subprocess

import pytest

from tests.e2e.conftest import leftovers
from tests.bootstrap.conftest import Kos, base_env

pytestmark = pytest.mark.netns

CLUSTER = "kosbadin"
TAKEN = "10.238.0.0/24"


@pytest.fixture
def taken_route():
    """A route of 'this machine' the cluster's public_cidr would collide with."""
    subprocess.run(["ip", "link", "add", "kosbadr", "type", "bridge"], check=True)
    subprocess.run(["ip", "addr", "add", "10.238.0.1/24", "dev", "kosbadr"], check=True)
    subprocess.run(["ip", "link", "set", "kosbadr", "up"], check=True)
    yield
    subprocess.run(["ip", "link", "del", "kosbadr"], check=False)


def test_overlapping_network_and_admin_access_are_refused(tmp_path, ssh_agent, taken_route):
    values = {
        "cluster_name": CLUSTER,
        "ssh_public_keys": [ssh_agent.public_key],
        "ssh_allowed_cidrs": [TAKEN],
        "external_network_name": "local",
        "base_image": "debian-12-local",
        "public_cidr": TAKEN,
        "private_cidr": "10.239.0.0/24",
        "first_control_plane_access": "admin_network",
        "admin_network_name": "adm",
    }
    (tmp_path / "bad.tfvars.json").write_text(json.dumps(values))
    kos = Kos(tmp_path, base_env(SSH_AUTH_SOCK=ssh_agent.sock))
    res = kos("up", "--cloud", "local", "--var-file", "bad.tfvars.json", "--yes", timeout=300)
    assert res.returncode == 4, res.stderr
    assert f"public_cidr {TAKEN} overlaps a route of this machine" in res.stderr
    assert "choose another public_cidr" in res.stderr
    assert 'set first_control_plane_access = "floating_ip" for --cloud local' in res.stderr
    assert leftovers(CLUSTER, tmp_path / ".kos" / CLUSTER) == []
    assert not (tmp_path / ".kos" / CLUSTER / "local").exists()
