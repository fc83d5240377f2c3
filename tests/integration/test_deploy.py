"""
orch.deploy on a real master and real minions (salt master, one control plane, two
workers, and a third worker the deployment gains later), each minion in its own network
namespace. The microk8s stand-in's cluster agent listens on the control plane's address;
workers join it over the test bridge, each with the credential the control plane issued
for it alone.
"""

import contextlib
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import (
    DOMAIN_SLS, EMPTY, STANDINS, by_id, converged, highstated, mine_digest, orchestrate,
    ran_on,
)

SNAP_DATA = "var/snap/microk8s/current"


def step_results(steps):
    """{step id: result} for every orchestration step."""
    return {v["__id__"]: v["result"] for v in steps.values()}


def order(steps):
    return [v["__id__"] for v in sorted(steps.values(), key=lambda v: v["__run_num__"])]


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


def test_every_step_succeeded_in_order(deployed, deployment):
    """A fresh cluster: the first control plane alone, then one wave for everything else
    (the master and both workers together), with the workers' credentials issued before
    it and revoked after it."""
    results = step_results(deployed)
    assert all(results.values()), results
    steps = order(deployed)
    expected = ["kos-orch-deploy-extension", "kos-orch-deploy-validate",
                "kos-orch-deploy-first-control-plane", "kos-orch-deploy-credentials-workers",
                "kos-orch-deploy-wave", "kos-orch-deploy-revoke"]
    assert [i for i in steps if i in expected] == expected
    assert highstated(deployed) == {
        "kos-orch-deploy-first-control-plane": {deployment.fqdn("k8s-cp-1")},
        "kos-orch-deploy-wave": {deployment.fqdn(n)
                                 for n in ("salt", "k8s-worker-1", "k8s-worker-2")},
    }
    DEMO["steps"] = steps


def test_every_minion_runs_the_release_of_the_extension_the_master_serves(
    deployed, salt_cli, deployment, release_root
):
    """Every minion the orchestration converges runs saltext.kos at the version of the
    release the master serves, in the Python that runs the minion (here the test's
    virtualenv has it already, so no wheel is fetched: tests/functional/
    test_extension_release.py fetches them for a minion that has another release)."""
    index = yaml.safe_load((release_root / "kos" / "release" / "release.yaml").read_text())
    for name in ("salt", "k8s-cp-1", "k8s-worker-1"):
        minion = deployment.fqdn(name)
        listed = salt_cli.run("pip.list", "saltext.kos", minion_tgt=minion).data
        assert list(listed.values()) == [index["version"]], (name, listed)
        installed = salt_cli.run("kos.installed_release", minion_tgt=minion).data
        assert installed == index["version"], (name, installed)


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


def credential_lines(host_roots):
    path = host_roots / "k8s-cp-1" / SNAP_DATA / "credentials/cluster-tokens.txt"
    return [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_the_wave_left_no_join_credential(deployed, salt_cli, deployment, host_roots):
    """Each worker joined with a credential of its own, used once: no token, no credential
    file and no mine entry is left once the wave ended."""
    cp = deployment.fqdn("k8s-cp-1")
    assert credential_lines(host_roots) == []
    join_dir = host_roots / "k8s-cp-1" / "etc/kos/join"
    assert not join_dir.exists() or list(join_dir.iterdir()) == []
    for name in ("k8s-worker-1", "k8s-worker-2"):
        worker = deployment.fqdn(name)
        seen = salt_cli.run("mine.get", cp, f"kos_join_{worker}", minion_tgt=worker).data
        assert not seen, seen


def hosts_lines(deployment):
    return [f"{deployment.lab.hosts[n].address} {deployment.fqdn(n)} {n}" for n in deployment.names]


def test_hosts_come_from_the_mine(deployed, deployment, host_roots):
    for name in deployment.names:
        text = (host_roots / name / "etc/hosts").read_text()
        assert text.startswith("127.0.0.1 localhost\n")
        for line in hosts_lines(deployment):
            assert line in text, (name, text)


def test_extra_san_is_in_the_certificate(deployed, host_roots):
    template = (host_roots / "k8s-cp-1" / SNAP_DATA / "certs/csr.conf.template").read_text()
    assert "IP.100 = 203.0.113.10\n#MOREIPS" in template
    rendered = (host_roots / "k8s-cp-1" / SNAP_DATA / "certs/csr.conf").read_text()
    assert "203.0.113.10" in rendered


def test_addons_from_pillar(deployed, salt_cli, deployment):
    addons = salt_cli.run("microk8s_addons.addons", minion_tgt=deployment.fqdn("k8s-cp-1")).data
    for name in ("dns", "hostpath-storage", "helm3", "ha-cluster", "observability"):
        assert addons[name] == "enabled", name
    assert addons["registry"] == "disabled"


def test_second_run_runs_no_highstate(deployed, salt_run):
    """Nothing changed: every minion says so, and no highstate runs anywhere."""
    started = time.monotonic()
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
    assert highstated(steps) == {}
    assert by_id(steps)["kos-orch-deploy-plan"]["name"] == "no highstate"
    DEMO["second_run_seconds"] = round(time.monotonic() - started, 1)
    DEMO["second_run_changes"] = 0


def test_a_forced_run_changes_nothing_in_parts_of_the_batch_one_after_the_other(
        deployed, salt_run, deployment):
    """force highstates every node though nothing changed; kos:orchestration:batch caps
    how many highstates the master serves at once (one wave without it: the pillar change
    below)."""
    ret, steps = orchestrate(salt_run, {"force": True, "kos": {"orchestration": {"batch": 3}}})
    assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
    parts = highstated(steps)
    assert sorted(parts) == ["kos-orch-deploy-wave", "kos-orch-deploy-wave-2"], parts
    assert [len(parts[p]) for p in sorted(parts)] == [3, 1]
    assert set().union(*parts.values()) == {
        deployment.fqdn(n) for n in ("salt", "k8s-cp-1", "k8s-worker-1", "k8s-worker-2")}
    ids = order(steps)
    assert ids.index("kos-orch-deploy-wave") < ids.index("kos-orch-deploy-wave-2")
    assert highstate_changes(steps) == []


def in_memory(salt_cli, minion, key):
    """A pillar value as the minion holds it between jobs (no compile)."""
    return salt_cli.run("pillar.get", key, "unmask=True", minion_tgt=minion).data


def test_a_pillar_change_is_one_parallel_highstate(deployed, salt_run, salt_cli, deployment):
    """A changed environment layer: every minion it applies to in one wave, no ordered
    step, nothing issued, nothing synced (the state tree is the one they converged with),
    the pillar judged in the minions' answers (no refresh, no validation job before the
    wave); afterwards each minion holds the new pillar; the next run has nothing left to
    do."""
    env = f"environments/{DOMAIN_SLS}.sls"
    original = (deployment.pillar_dir / env).read_text()
    changed = yaml.safe_load(original)
    changed["microk8s"]["ready_timeout"] = 31
    deployment.write(env, changed)
    try:
        ret, steps = orchestrate(salt_run)
        assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
        everyone = {deployment.fqdn(n) for n in ("salt", "k8s-cp-1", "k8s-worker-1",
                                                 "k8s-worker-2")}
        assert highstated(steps) == {"kos-orch-deploy-wave": everyone}
        assert not [i for i in order(steps) if "credentials" in i or "revoke" in i
                    or i.startswith("kos-orch-deploy-sync") or i in (
                        "kos-orch-deploy-refresh-pillar", "kos-orch-deploy-validate")]
        plan = by_id(steps)["kos-orch-deploy-plan"]["name"]
        assert "pillar changed: microk8s" in plan, plan
        # refreshed without waiting, at the end of each highstate
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            held = {m: in_memory(salt_cli, m, "microk8s:ready_timeout") for m in everyone}
            if set(held.values()) == {31}:
                break
            time.sleep(2)
        assert set(held.values()) == {31}, held
        ret, steps = orchestrate(salt_run)
        assert highstated(steps) == {}
    finally:
        deployment.write(env, original)
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0 and set(highstated(steps)) == {"kos-orch-deploy-wave"}


def test_a_worker_that_left_joins_again_alone(deployed, salt_run, salt_cli, deployment,
                                             host_roots):
    worker = deployment.fqdn("k8s-worker-2")
    assert salt_cli.run("microk8s.leave", minion_tgt=worker).returncode == 0
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
    assert highstated(steps) == {"kos-orch-deploy-wave": {worker}}
    plan = by_id(steps)["kos-orch-deploy-plan"]["name"]
    assert f"{worker} (not joined)" in plan, plan
    assert salt_cli.run("microk8s.is_worker", minion_tgt=worker).data is True
    assert credential_lines(host_roots) == []


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


def test_a_silent_minion_stops_the_deploy_before_anything_changes(deployed, salt_run, minions,
                                                                 deployment, host_roots):
    """A node that does not answer is named, and no step runs anywhere; excluded, it is
    left out and the others converge."""
    silent = deployment.fqdn("k8s-worker-2")
    minions["k8s-worker-2"].terminate()
    try:
        before = tree_snapshot(host_roots)
        ret, steps = orchestrate(salt_run, {"force": True})
        assert ret.returncode != 0
        results = step_results(steps)
        step = by_id(steps)["kos-orch-deploy-silent"]
        assert step["result"] is False, step
        assert step["name"] == f"no answer from {silent}: start them, or leave them out " \
                               "(pillar exclude)", step
        ran = {sid for sid, ok in results.items() if ok and sid != "kos-orch-deploy-plan"}
        assert ran == set() and highstate_changes(steps) == [], results
        assert tree_snapshot(host_roots) == before

        ret, steps = orchestrate(salt_run, {"exclude": [silent], "force": True})
        assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
        wave = by_id(steps)["kos-orch-deploy-wave"]
        assert converged(wave) == {deployment.fqdn(n) for n in ("salt", "k8s-cp-1",
                                                                "k8s-worker-1")}, wave
        assert highstate_changes(steps) == []
    finally:
        minions["k8s-worker-2"].start(start_timeout=180)


def test_limit_converges_the_named_nodes_with_the_first_control_planes_credential(
        deployed, salt_run, salt_cli, deployment):
    worker = deployment.fqdn("k8s-worker-1")
    assert salt_cli.run("microk8s.leave", minion_tgt=worker).returncode == 0
    ret, steps = orchestrate(salt_run, {"limit": [worker]})
    assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
    steps = by_id(steps)
    assert "kos-orch-deploy-first-control-plane" not in steps
    assert steps["kos-orch-deploy-credentials-workers"]["result"] is True
    assert converged(steps["kos-orch-deploy-wave"]) == {worker}
    # both judged in their answers: the tree they converged with, nothing to sync or refresh
    assert not {"kos-orch-deploy-refresh-pillar", "kos-orch-deploy-validate"} & set(steps)
    assert salt_cli.run("microk8s.is_worker", minion_tgt=worker).data is True


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


def test_a_rebuilt_first_control_plane_is_refused_before_anything_changes(
        deployed, salt_run, salt_cli, deployment, host_roots):
    """k8s-cp-1's server came back empty (no microk8s) while the workers are still joined
    to the cluster it initialised: initialising it would start a second cluster. The run
    names it and the way out, and changes nothing; excluded, the others converge."""
    cp = deployment.fqdn("k8s-cp-1")
    binary = host_roots / "k8s-cp-1" / "snap" / "bin" / "microk8s"
    aside = binary.with_name("microk8s.kos-aside")
    binary.rename(aside)
    try:
        assert salt_cli.run("saltutil.refresh_modules", "async=False", minion_tgt=cp).returncode == 0
        before = tree_snapshot(host_roots)
        ret, steps = orchestrate(salt_run)
        assert ret.returncode != 0
        assert list(step_results(steps)) == ["kos-orch-deploy-first-control-plane-lost"], steps
        name = next(iter(steps.values()))["name"]
        workers = ", ".join(deployment.fqdn(n) for n in ("k8s-worker-1", "k8s-worker-2"))
        assert name.startswith(f"the first control plane {cp} holds no cluster, but {workers}"
                               " joined the cluster it initialised: initialising it would "
                               "start a second cluster, so nothing changed"), name
        assert f"pillar exclude [{cp}]" in name, name
        assert tree_snapshot(host_roots) == before

        # plain Salt, no orchestration: the init guard refuses before the snap is installed
        # (installing it is what initialises a microk8s cluster); the workers said in the
        # mine that they joined, at the end of the highstate that joined them
        ret = salt_cli.run("state.highstate", minion_tgt=cp)
        assert ret.returncode != 0
        results = {v["__id__"]: v for v in ret.data.values()}
        guard = results["microk8s-init-kos-sole_cluster"]
        assert guard["result"] is False, guard
        assert guard["comment"].startswith(f"the first control plane {cp} holds no cluster, "
                                           f"but {workers} joined"), guard
        assert results["microk8s-init-snap-installed"]["result"] is False
        assert not binary.exists()
        assert tree_snapshot(host_roots) == before

        ret, steps = orchestrate(salt_run, {"exclude": [cp]})
        assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
        assert "kos-orch-deploy-first-control-plane" not in by_id(steps)
    finally:
        aside.rename(binary)
        salt_cli.run("saltutil.refresh_modules", "async=False", minion_tgt=cp)
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0 and highstated(steps) == {}, json.dumps(steps, default=str)[:4000]


# Every job that changes a minion which orch.deploy could start.
CHANGING = ["saltutil.sync_*", "saltutil.refresh_pillar", "state.*", "kos.learn_members",
            "kos.prepare_converge", "mine.update"]


def changing_jobs(salt_run):
    """The jids of every job in the master's job cache that changes a minion."""
    ret = salt_run.run("jobs.list_jobs", f"search_function={json.dumps(CHANGING)}")
    assert ret.returncode == 0, ret
    return set(ret.data or {})


@contextlib.contextmanager
def without_kos_module(factory):
    """``factory``'s minion restarted without kos's execution module (Salt's
    disable_modules), as a new server answers before it has the extension; restarted as it
    was afterwards."""
    config = Path(factory.config_file)
    original = config.read_text()
    factory.terminate()
    config.write_text(original + "\ndisable_modules: [kos]\n")
    try:
        factory.start(start_timeout=180)
        yield
    finally:
        factory.terminate()
        config.write_text(original)
        factory.start(start_timeout=180)


def test_deploy_in_test_mode_changes_no_minion_even_to_plan(
        deployed, minions, salt_run, salt_cli, deployment, host_roots):
    """k8s-cp-1 answers without kos's modules, as a new server does, while the workers are
    joined. Planning it once synced its modules and refreshed its pillar while the
    orchestration rendered, even under test=True; now the plan takes it for a new server,
    and the run in test mode starts no job that changes a minion: no extension install, no
    refresh, no state run."""
    cp = deployment.fqdn("k8s-cp-1")
    with without_kos_module(minions["k8s-cp-1"]):
        assert "kos.converge_need" not in (
            salt_cli.run("sys.list_functions", "kos", minion_tgt=cp).data or [])
        before, files = changing_jobs(salt_run), tree_snapshot(host_roots)
        ret, steps = orchestrate(salt_run, test=True)
        assert ret.returncode != 0
        assert list(step_results(steps)) == ["kos-orch-deploy-first-control-plane-lost"], steps
        name = next(iter(steps.values()))["name"]
        assert name.startswith(f"the first control plane {cp} answered without kos's "
                               "modules, as a new server does"), name
        assert changing_jobs(salt_run) == before
        assert tree_snapshot(host_roots) == files
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0 and highstated(steps) == {}, json.dumps(steps, default=str)[:4000]


def standin_microk8s(deployment, host_roots, name, *args):
    """The microk8s stand-in run by hand on a host (never through Salt)."""
    host = deployment.lab.hosts[name]
    root = host_roots / name
    env = [f"KOS_STANDIN_ROOT={root}", f"KOS_STANDIN_IP={host.address}",
           f"PATH={STANDINS / 'bin'}:{root / 'snap' / 'bin'}:/usr/bin:/bin"]
    cmd = ["ip", "netns", "exec", host.netns, "env", *env, str(root / "snap/bin/microk8s"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_workers_credential_is_its_own_and_dies_with_its_wave(
        deployed, salt_cli, deployment, host_roots):
    """Issued for one worker, as a worker (Terraform's role): only that minion reads it; once
    revoked, it joins nothing, neither as a control plane nor as a worker."""
    cp, worker = deployment.fqdn("k8s-cp-1"), deployment.fqdn("k8s-worker-1")
    run = {"kos_orchestration": {"join_nodes": [worker]}}
    ret = salt_cli.run("state.apply", "microk8s.credentials", f"pillar={json.dumps(run)}",
                       minion_tgt=cp)
    assert ret.returncode == 0, ret
    doc = json.loads((host_roots / "k8s-cp-1" / "etc/kos/join" / f"{worker}.json").read_text())
    assert (doc["node"], doc["role"]) == (worker, "worker")
    token = doc["connection"].split("/")[1]
    digest = hashlib.sha256(doc["connection"].encode()).hexdigest()
    key = f"kos_join_{worker}"
    assert mine_digest(salt_cli, worker, cp, key, "connection") == digest
    for other in ("k8s-worker-2", "salt", "k8s-cp-1"):
        assert mine_digest(salt_cli, deployment.fqdn(other), cp, key, "connection") == EMPTY
    assert salt_cli.run("microk8s.token_valid", token, minion_tgt=cp).data is True

    ret = salt_cli.run("state.apply", "microk8s.revoke", f"pillar={json.dumps(run)}",
                       minion_tgt=cp)
    assert ret.returncode == 0, ret
    assert salt_cli.run("microk8s.token_valid", token, minion_tgt=cp).data is False
    assert mine_digest(salt_cli, worker, cp, key, "connection") == EMPTY
    # a spare host (k8s-worker-3, not in the deployment yet) with microk8s installed tries it
    spare = deployment.fqdn("k8s-worker-3")
    # not in the deployment, so no orchestration has installed the extension there
    assert salt_cli.run("state.apply", "kos.extension", minion_tgt=spare).returncode == 0
    ret = salt_cli.run("state.apply", "microk8s", minion_tgt=spare)
    assert ret.returncode == 0, ret
    for extra in ([], ["--worker"]):
        res = standin_microk8s(deployment, host_roots, "k8s-worker-3", "join",
                               doc["connection"], *extra)
        assert res.returncode == 6, (extra, res.stdout, res.stderr)
        assert "Connection failed. Invalid token (500)." in res.stdout + res.stderr
    nodes = salt_cli.run("microk8s.nodes", minion_tgt=cp).data
    assert "k8s-worker-3" not in nodes


def test_adding_a_node_runs_its_highstate_and_teaches_the_others(
        deployed, salt_run, salt_cli, deployment, host_roots):
    """Terraform added k8s-worker-3: its highstate after its credential; on the others
    /etc/hosts learns it, and no highstate runs there."""
    new = deployment.fqdn("k8s-worker-3")
    others = {deployment.fqdn(n) for n in deployment.names}
    deployment.add("k8s-worker-3")
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, default=str)[:6000]
    assert highstated(steps) == {"kos-orch-deploy-wave": {new}}
    # one execution-module call on each of them, no state run
    learn = by_id(steps)["kos-orch-deploy-learn"]
    assert learn["name"] == "kos.learn_members" and ran_on(learn) == others, learn
    expected = ["kos-orch-deploy-learn", "kos-orch-deploy-credentials-workers",
                "kos-orch-deploy-wave", "kos-orch-deploy-revoke"]
    assert [i for i in order(steps) if i in expected] == expected
    assert salt_cli.run("microk8s.is_worker", minion_tgt=new).data is True
    nodes = salt_cli.run("microk8s.nodes", minion_tgt=deployment.fqdn("k8s-cp-1")).data
    assert nodes["k8s-worker-3"]["role"] == "worker"
    for name in deployment.names:
        text = (host_roots / name / "etc/hosts").read_text()
        for line in hosts_lines(deployment):
            assert line in text, (name, text)
    assert credential_lines(host_roots) == []
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0 and highstated(steps) == {}
    assert "kos-orch-deploy-learn" not in by_id(steps)


def test_control_planes_check_their_certificates_on_a_schedule_and_say_when_due(
        deployed, salt_cli, deployment, event_listener, salt_master):
    """The derived pillar gives every control plane (and no other minion) Salt's scheduled
    check; below kos:certificates:warn_days it fires kos/certificates/expiring to the
    master's event bus."""
    cp, worker = deployment.fqdn("k8s-cp-1"), deployment.fqdn("k8s-worker-1")
    jobs = salt_cli.run("schedule.list", "return_yaml=False", minion_tgt=cp).data
    assert jobs["kos-certificates"]["function"] == "kos.check_certificates", jobs
    assert "kos-certificates" not in (
        salt_cli.run("schedule.list", "return_yaml=False", minion_tgt=worker).data or {})
    quiet = salt_cli.run("kos.check_certificates", minion_tgt=cp).data
    assert quiet["expiring"] == {} and quiet["days_left"] in (364, 365), quiet
    env = f"environments/{DOMAIN_SLS}.sls"
    original = (deployment.pillar_dir / env).read_text()
    changed = yaml.safe_load(original)
    changed.setdefault("kos", {})["certificates"] = {"warn_days": 400}
    deployment.write(env, changed)
    try:
        salt_cli.run("saltutil.refresh_pillar", "wait=True", minion_tgt=cp)
        started = time.time()
        due = salt_cli.run("kos.check_certificates", minion_tgt=cp).data
        assert sorted(due["expiring"]) == ["front-proxy-client.crt", "server.crt"], due
        seen = event_listener.wait_for_events(
            [(salt_master.id, "kos/certificates/expiring")], after_time=started, timeout=30)
        assert seen.found_all_events, seen
        events = list(seen.matches)
        assert [e.data["id"] for e in events] == [cp], events
        # a minion's event: what it sent is under "data" (a reactor's data['data'])
        assert events[0].data["data"] == dict(due, id=cp)
    finally:
        deployment.write(env, original)
        salt_cli.run("saltutil.refresh_pillar", "wait=True", minion_tgt=cp)


def test_certificates_orchestration_renews_one_control_plane_at_a_time(
        deployed, salt_run, deployment, host_roots):
    server = host_roots / "k8s-cp-1" / SNAP_DATA / "certs" / "server.crt"
    before = server.read_bytes()
    ret = salt_run.run("state.orchestrate", "orch.certificates")
    assert ret.returncode == 0, ret.data
    assert server.read_bytes() == before  # a year left: nothing due
    ret = salt_run.run("state.orchestrate", "orch.certificates", 'pillar={"force": true}')
    assert ret.returncode == 0, ret.data
    assert server.read_bytes() != before


# -- orch.upgrade (issue 16, item 1): last, it moves the cluster to 1.32 --------------------


def kube_nodes(salt_cli, deployment):
    ret = salt_cli.run("microk8s.nodes", minion_tgt=deployment.fqdn("k8s-cp-1"))
    assert ret.returncode == 0, ret.data
    return ret.data


def snap_tracks(salt_cli, deployment):
    """{hostname: (tracking, held)} of every Kubernetes node's snap."""
    out = {}
    for name in [n for n in deployment.names if n.startswith("k8s-")]:
        facts = salt_cli.run("microk8s.upgrade_facts", minion_tgt=deployment.fqdn(name)).data
        out[name] = (facts["tracking"], facts["held"])
    return out


def upgrade_steps(steps):
    """[(hostname, step)] of the per-node steps, in the order they ran."""
    found = []
    for sid in order(steps):
        for step in ("drain", "refresh", "uncordon", "done"):
            prefix, suffix = "kos-orch-upgrade-", f"-{step}"
            if sid.startswith(prefix) and sid.endswith(suffix):
                found.append((sid[len(prefix):-len(suffix)].split(".")[0], step))
    return found


@pytest.mark.parametrize("version, words", [
    ("1.33", "1.33/stable would skip 1.32: microk8s upgrades one minor version at a time, "
             "upgrade to 1.32/stable first"),
    ("1.30/stable", "1.30/stable is older: kos does not downgrade"),
    ("latest/edge", "pillar key 'version' must be a microk8s track such as 1.32"),
])
def test_upgrade_refuses_a_skipped_minor_or_a_downgrade_before_anything_changes(
        deployed, salt_run, salt_cli, deployment, host_roots, version, words):
    before = tree_snapshot(host_roots)
    ret, steps = orchestrate(salt_run, {"version": version}, sls="orch.upgrade")
    assert ret.returncode != 0
    assert [v["result"] for v in steps.values()] == [False], steps
    assert words in next(iter(steps.values()))["name"]
    assert tree_snapshot(host_roots) == before


def test_upgrade_stops_before_anything_changes_when_a_node_is_silent(
        deployed, salt_run, minions, deployment, host_roots):
    minions["k8s-worker-2"].terminate()
    try:
        before = tree_snapshot(host_roots)
        ret, steps = orchestrate(salt_run, {"version": "1.32"}, sls="orch.upgrade")
        assert ret.returncode != 0
        step = by_id(steps)["kos-orch-upgrade-silent"]
        assert step["result"] is False and len(steps) == 1, steps
        assert f"nothing changed: {deployment.fqdn('k8s-worker-2')} did not say" in step["name"]
        assert tree_snapshot(host_roots) == before
    finally:
        minions["k8s-worker-2"].start(start_timeout=180)


def test_upgrade_moves_one_node_at_a_time_control_plane_first(deployed, salt_run, salt_cli,
                                                               deployment):
    nodes = [n for n in deployment.names if n.startswith("k8s-")]
    assert set(snap_tracks(salt_cli, deployment).values()) == {("1.31/stable", True)}
    # the operator cordoned k8s-worker-2 before: it is upgraded and stays cordoned
    cp = deployment.fqdn("k8s-cp-1")
    assert salt_cli.run("microk8s.cordon", "k8s-worker-2", minion_tgt=cp).returncode == 0
    ret, steps = orchestrate(salt_run, {"version": "1.32"}, sls="orch.upgrade")
    assert ret.returncode == 0, json.dumps(steps, indent=1, default=str)[:6000]
    workers = sorted(n for n in nodes if n.startswith("k8s-worker-"))
    assert upgrade_steps(steps) == [(n, s) for n in ["k8s-cp-1", *workers]
                                    for s in ("drain", "refresh", "uncordon", "done")]
    # each node was drained while it refreshed (k8s-worker-2 was cordoned already)
    for node in ["k8s-cp-1", *[w for w in workers if w != "k8s-worker-2"]]:
        drained = by_id(steps)[f"kos-orch-upgrade-{deployment.fqdn(node)}-drain"]
        assert "schedulable" in json.dumps(drained["changes"]), drained
    seen = kube_nodes(salt_cli, deployment)
    assert {n: (v["version"], v["ready"], v["unschedulable"]) for n, v in seen.items()} == {
        n: ("v1.32.9", True, n == "k8s-worker-2") for n in nodes}
    kept = by_id(steps)[f"kos-orch-upgrade-{deployment.fqdn('k8s-worker-2')}-uncordon"]
    assert kept["result"] is True and changed_states(kept) == [], kept
    assert salt_cli.run("microk8s.uncordon", "k8s-worker-2", minion_tgt=cp).returncode == 0
    assert set(snap_tracks(salt_cli, deployment).values()) == {("1.32/stable", True)}
    ret, steps = orchestrate(salt_run, {"version": "1.32/stable"}, sls="orch.upgrade")
    assert ret.returncode == 0 and list(by_id(steps)) == ["kos-orch-upgrade-nothing"], steps


def test_a_rerun_finishes_a_node_whose_upgrade_did_not(deployed, salt_run, salt_cli, deployment,
                                                       host_roots):
    """What a run that died after a node's refresh leaves: the node on the new channel,
    cordoned, its upgrade noted as pending. The next run finishes that node alone."""
    worker = deployment.fqdn("k8s-worker-1")
    pending = host_roots / "k8s-worker-1" / "etc" / "kos" / "upgrade-pending.json"
    pending.write_text(json.dumps({"channel": "1.32/stable"}))
    assert salt_cli.run("microk8s.cordon", "k8s-worker-1",
                        minion_tgt=deployment.fqdn("k8s-cp-1")).returncode == 0
    ret, steps = orchestrate(salt_run, {"version": "1.32"}, sls="orch.upgrade")
    assert ret.returncode == 0, json.dumps(steps, indent=1, default=str)[:6000]
    assert upgrade_steps(steps) == [("k8s-worker-1", s)
                                    for s in ("drain", "refresh", "uncordon", "done")]
    assert by_id(steps)[f"kos-orch-upgrade-{worker}-uncordon"]["changes"], steps
    assert not kube_nodes(salt_cli, deployment)["k8s-worker-1"]["unschedulable"]
    assert not pending.exists()


# -- orch.remove (issue 16, item 2): last, it takes workers out for good -------------------


def changed_states(step):
    """The state ids that changed something in one salt.state step of an orchestration."""
    return [sid for states in ((step.get("changes") or {}).get("ret") or {}).values()
            if isinstance(states, dict)
            for sid, state in states.items() if isinstance(state, dict) and state.get("changes")]


def remove_steps(steps):
    """[(hostname, step)] of the per-node steps, in the order they ran."""
    found = []
    for sid in order(steps):
        for step in ("drain", "leave", "forget"):
            prefix, suffix = "kos-orch-remove-", f"-{step}"
            if sid.startswith(prefix) and sid.endswith(suffix):
                found.append((sid[len(prefix):-len(suffix)].split(".")[0], step))
    return found


@pytest.mark.parametrize("pillar, words", [
    (lambda fqdn: {"remove": [fqdn("k8s-cp-1")]}, "is the first control plane"),
    (lambda fqdn: {"remove": ["k8s-worker-9.nowhere"]},
     '"k8s-worker-9.nowhere" is not a Kubernetes node of this cluster'),
    (lambda fqdn: {"remove": fqdn("k8s-worker-1")}, "pillar key 'remove' must list the minion ids"),
    (lambda fqdn: {"remove": [fqdn("k8s-worker-1")], "drain_timeout": 0},
     "pillar key 'drain_timeout' must be a number of seconds"),
    (lambda fqdn: {"remove": [fqdn("k8s-worker-1")], "replace": "yes"},
     "pillar key 'replace' must be true or false, got \"yes\""),
], ids=["first-control-plane", "unknown", "not-a-list", "drain-timeout", "replace"])
def test_remove_refuses_bad_options_before_anything_changes(
        deployed, salt_run, deployment, host_roots, pillar, words):
    before = tree_snapshot(host_roots)
    ret, steps = orchestrate(salt_run, pillar(deployment.fqdn), sls="orch.remove")
    assert ret.returncode != 0
    step = by_id(steps)["kos-orch-remove-options"]
    assert len(steps) == 1 and step["result"] is False, steps
    assert step["name"].startswith("nothing changed: ") and words in step["name"], step["name"]
    assert tree_snapshot(host_roots) == before


def test_remove_stops_before_anything_changes_when_the_node_is_silent(
        deployed, salt_run, minions, deployment, host_roots):
    worker = deployment.fqdn("k8s-worker-2")
    minions["k8s-worker-2"].terminate()
    try:
        before = tree_snapshot(host_roots)
        ret, steps = orchestrate(salt_run, {"remove": [worker]}, sls="orch.remove")
        assert ret.returncode != 0
        step = by_id(steps)["kos-orch-remove-silent"]
        assert len(steps) == 1 and step["result"] is False, steps
        assert f"nothing changed: {worker} did not answer" in step["name"]
        assert "force: true" in step["name"]
        assert tree_snapshot(host_roots) == before
    finally:
        minions["k8s-worker-2"].start(start_timeout=180)


def test_remove_takes_a_worker_out_for_good_and_a_rerun_changes_nothing(
        deployed, salt_run, salt_cli, deployment):
    worker = deployment.fqdn("k8s-worker-2")
    assert "k8s-worker-2" in kube_nodes(salt_cli, deployment)
    ret, steps = orchestrate(salt_run, {"remove": [worker]}, sls="orch.remove")
    assert ret.returncode == 0, json.dumps(steps, indent=1, default=str)[:6000]
    assert remove_steps(steps) == [("k8s-worker-2", s) for s in ("drain", "leave", "forget")]
    for step in ("drain", "leave", "forget"):
        assert changed_states(by_id(steps)[f"kos-orch-remove-{worker}-{step}"]), (step, steps)
    assert "k8s-worker-2" not in kube_nodes(salt_cli, deployment)
    assert salt_cli.run("microk8s.is_clustered", minion_tgt=worker).data is False
    # the others are untouched
    assert {n for n, v in kube_nodes(salt_cli, deployment).items() if v["ready"]} >= {
        "k8s-cp-1", "k8s-worker-1"}
    ret, steps = orchestrate(salt_run, {"remove": [worker]}, sls="orch.remove")
    assert ret.returncode == 0, json.dumps(steps, indent=1, default=str)[:6000]
    assert remove_steps(steps) == [("k8s-worker-2", s) for s in ("drain", "leave", "forget")]
    for step in ("drain", "leave", "forget"):
        assert changed_states(by_id(steps)[f"kos-orch-remove-{worker}-{step}"]) == [], steps


def test_remove_with_force_forgets_a_node_whose_server_is_gone(
        deployed, salt_run, salt_cli, minions, deployment):
    """Its server is gone (here: its minion stopped, the stand-in node still registered) and
    Terraform no longer lists it (kos forget): the cluster forgets it without draining it or
    the node's own step (microk8s remove-node --force)."""
    worker = deployment.fqdn("k8s-worker-1")
    minions["k8s-worker-1"].terminate()
    deployment.names.remove("k8s-worker-1")
    deployment.write("_from_terraform.sls", deployment.from_terraform())
    try:
        ret, steps = orchestrate(salt_run, {"remove": [worker], "force": True}, sls="orch.remove")
        assert ret.returncode == 0, json.dumps(steps, indent=1, default=str)[:6000]
        assert remove_steps(steps) == [("k8s-worker-1", "forget")]
        assert "k8s-worker-1" not in kube_nodes(salt_cli, deployment)
        # again: nothing of it is left to forget
        ret, steps = orchestrate(salt_run, {"remove": [worker], "force": True}, sls="orch.remove")
        assert ret.returncode == 0, json.dumps(steps, indent=1, default=str)[:6000]
        assert changed_states(by_id(steps)[f"kos-orch-remove-{worker}-forget"]) == [], steps
    finally:
        deployment.add("k8s-worker-1")
        minions["k8s-worker-1"].start(start_timeout=180)
