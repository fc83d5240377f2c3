"""
orch.deploy on a real master and four real minions (salt master, one control
plane, two workers), each minion in its own network namespace. The microk8s
stand-in's cluster agent listens on the control plane's address; workers join it
over the test bridge with the token the control plane published in the mine.
"""

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import DOMAIN_SLS

SNAP_DATA = "var/snap/microk8s/current"


def orchestrate(salt_run, pillar=None):
    args = ["state.orchestrate", "orch.deploy"]
    if pillar is not None:
        args.append(f"pillar={json.dumps(pillar)}")
    ret = salt_run.run(*args)
    data = ret.data
    # salt-run --out=json: {"data": {"<master>_master": {state id: result}}, "retcode": n}
    steps = next(iter(data["data"].values())) if isinstance(data, dict) and "data" in data else data
    return ret, steps


def step_results(steps):
    """{step id: result} for every orchestration step."""
    return {v["__id__"]: v["result"] for v in steps.values()}


def highstate_changes(steps):
    """Every (minion, state id) that changed something in the orchestration's highstates."""
    changed = []
    for step in steps.values():
        if not step["__id__"].startswith("kos-orch-deploy-") or "changes" not in step:
            continue
        for minion, states in (step["changes"].get("ret") or {}).items():
            if not isinstance(states, dict):
                continue
            for state_id, result in states.items():
                if isinstance(result, dict) and result.get("changes"):
                    changed.append((minion, state_id, result["changes"]))
    return changed


def tree_snapshot(root):
    """Every file under root with size and mtime: what the stand-ins left on a host's disk."""
    snap = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            snap[str(path)] = (st.st_size, st.st_mtime_ns)
    return snap


@pytest.fixture(scope="module")
def deployed(salt_run, minions):
    started = time.monotonic()
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, indent=1, default=str)[:6000]
    DEMO["orchestration_seconds"] = round(time.monotonic() - started, 1)
    return steps


# `make demo` (kos.demo) reads what this scenario converged from here.
DEMO = {}


@pytest.fixture(scope="module", autouse=True)
def demo_report():
    yield
    path = os.environ.get("KOS_DEMO_REPORT")
    if path and DEMO:
        Path(path).write_text(json.dumps(DEMO, indent=1))


def test_every_step_succeeded_in_order(deployed):
    results = step_results(deployed)
    assert all(results.values()), results
    order = [v["__id__"] for v in sorted(deployed.values(), key=lambda v: v["__run_num__"])]
    assert order.index("kos-orch-deploy-validate") < order.index("kos-orch-deploy-salt-master")
    assert order.index("kos-orch-deploy-salt-master") < order.index("kos-orch-deploy-first-control-plane")
    assert order.index("kos-orch-deploy-first-control-plane") < order.index("kos-orch-deploy-workers")


def test_workers_joined_the_control_plane(deployed, salt_cli, deployment, host_roots):
    cp = deployment.fqdn("k8s-cp-1")
    ret = salt_cli.run("microk8s.nodes", minion_tgt=cp)
    assert ret.returncode == 0, ret
    nodes = ret.data
    assert {n: v["role"] for n, v in nodes.items()} == {
        "k8s-cp-1": "control-plane",
        "k8s-worker-1": "worker",
        "k8s-worker-2": "worker",
    }
    DEMO["nodes"] = {
        name: {"role": info["role"], "ip": info["ip"], "ready": info["ready"]} for name, info in nodes.items()
    }
    for name in ("k8s-worker-1", "k8s-worker-2"):
        worker = deployment.fqdn(name)
        assert salt_cli.run("microk8s.is_worker", minion_tgt=worker).data is True
        assert (host_roots / name / SNAP_DATA / "var/lock/clustered.lock").exists()
        assert nodes[name]["ip"] == deployment.lab.hosts[name].address


def test_joins_used_the_ttl_token_from_the_mine(deployed, salt_cli, deployment, host_roots):
    cp = deployment.fqdn("k8s-cp-1")
    published = json.loads((host_roots / "k8s-cp-1" / "etc/kos/join.json").read_text())
    token = published["connection"].split("/")[1]
    assert published["connection"].startswith(deployment.lab.hosts["k8s-cp-1"].address + ":25000/")
    assert published["expires"] > time.time() + 1800
    lines = (host_roots / "k8s-cp-1" / SNAP_DATA / "credentials/cluster-tokens.txt").read_text().splitlines()
    # a TTL token: still there after two joins, never a single-use one
    assert any(line.startswith(f"{token}|") for line in lines)
    assert all("|" in line for line in lines if line.strip())
    # the mine serves it to Kubernetes nodes, not to the salt master's minion
    worker = deployment.fqdn("k8s-worker-1")
    seen = salt_cli.run("mine.get", cp, "kos_join", minion_tgt=worker).data
    assert seen[cp]["connection"] == published["connection"]
    hidden = salt_cli.run("mine.get", cp, "kos_join", minion_tgt=deployment.fqdn("salt")).data
    assert not hidden
    # and no minion log carries it
    for log in Path(deployment.pillar_dir).parents[1].rglob("minion.log"):
        assert token not in log.read_text(errors="replace"), log


def test_hosts_come_from_the_mine(deployed, deployment, host_roots):
    for name in ("salt", "k8s-cp-1", "k8s-worker-1", "k8s-worker-2"):
        text = (host_roots / name / "etc/hosts").read_text()
        assert text.startswith("127.0.0.1 localhost\n")
        for other, host in deployment.lab.hosts.items():
            assert f"{host.address} {deployment.fqdn(other)} {other}" in text, (name, text)


def test_extra_san_is_in_the_certificate(deployed, host_roots):
    template = (host_roots / "k8s-cp-1" / SNAP_DATA / "certs/csr.conf.template").read_text()
    assert "IP.100 = 203.0.113.10\n#MOREIPS" in template
    rendered = (host_roots / "k8s-cp-1" / SNAP_DATA / "certs/csr.conf").read_text()
    assert "203.0.113.10" in rendered


def test_addons_from_pillar(deployed, salt_cli, deployment):
    addons = salt_cli.run("microk8s.addons", minion_tgt=deployment.fqdn("k8s-cp-1")).data
    for name in ("dns", "hostpath-storage", "helm3", "ha-cluster", "observability"):
        assert addons[name] == "enabled", name
    assert addons["registry"] == "disabled"


def test_second_run_changes_nothing(deployed, salt_run):
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0
    assert highstate_changes(steps) == []
    DEMO["second_run_changes"] = 0


def test_near_expiry_token_is_replaced_and_a_new_node_still_joins(deployed, salt_run, salt_cli, deployment, host_roots):
    path = host_roots / "k8s-cp-1" / "etc/kos/join.json"
    doc = json.loads(path.read_text())
    old = doc["connection"]
    doc["expires"] = int(time.time()) + 60  # as if issued long ago
    path.write_text(json.dumps(doc))
    # a worker leaves, so the next run has a join to do with the new token
    worker = deployment.fqdn("k8s-worker-2")
    assert salt_cli.run("microk8s.leave", minion_tgt=worker).returncode == 0
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
    new = json.loads(path.read_text())
    assert new["connection"] != old and new["expires"] > time.time() + 1800
    assert salt_cli.run("microk8s.is_worker", minion_tgt=worker).data is True


def test_bad_pillar_fails_with_the_key_and_changes_nothing(deployed, salt_run, deployment, host_roots):
    env = f"environments/{DOMAIN_SLS}.sls"
    original = (deployment.pillar_dir / env).read_text()
    before = tree_snapshot(host_roots)
    bad = yaml.safe_load(original)
    bad["microk8s"]["addons"] = {"dnss": True}
    deployment.write(env, bad)
    try:
        ret, steps = orchestrate(salt_run)
        assert ret.returncode != 0
        text = json.dumps(steps, default=str)
        assert "pillar key 'microk8s:addons:dnss': unknown addon" in text
        results = step_results(steps)
        assert results["kos-orch-deploy-validate"] is False
        assert not results.get("kos-orch-deploy-first-control-plane")
    finally:
        deployment.write(env, original)
    assert tree_snapshot(host_roots) == before


def converged(step):
    """The minions a salt.state step ran on, from its comment ("States ran successfully.
    Updating a. No changes made to b, c.")."""
    names = set()
    for part in step["comment"].split(". "):
        for prefix in ("Updating ", "No changes made to "):
            if part.startswith(prefix):
                names |= {n.strip(" .") for n in part[len(prefix):].split(",")}
    return names


def test_a_silent_minion_stops_the_deploy_before_anything_changes(deployed, salt_run, minions,
                                                                 deployment, host_roots):
    """A node that does not answer is named, and no step runs anywhere; excluded, it is
    left out and the others converge."""
    silent = deployment.fqdn("k8s-worker-2")
    minions["k8s-worker-2"].terminate()
    try:
        before = tree_snapshot(host_roots)
        ret, steps = orchestrate(salt_run)
        assert ret.returncode != 0
        results = step_results(steps)
        ping = next(v for v in steps.values() if v["__id__"] == "kos-orch-deploy-ping")
        # "Running function test.ping failed on minions: <ids> Function test.ping ran on ..."
        named = ping["comment"].split("failed on minions:")[1].split(" Function ")[0]
        assert ping["result"] is False and [n.strip() for n in named.split(",")] == [silent], ping
        assert not any(ok for sid, ok in results.items() if sid != "kos-orch-deploy-ping"), results
        assert highstate_changes(steps) == []
        assert tree_snapshot(host_roots) == before

        ret, steps = orchestrate(salt_run, {"exclude": [silent]})
        assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
        workers = next(v for v in steps.values() if v["__id__"] == "kos-orch-deploy-workers")
        assert converged(workers) == {deployment.fqdn("k8s-worker-1")}, workers
        assert highstate_changes(steps) == []
    finally:
        minions["k8s-worker-2"].start(start_timeout=180)


def test_limit_converges_the_named_nodes_with_the_first_control_planes_token(
        deployed, salt_run, deployment):
    worker = deployment.fqdn("k8s-worker-1")
    ret, steps = orchestrate(salt_run, {"limit": [worker]})
    assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
    by_id = {v["__id__"]: v for v in steps.values()}
    assert "kos-orch-deploy-salt-master" not in by_id
    assert "kos-orch-deploy-first-control-plane" not in by_id
    assert by_id["kos-orch-deploy-first-control-plane-credentials"]["result"] is True
    assert converged(by_id["kos-orch-deploy-workers"]) == {worker}
    assert set(by_id["kos-orch-deploy-ping"]["changes"]["ret"]) == {
        worker, deployment.fqdn("k8s-cp-1")}


def test_an_unknown_minion_in_the_options_changes_nothing(deployed, salt_run, host_roots):
    before = tree_snapshot(host_roots)
    ret, steps = orchestrate(salt_run, {"limit": ["k8s-worker-9.nowhere"]})
    assert ret.returncode != 0
    assert list(step_results(steps)) == ["kos-orch-deploy-options"]
    step = next(iter(steps.values()))
    assert step["result"] is False
    assert "pillar key 'limit': \"k8s-worker-9.nowhere\" is not a minion of this deployment" in \
        step["name"], step
    assert tree_snapshot(host_roots) == before
