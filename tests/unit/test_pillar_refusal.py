"""A pillar orch.deploy refused before anything changed is one input error (exit code 3):
each key once, with the minions it applies to and its own fix; a pillar file YAML cannot
read is named with its line and column before anything is pushed (kos.refusal)."""

import pytest
from kos.errors import EXIT_INPUT, InputError
from kos.refusal import check_pillar_yaml, pillar_refusal

CHANNEL = ("pillar key 'microk8s:channel': is not a snap channel; use a channel such as "
           "1.31/stable")
DISTRIBUTION = ("pillar key 'kos:distribution': is missing; set kubernetes_distribution "
                "(microk8s or kubeadm) in the Terraform variables and apply (kos up): "
                "Terraform writes it to the pillar as kos:distribution")
STEP = "kos-orch-deploy-validate"


def planned(*minions):
    """The plan's validation step as orchestration_failures words it."""
    said = " | ".join(f"{m}: {'; '.join(msgs)}" for m, msgs in minions)
    return (STEP, f"{STEP} (invalid pillar on {said}): Failure!")


def test_one_key_on_several_minions_is_said_once_with_its_own_fix():
    error = pillar_refusal([planned(("cp-1.kos.test", [CHANNEL]), ("w-1.kos.test", [CHANNEL]))],
                           "kos converge")
    assert error.exit_code == EXIT_INPUT
    assert error.problem == ("invalid pillar, nothing changed: pillar key 'microk8s:channel' "
                             "on cp-1.kos.test, w-1.kos.test: is not a snap channel")
    assert error.fix == "use a channel such as 1.31/stable, then re-run kos converge"


def test_each_key_once_from_the_plan_and_from_the_minions_own_validation():
    prepared = (STEP, f"w-2.kos.test: invalid pillar:\n{CHANNEL}\n{DISTRIBUTION}")
    error = pillar_refusal(
        [planned(("cp-1.kos.test", [CHANNEL, DISTRIBUTION])), prepared], "kos converge")
    assert error.problem == "invalid pillar, nothing changed: 2 keys are refused"
    assert error.details == [
        "pillar key 'kos:distribution' on cp-1.kos.test, w-2.kos.test: is missing",
        "  fix: set kubernetes_distribution (microk8s or kubeadm) in the Terraform variables "
        "and apply (kos up): Terraform writes it to the pillar as kos:distribution",
        "pillar key 'microk8s:channel' on cp-1.kos.test, w-2.kos.test: is not a snap channel",
        "  fix: use a channel such as 1.31/stable",
    ]


def test_a_failure_past_the_validation_is_not_a_refused_pillar():
    wave = ("kos-orch-deploy-wave", f"w-1.kos.test: kos-validate (kos.validate): {CHANNEL}")
    assert pillar_refusal([planned(("cp-1.kos.test", [CHANNEL])), wave], "kos converge") is None
    assert pillar_refusal([(STEP, "w-1.kos.test: minion did not return")], "kos converge") is None


def test_a_pillar_file_yaml_cannot_read_is_named_with_its_line_and_column(tmp_path):
    pillar = tmp_path / "pillar"
    (pillar / "environments").mkdir(parents=True)
    (pillar / "top.sls").write_text("base:\n  '*':\n    - environments.dev\n")
    (pillar / "environments" / "dev.sls").write_text("core:\n  motd: hi\n   bad: [1\n")
    # rendered by the master's Jinja first: not YAML yet, so not read here
    (pillar / "derived.sls").write_text("{% set x = 1 %}\nkos: {{ x }\n")
    with pytest.raises(InputError) as raised:
        check_pillar_yaml(pillar)
    assert raised.value.exit_code == EXIT_INPUT
    assert raised.value.problem == (
        "the pillar does not read as YAML, nothing changed: pillar/environments/dev.sls, "
        "line 3, column 7: mapping values are not allowed here")
    (pillar / "environments" / "dev.sls").write_text("core:\n  motd: hi\n")
    check_pillar_yaml(pillar)
