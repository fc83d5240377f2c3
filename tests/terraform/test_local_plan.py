"""
The local cloud writes the pillar and outputs Terraform would: for the same variables,
``terraform test`` (real provider schema, mocked API, each floating IP overridden with the
host's public address, which is what a floating IP is on the local cloud) must produce
exactly what ``kos.local.plan`` computes.
"""

import json
import shutil

import yaml

from kos import inputs
from kos.local import plan

VARIABLES = {
    "cluster_name": "rehearsal",
    "external_network_name": "local",
    "base_image": "debian-12-local",
    "deploy_domain_name": "stage.example.org",
    "deploy_user": "ops",
    "ssh_public_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKosDeployKeyForTestsOnly kos@ci"],
    "ssh_allowed_cidrs": ["10.240.0.0/24"],
    "kubernetes_distribution": "kubeadm",
    "num_control_plane": 3,
    "num_kube_nodes": 5,
    "availability_zones": ["az-a", "az-b"],
    "public_cidr": "10.240.0.0/24",
    "private_cidr": "10.241.0.0/24",
    "users": [{"name": "alice", "ssh_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAliceKeyForTests a@b"], "sudo": True},
              {"name": "bob"}],
}


def test_local_plan_matches_terraform(tf, terraform_workdir, tmp_path):
    var_file = tmp_path / "rehearsal.tfvars.json"
    var_file.write_text(json.dumps(VARIABLES))
    values = inputs.evaluate(terraform_workdir, [var_file]).values
    expected = plan.outputs(values)
    first = next(iter(expected["kubernetes_nodes"]))
    directory = terraform_workdir / "kos-local"
    directory.mkdir(exist_ok=True)
    variables = "\n".join(f"  {k} = {json.dumps(v)}" for k, v in VARIABLES.items())

    def decoded(value):
        return f"jsondecode({json.dumps(json.dumps(value))})"

    (directory / "local_plan.tftest.hcl").write_text(
        'mock_provider "openstack" {\n  source = "./tests/mocks"\n'
        "  override_resource {\n    target = module.bastion.openstack_networking_floatingip_v2.this\n"
        f'    values = {{ address = "{expected["bastion_floating_ip"]}" }}\n  }}\n'
        "  override_resource {\n    target = module.nodes.openstack_networking_floatingip_v2.node\n"
        f'    values = {{ address = "{expected["kubernetes_nodes"][first]["floating_ip"]}" }}\n  }}\n}}\n\n'
        f"variables {{\n{variables}\n}}\n\n"
        'run "local_plan" {\n  command = apply\n'
        + "".join(
            f"  assert {{\n    condition = {cond}\n    error_message = \"{name} differs from kos.local.plan\"\n  }}\n"
            for name, cond in [
                ("salt_pillar", f"yamldecode(output.salt_pillar) == {decoded(yaml.safe_load(expected['salt_pillar']))}"),
                ("minions", f"output.minions == {decoded(expected['minions'])}"),
                ("kubernetes_nodes", f"output.kubernetes_nodes == {decoded(expected['kubernetes_nodes'])}"),
                ("addresses", " && ".join(
                    f"output.{k} == {json.dumps(expected[k])}"
                    for k in ("bastion_floating_ip", "salt_master_private_ip", "api_floating_ip",
                              "ssh_user", "cluster_name"))),
            ]
        )
        + "}\n"
    )
    try:
        events = tf.test(json=True, test_directory="kos-local").value
    finally:
        # the working copy is shared: terraform fmt -check runs on it later
        shutil.rmtree(directory)
    failures = [
        " ".join(e["diagnostic"].get("detail", e["diagnostic"].get("summary", "")).split())[:1500]
        for e in events
        if e.get("type") == "diagnostic" and e["diagnostic"].get("severity") == "error"
    ]
    summaries = [e["test_summary"] for e in events if e.get("type") == "test_summary"]
    assert not failures, failures
    assert summaries and summaries[0]["passed"] == 1, summaries
