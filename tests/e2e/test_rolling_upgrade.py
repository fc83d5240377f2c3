"""
``kos upgrade`` on the rehearsal cloud's kubeadm cluster: a skipped minor and a downgrade
are refused by real kubelets' versions with nothing changed. The rolling upgrade itself
runs on real kubeadm in test_target_minor_upgrade.py (when the next minor is built), and
against the stand-ins through real Salt in tests/integration (both distributions, the
order, drains, held snaps, a re-run) and through the kos CLI in
tests/bootstrap/test_converge.py. Named to run before test_teardown.py, which takes the
clusters down: the package's modules run in file-name order.
"""

import json
import subprocess
import threading
import time

import pytest

pytestmark = pytest.mark.netns



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


def nodes(cluster, fun="kos_kubectl.nodes"):
    """The Kubernetes nodes as the first control plane sees them (None: no answer)."""
    found = salt(cluster, first_control_plane(cluster), fun, timeout=60)
    return found if isinstance(found, dict) else None


class Watcher(threading.Thread):
    """Samples the cluster's nodes from the first control plane while an upgrade runs
    (``fun``: the distribution's nodes function)."""

    def __init__(self, cluster, fun="kos_kubectl.nodes", interval=0.5):
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


def test_kubeadm_refuses_a_skipped_minor_and_a_downgrade_with_nothing_changed(cluster):
    if cluster.values["kubernetes_distribution"] != "kubeadm":
        pytest.skip("microk8s's refusals: tests/integration/test_deploy.py and "
                    "tests/bootstrap/test_converge.py")
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
