"""What the master's reactor does for a minion that starts (saltext.kos.runners.kos_reactor),
decided from a real master cache (Salt's localfs cache in a temporary directory, filled the
way the master fills it: each minion's pillar and mine)."""

from pathlib import Path
from unittest.mock import create_autospec

import pytest
import salt.cache
import salt.config
import salt.payload
import salt.utils.mine

from tests.saltjobs import running_job
from tests.unit.conftest import load

runner = load("runners", "kos_reactor")

DOMAIN = "example.com"
FIRST, WORKER, NEW = (f"{n}.{DOMAIN}" for n in ("k8s-cp-1", "k8s-worker-1", "k8s-worker-2"))
BASTION = f"bastion.{DOMAIN}"
NODES = {FIRST: {"role": "control_plane"}, WORKER: {"role": "worker"},
         NEW: {"role": "worker"}}


@pytest.fixture
def cache(tmp_path):
    opts = salt.config.master_config(None)
    opts.update(cachedir=str(tmp_path), minion_data_cache=True)
    return salt.cache.factory(opts), opts


@pytest.fixture
def orchestrate():
    return create_autospec(lambda mods, pillar=None: None,
                           return_value={"data": {"salt_master": {}}, "retcode": 0})


@pytest.fixture
def configure_loader_modules(cache, orchestrate):
    return {runner: {"__opts__": cache[1], "__salt__": {"state.orchestrate": orchestrate}}}


def pillar_of(cache, minion, roles):
    cache[0].store("pillar", minion, {"kos": {"roles": roles, "first_control_plane": FIRST,
                                              "nodes": NODES}})


def mine_of(cache, minion, **kubernetes):
    # as mine.update stores it: every entry wrapped with its ACL
    cache[0].store("mine", minion, {
        "kos_private_ips": ["10.0.0.1"],
        "kos_kubernetes": salt.utils.mine.wrap_acl_structure(kubernetes)})


@pytest.fixture
def cluster_up(cache):
    pillar_of(cache, FIRST, ["control_plane", "kubernetes_node", "first_control_plane"])
    mine_of(cache, FIRST, initialised=True, joined=True)
    pillar_of(cache, WORKER, ["worker", "kubernetes_node"])
    mine_of(cache, WORKER, initialised=True, joined=True)
    pillar_of(cache, BASTION, ["bastion"])


def test_a_new_node_of_a_cluster_that_is_up_is_converged(cache, cluster_up, orchestrate):
    pillar_of(cache, NEW, ["worker", "kubernetes_node"])
    mine_of(cache, NEW, initialised=False, joined=False)
    ret = runner.started(NEW)
    assert ret["converge"] is True
    orchestrate.assert_called_once_with("orch.deploy", pillar={"started": NEW})
    assert ret["orchestration"] == orchestrate.return_value
    # its mine not sent yet: the same
    cache[0].flush("mine", NEW)
    assert runner.decide(NEW)["converge"] is True


@pytest.mark.parametrize("minion, why", [
    (WORKER, "started, but it joined its cluster already (its mine says so)"),
    (FIRST, "started, but it is the first control plane and its cluster is up"),
    (BASTION, "started, but it is no Kubernetes node"),
    ("stray.example.com", "started, but no deployment expects it (no kos:roles in its pillar)"),
])
def test_a_minion_that_needs_nothing_starts_no_orchestration(cluster_up, orchestrate, minion,
                                                             why, caplog):
    """What every minion fires again when the master restarts."""
    with caplog.at_level("INFO"):
        ret = runner.started(minion)
    assert (ret["converge"], ret["why"]) == (False, why)
    orchestrate.assert_not_called()
    assert f"kos reactor: minion {minion} {why}: nothing done" in caplog.text


def test_nobody_is_converged_before_the_cluster_is_up(cache, orchestrate):
    pillar_of(cache, FIRST, ["control_plane", "kubernetes_node", "first_control_plane"])
    pillar_of(cache, WORKER, ["worker", "kubernetes_node"])
    mine_of(cache, FIRST, initialised=False, joined=False)
    for minion in (FIRST, WORKER):
        assert runner.started(minion)["why"] == "started before its cluster is up"
    orchestrate.assert_not_called()


@pytest.fixture
def new_node(cache, cluster_up):
    pillar_of(cache, NEW, ["worker", "kubernetes_node"])
    mine_of(cache, NEW, initialised=False, joined=False)


def test_a_node_starting_during_an_orchestration_waits_for_it_to_end(cache, new_node,
                                                                     orchestrate, caplog):
    """kos converge (or an operator's upgrade) runs: the node joins after it, not midway."""
    converge = running_job(cache[1]["cachedir"], "runner.state.orchestrate",
                           "20261129150000000001", 3)
    try:
        with caplog.at_level("INFO"):
            ret = runner.started(NEW, poll=0.2)
        assert converge.poll() is not None, "decided before the orchestration ended"
    finally:
        converge.kill()
        converge.wait()
    assert ret["converge"] is True
    orchestrate.assert_called_once_with("orch.deploy", pillar={"started": NEW})
    assert (f"kos reactor: minion {NEW} started while orchestration 20261129150000000001 "
            "runs: waiting for it to end") in caplog.text


def test_a_node_starting_during_a_converge_that_joined_it_does_nothing(cache, new_node,
                                                                      orchestrate):
    converge = running_job(cache[1]["cachedir"], "runner.state.orchestrate",
                           "20261129150000000002", 2)
    mine_of(cache, NEW, initialised=True, joined=True)  # what that converge leaves
    try:
        ret = runner.started(NEW, poll=0.2)
    finally:
        converge.kill()
        converge.wait()
    assert ret["why"] == "started, but it joined its cluster already (its mine says so)"
    orchestrate.assert_not_called()


def test_reactions_do_not_wait_for_one_another(cache, new_node, orchestrate):
    """Another node's reaction runs (runner.kos_reactor.started): waiting for it could
    deadlock two nodes that start together."""
    other = running_job(cache[1]["cachedir"], "runner.kos_reactor.started",
                        "20261129150000000003", 30)
    try:
        assert runner.started(NEW, poll=0.2)["converge"] is True
        # had it waited, the other reaction's job would have ended first
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_an_orchestration_that_never_ends_gives_up_and_changes_nothing(cache, new_node,
                                                                      orchestrate, caplog):
    stuck = running_job(cache[1]["cachedir"], "runner.state.orchestrate",
                        "20261129150000000004", 60)
    try:
        ret = runner.started(NEW, wait=1, poll=0.2)
    finally:
        stuck.kill()
        stuck.wait()
    assert ret == {"minion": NEW, "converge": False,
                   "why": "an orchestration still ran after 1 s"}
    orchestrate.assert_not_called()
    assert "still running after 1 s: nothing done (kos converge converges it)" in caplog.text


def test_the_jobs_the_reactor_waits_for_are_those_kos_waits_for():
    """kos (onmaster.ORCHESTRATIONS) refuses to start beside an orchestration or a reaction;
    the reactor waits for the orchestrations only. Both name the same jobs, or one of them
    starts beside the other."""
    from kos import onmaster_orchestrate as onmaster

    own = f"runner.{runner.__virtualname__}.{runner.started.__name__}"
    assert onmaster.ORCHESTRATIONS == (runner.ORCHESTRATE, own)


def test_the_reactor_reads_the_mine_entry_the_nodes_send():
    """The nodes send kos.kubernetes_state under the name pillar kos/derived.sls gives it;
    the reactor and kos.sole_cluster read it by that name."""
    states = load("states", "kos")
    derived = (Path(__file__).resolve().parents[3] / "pillar" / "kos" / "derived.sls")
    assert runner.KUBERNETES_MINE == states.KUBERNETES_MINE
    assert (f"  {runner.KUBERNETES_MINE}:\n    - mine_function: kos.kubernetes_state"
            in derived.read_text())
