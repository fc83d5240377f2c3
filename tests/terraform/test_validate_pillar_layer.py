"""
ci/validate_pillar.py's terraform_layer rebuilds in Python the pillar Terraform writes
(local.pillar in terraform/main.tf, the salt_pillar output), because Terraform's own needs a
provider and state. Here Terraform computes it offline (`terraform test` with the mock
provider) for the same variables, and the two must be equal.

The variables reach terraform_layer the way the validate job gets them (kos.inputs.evaluate
over a var file), and the layer is written as the job writes _from_terraform.sls. What the
cloud hands out (floating IPs, the admin port's address) is set in the mock to the
placeholders terraform_layer uses, so those fields are compared too, not masked.
"""

from __future__ import annotations

import difflib
import json
import shutil
import sys

import pytest
import yaml
from kos_terraform_support import REPO, TERRAFORM_DIR

sys.path.insert(0, str(REPO / "ci"))
import validate_pillar  # noqa: E402

pytestmark = pytest.mark.terraform

TEST_DIRECTORY = "kos-pillar-layer"
USERS = [
    {"name": "alice", "ssh_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAliceKey alice@x"]},
    {"name": "bob", "sudo": True},
]
# name -> (variables the pillar reads, variables only the rest of Terraform needs).
CASES = {
    "microk8s_default": ({}, {}),
    "kubeadm_three_control_planes_two_zones": (
        {
            "cluster_name": "prod-eu",
            "deploy_domain_name": "prod.example.internal",
            "deploy_user": "ops",
            "users": USERS,
            "kubernetes_distribution": "kubeadm",
            "num_control_plane": 3,
            "num_kube_nodes": 5,
            "availability_zones": ["az-a", "az-b"],
            "first_control_plane_access": "admin_network",
            "private_cidr": "10.30.0.0/16",
            "syndic_master": "198.51.100.7",
        },
        {"admin_network_name": "admin"},
    ),
    "kubeadm_nodes_as_a_map": (
        {
            "kubernetes_distribution": "kubeadm",
            "availability_zones": ["az-a", "az-b"],
            "kubernetes_nodes": {
                "k8s-cp-1": {"role": "control_plane"},
                "k8s-cp-2": {"role": "control_plane", "az": "az-c"},
                "k8s-cp-3": {"role": "control_plane"},
                "k8s-worker-2": {"role": "worker"},
                "gpu-1": {"role": "worker", "address": 60, "flavor": "g1.xlarge"},
            },
        },
        {},
    ),
    "top_master_with_retired_nodes": (
        {
            "cluster_name": "top",
            "num_control_plane": 3,
            "num_kube_nodes": 7,
            "worker_address_base": 40,
            "retired_nodes": ["k8s-cp-2", "k8s-cp-3", "k8s-worker-2"],
            "availability_zones": ["az-a", "az-b", "az-c"],
            "top_master": {"syndic_cidrs": ["198.51.100.7/32"], "syndics": ["dev", "prod"]},
        },
        {},
    ),
}

# The mock's values for what the cloud computes, set to terraform_layer's placeholders.
# Run-level overrides take precedence over the mock provider's
# (https://developer.hashicorp.com/terraform/language/tests/mocking#overrides).
OVERRIDES = {
    "module.bastion.module.server.openstack_networking_floatingip_v2.this": {
        "address": validate_pillar.BASTION_FLOATING_IP
    },
    "module.nodes.module.server.openstack_networking_floatingip_v2.this": {
        "address": validate_pillar.API_FLOATING_IP
    },
    "module.salt_master.module.server.openstack_networking_floatingip_v2.this": {
        "address": validate_pillar.MASTER_FLOATING_IP
    },
    "module.network.openstack_networking_subnet_v2.public": {
        "id": validate_pillar.PUBLIC_SUBNET_ID
    },
    "module.network.openstack_networking_subnet_v2.private": {
        "id": validate_pillar.PRIVATE_SUBNET_ID
    },
    "module.nodes.module.server.openstack_networking_port_v2.admin": {
        "all_fixed_ips": [validate_pillar.API_ADMIN_IP]
    },
}


def hcl(value):
    """A JSON value as an HCL expression: HCL's object constructor takes ':' as well as '='
    (https://github.com/hashicorp/hcl/blob/main/hclsyntax/spec.md#collection-values)."""
    text = json.dumps(value)
    # In HCL strings these start a template: none of the values here needs them.
    assert "${" not in text and "%{" not in text, text
    return text


def tftest(pillar_vars, other_vars, layer_file):
    assignments = "\n".join(
        f"    {name} = {hcl(value)}" for name, value in {**pillar_vars, **other_vars}.items()
    )
    overrides = "".join(
        f"\n  override_resource {{\n    target = {target}\n    values = {hcl(values)}\n  }}\n"
        for target, values in OVERRIDES.items()
    )
    return (
        'mock_provider "openstack" {\n  source = "./tests/mocks"\n}\n\n'
        'run "salt_pillar" {\n  command = apply\n\n'
        f"  variables {{\n{assignments}\n  }}\n{overrides}\n"
        "  assert {\n"
        f"    condition     = yamldecode(output.salt_pillar) == yamldecode(file({hcl(layer_file)}))\n"
        '    error_message = "TERRAFORM-PILLAR-BEGIN${output.salt_pillar}TERRAFORM-PILLAR-END"\n'
        "  }\n}\n"
    )


@pytest.fixture(scope="module")
def compared(tf, terraform_workdir, tmp_path_factory):
    """Per case: the Python layer, and `terraform test`'s status and diagnostics for it."""
    directory = terraform_workdir / TEST_DIRECTORY
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    # The variables every test starts from (external network, image, keys), as
    # terraform/tests/*.tftest.hcl get them.
    shutil.copy(TERRAFORM_DIR / "tests" / "terraform.tfvars", directory / "terraform.tfvars")
    inputs_dir = tmp_path_factory.mktemp("pillar-layer")
    layers = {}
    for name, (pillar_vars, other_vars) in CASES.items():
        var_file = inputs_dir / f"{name}.tfvars.json"
        var_file.write_text(json.dumps(pillar_vars))
        evaluated = validate_pillar.inputs.evaluate(
            TERRAFORM_DIR, [var_file], only=validate_pillar.pillar_variables()
        )
        layers[name] = validate_pillar.terraform_layer(evaluated.values, evaluated.nodes)
        layer_file = inputs_dir / f"{name}.yaml"
        # As check_environment writes _from_terraform.sls.
        layer_file.write_text(yaml.safe_dump(layers[name], sort_keys=True))
        (directory / f"{name}.tftest.hcl").write_text(
            tftest(pillar_vars, other_vars, str(layer_file))
        )
    result = tf.test(json=True, test_directory=TEST_DIRECTORY)
    events = result.value if isinstance(result.value, list) else []
    if not events:
        pytest.fail(f"terraform test gave no events:\n{result.value}\n{result.error}")
    results = {}
    for name in CASES:
        test_file = f"{TEST_DIRECTORY}/{name}.tftest.hcl"
        statuses = [
            e["test_run"]["status"]
            for e in events
            if e.get("type") == "test_run"
            and e["test_run"].get("path") == test_file
            and e["test_run"].get("progress") == "complete"
        ]
        diagnostics = [
            e["diagnostic"]
            for e in events
            if e.get("type") == "diagnostic" and e.get("@testfile") == test_file
        ]
        results[name] = (layers[name], statuses, diagnostics)
    return results


@pytest.mark.parametrize("case", CASES)
def test_terraform_layer_is_terraforms_salt_pillar(compared, case):
    layer, statuses, diagnostics = compared[case]
    if statuses == ["pass"]:
        return
    details = [d.get("detail", "") for d in diagnostics]
    terraform = [
        d.split("TERRAFORM-PILLAR-BEGIN", 1)[1].split("TERRAFORM-PILLAR-END", 1)[0]
        for d in details
        if "TERRAFORM-PILLAR-BEGIN" in d
    ]
    if not terraform:
        pytest.fail(
            f"terraform test did not pass ({statuses}): "
            + "\n".join(f"{d.get('summary')}: {d.get('detail')}" for d in diagnostics)
        )
    ours = yaml.safe_dump(layer, sort_keys=True).splitlines()
    theirs = yaml.safe_dump(yaml.safe_load(terraform[0]), sort_keys=True).splitlines()
    diff = "\n".join(
        difflib.unified_diff(
            theirs, ours, "terraform salt_pillar", "validate_pillar.terraform_layer", lineterm=""
        )
    )
    pytest.fail(f"terraform_layer differs from Terraform's salt_pillar for {case}:\n{diff}")
