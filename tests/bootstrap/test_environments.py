"""
Environments (``kos --env NAME`` / ``KOS_ENV``): environments/NAME/ holds the environment's
Terraform variables, and the name selects the state directory and, in a GitLab job, the
Terraform state. Bad input (an unknown environment, one sharing its domain or cluster name
with another) gets one error naming the option and the fix, and changes nothing.

``kos plan`` runs real Terraform against the OpenStack API double (tests/bootstrap/conftest).
"""

import json

import pytest

from tests.bootstrap.conftest import REPO, required_vars
from tests.terraform.kos_terraform_support import copy_terraform

pytestmark = pytest.mark.terraform


def site_vars(write_vars, ssh_agent):
    """What a site adds to a committed environment (KOS_TFVARS in the pipeline)."""
    values = required_vars(ssh_agent.public_key)
    values.pop("num_kube_nodes")
    return write_vars(values, name="site.tfvars.json")


def state_calls(fake_cloud):
    return sorted({r[1] for r in fake_cloud.requests if r[1].startswith("/gitlab/")})


def test_each_environment_has_its_own_variables_state_dir_and_gitlab_state(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    site = site_vars(write_vars, ssh_agent)
    gitlab = {
        "CI_API_V4_URL": f"{fake_cloud.url}/gitlab/api/v4",
        "CI_PROJECT_ID": "7",
        "CI_JOB_TOKEN": fake_cloud.gitlab_token,
    }
    dev = cloud_kos(
        "plan", "--var-file", site, "--out", "plan-dev", env={**gitlab, "KOS_ENV": "dev"}, check=0
    )
    prod = cloud_kos(
        "plan", "--env", "prod", "--var-file", site, "--out", "plan-prod", env=gitlab, check=0
    )
    assert json.loads(dev.stdout)["cluster"] == "kos-dev"
    assert json.loads(prod.stdout)["cluster"] == "kos-prod"
    assert (
        "environment dev: cluster kos-dev, pillar layer environments/dev_kos_internal.sls"
        in dev.stderr
    )
    assert "pillar layer environments/prod_kos_internal.sls" in prod.stderr
    # Each environment's own variables: prod runs 3 control planes, dev one.
    dev_plan = (cloud_kos.cwd / "plan-dev" / "plan.txt").read_text()
    prod_plan = (cloud_kos.cwd / "plan-prod" / "plan.txt").read_text()
    assert '"k8s-cp-3"' in prod_plan and '"k8s-cp-3"' not in dev_plan
    assert "kos-prod-bastion" in prod_plan and "kos-prod" not in dev_plan
    # Separate state: GitLab's state named after each environment, and a directory each.
    base = "/gitlab/api/v4/projects/7/terraform/state"
    assert state_calls(fake_cloud) == [
        f"{base}/dev",
        f"{base}/dev/lock",
        f"{base}/prod",
        f"{base}/prod/lock",
    ]
    kos_dir = cloud_kos.cwd / ".kos"
    assert sorted(p.relative_to(kos_dir).as_posix() for p in kos_dir.glob("*/*")) == [
        "env_dev/kos-dev",
        "env_prod/kos-prod",
    ]


def test_without_a_gitlab_job_an_environment_keeps_local_state(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    site = site_vars(write_vars, ssh_agent)
    res = cloud_kos("plan", "--env", "dev", "--var-file", site, check=0)
    assert "local Terraform state" in res.stderr
    assert state_calls(fake_cloud) == []
    assert (cloud_kos.cwd / ".kos" / "env_dev" / "kos-dev" / "terraform").is_dir()


def test_unknown_environment_names_the_option_and_changes_nothing(cloud_kos, fake_cloud):
    res = cloud_kos("up", "--yes", env={"KOS_ENV": "staging"}, check=3)
    assert "environment 'staging' (--env / KOS_ENV) does not exist" in res.stderr
    assert "use one of: dev, prod" in res.stderr
    bad = cloud_kos("plan", "--env", "Prod!", check=3)
    assert "environment name 'Prod!' (--env / KOS_ENV) is not valid" in bad.stderr
    assert fake_cloud.requests == []
    assert not (cloud_kos.cwd / ".kos").exists()


def test_state_address_of_another_state_is_refused(cloud_kos, fake_cloud, write_vars, ssh_agent):
    site = site_vars(write_vars, ssh_agent)
    res = cloud_kos(
        "plan",
        "--env",
        "dev",
        "--var-file",
        site,
        env={"TF_HTTP_ADDRESS": f"{fake_cloud.url}/gitlab/api/v4/projects/7/terraform/state/kos"},
        check=3,
    )
    assert "is not the state of environment 'dev'" in res.stderr
    assert "unset TF_HTTP_ADDRESS" in res.stderr
    assert fake_cloud.requests == []


@pytest.fixture
def repo_with(tmp_path):
    """A repository copy whose environments/ holds the given var files."""

    def make(**envs):
        root = tmp_path / "repo"
        copy_terraform(root / "terraform")
        for name, text in envs.items():
            (root / "environments" / name).mkdir(parents=True)
            (root / "environments" / name / "terraform.tfvars").write_text(text)
        return root

    return make


@pytest.mark.parametrize(
    ("key", "meaning"),
    [
        ("deploy_domain_name", "the same minion ids and pillar layer"),
        ("cluster_name", "the same OpenStack names and kos-cluster tag"),
    ],
)
def test_environments_sharing_a_domain_or_cluster_are_refused(
    cloud_kos, fake_cloud, repo_with, key, meaning
):
    blue = {"cluster_name": "blue", "deploy_domain_name": "blue.example.org"}
    green = {"cluster_name": "green", "deploy_domain_name": "green.example.org", key: blue[key]}
    root = repo_with(
        blue="".join(f'{k} = "{v}"\n' for k, v in blue.items()),
        green="".join(f'{k} = "{v}"\n' for k, v in green.items()),
    )
    res = cloud_kos("plan", "--terraform-dir", root / "terraform", "--env", "green", check=3)
    problem = f"environments green and blue share {key} '{blue[key]}': they would have {meaning}"
    assert problem in res.stderr
    fix = f"give environment green its own {key} in {root}/environments/green/terraform.tfvars"
    assert fix in res.stderr
    assert fake_cloud.requests == []
    assert not (cloud_kos.cwd / ".kos").exists()


def test_an_environment_without_variables_is_refused(cloud_kos, repo_with):
    root = repo_with(blue='cluster_name = "blue"\n')
    (root / "environments" / "empty").mkdir()
    res = cloud_kos("plan", "--terraform-dir", root / "terraform", "--env", "empty", check=3)
    assert "environment 'empty' has no variables" in res.stderr
    assert f"{root}/environments/empty/terraform.tfvars" in res.stderr


def test_committed_environments_are_distinct():
    """The repository's own environments pass the check every kos --env makes."""
    from kos import inputs

    root = REPO / "environments"
    for env in inputs.environments(root).values():
        values = inputs.check_environments(REPO / "terraform", root, env)
        assert values["cluster_name"] == f"kos-{env.name}"
