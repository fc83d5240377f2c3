"""
The master's reactor (salt_master:reactor, salt://reactor/start.sls) on a master of its
own, configured as the salt_master formula configures a real one: a minion the
deployment expects that starts once its cluster is up converges without anyone running
the orchestration (its highstate after its credential, /etc/hosts on the others, no
highstate there); a minion nobody expects does nothing and is logged.
"""

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import (
    MASTER_TIMING, REPO, Deployment, converged, host_layer, kill_standin_daemons, netlab_up,
    netns_minion, ran_on,
)

PREFIX = "kosrt"
CIDR = "10.253.0.0/24"
DOMAIN = "kos-rt.test"
DOMAIN_SLS = DOMAIN.replace(".", "_")
FIRST = ["salt", "k8s-cp-1", "k8s-worker-1"]
LATER = "k8s-worker-2"
STRAY = "k8s-stray-1"

pytestmark = [pytest.mark.integration, pytest.mark.netns]


class ReactorDeployment(Deployment):
    def fqdn(self, hostname):
        return f"{hostname}.{DOMAIN}"

    def from_terraform(self):
        data = super().from_terraform()
        data["kos"].update(cluster_name="kos-rt", domain=DOMAIN)
        data["kos"]["networks"].update(public_cidr="10.254.0.0/24", private_cidr=CIDR)
        return data


def reactor_setting():
    """The reactor the salt_master formula configures (its kos.conf template, rendered by
    the functional tests): the same mapping here."""
    text = (REPO / "salt/salt/salt_master/files/kos.conf.jinja").read_text()
    block = text[text.index("reactor:"):text.index("{%- endif %}", text.index("reactor:"))]
    return yaml.safe_load(block)["reactor"]


@pytest.fixture(scope="module")
def lab():
    with netlab_up(PREFIX, CIDR) as net:
        yield net


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    return tmp_path_factory.mktemp("reactor-hosts")


@pytest.fixture(scope="module")
def rt_deployment(lab, tmp_path_factory, roots):
    for name in FIRST + [LATER, STRAY]:
        lab.add_host(name, default_route=False)
    dep = ReactorDeployment(tmp_path_factory.mktemp("reactor-pillar"), lab, FIRST)
    dep.write("_from_terraform.sls", dep.from_terraform())
    dep.write(f"environments/{DOMAIN_SLS}.sls", {
        "core": {"manage": {key: key == "hosts" for key in (
            "sysctl", "limits", "locale", "banners", "sshd", "resolver", "hosts", "packages",
            "minion", "users")}},
        "salt_master": {"manage_service": False},
        "microk8s": {"ready_timeout": 30},
    })
    for name in FIRST + [LATER, STRAY]:
        dep.write(f"minions/{DOMAIN_SLS}/{name}.sls", host_layer(roots / name, name))
    yield dep
    kill_standin_daemons(roots)


@pytest.fixture(scope="module")
def rt_master(salt_factories, lab, rt_deployment, release_root):
    factory = salt_factories.salt_master_daemon(
        "kos-rt-master",
        overrides={
            "interface": lab.gateway,
            "file_roots": {"base": [str(REPO / "salt" / "salt"), str(release_root)]},
            "pillar_roots": {"base": [str(REPO / "pillar"), str(rt_deployment.pillar_dir)]},
            "minion_data_cache": True,
            **MASTER_TIMING,
            "reactor": reactor_setting(),
        },
    )
    with factory.started(start_timeout=120):
        # the reactor's runner comes from the extension installed where the master runs
        ret = factory.salt_run_cli(timeout=120).run("doc.runner")
        assert "kos_reactor.started" in (ret.data or {}), ret
        yield factory


@pytest.fixture(scope="module")
def rt_minions(rt_master, lab, rt_deployment, roots):
    made = {name: netns_minion(rt_master, lab, rt_deployment, roots, name)
            for name in FIRST + [LATER, STRAY]}
    try:
        with ThreadPoolExecutor(len(FIRST)) as pool:
            for fut in [pool.submit(made[n].start, start_timeout=180) for n in FIRST]:
                fut.result()
        yield made
    finally:
        for factory in made.values():
            if factory.is_running():
                factory.terminate()


def master_log(rt_master, since=0):
    """The master's log file from character ``since`` on."""
    path = Path(rt_master.config["log_file"])
    return path.read_text(errors="replace")[since:] if path.exists() else ""


def reactor_lines(rt_master, since=0):
    """What the reactor said (and the log's last lines), for a failed assertion."""
    text = master_log(rt_master, since)
    said = [line for line in text.splitlines() if "kos reactor:" in line]
    return "\n".join(said[-40:]) + "\n---\n" + text[-2000:]


def wait_for_log(rt_master, text, timeout=120, since=0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in master_log(rt_master, since):
            return True
        time.sleep(1)
    return False


def orchestrations(event_listener, rt_master, after):
    """The orchestrations the reactor ran since ``after``: their steps by id."""
    runs = []
    for event in event_listener.get_events([(rt_master.id, "salt/run/*/ret")],
                                           after_time=after):
        if event.data.get("fun") != "runner.kos_reactor.started":
            continue
        ret = (event.data.get("return") or {}).get("orchestration")
        if ret is None:
            continue
        steps = next(iter((ret.get("data") or {}).values()), {})
        runs.append({v["__id__"]: v for v in steps.values() if isinstance(v, dict)})
    return runs


@pytest.fixture(scope="module")
def up(rt_minions, rt_master, rt_deployment):
    """The first converge is kos converge's (here: the orchestration it runs); the nodes
    that started before it found their cluster down and did nothing, and the master's
    own minion is none of the reactor's business."""
    for name in FIRST:
        minion = rt_deployment.fqdn(name)
        why = "started, but it is no Kubernetes node" if name == "salt" else \
            "started before its cluster is up"
        assert wait_for_log(rt_master, f"kos reactor: minion {minion} {why}: nothing done"), name
    ret = rt_master.salt_run_cli(timeout=900).run("state.orchestrate", "orch.deploy")
    assert ret.returncode == 0, json.dumps(ret.data, default=str)[:6000]
    return ret


def test_a_node_terraform_adds_converges_when_its_minion_starts(
        up, rt_minions, rt_master, rt_deployment, roots, event_listener):
    rt_deployment.add(LATER)
    new = rt_deployment.fqdn(LATER)
    started = time.time()
    rt_minions[LATER].start(start_timeout=180)
    salt_cli = rt_master.salt_cli(timeout=120)
    deadline = time.monotonic() + 300
    runs = []
    while time.monotonic() < deadline:
        runs = [r for r in orchestrations(event_listener, rt_master, started)
                if "kos-orch-deploy-wave" in r]
        if runs:
            break
        time.sleep(2)
    assert runs, reactor_lines(rt_master)
    run = runs[0]
    assert all(step["result"] for step in run.values()), json.dumps(run, default=str)[:4000]
    # its highstate after its own credential; the others learn its address, no highstate
    assert converged(run["kos-orch-deploy-wave"]) == {new}
    assert ran_on(run["kos-orch-deploy-learn"]) == {rt_deployment.fqdn(n) for n in FIRST}
    assert run["kos-orch-deploy-credentials-workers"]["result"] is True
    assert salt_cli.run("microk8s.is_worker", minion_tgt=new).data is True
    address = rt_deployment.lab.hosts[LATER].address
    for name in FIRST:
        assert f"{address} {new} {LATER}" in (roots / name / "etc/hosts").read_text()
    # the node notes who converged it (kos status shows it); the others' last converge
    # was the orchestration's
    assert salt_cli.run("kos.last_converged", minion_tgt=new).data["by"] == "reactor"
    first = rt_deployment.fqdn("k8s-cp-1")
    assert salt_cli.run("kos.last_converged", minion_tgt=first).data["by"] == "orchestration"
    # the credential was used once
    join_dir = roots / "k8s-cp-1" / "etc/kos/join"
    assert not join_dir.exists() or list(join_dir.iterdir()) == []


def test_a_minion_nobody_expects_does_nothing_and_is_logged(
        up, rt_minions, rt_master, rt_deployment, roots, event_listener):
    stray = rt_deployment.fqdn(STRAY)
    started = time.time()
    rt_minions[STRAY].start(start_timeout=180)
    assert wait_for_log(rt_master, f"kos reactor: minion {stray} started, but no deployment "
                                   "expects it"), reactor_lines(rt_master)
    time.sleep(5)
    assert orchestrations(event_listener, rt_master, started) == []
    assert not (roots / STRAY / "snap").exists()
    assert (roots / STRAY / "etc/hosts").read_text() == "127.0.0.1 localhost\n"


def test_an_orchestration_started_for_an_unexpected_minion_does_nothing(up, rt_master,
                                                                       rt_deployment):
    """The orchestration checks again (the reactor read a cache)."""
    ret = rt_master.salt_run_cli(timeout=300).run(
        "state.orchestrate", "orch.deploy", f"pillar={json.dumps({'started': 'nobody.test'})}")
    steps = next(iter(ret.data["data"].values()))
    assert [v["__id__"] for v in steps.values()] == ["kos-orch-deploy-unexpected"]
    assert ret.returncode == 0


def test_a_master_restart_converges_nobody(up, rt_minions, rt_master, rt_deployment,
                                           event_listener):
    """The minions fire their start events again once the master is back: the reactor
    decides each it receives from the master's caches and starts no orchestration for a
    joined node, the first control plane or the master's own minion.

    A minion that reconnects before the restarted master's reactor listens is not reacted
    on at all (saltstack/salt#43713): nothing needs doing for it either, so the test asks
    for at least one decision, and the right one for every minion decided."""
    expected = {rt_deployment.fqdn(name): why for name, why in (
        ("k8s-worker-1", "it joined its cluster already (its mine says so)"),
        ("k8s-cp-1", "it is the first control plane and its cluster is up"),
        ("salt", "it is no Kubernetes node"))}
    rt_master.terminate()
    since = len(master_log(rt_master))
    started = time.time()
    rt_master.start(start_timeout=120)
    deadline = time.monotonic() + 120
    while True:
        said = master_log(rt_master, since)
        decided = {m for m in expected if f"kos reactor: minion {m} " in said}
        if decided == set(expected) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert decided, reactor_lines(rt_master, since)
    for minion in decided:
        assert f"kos reactor: minion {minion} started, but {expected[minion]}: nothing done" \
            in said, reactor_lines(rt_master, since)
    assert "converging it" not in said, reactor_lines(rt_master, since)
    time.sleep(5)
    assert orchestrations(event_listener, rt_master, started) == []
