"""
The one rehearsal cloud every local cluster shares, without booting it: which clusters it
holds (their profiles), how a cluster leaves it, what it refuses, and how the
materialiser finds the cluster a server is for (its project, in Nova's metadata).
"""

import base64
import json
from types import SimpleNamespace

import pytest
import yaml

import kos_local
from kos.errors import ConvergeError
from kos_local import net
from kos_local.openstack import materialiser
from kos_local.openstack.cloud import Cloud


@pytest.fixture
def clouds_yaml(tmp_path, monkeypatch):
    path = tmp_path / "config" / "clouds.yaml"
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(path))
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({"clouds": {
        "kos-local-a": {"auth": {"auth_url": "http://100.64.0.130:5000/v3"}},
        "kos-local-b": {"auth": {"auth_url": "http://100.64.0.130:5000/v3"}},
        "elsewhere": {"auth": {"auth_url": "https://keystone.example.com/v3"}},
    }}))
    return path


def attach_profile(cloud, cluster, **profile):
    path = cloud.root / "clusters" / f"{cluster}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile))


def test_a_cluster_leaves_a_cloud_that_is_not_running_by_its_profile_and_entry(
        tmp_path, clouds_yaml):
    cloud = Cloud("kostest", tmp_path / "kostest-cloud")
    attach_profile(cloud, "a", project_id="p-a", state=str(tmp_path / "a"))
    attach_profile(cloud, "b", project_id="p-b", state=str(tmp_path / "b"))
    assert cloud.clusters() == ["a", "b"]
    assert cloud.attached("a") and not cloud.attached("c")
    assert not cloud.usable()  # not running: nothing asks Keystone
    assert cloud.detach("a") == ["clouds.yaml entry kos-local-a"]
    assert cloud.clusters() == ["b"]
    entries = yaml.safe_load(clouds_yaml.read_text())["clouds"]
    assert sorted(entries) == ["elsewhere", "kos-local-b"]
    assert cloud.detach("a") == []  # a second time: nothing left to do


def test_a_second_cluster_of_a_name_in_use_from_another_directory_is_refused(tmp_path):
    cloud = Cloud("kostest", tmp_path / "kostest-cloud")
    theirs = tmp_path / "theirs" / ".kos" / "a"
    theirs.mkdir(parents=True)
    attach_profile(cloud, "a", project_id="p-a", state=str(theirs))
    with pytest.raises(ConvergeError) as err:
        cloud.attach("a", {"state": str(tmp_path / "mine" / ".kos" / "a")})
    assert str(theirs) in err.value.problem and "another cluster_name" in err.value.fix


def test_the_materialiser_finds_the_cluster_of_a_servers_project(tmp_path):
    mat = materialiser.Materialiser({"cloud": "kostest", "local_dir": str(tmp_path),
                                     "venv_bin": "/nonexistent"})
    cloud = Cloud("kostest", tmp_path)
    attach_profile(cloud, "a", project_id="p-a", kubelet=True, standins=None)
    attach_profile(cloud, "b", project_id="p-b", kubelet=False, standins="/s")

    def drive(project):
        meta = json.dumps({"uuid": "u", "project_id": project}).encode()
        return {materialiser.METADATA: base64.b64encode(meta).decode()}

    assert mat.profile(drive("p-b"))["standins"] == "/s"
    assert mat.profile(drive("p-a"))["kubelet"] is True
    with pytest.raises(RuntimeError, match="project p-z is no cluster's on this cloud"):
        mat.profile(drive("p-z"))
    with pytest.raises(RuntimeError, match="names no project"):
        mat.profile({})


def findings(values, running_block=None):
    backend = kos_local.LocalBackend.__new__(kos_local.LocalBackend)
    plan = net.Plan(net.ipaddress.ip_network(running_block)) if running_block else None
    backend.cloud = SimpleNamespace(running=lambda: plan is not None, plan=lambda: plan)
    cidrs = {"public_cidr": "10.0.0.0/24", "private_cidr": "10.0.1.0/24",
             "pod_cidr": "10.42.0.0/16", "service_cidr": "10.43.0.0/16"}
    return {f.check: f for f in backend._cloud_findings({**cidrs, **values}) if not f.ok}


def test_a_cluster_named_as_a_project_the_cloud_keeps_or_inside_its_addresses_is_refused():
    assert findings({"cluster_name": "demo"}) == {}
    refused = findings({"cluster_name": "admin"})
    assert "choose a cluster_name other than admin or service" in refused["cluster_name"].fix
    # the cloud runs on 100.64.3.0/24: a cluster whose network is there would not reach out
    refused = findings({"cluster_name": "demo", "private_cidr": "100.64.3.128/25"},
                       running_block="100.64.3.0/24")
    assert list(refused) == ["private_cidr"]
    assert "outside 100.64.3.0/24" in refused["private_cidr"].fix
    # no cloud running yet: it will be placed around the cluster's networks
    assert findings({"cluster_name": "demo", "private_cidr": "100.64.3.128/25"}) == {}


def test_the_clouds_lock_waits_for_its_holder_and_leaves_no_file(tmp_path):
    """A second kos waits for the first (they would set up or remove the same cloud), then
    takes the lock even though the first removed its file meanwhile; nothing stays."""
    import threading
    import time

    cloud = Cloud("kostest", tmp_path / "kos" / "kostest-cloud")
    order = []

    def second():
        with cloud.lock():
            order.append("2")

    with cloud.lock():
        waiting = threading.Thread(target=second)
        waiting.start()
        time.sleep(0.3)
        assert waiting.is_alive() and order == []
        order.append("1")
    waiting.join(timeout=10)
    assert order == ["1", "2"]
    # no cloud here: neither its lock file nor the directory that held it stays
    assert not (tmp_path / "kos").exists()
