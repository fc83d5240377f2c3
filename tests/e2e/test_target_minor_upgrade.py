"""
The real kubeadm upgrade on the rehearsal cloud (issue 11, item 5; issue 16, item 1): ``kos
upgrade`` moves the kubeadm cluster from the formula's pinned release to the next minor's
(``kos_local.kubernetes.UPGRADE_TARGET``), real ``kubeadm upgrade apply`` on the first
control plane, ``kubeadm upgrade node`` on the others and the workers, one node at a time,
each drained before and uncordoned after, the packages and images from the mirror's path of
the target minor as pkgs.k8s.io lays it out. The API is probed from the master meanwhile.

make test does not build the target (about ten more minutes of a fresh machine's hour):
this runs where it is built already (``python -m kos_local.kubernetes --next``) and is
skipped, saying so, elsewhere. Named to run last before test_teardown.py: the tests before
it expect the pinned release.
"""

import json
import re

import pytest

from kos_local import kubernetes
from tests.e2e.test_real_kubernetes import kube_json
from tests.e2e.test_rolling_upgrade import Watcher, salt, watched_upgrade

pytestmark = pytest.mark.netns

UPGRADE_TIMEOUT = 2400


@pytest.fixture
def target(real):
    if not kubernetes.built(kubernetes.UPGRADE_TARGET):
        pytest.skip(f"the upgrade target {kubernetes.UPGRADE_TARGET} is not built on this "
                    "machine: python -m kos_local.kubernetes --next builds it")
    # the cloud's hosts see the mirror's minor paths as this machine made them
    kubernetes.ensure(kubernetes.UPGRADE_TARGET)
    return kubernetes.UPGRADE_TARGET


def test_kubeadm_moves_to_the_next_minor_one_node_at_a_time(real, target):
    hosts = sorted(h for h in real.hostnames() if h.startswith("k8s-"))
    cps = [h for h in hosts if h.startswith("k8s-cp-")]
    watcher = Watcher(real, "kos_kubectl.nodes", interval=1)
    doc, _ = watched_upgrade(watcher, target, UPGRADE_TIMEOUT)
    # the first control plane, the other control planes, then the workers
    upgraded = [m.split(".")[0] for m in doc["upgraded"]]
    assert upgraded[0] == "k8s-cp-1" and sorted(upgraded[:len(cps)]) == cps, upgraded
    assert sorted(upgraded) == hosts
    steps = [re.fullmatch(r"kos-orch-upgrade-(.+?)\.\S+-(drain|node|uncordon)", s)
             for s in doc["orchestration"]["seconds"]]
    assert sorted((m[1], m[2]) for m in steps if m) == sorted(
        (h, s) for h in hosts for s in ("drain", "node", "uncordon"))
    # never more than one node unschedulable at once, none left so
    assert max((len(s) for s in watcher.samples), default=0) <= 1, watcher.samples
    nodes = {n["metadata"]["name"]: n for n in kube_json(real, "get", "nodes")["items"]}
    assert {n: v["status"]["nodeInfo"]["kubeletVersion"] for n, v in nodes.items()} == {
        h: target for h in hosts}
    assert not any(v["spec"].get("unschedulable") for v in nodes.values())
    ids = {i["hostname"]: mid for mid, i in real.outputs()["minions"].items()}
    for cp in cps:
        facts = salt(real, ids[cp], "kos_upgrade.upgrade_facts")
        assert facts["control_plane_version"] == target, (cp, facts)
        assert facts["kubeadm"] == target and facts["pending"] is None, (cp, facts)
    status = json.loads(real.kos("status", *real.args, "--json", timeout=300).stdout)
    assert status["healthy"] is True
    assert {n["kubernetes"]["version"] for n in status["nodes"] if "kubernetes" in n} == {target}
