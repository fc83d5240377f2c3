"""
The dead first control plane rebuilt in place (issue 16, "replace a node"): k8s-cp-1's
server, the one that initialised the cluster and issues join credentials, is off
(test_real_kubernetes.py stopped it), as a broken server's would be, and ``kos up --replace
k8s-cp-1`` makes the cluster forget it through another control plane, k8s-cp-2 (its etcd
member removed, its Node deleted), rebuilds its server under the same name and address,
forgets the old server's salt key, accepts the new server's key against its console, and
the new server rejoins as a control plane through k8s-cp-2, which issues its credential:
no second cluster. (The master's reactor does not converge it when it starts: its cluster,
as the first control plane's mine entry says, is not up; kos's own converge does.)
Real etcd and kubeadm, so the kubeadm cluster only. Named to run after
test_real_kubernetes.py: the upgrade, scale-in and restore tests then run on a cluster
with a rebuilt control plane.
"""

import json

import pytest

from kos import trust
from kos.onmaster_keys import key_finger
from tests.e2e.test_real_kubernetes import etcd_members, kube_json, kubectl, wait_for

pytestmark = pytest.mark.netns

UP_TIMEOUT = 1500


def test_the_dead_first_control_plane_is_rebuilt_and_rejoins_the_cluster(real):
    conn = real.conn()
    old = real.server("k8s-cp-1")
    minions = real.outputs()["minions"]
    mid = next(m for m, i in minions.items() if i["hostname"] == "k8s-cp-1")
    before = etcd_members(real, via="k8s-cp-2")
    assert sorted(before) == ["k8s-cp-1", "k8s-cp-2", "k8s-cp-3"], before
    if old.status != "SHUTOFF":  # test_real_kubernetes.py left it off, unless run alone
        conn.compute.stop_server(old)
        conn.compute.wait_for_server(old, status="SHUTOFF", wait=180)

    res = real.kos("up", *real.args, "--yes", "--replace", "k8s-cp-1", timeout=UP_TIMEOUT)
    assert res.returncode == 0, res.stderr[-4000:]
    # silent, so forgotten without leaving by itself (orch.remove's force)
    assert f"{mid} do not answer: forgotten by the cluster" in res.stderr
    steps = json.loads((real.state / "steps.json").read_text())["steps"]
    assert steps["replace-leave"]["status"] == "done" and "forced" in steps["replace-leave"]["detail"]
    assert steps["terraform-apply"]["detail"]["replaced"] == ["k8s-cp-1"]
    assert steps["salt-keys-rebuilt"]["status"] == "done"
    # joined with a credential issued for it, as any control plane joins; never initialised
    ran = set(steps["orchestrate"]["detail"]["seconds"])
    assert {f"kos-orch-deploy-credentials-{mid}", f"kos-orch-deploy-control-plane-{mid}",
            f"kos-orch-deploy-revoke-{mid}"} <= ran, sorted(ran)
    assert "kos-orch-deploy-first-control-plane" not in ran

    # a new server under the same name and address
    new = real.server("k8s-cp-1")
    assert new.id != old.id
    assert real.outputs()["minions"][mid] == minions[mid]

    # the master holds the new server's key, the one its console printed, and nothing denied
    keys = json.loads(real.host("salt").run("salt-key", "-L", "--out=json", timeout=60).stdout)
    assert mid in keys["minions"] and keys["minions_denied"] == [] and keys["minions_pre"] == []
    pem = json.loads(real.host("salt").run("salt-key", "-p", mid, "--out=json",
                                           timeout=60).stdout)["minions"][mid]
    console = conn.compute.get_server_console_output(new)["output"]
    assert trust.parse_console(console, mid)["minion_keys"] == [key_finger(pem)]

    # etcd: three members of one cluster again, k8s-cp-1 a new one, as both the issuer and
    # the rebuilt node see it; Kubernetes: the node Ready, one cluster (the same UID for
    # kube-system seen from the rebuilt node and from k8s-cp-2)
    def members():
        found = etcd_members(real, via="k8s-cp-2")
        ok = isinstance(found, dict) and sorted(found) == sorted(before) and (
            found["k8s-cp-1"] != before["k8s-cp-1"])
        return ok, found

    wait_for("three etcd members, k8s-cp-1 a new one", members)
    assert etcd_members(real) == etcd_members(real, via="k8s-cp-2")
    node = kube_json(real, "get", "node", "k8s-cp-1")
    assert "node-role.kubernetes.io/control-plane" in node["metadata"]["labels"]
    assert next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready") == "True"
    uid = kube_json(real, "get", "namespace", "kube-system")["metadata"]["uid"]
    assert json.loads(kubectl(real, "get", "namespace", "kube-system", "-o", "json",
                              via="k8s-cp-2").stdout)["metadata"]["uid"] == uid
    # no join credential left behind on the issuer
    left = real.host("k8s-cp-2").run("ls", "-A", "/etc/kos/join", check=False, timeout=60)
    assert left.stdout.strip() == "", left.stdout

    status = real.kos("status", *real.args, "--json", timeout=300)
    assert status.returncode == 0, status.stdout[-3000:] + status.stderr[-2000:]
    doc = json.loads(status.stdout)
    assert doc["healthy"] is True and doc["unexpected_keys"] == [], doc

    # a converge after the rebuild changes nothing: the first control plane is whole again
    again = real.kos("converge", *real.args, timeout=UP_TIMEOUT)
    assert again.returncode == 0, again.stderr[-4000:]
