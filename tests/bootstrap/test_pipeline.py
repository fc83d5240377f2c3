"""
The GitLab pipeline really runs: gitlab-ci-local (`ci/local-pipeline.sh`, what `make pipeline`
runs; installed from the npm registry under the user cache dir) executes .gitlab-ci.yml in
shell mode on a copy of the working tree:

* which jobs a push to the default branch, a push to another branch and a scheduled
  pipeline create, per environment (gitlab-ci-local evaluates the rules and needs);
* ``validate`` (lint, every environment's pillar against the schema, terraform validate;
  kos's own tests are not part of it) and ``plan:dev`` against the OpenStack API double, with
  environment dev's Terraform state in the double's GitLab state API, exactly as kos derives
  it in a GitLab job; ``validate`` failing on a bad value in an environment's pillar layer;
* ``deploy:dev`` applying the plan file plan:dev saved: it refuses when the variables
  changed in between, applies that very plan otherwise, and refuses it once the state moved.
"""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.bootstrap.conftest import REPO, ensure_debian_package, required_vars
from tests.terraform.kos_terraform_support import cache_root

pytestmark = pytest.mark.terraform

COPY_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".kos",
    ".cache",
    ".gitlab-ci-local",
    ".gitlab-ci-local-variables.yml",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".terraform",
    "*.tfstate",
    "*.tfstate.*",
    "*.egg-info",
    "plan",
)
JOBS = ("plan", "deploy", "converge", "drift", "destroy")


@pytest.fixture(scope="session")
def local_pipeline():
    ensure_debian_package("/usr/bin/rsync", "rsync")  # it copies the project for each job
    if not shutil.which("npm"):
        pytest.skip("npm is needed to install gitlab-ci-local")
    return "ci/local-pipeline.sh"


@pytest.fixture
def project(tmp_path):
    """The working tree as a fresh git repository (what a pipeline checks out)."""
    copy = tmp_path / "kos"
    shutil.copytree(REPO, copy, ignore=COPY_IGNORE, symlinks=True)
    git = [
        "git",
        "-C",
        str(copy),
        "-c",
        "user.name=kos-test",
        "-c",
        "user.email=kos-test@example.invalid",
    ]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run(
        [*git, "remote", "add", "origin", "https://gitlab.example.invalid/kos/kos.git"], check=True
    )
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "pipeline under test"], check=True)
    # As if pushed: rules:changes compare against the default branch of origin.
    subprocess.run([*git, "update-ref", "refs/remotes/origin/main", "HEAD"], check=True)
    subprocess.run(
        [*git, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main"], check=True
    )
    return copy


def run_pipeline(script, project, args, variables, timeout=900):
    cmd = [script]
    overridden = sorted(k for k in variables if k.startswith("CI_"))
    if overridden:
        cmd += ["--ignore-predefined-vars", ",".join(overridden)]
    for key, value in variables.items():
        cmd += ["--variable", f"{key}={value}"]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OS_", "TF_VAR_", "TF_HTTP_", "KOS_"))
    }
    env.pop("SSH_AUTH_SOCK", None)
    env.update(
        KOS_VENV=str(Path(sys.executable).parent.parent), XDG_CACHE_HOME=str(cache_root().parent)
    )
    return subprocess.run(
        [*cmd, *args], cwd=project, env=env, capture_output=True, text=True, timeout=timeout
    )


def listed_jobs(script, project, variables=None):
    res = run_pipeline(script, project, ["--list-json"], variables or {}, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # --list-json shows the jobs whose rules say never too.
    return {job["name"]: job for job in json.loads(res.stdout) if job["when"] != "never"}


def environment_names():
    return sorted(d.name for d in (REPO / "environments").iterdir() if d.is_dir())


def needs_of(job):
    return sorted(n["job"] if isinstance(n, dict) else n for n in job.get("needs") or [])


def test_every_environment_has_its_own_chain_of_jobs(local_pipeline, project):
    envs = environment_names()
    assert {"dev", "prod"} <= set(envs)

    push = listed_jobs(local_pipeline, project)
    assert push["validate"]["when"] == "on_success"
    for env in envs:
        for kind in ("plan", "deploy", "converge", "destroy"):
            assert f"{kind}:{env}" in push, f"{kind}:{env} missing from a push to main"
        assert f"drift:{env}" not in push
        assert needs_of(push[f"deploy:{env}"]) == [f"plan:{env}"]
        assert needs_of(push[f"converge:{env}"]) == [f"deploy:{env}"]
        assert push[f"destroy:{env}"]["when"] == "manual"
    # prod is protected: a person starts its deploy; dev deploys by itself.
    assert push["deploy:prod"]["when"] == "manual"
    assert push["deploy:dev"]["when"] == "on_success"

    branch = listed_jobs(local_pipeline, project, {"CI_COMMIT_BRANCH": "feature"})
    assert sorted(branch) == sorted(["validate", *(f"plan:{env}" for env in envs)])

    scheduled = listed_jobs(local_pipeline, project, {"CI_PIPELINE_SOURCE": "schedule"})
    assert sorted(scheduled) == sorted(f"drift:{env}" for env in envs)


def test_jobs_name_their_environment_and_state(project):
    """Each job runs kos for its own environment: KOS_ENV, GitLab environment, lock group."""
    import yaml

    templates = yaml.safe_load((project / "ci" / "deploy.yml").read_text())
    for env in environment_names():
        jobs = yaml.safe_load((project / "environments" / env / "pipeline.yml").read_text())
        assert sorted(jobs) == sorted(f"{kind}:{env}" for kind in JOBS)
        for name, job in jobs.items():
            assert job["variables"] == {"KOS_ENV": env}, name
    for name in (".kos-plan", ".kos-deploy", ".kos-converge", ".kos-drift", ".kos-destroy"):
        assert templates[name]["environment"]["name"] == "$KOS_ENV", name
    assert templates[".kos-environment"]["resource_group"] == "kos-$KOS_ENV"
    assert templates[".kos-deploy"]["script"] == [
        'ci/kos.sh apply --yes --plan-file "plan/$KOS_ENV/kos.tfplan"'
    ]
    root = yaml.safe_load((project / ".gitlab-ci.yml").read_text())
    assert not any(k.startswith("TF_HTTP") for k in root["variables"])


@pytest.fixture
def pipeline_vars(fake_cloud, terraform_env, ssh_agent, tmp_path):
    clouds = fake_cloud.clouds_yaml(tmp_path)

    def variables(**tfvars):
        path = tmp_path / f"site-{len(list(tmp_path.glob('site-*')))}.tfvars.json"
        values = required_vars(ssh_agent.public_key)
        values.pop("num_kube_nodes")  # environments/dev/terraform.tfvars names the nodes
        values.update(tfvars)
        path.write_text(json.dumps(values))
        return {
            "KOS_CLOUDS_YAML": clouds,
            "OS_CLOUD": "kos-test",
            "KOS_TFVARS": path,
            "TF_CLI_CONFIG_FILE": terraform_env["cli_config"],
            "KOS_PROVIDER_LOCK_FILE": terraform_env["lock_file"],
            "CI_API_V4_URL": f"{fake_cloud.url}/gitlab/api/v4",
            "CI_PROJECT_ID": "1",
            "CI_JOB_TOKEN": fake_cloud.gitlab_token,
        }

    return variables


def cloud_writes(fake_cloud):
    """Writes to the cloud (the GitLab state API's locks aside)."""
    return [r for r in fake_cloud.writes() if not r[1].startswith("/gitlab/")]


def artifacts(project, job):
    # gitlab-ci-local's directory name for a job: base64url of every run of other characters.
    safe = re.sub(
        r"[^\w-]+", lambda m: base64.urlsafe_b64encode(m.group().encode()).decode().rstrip("="), job
    )
    return project / ".gitlab-ci-local" / "artifacts" / safe


def test_validate_and_plan_save_the_plan_without_secrets(
    local_pipeline, project, fake_cloud, pipeline_vars
):
    res = run_pipeline(local_pipeline, project, ["validate", "plan:dev"], pipeline_vars())
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-6000:]
    for step in ("ruff", "salt-lint", "yamllint", "terraform fmt", "pillar", "terraform validate"):
        assert f"--- {step}" in log, step
    assert "--- tests" not in log
    assert "environment dev: the pillar of 5 minions is valid" in log
    assert "environment prod: the pillar of 8 minions is valid" in log
    assert "terraform validate: the root module is valid" in log
    assert "environment dev: cluster kos-dev, pillar layer environments/dev_kos_internal.sls" in log
    out = artifacts(project, "plan:dev") / "plan" / "dev"
    assert sorted(p.name for p in out.iterdir()) == [
        "changes.json",
        "diff.json",
        "diff.txt",
        "kos.tfplan",
        "plan.txt",
        "report.json",
    ]
    assert len(json.loads((out / "changes.json").read_text())) == 52
    assert json.loads((out / "report.json").read_text()) == {
        "create": 52,
        "update": 0,
        "delete": 0,
    }
    assert "kos-dev-bastion" in (out / "plan.txt").read_text()
    # dev's state is GitLab's state named dev, read and locked with the job token.
    state = "/gitlab/api/v4/projects/1/terraform/state/dev"
    calls = {(r[0], r[1]) for r in fake_cloud.requests if r[1].startswith("/gitlab/")}
    assert calls == {("GET", state), ("POST", f"{state}/lock"), ("DELETE", f"{state}/lock")}
    secrets = [fake_cloud.password, fake_cloud.gitlab_token]
    with zipfile.ZipFile(out / "kos.tfplan") as plan:
        for member in plan.namelist():
            data = plan.read(member).decode(errors="replace")
            assert not any(s in data for s in secrets), member
    for path in (out / "plan.txt", out / "changes.json", out / "diff.json", out / "diff.txt"):
        assert not any(s in path.read_text() for s in secrets)


def test_validate_fails_on_a_bad_value_in_an_environment_layer(
    local_pipeline, project, terraform_env
):
    layer = project / "pillar" / "environments" / "prod_kos_internal.sls"
    layer.write_text("core:\n  sshd:\n    port: 70000\n")
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(project),
            "-c",
            "user.name=kos-test",
            "-c",
            "user.email=kos-test@example.invalid",
            "commit",
            "-q",
            "-m",
            "bad port",
        ],
        check=True,
    )
    provider = {
        "TF_CLI_CONFIG_FILE": terraform_env["cli_config"],
        "KOS_PROVIDER_LOCK_FILE": terraform_env["lock_file"],
    }
    res = run_pipeline(local_pipeline, project, ["validate"], provider)
    log = res.stdout + res.stderr
    assert res.returncode != 0, log[-6000:]
    assert (
        "k8s-worker-3.prod.kos.internal: pillar key 'core:sshd:port': 70000 is out of range"
    ) in log, log[-6000:]
    failed = re.search(r"validate: failed: (\S+)", log)
    assert failed and "pillar" in failed.group(1).split(","), log[-6000:]


def test_deploy_applies_the_saved_plan_only(local_pipeline, project, fake_cloud, pipeline_vars):
    fake_cloud.creatable = {"networks", "routers", "security-groups"}
    reviewed = pipeline_vars()
    res = run_pipeline(local_pipeline, project, ["plan:dev"], reviewed)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    assert cloud_writes(fake_cloud) == []

    # The variables changed after the review: deploy refuses and changes nothing.
    more = {"k8s-cp-1": {"role": "control_plane"},
            **{f"k8s-worker-{n}": {"role": "worker"} for n in (1, 2, 3)}}
    changed = run_pipeline(local_pipeline, project, ["deploy:dev"],
                           pipeline_vars(kubernetes_nodes=more))
    log = changed.stdout + changed.stderr
    assert changed.returncode != 0
    assert "variables changed since the plan was made: kubernetes_nodes" in log, log[-4000:]
    assert cloud_writes(fake_cloud) == []
    assert "/gitlab/api/v4/projects/1/terraform/state/dev" not in fake_cloud.gitlab_states

    # Unchanged: that very plan is applied (the double refuses subnets as over quota, so
    # the apply stops part way, as a real one can).
    applied = run_pipeline(local_pipeline, project, ["deploy:dev"], reviewed)
    log = applied.stdout + applied.stderr
    assert "terraform apply kos.tfplan" in log, log[-4000:]
    assert "Quota exceeded for resources: ['subnet']" in log
    names = sorted(name for _, name in fake_cloud.created())
    assert "kos-dev-public" in names and "kos-dev-router" in names
    assert "/gitlab/api/v4/projects/1/terraform/state/dev" in fake_cloud.gitlab_states

    # The state moved since the plan was made: the same plan is refused, nothing is created.
    created = fake_cloud.created()
    again = run_pipeline(local_pipeline, project, ["deploy:dev"], reviewed)
    log = again.stdout + again.stderr
    assert again.returncode != 0
    assert "the saved plan is stale" in log, log[-4000:]
    assert fake_cloud.created() == created
