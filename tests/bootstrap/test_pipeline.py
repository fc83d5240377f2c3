"""
The GitLab pipeline really runs: gitlab-ci-local (from the npm registry, cached under the
user cache dir) executes .gitlab-ci.yml in shell mode on a copy of the working tree, for the
jobs that can run here:

* ``validate`` with a reduced test selection (the whole suite would recurse into this test);
* ``plan`` against the OpenStack API double, with the Terraform state in the double's
  GitLab state API, exactly as the pipeline variables set it up.

``deploy``, ``converge`` and ``destroy`` need a cloud; the test checks they are wired as
manual/rule-driven jobs calling the CLI.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.bootstrap.conftest import REPO, ensure_debian_package, required_vars
from tests.terraform.kos_terraform_support import cache_root, locked

pytestmark = pytest.mark.terraform

# The newest release that runs on Node.js 20 (later ones use Node 22 APIs).
GITLAB_CI_LOCAL = "4.65.0"
COPY_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".kos",
    ".cache",
    ".gitlab-ci-local",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".terraform",
    "*.tfstate",
    "*.tfstate.*",
    "*.egg-info",
    "plan",
)


@pytest.fixture(scope="session")
def gitlab_ci_local():
    ensure_debian_package("/usr/bin/rsync", "rsync")  # it copies the project for each job
    npm = shutil.which("npm")
    if not npm:
        pytest.skip("npm is needed to install gitlab-ci-local")
    prefix = cache_root() / "npm" / f"gitlab-ci-local-{GITLAB_CI_LOCAL}"
    exe = prefix / "node_modules" / ".bin" / "gitlab-ci-local"
    if not exe.exists():
        with locked(prefix.parent / f"gitlab-ci-local-{GITLAB_CI_LOCAL}.lock"):
            if not exe.exists():
                subprocess.run(
                    [
                        npm,
                        "install",
                        "--prefix",
                        str(prefix),
                        "--no-audit",
                        "--no-fund",
                        "--loglevel=error",
                        f"gitlab-ci-local@{GITLAB_CI_LOCAL}",
                    ],
                    check=True,
                    capture_output=True,
                    timeout=600,
                )
    return exe


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


def run_pipeline(exe, project, jobs, variables, timeout=900):
    args = [str(exe), "--shell-isolation", "--force-shell-executor", "--no-color", "--timestamps"]
    overridden = sorted(k for k in variables if k.startswith("CI_"))
    if overridden:
        args += ["--ignore-predefined-vars", ",".join(overridden)]
    for key, value in variables.items():
        args += ["--variable", f"{key}={value}"]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OS_", "TF_VAR_", "TF_HTTP_", "KOS_"))
    }
    env.pop("SSH_AUTH_SOCK", None)
    return subprocess.run(
        [*args, *jobs], cwd=project, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_pipeline_defines_the_five_jobs(project):
    root = yaml.safe_load((project / ".gitlab-ci.yml").read_text())
    jobs = {}
    for include in root["include"]:
        jobs.update(yaml.safe_load((project / include["local"]).read_text()))
    assert root["stages"] == ["validate", "plan", "deploy", "converge", "destroy"]
    assert jobs["validate"]["script"] == ["ci/validate.sh"]
    assert jobs["plan"]["script"] == ["ci/kos.sh plan --out plan"]
    assert jobs["plan"]["artifacts"]["paths"] == ["plan/plan.txt", "plan/changes.json"]
    assert (jobs["deploy"]["when"], jobs["deploy"]["script"]) == ("manual", ["ci/kos.sh up --yes"])
    assert jobs["converge"]["script"] == ["ci/kos.sh converge"]
    assert (jobs["destroy"]["when"], jobs["destroy"]["script"]) == (
        "manual",
        ["ci/kos.sh down --yes"],
    )
    assert root["variables"]["TF_HTTP_ADDRESS"].endswith("/terraform/state/${TF_STATE_NAME}")
    assert "TF_HTTP_PASSWORD" not in root["variables"]


def test_validate_and_plan_jobs_succeed(
    gitlab_ci_local, project, fake_cloud, terraform_env, ssh_agent, tmp_path
):
    tfvars = tmp_path / "cluster.tfvars.json"
    tfvars.write_text(json.dumps(required_vars(ssh_agent.public_key, cluster_name="pipeline")))
    clouds = fake_cloud.clouds_yaml(tmp_path)
    variables = {
        "KOS_VENV": Path(sys.executable).parent.parent,
        "KOS_TEST_ARGS": "-q -p no:cacheprovider tests/bootstrap/test_preflight.py -k bad_input",
        "XDG_CACHE_HOME": cache_root().parent,
        "KOS_CLOUDS_YAML": clouds,
        "OS_CLOUD": "kos-test",
        "KOS_TFVARS": tfvars,
        "TF_CLI_CONFIG_FILE": terraform_env["cli_config"],
        "CI_API_V4_URL": f"{fake_cloud.url}/gitlab/api/v4",
        "CI_PROJECT_ID": "1",
        "CI_JOB_TOKEN": fake_cloud.gitlab_token,
    }
    res = run_pipeline(gitlab_ci_local, project, ["validate", "plan"], variables)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-6000:]
    assert "--- terraform fmt" in log and "--- tests" in log
    artifacts = project / ".gitlab-ci-local" / "artifacts" / "plan" / "plan"
    assert sorted(p.name for p in artifacts.iterdir()) == ["changes.json", "plan.txt"]
    assert len(json.loads((artifacts / "changes.json").read_text())) == 50
    # The plan's state lives in GitLab's http backend, read with the job token.
    state_calls = [
        r for r in fake_cloud.requests if r[1] == "/gitlab/api/v4/projects/1/terraform/state/kos"
    ]
    assert state_calls and all(r[4] == 404 for r in state_calls)
    for path in artifacts.iterdir():
        text = path.read_text()
        assert fake_cloud.password not in text and fake_cloud.gitlab_token not in text
