"""
``kos upgrade`` on the rehearsal cloud's microk8s cluster (issue 16, item 1): a skipped
minor and a downgrade are refused with nothing changed; 1.31 → 1.32 moves the first control
plane, then each worker, one at a time, each drained before its refresh and uncordoned
after, never more than one node unschedulable at once, every snap held; a re-run has
nothing to do. The API is probed from the master while it runs; failed probes are
reported (one control plane: its own refresh takes the API away for a moment).
On the real kubeadm cluster, a skipped minor and a downgrade are refused by real kubelets'
versions with nothing changed (the rolling upgrade itself runs against the stand-ins in
tests/integration/kubeadm_upgrade: the next minor's build is not part of make test). Named
to run before test_teardown.py, which takes the clusters down: the package's modules run in
file-name order.
"""

import json
import re
import subprocess
import threading
import time

import pytest

pytestmark = pytest.mark.netns

UPGRADE_TIMEOUT = 900


def first_control_plane(cluster):
    return next(m for m, i in cluster.outputs()["minions"].items()
                if i["hostname"] == "k8s-cp-1")


def salt(cluster, target, *args, timeout=120):
    """The minion's return (None: no answer, also none within ``timeout`` seconds)."""
    try:
        res = cluster.host("salt").run("salt", "--out=json", "--static", target, *args,
                                       timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None
    try:
        return json.loads(res.stdout).get(target)
    except ValueError:
        return None


def nodes(cluster, fun="microk8s.nodes"):
    """The Kubernetes nodes as the first control plane sees them (None: no answer)."""
    found = salt(cluster, first_control_plane(cluster), fun, timeout=60)
    return found if isinstance(found, dict) else None


def snaps(cluster):
    """``{hostname: (tracking, held)}`` from every node's own snap."""
    out = {}
    for mid, info in cluster.outputs()["minions"].items():
        if info["role"] in ("control_plane", "worker"):
            facts = salt(cluster, mid, "microk8s.upgrade_facts")
            out[info["hostname"]] = (facts["tracking"], facts["held"])
    return out


class Watcher(threading.Thread):
    """Samples the cluster's nodes from the first control plane while an upgrade runs
    (``fun``: the distribution's nodes function)."""

    def __init__(self, cluster, fun="microk8s.nodes", interval=0.5):
        super().__init__(daemon=True)
        self.cluster, self.fun, self.interval = cluster, fun, interval
        self.samples, self.failed = [], 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            seen = nodes(self.cluster, self.fun)
            if seen is None:
                self.failed += 1
            else:
                self.samples.append({n for n, v in seen.items() if v.get("unschedulable")})
            time.sleep(self.interval)


def watched_upgrade(watcher, version, timeout):
    """A successful ``kos upgrade --version`` with ``watcher`` sampling the nodes throughout:
    the upgrade's JSON report and the stopped watcher."""
    cluster = watcher.cluster
    watcher.start()
    try:
        res = cluster.kos("upgrade", *cluster.args, "--version", version, timeout=timeout)
    finally:
        watcher.stop.set()
        watcher.join(timeout=120)
    assert res.returncode == 0, res.stderr[-4000:]
    doc = json.loads(res.stdout)
    print(f"API probes during the upgrade: {len(watcher.samples)} answered, "
          f"{watcher.failed} failed; upgrade steps (s): {doc['orchestration']['seconds']}")
    return doc, watcher


@pytest.fixture
def microk8s(cluster):
    if cluster.values["kubernetes_distribution"] != "microk8s":
        pytest.skip("the kubeadm cluster's upgrade: test_target_minor_upgrade.py")
    assert cluster.up.returncode == 0, cluster.failed_up()
    return cluster


def test_skipped_minor_and_downgrade_are_refused_with_nothing_changed(microk8s):
    before = snaps(microk8s)
    assert set(before.values()) == {("1.31/stable", True)}, before
    res = microk8s.kos("upgrade", *microk8s.args, "--version", "1.33", timeout=600)
    assert res.returncode == 6, res.stderr[-2000:]
    assert "would skip 1.32" in res.stderr and "upgrade to 1.32/stable first" in res.stderr
    res = microk8s.kos("upgrade", *microk8s.args, "--version", "1.30/stable", timeout=600)
    assert res.returncode == 6, res.stderr[-2000:]
    assert "kos does not downgrade" in res.stderr
    assert snaps(microk8s) == before
    assert not any(v["unschedulable"] for v in nodes(microk8s).values())


def test_kubeadm_refuses_a_skipped_minor_and_a_downgrade_with_nothing_changed(cluster):
    if cluster.values["kubernetes_distribution"] != "kubeadm":
        pytest.skip("the microk8s refusals are the test above")
    assert cluster.up.returncode == 0, cluster.failed_up()
    first = first_control_plane(cluster)
    before = salt(cluster, first, "kos_kubectl.nodes", timeout=60)
    versions = {v["version"] for v in before.values()}
    assert len(versions) == 1, before
    minor = int(versions.pop().split(".")[1])
    res = cluster.kos("upgrade", *cluster.args, "--version", f"v1.{minor + 2}.0", timeout=600)
    assert res.returncode == 6, res.stderr[-2000:]
    assert f"would skip 1.{minor + 1}" in res.stderr and "one minor version at a time" in res.stderr
    res = cluster.kos("upgrade", *cluster.args, "--version", f"v1.{minor - 1}.0", timeout=600)
    assert res.returncode == 6, res.stderr[-2000:]
    assert "kos does not downgrade" in res.stderr
    assert salt(cluster, first, "kos_kubectl.nodes", timeout=60) == before


def test_upgrade_moves_one_node_at_a_time_in_order(microk8s):
    doc, watcher = watched_upgrade(Watcher(microk8s), "1.32", UPGRADE_TIMEOUT)
    # the first control plane, then the workers; each drained, refreshed, uncordoned (each
    # step requires the one before: the orchestration's integration test checks the order)
    order = ["k8s-cp-1", "k8s-worker-1", "k8s-worker-2"]
    assert [m.split(".")[0] for m in doc["upgraded"]] == order
    steps = [re.fullmatch(r"kos-orch-upgrade-(.+)-(drain|refresh|uncordon|done)", s)
             for s in doc["orchestration"]["seconds"]]
    assert sorted((m[1].split(".")[0], m[2]) for m in steps if m) == sorted(
        (n, s) for n in order for s in ("drain", "refresh", "uncordon", "done"))
    assert doc["versions"] == {n: "v1.32.9" for n in order}
    # what the samples saw (a sample takes seconds, a node's turn a few: some see none)
    assert max((len(s) for s in watcher.samples), default=0) <= 1, watcher.samples
    assert set(snaps(microk8s).values()) == {("1.32/stable", True)}
    assert not any(v["unschedulable"] for v in nodes(microk8s).values())
    status = json.loads(microk8s.kos("status", *microk8s.args, "--json", timeout=300).stdout)
    assert status["healthy"] is True
    assert {n["kubernetes"]["version"] for n in status["nodes"] if "kubernetes" in n} == {"v1.32.9"}


def test_upgrade_again_has_nothing_to_do(microk8s):
    res = microk8s.kos("upgrade", *microk8s.args, "--version", "1.32/stable", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert list(json.loads(res.stdout)["orchestration"]["seconds"]) == ["kos-orch-upgrade-nothing"]
