"""
orch.upgrade on a kubeadm cluster of three control planes and a worker, v1.31.4 to
v1.32.1 as the operator sets it in the environment's pillar: refused before anything
changes when a node is silent or the target skips a minor or goes down; one node at a time,
the first control plane first; a run stopped by a failing node is finished by the next;
then nothing is left to do, and a highstate moves no package.
"""

import hashlib
import json

import pytest

from tests.integration.kubeadm.conftest import root_of
from tests.integration.conftest import by_id
from tests.integration.conftest import orchestrate as run_orchestration
from tests.integration.kubeadm_upgrade.conftest import CONTROL_PLANES, FIRST_PACKAGES, WORKERS

K8S = [*CONTROL_PLANES, *WORKERS]
TARGET, TARGET_PACKAGES = "v1.32.1", "1.32.1-1.1"
STEPS = ("begin", "drain", "node", "uncordon", "done")
REQUISITE_FAILED = "One or more requisite failed"


def orchestrate(salt_run, pillar=None, test=False):
    return run_orchestration(salt_run, pillar, sls="orch.upgrade", test=test)


def ran(steps):
    """The ids of the steps that ran (not stopped by a failed requisite), in order."""
    return [v["__id__"] for v in sorted(steps.values(), key=lambda v: v["__run_num__"])
            if not str(v.get("comment", "")).startswith(REQUISITE_FAILED)]


def node_steps(steps):
    """[(hostname, step)] of the per-node steps that ran, in order."""
    found = []
    for sid in ran(steps):
        for step in STEPS:
            prefix, suffix = "kos-orch-upgrade-", f"-{step}"
            if sid.startswith(prefix) and sid.endswith(suffix):
                found.append((sid[len(prefix):-len(suffix)].split(".")[0], step))
    return found


def minion_states(step):
    """{state id: state return} of the one minion a salt.state step ran on."""
    rets = ((step.get("changes") or {}).get("ret") or {}).values()
    return {v["__id__"]: v for states in rets if isinstance(states, dict)
            for v in states.values() if isinstance(v, dict)}


def dump(steps):
    return json.dumps(steps, indent=1, default=str)[:8000]


def standin_file(host_roots, name, file, default=None):
    path = root_of(host_roots, name) / "var/lib/kos-standin" / file
    if not path.exists():
        return default
    text = path.read_text()
    return json.loads(text) if file.endswith(".json") else text


def nodes(salt_cli, deployment, name="k8s-cp-1"):
    ret = salt_cli.run("kos_kubectl.nodes", minion_tgt=deployment.fqdn(name))
    assert ret.returncode == 0, ret
    return ret.data


def kubectl(salt_cli, deployment, host_roots, *args):
    admin = root_of(host_roots, "k8s-cp-1") / "etc/kubernetes/admin.conf"
    ret = salt_cli.run("cmd.run_all", " ".join(["kubectl", "--kubeconfig", str(admin), *args]),
                       minion_tgt=deployment.fqdn("k8s-cp-1"))
    assert ret.data["retcode"] == 0, ret.data
    return ret.data["stdout"]


def node_view(salt_cli, deployment, host_roots):
    """What an upgrade changes, as the operator would check it: each node's kubelet version,
    Ready, cordon and packages, its control-plane manifests and kubelet configuration, and
    kos's note of an unfinished upgrade."""
    seen = nodes(salt_cli, deployment)
    view = {}
    for name in K8S:
        root = root_of(host_roots, name)
        files = sorted(p for p in (root / "etc/kubernetes/manifests").glob("*.yaml"))
        files += [root / "var/lib/kubelet/config.yaml", root / "etc/kos/kubeadm-upgrade-pending.json"]
        view[name] = {
            "node": (seen[name]["version"], seen[name]["ready"], seen[name]["unschedulable"]),
            "packages": standin_file(host_roots, name, "packages.json"),
            "holds": standin_file(host_roots, name, "holds.json"),
            "files": {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
                      for p in files if p.exists()},
        }
    return view


@pytest.fixture(scope="module")
def deployed(salt_run, minions):
    ret = salt_run.run("state.orchestrate", "orch.deploy")
    assert ret.returncode == 0, str(ret.data)[:8000]


def test_the_cluster_starts_on_the_first_release(deployed, salt_cli, deployment, host_roots):
    seen = nodes(salt_cli, deployment)
    assert {n: (v["version"], v["ready"]) for n, v in seen.items()} == {
        n: ("v1.31.4", True) for n in K8S}
    for name in K8S:
        assert standin_file(host_roots, name, "packages.json") == dict.fromkeys(
            ("kubeadm", "kubelet", "kubectl"), FIRST_PACKAGES)


@pytest.mark.parametrize("pillar, words", [
    ({"version": "v1.33.0"},
     "k8s-cp-1.kos-iu.test's kubelet runs v1.31.4; v1.33.0 would skip 1.32: kubeadm upgrades "
     "one minor version at a time, upgrade to the newest v1.32 first"),
    ({"version": "1.30.9"},
     "k8s-worker-1.kos-iu.test's kubelet runs v1.31.4; v1.30.9 is older: kos does not downgrade"),
    ({"version": "v1.32.1", "package_version": "1.31.4-1.1"},
     "kubeadm:package_version 1.31.4-1.1 is not a package of v1.32.1"),
    ({"version": "1.32"}, "pillar key 'version' must be a Kubernetes release such as v1.32.1"),
])
def test_a_skipped_minor_or_a_downgrade_is_refused_before_anything_changes(
        deployed, salt_run, salt_cli, deployment, host_roots, pillar, words):
    before = node_view(salt_cli, deployment, host_roots)
    ret, steps = orchestrate(salt_run, pillar)
    assert ret.returncode != 0
    assert [v["result"] for v in steps.values()] == [False], dump(steps)
    message = next(iter(steps.values()))["name"]
    assert words in message, message
    if not words.startswith("pillar key"):
        assert message.startswith("nothing changed: "), message
    assert node_view(salt_cli, deployment, host_roots) == before


def test_a_silent_node_is_named_and_nothing_changes(deployed, salt_run, salt_cli, minions,
                                                    deployment, host_roots):
    before = node_view(salt_cli, deployment, host_roots)
    minions["k8s-worker-1"].terminate()
    try:
        ret, steps = orchestrate(salt_run, {"version": TARGET})
        assert ret.returncode != 0
        step = by_id(steps)["kos-orch-upgrade-silent"]
        assert step["result"] is False and len(steps) == 1, dump(steps)
        assert step["name"].startswith(f"nothing changed: {deployment.fqdn('k8s-worker-1')} did "
                                       "not say what it runs"), step["name"]
    finally:
        minions["k8s-worker-1"].start(start_timeout=180)
    assert node_view(salt_cli, deployment, host_roots) == before


def test_a_test_run_predicts_every_node_and_changes_nothing(deployed, salt_run, salt_cli,
                                                            deployment, host_roots):
    before = node_view(salt_cli, deployment, host_roots)
    ret, steps = orchestrate(salt_run, {"version": TARGET, "package_version": TARGET_PACKAGES},
                             test=True)
    assert ret.returncode == 0, dump(steps)
    assert [n for n, _ in node_steps(steps)] == [n for n in K8S for _ in STEPS], dump(steps)
    assert all(v["result"] is not False for v in steps.values()), dump(steps)
    node = minion_states(by_id(steps)[f"kos-orch-upgrade-{deployment.fqdn('k8s-cp-1')}-node"])
    assert node["kubeadm-upgrade-node-kubeadm_upgrade-packages-kubeadm"]["changes"] == {
        "kubeadm": {"old": FIRST_PACKAGES, "new": TARGET_PACKAGES}}
    assert node["kubeadm-upgrade-node-kubeadm_upgrade-kubelet_restarted"]["result"] is None
    assert node_view(salt_cli, deployment, host_roots) == before
    for name in K8S:
        assert standin_file(host_roots, name, "restarts.log") is None, name


@pytest.fixture(scope="module")
def interrupted(deployed, salt_run, salt_cli, deployment, host_roots):
    """The operator moves the environment's pillar to v1.32.1 and cordons k8s-worker-1;
    the package repository fails k8s-cp-2 once, in the middle of the run."""
    deployment.environment(version=TARGET, package_version=TARGET_PACKAGES, repo={
        "url": "https://pkgs.k8s.io/core:/stable:/v1.32/deb/",
        "key_url": "https://pkgs.k8s.io/core:/stable:/v1.32/deb/Release.key"})
    kubectl(salt_cli, deployment, host_roots, "cordon", "k8s-worker-1")
    fault = root_of(host_roots, "k8s-cp-2") / "kos-test-faults" / "apt-install"
    fault.parent.mkdir(parents=True, exist_ok=True)
    fault.write_text("")
    before = node_view(salt_cli, deployment, host_roots)
    ret, steps = orchestrate(salt_run)
    return ret, steps, before, node_view(salt_cli, deployment, host_roots)


def test_a_failing_node_stops_the_run_and_the_nodes_after_it_stay_as_they_were(
        interrupted, deployment):
    ret, steps, before, after = interrupted
    assert ret.returncode != 0
    assert node_steps(steps) == [("k8s-cp-1", s) for s in STEPS] + [
        ("k8s-cp-2", "begin"), ("k8s-cp-2", "drain"), ("k8s-cp-2", "node")], dump(steps)
    failed = by_id(steps)[f"kos-orch-upgrade-{deployment.fqdn('k8s-cp-2')}-node"]
    assert failed["result"] is False
    assert "503" in json.dumps(failed), dump(failed)
    # the first control plane is done: control plane, packages and kubelet on v1.32.1
    assert after["k8s-cp-1"]["node"] == (TARGET, True, False)
    assert after["k8s-cp-1"]["packages"] == dict.fromkeys(("kubeadm", "kubelet", "kubectl"),
                                                          TARGET_PACKAGES)
    assert "etc/kos/kubeadm-upgrade-pending.json" not in after["k8s-cp-1"]["files"]
    # the failing one is drained, noted as pending, its packages where they were
    assert after["k8s-cp-2"]["node"] == ("v1.31.4", True, True)
    assert after["k8s-cp-2"]["packages"] == before["k8s-cp-2"]["packages"]
    assert "etc/kos/kubeadm-upgrade-pending.json" in after["k8s-cp-2"]["files"]
    # the nodes after it are untouched
    for name in ("k8s-cp-3", "k8s-worker-1"):
        assert after[name] == before[name], name


@pytest.fixture(scope="module")
def finished(interrupted, salt_run, salt_cli, deployment, host_roots):
    ret, steps = orchestrate(salt_run)
    return ret, steps, node_view(salt_cli, deployment, host_roots)


def test_the_rerun_finishes_the_failed_node_then_the_rest_in_order(finished, interrupted,
                                                                   deployment):
    ret, steps, _ = finished
    assert ret.returncode == 0, dump(steps)
    assert node_steps(steps) == [(n, s) for n in ("k8s-cp-2", "k8s-cp-3", "k8s-worker-1")
                                 for s in STEPS], dump(steps)
    first_run = by_id(interrupted[1])
    apply = minion_states(first_run[f"kos-orch-upgrade-{deployment.fqdn('k8s-cp-1')}-node"])
    assert apply["kubeadm-upgrade-node-kubeadm_upgrade-upgraded"]["comment"] == (
        f"kubeadm upgrade apply {TARGET} ran")
    for name in ("k8s-cp-2", "k8s-cp-3", "k8s-worker-1"):
        step = by_id(steps)[f"kos-orch-upgrade-{deployment.fqdn(name)}-node"]
        states = minion_states(step)
        assert states["kubeadm-upgrade-node-kubeadm_upgrade-upgraded"]["comment"] == (
            "kubeadm upgrade node ran"), name
        # the kubeadm package first, then upgrade node, then the kubelet's and kubectl's,
        # then the kubelet restarted on them
        order = sorted(states, key=lambda sid: states[sid]["__run_num__"])
        assert order == ["kubeadm-upgrade-node-kubeadm_upgrade-packages-kubeadm",
                         "kubeadm-upgrade-node-kubeadm_upgrade-upgraded",
                         "kubeadm-upgrade-node-kubeadm_upgrade-packages-kubelet",
                         "kubeadm-upgrade-node-kubeadm_upgrade-kubelet_restarted"], order
        assert all(states[sid]["changes"] for sid in order), (name, states)
        assert states["kubeadm-upgrade-node-kubeadm_upgrade-kubelet_restarted"]["changes"] == {
            "kubelet": {"old": "v1.31.4", "new": TARGET}}


def test_every_node_runs_the_new_release_drained_and_uncordoned_once(
        finished, interrupted, salt_cli, deployment, host_roots):
    _, steps, view = finished
    runs = [by_id(interrupted[1]), by_id(steps)]
    for name in K8S:
        # the operator's cordon of k8s-worker-1 stays; every other node takes Pods again
        assert view[name]["node"] == (TARGET, True, name == "k8s-worker-1"), name
        assert view[name]["packages"] == dict.fromkeys(("kubeadm", "kubelet", "kubectl"),
                                                       TARGET_PACKAGES), name
        assert view[name]["holds"] == ["kubeadm", "kubectl", "kubelet"], name
        assert "etc/kos/kubeadm-upgrade-pending.json" not in view[name]["files"]
        # the kubelet restarted once, on its new package; apt moved kubeadm first
        assert standin_file(host_roots, name, "restarts.log") == "kubelet\n", name
        assert standin_file(host_roots, name, "apt.log") == (
            f"kubeadm={TARGET_PACKAGES}\nkubelet={TARGET_PACKAGES} kubectl={TARGET_PACKAGES}\n")
        # drained in whichever run reached it (k8s-cp-2 in the one that failed), uncordoned
        # in the run that finished it
        drained = [minion_states(run[sid]).get("kubeadm-upgrade-drain-kubeadm-node_drained")
                   for run in runs
                   if (sid := f"kos-orch-upgrade-{deployment.fqdn(name)}-drain") in run
                   and not str(run[sid].get("comment", "")).startswith(REQUISITE_FAILED)]
        changed = [d["changes"] for d in drained if d and d["changes"]]
        step = runs[1 if name != "k8s-cp-1" else 0][
            f"kos-orch-upgrade-{deployment.fqdn(name)}-uncordon"]
        uncordon = minion_states(step)
        if name == "k8s-worker-1":
            # cordoned already: nothing to drain, and kept cordoned
            assert changed == [], drained
            assert step["result"] is True and not any(s["changes"] for s in uncordon.values())
        else:
            assert len(changed) == 1 and changed[0]["drained"]["new"]["schedulable"] is False, \
                drained
            assert uncordon["kubeadm-upgrade-uncordon-kubeadm_upgrade-node_uncordoned"][
                "changes"] == {"schedulable": {"old": False, "new": True}}
    for name in CONTROL_PLANES:
        manifests = root_of(host_roots, name) / "etc/kubernetes/manifests"
        assert f"kube-apiserver:{TARGET}" in (manifests / "kube-apiserver.yaml").read_text()
    ret = salt_cli.run("kos_kubectl.cluster_version", minion_tgt=deployment.fqdn("k8s-cp-1"))
    assert ret.data == TARGET, ret


def test_a_second_run_has_nothing_to_do(finished, salt_run):
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0 and list(by_id(steps)) == ["kos-orch-upgrade-nothing"], dump(steps)
    assert next(iter(steps.values()))["name"] == f"every node runs {TARGET}"


def test_a_highstate_after_the_upgrade_moves_no_package(finished, salt_cli, deployment,
                                                        host_roots):
    before = node_view(salt_cli, deployment, host_roots)
    ret = salt_cli.run("state.highstate", minion_tgt="k8s-*")
    assert ret.returncode == 0, str(ret.data)[:6000]
    assert node_view(salt_cli, deployment, host_roots) == before
    for name in K8S:
        assert standin_file(host_roots, name, "restarts.log") == "kubelet\n", name
