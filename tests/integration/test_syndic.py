"""
A master of masters (issue 14.5): a top salt-master and two environments, each a
salt-master with its salt-syndic and its minions, all real Salt daemons on loopback. The
topology keys come from the salt_master formula (Terraform's kos:salt_master facts in the
pillar, rendered through Salt's loaders into master.d/kos.conf and read back by Salt's
config loader), not from the test.

What an operator relies on: a command on the top reaches every environment's minions, a
target can pick one environment, an orchestration on the top runs through the
environments in order, a command on an environment's master reaches only its
own minions, and an environment's master keeps serving its minions while the top is down
and its syndic is back once the top is (kos_syndic, the master's scheduled repair).
"""

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import salt.config
import yaml
from saltfactories.utils.functional import Loaders

from tests.formula_loader import formula_modules
from tests.integration.conftest import by_id, orchestrate
from tests.release import release_root

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "salt" / "salt"
ENVIRONMENTS = ("dev", "prod")
# Topology keys of the formula's master config; the rest (roots, job cache, backups) the
# other tests of the formula cover.
TOPOLOGY = ("order_masters", "syndic_master", "syndic_wait", "transport", "worker_pools_enabled")

pytestmark = [pytest.mark.integration]


def domain(env):
    return f"{env}.kos-sy.test"


def rendered_config(root, facts):
    """The salt_master formula applied with ``kos:salt_master`` = ``facts``; the master
    config it wrote, as Salt's config loader reads it."""
    root.mkdir(parents=True)
    conf_file = root / "etc" / "salt" / "master.d" / "kos.conf"
    pillar_dir = root / "pillar"
    pillar_dir.mkdir()
    (pillar_dir / "top.sls").write_text("base:\n  '*':\n    - data\n")
    (pillar_dir / "data.sls").write_text(yaml.safe_dump({
        "kos": {"salt_master": facts},
        "salt_master": {"config_file": str(conf_file), "cachedir": str(root / "cache"),
                        "pki_dir": str(root / "pki"), "manage_service": False,
                        "job_cache_filter": False},
    }))
    opts = salt.config.minion_config(None)
    opts.update(
        id=facts["id"], file_client="local", root_dir=str(root / "minion"),
        cachedir=str(root / "minion" / "cache"), pki_dir=str(root / "minion" / "pki"),
        extension_modules=str(root / "minion" / "extmods"),
        file_roots={"base": [str(TREE), str(release_root())]}, pillar_roots={"base": [str(pillar_dir)]},
    )
    ret = Loaders(opts).modules.state.sls("salt_master").raw
    failed = {k: v["comment"] for k, v in ret.items() if v["result"] is not True}
    assert not failed, failed
    (root / "etc" / "salt" / "master").write_text("")
    return salt.config.master_config(str(root / "etc" / "salt" / "master"))


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    root = tmp_path_factory.mktemp("syndic-configs")
    # Terraform's facts for a top master and for the environments that join it (tcp: see
    # terraform/main.tf's salt_transport)
    top = rendered_config(root / "top", {"id": "salt.top.kos-sy.test", "order_masters": True,
                                         "syndics": ["kos-dev", "kos-prod"],
                                         "transport": "tcp"})
    envs = {env: rendered_config(root / env, {"id": f"salt.{domain(env)}",
                                              "syndic_master": "127.0.0.1",
                                              "transport": "tcp"})
            for env in ENVIRONMENTS}
    return top, envs


def test_the_formula_configures_the_top_and_the_syndics(configs):
    top, envs = configs
    assert top["order_masters"] is True
    assert top["transport"] == "tcp"
    assert top.get("syndic_master") in (None, "masterofmasters")  # Salt's default: unset
    for conf in envs.values():
        assert conf["syndic_master"] == "127.0.0.1"
        assert conf["syndic_wait"] == 5
        assert conf["order_masters"] is False
        assert conf["transport"] == "tcp"
    for conf in [top, *envs.values()]:
        assert conf["worker_pools_enabled"] is False  # see kos.conf.jinja


@pytest.fixture(scope="module")
def topology(salt_factories, configs):
    top_conf, env_confs = configs
    syndic_ids = {f"salt.{domain(env)}" for env in ENVIRONMENTS}

    def accept_syndics_only(master, payload):
        # As kos does on a top master: the expected syndics' keys, nothing else.
        if payload["act"] == "pend" and payload["id"] in syndic_ids:
            master.salt_key_cli().run("--yes", "--accept", payload["id"])

    top = salt_factories.salt_master_daemon(
        "salt.top.kos-sy.test",
        overrides={key: top_conf[key]
                   for key in ("order_masters", "transport", "worker_pools_enabled")},
        on_auth_event_callback=accept_syndics_only,
    )
    started = []

    def environment(env):
        conf = env_confs[env]
        # As on a network, where each master is a host of its own and all publish on 4505: a
        # salt-syndic reads its own master's configuration and subscribes to the top on the
        # publish port it finds there. Here each environment's master has an address of its
        # own on loopback and the top's publish port.
        address = f"127.0.0.{2 + ENVIRONMENTS.index(env)}"
        port = {"publish_port": top.config["publish_port"], "transport": conf["transport"]}
        syndic = top.salt_syndic_daemon(
            f"salt.{domain(env)}",
            overrides={**{key: conf[key] for key in TOPOLOGY if key.startswith("syndic_")},
                       **port},
            master_overrides={"interface": address,
                              "worker_pools_enabled": conf["worker_pools_enabled"], **port},
            minion_overrides={"master": address, **port},
        )
        # salt-factories points the syndic at the top's port; the address is the formula's
        assert syndic.config["syndic_master"] == conf["syndic_master"]
        minion = syndic.master.salt_minion_daemon(
            f"k8s-cp-1.{domain(env)}", overrides={"master": address, **port})
        # salt-factories would start the syndic's own minion (the master's own minion) with
        # the syndic, and never end it: started here, it is ended with the rest
        for daemon in (syndic.master, syndic.minion, syndic, minion):
            started.append(daemon)
            daemon.start(start_timeout=180)
        return env, syndic

    with top.started(start_timeout=180):
        try:
            with ThreadPoolExecutor(len(ENVIRONMENTS)) as pool:
                envs = dict(pool.map(environment, ENVIRONMENTS))
            yield top, envs
        finally:
            for daemon in reversed(started):
                daemon.terminate()


def answered(cli, target, timeout=120):
    # A top cannot know which minions sit behind its syndics: it waits out its --timeout
    # (each syndic passes its minions' returns up within syndic_wait).
    ret = cli.run("test.ping", minion_tgt=target, _timeout=timeout)
    return sorted(m for m, value in (ret.data or {}).items() if value is True)


def minions_of(env):
    # An environment's master is a minion of itself too (as kos's salt host is), started
    # beside its syndic under the same id.
    return [f"k8s-cp-1.{domain(env)}", f"salt.{domain(env)}"]


def test_a_command_on_the_top_reaches_every_environment(topology):
    top, _ = topology
    cli = top.salt_cli(timeout=10)
    assert answered(cli, "*") == sorted(minions_of("dev") + minions_of("prod"))
    # one environment, by its domain
    assert answered(cli, f"*.{domain('prod')}") == minions_of("prod")


def rolling_orchestration():
    """One step per environment, each only once the one before succeeded: what an
    operator runs from the top to roll a change through the environments in order."""
    steps = {}
    for before, env in zip((None,) + ENVIRONMENTS, ENVIRONMENTS):
        step = [{"name": "grains.get"}, {"tgt": f"*.{domain(env)}"}, {"arg": ["id"]},
                {"timeout": 30}]
        if before:
            step.append({"require": [{"salt": before}]})
        steps[env] = {"salt.function": step}
    return yaml.safe_dump(steps)


def test_an_orchestration_on_the_top_spans_environments(topology):
    top, _ = topology
    with top.state_tree.base.temp_file("kos_across.sls", rolling_orchestration()):
        ret, steps = orchestrate(top.salt_run_cli(timeout=180), sls="kos_across")
    assert ret.returncode == 0, ret
    steps = by_id(steps)
    for env in ENVIRONMENTS:
        assert steps[env]["result"] is True, steps[env]
        # each step ran on that environment's minions, and they answered through its syndic
        assert steps[env]["changes"]["ret"] == {mid: mid for mid in minions_of(env)}
    assert steps["dev"]["__run_num__"] < steps["prod"]["__run_num__"]


def test_an_environment_master_reaches_only_its_own(topology):
    _, envs = topology
    for env, syndic in envs.items():
        assert answered(syndic.master.salt_cli(timeout=10), "*") == minions_of(env)


@pytest.fixture
def kos_syndic(monkeypatch):
    """saltext.kos.modules.kos_syndic through Salt's loader, as an environment's master runs
    it (the module loads where salt-syndic is installed: here, this virtualenv's)."""
    return formula_modules(monkeypatch, "salt.dev.kos-sy.test")


def link(kos_syndic, top, syndic, **kwargs):
    return kos_syndic.kos_syndic.heal(
        pidfile=syndic.config["pidfile"], master="127.0.0.1", port=top.config["publish_port"],
        log_file=syndic.config["log_file"],
        test=True, **kwargs)


def test_an_environment_master_works_while_the_top_is_down(topology, kos_syndic):
    top, envs = topology
    for syndic in envs.values():
        found = link(kos_syndic, top, syndic)
        assert found["status"]["subscribed"] is True and found["restart"] is False, found
    top.terminate()
    try:
        assert answered(envs["dev"].master.salt_cli(timeout=10), "*") == minions_of("dev")
        # nothing to repair while the top is away
        found = link(kos_syndic, top, envs["dev"], grace=0)
        assert found["status"]["top_publishing"] is False and found["restart"] is False, found
    finally:
        top.start(start_timeout=180)
    # Salt 3008's syndics do not subscribe again by themselves (kos_syndic's docstring):
    # the master's schedule finds that and restarts them, as done here.
    for syndic in envs.values():
        found = link(kos_syndic, top, syndic, grace=0)
        assert found["status"]["top_publishing"] is True, found
        assert found["status"]["subscribed"] is False and found["restart"] is True, found
        syndic.terminate()
        syndic.start(start_timeout=180)
    started = time.monotonic()
    deadline = started + 180
    while True:
        found = answered(top.salt_cli(timeout=10), "*", timeout=20)
        if found == sorted(minions_of("dev") + minions_of("prod")) or time.monotonic() > deadline:
            break
    print(f"the top reached every environment {time.monotonic() - started:.0f} s after the "
          "syndics restarted")
    assert found == sorted(minions_of("dev") + minions_of("prod"))
    for syndic in envs.values():
        assert link(kos_syndic, top, syndic)["status"]["subscribed"] is True
