"""
kos reads the root module's ``variable`` blocks with an HCL parser (python-hcl2) and lets
Terraform evaluate the var files against them (kos.inputs). Blocks ``terraform fmt`` has not
touched, heredocs and comments holding braces are read as Terraform reads them.
"""

import textwrap

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
