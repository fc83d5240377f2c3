"""What the master's reactor does for a minion that starts (salt://_runners/kos_reactor.py),
decided from a real master cache (Salt's localfs cache in a temporary directory, filled the
way the master fills it: each minion's pillar and mine)."""

from unittest.mock import create_autospec

import pytest
import salt.cache
import salt.config
import salt.utils.mine

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
