"""
The converge as a list of steps (``kos.steps.converge``), without a salt master: the step
records and the names the benchmarks read come from the steps that run, in their order;
which steps a converge runs follows from the outputs, the last apply's records and
--exclude/--limit. The steps' work on a real master: tests/bootstrap/test_converge.py.
"""

from types import SimpleNamespace

import pytest
import yaml
from kos.errors import InputError
from kos.state import StateDir
from kos.steps import converge, runner

MASTER = "salt.example.com"
MINIONS = {
    MASTER: {"hostname": "salt", "role": "salt_master"},
    "k8s-cp-1.example.com": {"hostname": "k8s-cp-1", "role": "control_plane"},
    "k8s-worker-1.example.com": {"hostname": "k8s-worker-1", "role": "worker"},
}


def outputs(syndics=()):
    master = {"id": MASTER, **({"syndics": list(syndics)} if syndics else {})}
    return {"minions": MINIONS, "salt_pillar": yaml.safe_dump({"kos": {"salt_master": master}})}


def deployment(tmp_path, found, last_apply=None, finished="2026-12-01T10:00:00.000Z"):
    steps = StateDir(tmp_path, "kosu").steps()
    if last_apply is not None:
        steps.records["terraform-apply"] = {"status": "done", "detail": last_apply,
                                            "finished": finished}
    return SimpleNamespace(settings=SimpleNamespace(wait_minions=5), steps=steps,
                           backend=SimpleNamespace(create_step="terraform-apply"),
                           outputs=lambda: found)


def converge_run(tmp_path, found=None, exclude=(), limit=(), **last):
    found = found or outputs()
    targets = converge.select_targets(sorted(found["minions"]), exclude, limit)
    return converge.ConvergeRun(deployment(tmp_path, found, **last), found, targets,
                                exclude, limit)


def step(run, kind):
    return next(s for s in run.steps if isinstance(s, kind))


def test_the_recorded_steps_are_the_converge_steps_in_the_order_they_run():
    assert [s.value for s in converge.ConvergeStep] == [
        "salt-keys-syndics", "salt-keys-retired", "salt-keys-rebuilt", "salt-keys-master",
        "salt-trees", "salt-pillar", "salt-master-config", "salt-keys", "ccm-credential",
        "orchestrate", "ccm-credential-retire",
    ]
    assert [s.name for s in converge.STEPS if s.name] == list(converge.ConvergeStep)
    # the members the benchmarks and kos status name
    assert converge.ConvergeStep.MASTER_KEY == "salt-keys-master"
    assert converge.ConvergeStep.KEYS == "salt-keys"
    assert converge.ConvergeStep.SYNDIC_KEYS == "salt-keys-syndics"
    assert all(issubclass(s, runner.Step) for s in converge.STEPS)


def test_a_plain_converge_skips_the_syndic_retired_and_rebuilt_steps(tmp_path):
    run = converge_run(tmp_path)
    wanted = [s.name for s in run.steps if s.name and s.should_run()]
    assert wanted == [s for s in converge.ConvergeStep if s not in (
        "salt-keys-syndics", "salt-keys-retired", "salt-keys-rebuilt")]


def test_a_top_master_accepts_its_syndics_on_every_converge(tmp_path):
    syndics = step(converge_run(tmp_path, outputs(["dev", "prod"])), converge.SyndicKeys)
    assert syndics.should_run() and syndics.always
    assert syndics.title() == "accept the keys of the syndics of dev, prod (this is a top master)"


class KeyList:
    """The master's key lists as kos.salt.Master.keys returns them."""

    def __init__(self, accepted=(), pending=()):
        self.lists = {"minions": sorted(accepted), "minions_pre": sorted(pending),
                      "minions_rejected": [], "minions_denied": []}

    def keys(self):
        return self.lists


def test_after_an_apply_the_rebuilt_keys_go_once_and_the_retired_while_the_master_has_them(
        tmp_path):
    run = converge_run(tmp_path, last_apply={"retired": ["k8s-worker-2.example.com"],
                                             "replaced": ["k8s-cp-1", "salt"]})
    run.master = KeyList(accepted=[*MINIONS, "k8s-worker-2.example.com"])
    retired, rebuilt = step(run, converge.RetiredKeys), step(run, converge.RebuiltKeys)
    assert retired.should_run() and retired.retired == ["k8s-worker-2.example.com"]
    # the master's keys sit on its state volume: a rebuilt master keeps them
    assert rebuilt.should_run() and rebuilt.rebuilt == ["k8s-cp-1.example.com"]
    assert retired.always and not rebuilt.always
    # the keys went: nothing to do, whatever was recorded
    run.master = KeyList(accepted=MINIONS)
    assert not retired.should_run()
    # the node came back (a new key, pending or accepted) and was retired again: it goes
    run.master = KeyList(accepted=MINIONS, pending=["k8s-worker-2.example.com"])
    assert retired.should_run() and retired.retired == ["k8s-worker-2.example.com"]
    # a later rebuild of the same host is another one: its keys go again
    again = converge_run(tmp_path, last_apply={"replaced": ["k8s-cp-1"]},
                         finished="2026-12-02T10:00:00.000Z")
    later = step(again, converge.RebuiltKeys)
    later.should_run()
    assert later.fingerprint() != rebuilt.fingerprint()


def test_exclude_and_limit_reach_the_orchestration_and_the_fingerprints(tmp_path):
    plain = converge_run(tmp_path)
    narrowed = converge_run(tmp_path, exclude=["k8s-worker-1.example.com"])
    assert step(plain, converge.Orchestrate).title() == "salt-run state.orchestrate orch.deploy"
    assert step(narrowed, converge.Orchestrate).title() == (
        "salt-run state.orchestrate orch.deploy "
        """pillar='{"exclude": ["k8s-worker-1.example.com"], "limit": []}'""")
    # a narrowed converge does not pass for a whole one
    assert narrowed.fp != plain.fp
    assert step(narrowed, converge.Keys).title() == "accept the keys of 2 minions"
    # without the master's own minion, its key is not this converge's to accept
    limited = converge_run(tmp_path, limit=["k8s-cp-1.example.com"])
    assert not step(limited, converge.MasterKey).should_run()
    assert step(plain, converge.MasterKey).should_run()


def test_the_newcomers_are_the_targets_the_master_did_not_know(tmp_path):
    run = converge_run(tmp_path)
    run.members = [MASTER]
    newcomers = step(run, converge.NewcomersAnswer)
    assert newcomers.should_run()
    assert newcomers.title() == "check that 2 minions answer"
    run.members = sorted(MINIONS)
    assert not newcomers.should_run()


@pytest.mark.parametrize("exclude, limit, said", [
    (["nope.example.com"], [], "--exclude nope.example.com: not a minion of this cluster"),
    ([], ["nope.example.com"], "--limit nope.example.com: not a minion of this cluster"),
    ([MASTER], [MASTER], "--exclude/--limit leave no minion to converge"),
])
def test_targets_outside_the_cluster_are_refused(exclude, limit, said):
    with pytest.raises(InputError) as refused:
        converge.select_targets(sorted(MINIONS), exclude, limit)
    assert refused.value.problem == said
