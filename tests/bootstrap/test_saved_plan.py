"""
``kos plan --plan-file`` and ``kos apply --plan-file``: the reviewed plan is the applied plan.
A plan file holds every variable's value, so when a sensitive one is set (root_password)
kos saves it only encrypted with KOS_PLAN_KEY, and refuses to apply it without that key.
(The pipeline's deploy job, its refusal of changed variables and of a stale plan, are in
test_pipeline.py.) Real Terraform runs against the OpenStack API double.
"""

import json
import zipfile

import pytest

from tests.bootstrap.conftest import required_vars

pytestmark = pytest.mark.terraform

SECRET = "console-only-Passw0rd!"
KEY = "kos-test-plan-key-0123456789abcdef0123456789abcdef"


def cloud_writes(fake_cloud):
    return [r for r in fake_cloud.writes() if not r[1].startswith("/gitlab/")]


@pytest.fixture
def secret_vars(write_vars, ssh_agent):
    return write_vars(required_vars(ssh_agent.public_key, set_root_password=True))


def test_a_plan_with_a_secret_is_not_saved_in_the_clear(cloud_kos, fake_cloud, secret_vars):
    res = cloud_kos(
        "plan",
        "--var-file",
        secret_vars,
        "--plan-file",
        "kos.tfplan",
        env={"TF_VAR_root_password": SECRET},
        check=3,
    )
    assert "a saved plan holds every variable's value, and the sensitive root_password is set" in (
        res.stderr
    )
    assert "set KOS_PLAN_KEY" in res.stderr
    assert not (cloud_kos.cwd / "kos.tfplan").exists()
    assert fake_cloud.requests == []


def test_encrypted_plan_applies_only_with_its_key(cloud_kos, fake_cloud, secret_vars):
    fake_cloud.creatable = {"networks", "routers", "security-groups"}
    env = {"TF_VAR_root_password": SECRET, "KOS_PLAN_KEY": KEY}
    res = cloud_kos(
        "plan", "--var-file", secret_vars, "--plan-file", "kos.tfplan", env=env, check=0
    )
    assert json.loads(res.stdout)["encrypted"] is True
    saved = (cloud_kos.cwd / "kos.tfplan").read_bytes()
    assert SECRET.encode() not in saved and not zipfile.is_zipfile(cloud_kos.cwd / "kos.tfplan")

    apply = ["apply", "--yes", "--var-file", secret_vars, "--plan-file", "kos.tfplan"]
    no_key = cloud_kos(*apply, env={"TF_VAR_root_password": SECRET}, check=3)
    assert "the plan file kos.tfplan is encrypted and KOS_PLAN_KEY is not set" in no_key.stderr
    wrong = cloud_kos(*apply, env={**env, "KOS_PLAN_KEY": KEY[::-1]}, check=3)
    assert "KOS_PLAN_KEY does not open the plan file kos.tfplan" in wrong.stderr
    assert cloud_writes(fake_cloud) == []

    applied = cloud_kos(*apply, env=env, check=5)
    assert "terraform apply kos.tfplan" in applied.stderr
    assert "Quota exceeded for resources: ['subnet']" in applied.stderr
    assert "kos-router" in [name for _, name in fake_cloud.created()]
    # Neither Terraform's plan nor the decrypted copy outlives its command.
    assert list((cloud_kos.cwd / ".kos").rglob("*.tfplan")) == []


def test_apply_needs_a_plan_file_kos_wrote(cloud_kos, fake_cloud, write_vars, ssh_agent):
    vars_file = write_vars(required_vars(ssh_agent.public_key))
    (cloud_kos.cwd / "notes.txt").write_text("not a plan\n")
    res = cloud_kos("apply", "--yes", "--var-file", vars_file, "--plan-file", "notes.txt", check=3)
    assert "notes.txt is not a Terraform plan file" in res.stderr
    assert fake_cloud.requests == []
