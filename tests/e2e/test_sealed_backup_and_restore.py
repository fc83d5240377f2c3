"""
``kos backup`` and ``kos restore`` on the rehearsal cloud (issue 16, item 4). kubeadm, real:
an etcd snapshot of the real cluster goes to the salt master sealed (the master holds no
readable copy), the master runs backups on a schedule, and a restore puts every etcd member
back to the snapshot: an object deleted since is back, one made since is gone, every member
and node is back. microk8s, on the stand-ins: the same path (dbctl backup, sealed, filed on
the master, fetched back, dbctl restore). Named to run after test_scale_in.py and before
test_teardown.py (the package's modules run in file-name order).
"""

import json
import secrets

import pytest

from tests.e2e.test_real_kubernetes import etcd_members, kubectl, wait_for
from tests.e2e.test_rolling_upgrade import first_control_plane, salt

pytestmark = pytest.mark.netns

BACKUPS = "/var/lib/kos-salt/backups"


def configmap(real, name):
    res = kubectl(real, "get", "configmap", name, "-o", "json", check=False)
    return json.loads(res.stdout)["data"] if res.returncode == 0 else None


def sealed_on_the_master(cluster, name, secret=None):
    master = cluster.host("salt")
    path = f"{BACKUPS}/{name}"
    assert master.run("stat", "-c", "%a %U", path).stdout.split() == ["600", "root"]
    assert master.run("head", "-c", "8", path).stdout == "KOSBAK1\n"
    if secret:
        # sealed: the master has the backup, not what is in it
        assert master.run("grep", "-a", "-c", secret, path, check=False).stdout.strip() == "0"
    # nothing left where it came from, nor in the master's cache it came through
    cp1 = cluster.host("k8s-cp-1")
    assert cp1.run("find", "/var/lib/kos/backups", "-type", "f").stdout == ""
    assert master.run("find", "/var/cache/salt/master/minions", "-name", "*.kosbak").stdout == ""


def test_a_sealed_backup_on_the_master_and_a_restore_that_brings_the_cluster_back_to_it(real):
    marker = f"kos-marker-{secrets.token_hex(8)}"
    kubectl(real, "create", "configmap", "kos-kept-by-the-backup", f"--from-literal=v={marker}")

    res = real.kos("backup", *real.args, "--json", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    done = json.loads(res.stdout)
    name = done["backup"]
    assert name.startswith("etcd-k8s-cp-1-") and name.endswith(".kosbak"), done
    assert name == done["backups"][-1]["name"]

    sealed_on_the_master(real, name, secret=marker)
    # and the master takes one every salt_master:backups:every_hours
    schedule = json.loads(real.host("salt").run("salt-run", "--out=json", "config.get", "schedule").stdout)
    assert schedule["kos-backup"]["function"] == "state.orchestrate"
    assert schedule["kos-backup"]["args"] == ["orch.backup"]

    listed = json.loads(real.kos("backup", *real.args, "--list", "--json", timeout=300).stdout)
    assert name in [b["name"] for b in listed["backups"]]
    # and for a person, a table: the backup on a line of its own with its time
    table = real.kos("backup", *real.args, "--list", timeout=300).stdout
    taken = next(b["time"] for b in listed["backups"] if b["name"] == name)
    assert any(name in line and taken in line for line in table.splitlines()), table

    # what changes after the backup
    kubectl(real, "delete", "configmap", "kos-kept-by-the-backup")
    kubectl(real, "create", "configmap", "kos-made-after-the-backup", "--from-literal=v=1")

    res = real.kos("restore", *real.args, "--backup", "etcd-k8s-cp-1-19990101T000000Z.kosbak",
                   "--yes", timeout=300)
    assert res.returncode != 0 and "--backup" in res.stderr and name in res.stderr, res.stderr
    assert configmap(real, "kos-made-after-the-backup") == {"v": "1"}  # nothing changed

    res = real.kos("restore", *real.args, "--yes", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["restored"] == name

    wait_for("the deleted ConfigMap back", lambda: (
        (data := configmap(real, "kos-kept-by-the-backup")) == {"v": marker}, data))
    assert configmap(real, "kos-made-after-the-backup") is None
    control_planes = sorted(h for h in real.hostnames() if h.startswith("k8s-cp-"))

    def members():
        found = etcd_members(real)
        found = sorted(found) if isinstance(found, dict) else found
        return found == control_planes, found

    wait_for("every control plane an etcd member again", members)

    def ready():
        doc = json.loads(kubectl(real, "get", "nodes", "-o", "json").stdout)
        state = {n["metadata"]["name"]: next(c["status"] for c in n["status"]["conditions"]
                                             if c["type"] == "Ready") for n in doc["items"]}
        return all(v == "True" for v in state.values()), state

    wait_for("every node Ready after the restore", ready, timeout=300)


def test_a_microk8s_backup_goes_the_same_way_and_dbctl_restores_it(cluster):
    if cluster.values["kubernetes_distribution"] != "microk8s":
        pytest.skip("the kubeadm cluster's backup is a real etcd snapshot (above)")
    assert cluster.up.returncode == 0, cluster.failed_up()
    cp1 = first_control_plane(cluster)

    def objects():
        return salt(cluster, cp1, "cmd.run", "microk8s kubectl get all")

    before = objects()
    assert "service/kubernetes" in before and "metrics-server" not in before
    res = cluster.kos("backup", *cluster.args, "--json", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    name = json.loads(res.stdout)["backup"]
    assert name.startswith("microk8s-k8s-cp-1-") and name.endswith(".kosbak")
    sealed_on_the_master(cluster, name)

    assert salt(cluster, cp1, "microk8s_addons.enable_addon", "metrics-server") is not False
    assert "metrics-server" in objects()
    res = cluster.kos("restore", *cluster.args, "--backup", name, "--yes", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert objects() == before
