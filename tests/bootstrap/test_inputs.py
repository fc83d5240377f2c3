"""
kos reads the root module's ``variable`` blocks with an HCL parser (python-hcl2) and lets
Terraform evaluate the var files against them (kos.inputs). Blocks ``terraform fmt`` has not
touched, heredocs and comments holding braces are read as Terraform reads them.
"""

import textwrap
from pathlib import Path

import pytest
from kos import inputs
from kos.errors import InputError

pytestmark = pytest.mark.terraform


def evaluate(tmp_path, variables_tf, tfvars=""):
    module = tmp_path / "module"
    module.mkdir()
    (module / "variables.tf").write_text(variables_tf)
    var_file = tmp_path / "site.tfvars"
    var_file.write_text(tfvars)
    return inputs.evaluate(module, [var_file])


# Layouts the regular expressions kos read blocks with before got wrong, and the values
# Terraform gives them.
LAYOUTS = {
    "a closing brace out of column 0 ends its own block": (
        """
        variable "region" {
          type    = string
          default = "north"
          }
        variable "zones" {
          type    = number
          default = 2
        }
        """,
        "zones = 3\n",
        {"region": "north", "zones": 3},
    ),
    "a heredoc holding a brace in column 0": (
        """
        variable "motd" {
          type        = string
          description = <<EOT
        Shown at login.
        }
        EOT
          default     = "hello"
        }
        """,
        "",
        {"motd": "hello"},
    ),
    "a commented-out variable is not a variable": (
        """
        /*
        variable "retired" {
          type = string
        }
        */
        variable "kept" {
          type    = string
          default = "yes" # } closes nothing
        }
        """,
        "",
        {"kept": "yes"},
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_variable_blocks_are_read_as_terraform_reads_them(tmp_path, layout):
    variables_tf, tfvars, values = LAYOUTS[layout]
    assert evaluate(tmp_path, textwrap.dedent(variables_tf), tfvars).values == values


def test_a_sensitive_variable_with_a_comment_stays_inside_terraform(tmp_path):
    got = evaluate(
        tmp_path,
        'variable "name" {\n  type = string\n}\n'
        'variable "token" {\n  type      = string\n  default   = null\n'
        "  sensitive = true # never printed\n}\n",
        'name = "a"\ntoken = "s3cret"\n',
    )
    assert got.values == {"name": "a"}
    assert got.sensitive_given == {"token"}
    assert "s3cret" not in repr(got)


def test_a_module_that_is_not_hcl_names_the_file(tmp_path):
    with pytest.raises(InputError) as bad:
        evaluate(tmp_path, 'variable "a" {\n  type = string\n')
    assert f"{tmp_path / 'module' / 'variables.tf'}: not valid HCL" in str(bad.value)


REPO = Path(__file__).resolve().parents[2]
# What every deployment must set, as terraform/tests give it.
REQUIRED = REPO / "terraform" / "tests" / "terraform.tfvars"


def deployment_inputs(tmp_path, tfvars):
    var_file = tmp_path / "nodes.tfvars"
    var_file.write_text(textwrap.dedent(tfvars))
    return inputs.evaluate(REPO / "terraform", [REQUIRED, var_file])


def test_the_nodes_are_what_terraform_makes_of_the_variables(tmp_path):
    """One node set for Terraform and kos: the counters of an older cluster and the map of
    the same names give the same nodes, addresses and zones."""
    counters = deployment_inputs(tmp_path, """
        num_control_plane  = 3
        num_kube_nodes     = 5
        retired_nodes      = ["k8s-worker-1"]
        availability_zones = ["az-a", "az-b"]
    """)
    assert counters.nodes == {
        "k8s-cp-1": {"role": "control_plane", "address": 20, "az": "az-a", "flavor": None,
                     "boot_volume": None},
        "k8s-cp-2": {"role": "control_plane", "address": 21, "az": "az-b", "flavor": None,
                     "boot_volume": None},
        "k8s-cp-3": {"role": "control_plane", "address": 22, "az": "az-a", "flavor": None,
                     "boot_volume": None},
        "k8s-worker-2": {"role": "worker", "address": 31, "az": "az-b", "flavor": None,
                     "boot_volume": None},
    }
    assert counters.node_count == 4
    assert counters.control_planes == ["k8s-cp-1", "k8s-cp-2", "k8s-cp-3"]
    mapped = deployment_inputs(tmp_path, """
        availability_zones = ["az-a", "az-b"]
        kubernetes_nodes = {
          k8s-cp-1     = { role = "control_plane" }
          k8s-cp-2     = { role = "control_plane" }
          k8s-cp-3     = { role = "control_plane" }
          k8s-worker-2 = { role = "worker" }
        }
    """)
    assert mapped.nodes == counters.nodes
    volumes = deployment_inputs(tmp_path, """
        boot_volumes = { worker = { size = 20 } }
        kubernetes_nodes = {
          k8s-cp-1     = { role = "control_plane" }
          k8s-worker-1 = { role = "worker" }
          k8s-worker-2 = { role = "worker", boot_volume = { size = 40, type = "ssd" } }
        }
    """)
    assert {name: node["boot_volume"] for name, node in volumes.nodes.items()} == {
        "k8s-cp-1": None, "k8s-worker-1": {"size": 20, "type": None},
        "k8s-worker-2": {"size": 40, "type": "ssd"}}


def test_a_bad_node_map_is_refused_naming_the_variable_and_the_fix(tmp_path):
    with pytest.raises(InputError) as err:
        deployment_inputs(tmp_path, """
            kubernetes_nodes = {
              k8s-cp-1 = { role = "control_plane" }
              k8s-cp-2 = { role = "control_plane" }
            }
        """)
    assert "nothing was created or changed" in err.value.problem
    assert any(d.startswith("kubernetes_nodes") and "odd number of control planes" in d
               for d in err.value.details), err.value.details
