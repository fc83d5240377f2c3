"""
kos: from an OpenStack project to a converged Kubernetes cluster, and back.

Thin click commands over the idempotent, recorded steps in ``kos.steps``. Progress goes
to stderr, data to stdout. Exit codes:

0 success; 1 unexpected error (bug); 2 usage error; 3 bad input (nothing changed);
4 preflight failed; 5 Terraform failed; 6 converge failed; 7 cleanup left resources;
8 aborted (confirmation declined; use --yes); 9 status: cluster degraded; 10 drift found;
11 another kos run holds the cluster's lock; 130 interrupted (Ctrl-C, SIGTERM).
"""

import json
import sys
from importlib import metadata
from pathlib import Path

import click

from . import errors, tables, ui
from . import plan as plan_mod
from . import inputs as inputs_mod
from . import terraform as terraform_mod
from .backends import clouds
from .steps import backup as backup_steps
from .steps import ccm_credential, certificates, deployment
from .steps import converge as converge_steps
from .steps import down as down_steps
from .steps import kubeconfig as kubeconfig_steps
from .steps import nodes as node_steps
from .steps import status as status_steps
from .steps import up as up_steps
from .steps import upgrade as upgrade_steps
from .ssh import take_interrupts

DEFAULT_STATE_DIR = ".kos"


def _default_terraform_dir():
    here = Path.cwd() / "terraform"
    if (here / "variables.tf").exists():
        return here
    return Path(__file__).resolve().parents[2] / "terraform"


def common_options(func):
    decorators = [
        click.option(
            "--var-file",
            "var_files",
            multiple=True,
            type=click.Path(dir_okay=False),
            help="Terraform variables file (.tfvars or .tfvars.json); repeatable. terraform.tfvars, "
            "*.auto.tfvars and TF_VAR_* are read too.",
        ),
        click.option(
            "--terraform-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=_default_terraform_dir,
            show_default="./terraform",
            help="The repository's Terraform root module.",
        ),
        click.option(
            "--state-dir",
            envvar="KOS_STATE_DIR",
            type=click.Path(file_okay=False, path_type=Path),
            default=DEFAULT_STATE_DIR,
            show_default=True,
            help="Where kos records progress per cluster (<state-dir>/<cluster>/).",
        ),
        click.option(
            "--cloud",
            type=click.Choice(sorted(clouds())),
            default="openstack",
            show_default=True,
            help="Where the machines come from (the clouds installed: group kos.clouds).",
        ),
        click.option(
            "--os-cloud",
            default=None,
            help="Entry of clouds.yaml to use (default: OS_CLOUD, else the OS_* variables).",
        ),
        click.option(
            "--ssh-port",
            envvar="KOS_SSH_PORT",
            type=click.IntRange(1, 65535),
            default=22,
            show_default=True,
            help="SSH port of the bastion and the salt master (pillar core:sshd:port).",
        ),
        click.option(
            "--env",
            "env",
            envvar="KOS_ENV",
            default=None,
            help="Environment: its Terraform variables (environments/NAME/*.tfvars, before any "
            "--var-file), its state directory (<state-dir>/env_NAME/) and, in a GitLab job, "
            "its Terraform state (named NAME). Default: KOS_ENV.",
        ),
        click.option(
            "--known-hosts",
            envvar="KOS_KNOWN_HOSTS",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="Pinned host keys of the bastion and the master (known_hosts lines); they "
            "replace the state directory's known_hosts. Default: KOS_KNOWN_HOSTS.",
        ),
        click.option(
            "--trust-unverified",
            envvar="KOS_TRUST_UNVERIFIED",
            is_flag=True,
            default=False,
            help="Accept minion keys and SSH host keys that no server console vouched for "
            "(trust on first use: a cloud without the console-log API, --outputs runs). A key "
            "that differs from its console's is refused regardless. Default: "
            "KOS_TRUST_UNVERIFIED.",
        ),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def outputs_option(func):
    return click.option(
        "--outputs",
        "outputs_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="Use this saved `terraform output -json` document instead of asking Terraform.",
    )(func)


def wait_minions_option(func):
    return click.option(
        "--wait-minions",
        type=click.IntRange(0),
        default=900,
        show_default=True,
        help="Seconds to wait for the minions' keys.",
    )(func)


def yes_option(func):
    return click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (CI).")(func)


def _environment(terraform_dir, name):
    """Select environment ``name``: check it against the others, point Terraform at its state."""
    root = terraform_dir.parent / "environments"
    env = inputs_mod.select_environment(root, name)
    values = inputs_mod.check_environments(terraform_dir, root, env)
    backend = terraform_mod.use_environment_state(name)
    layer = inputs_mod.pillar_layer(values["deploy_domain_name"])
    missing = ("" if (deployment.REPO / "pillar" / layer).exists()
               else " (not there: defaults only)")
    ui.info(
        f"environment {name}: cluster {values['cluster_name']}, pillar layer {layer}{missing}, "
        f"{backend} Terraform state"
    )
    return env


def _settings(**kw):
    terraform_dir = Path(kw["terraform_dir"]).resolve()
    state_root = Path(kw["state_dir"]).resolve()
    # Terraform runs in kos's working copy, not here: a relative path would not reach it.
    var_files = [str(Path(p).expanduser().resolve()) for p in kw.get("var_files") or ()]
    if kw.get("env"):
        env = _environment(terraform_dir, kw["env"])
        var_files = [str(p) for p in env.var_files] + var_files
        state_root = state_root / env.state_dir_name
    return deployment.Settings(
        terraform_dir=terraform_dir,
        state_root=state_root,
        var_files=var_files,
        env=kw.get("env"),
        known_hosts=kw.get("known_hosts"),
        trust_unverified=bool(kw.get("trust_unverified")),
        cloud=kw["cloud"],
        os_cloud=kw.get("os_cloud"),
        outputs_file=kw.get("outputs_file"),
        ssh_port=kw.get("ssh_port", 22),
        wait_minions=kw.get("wait_minions", 900),
        # up and converge may meet VMs still booting; the reads of a running cluster do not.
        connect_wait=kw.get("wait_minions", 0),
        replace=tuple(kw.get("replace") or ()),
    )


def _confirmer(yes):
    def confirm(action):
        if yes:
            return
        if not sys.stdin.isatty():
            raise errors.Aborted(f"refusing to {action} without confirmation", fix="pass --yes")
        if not click.confirm(f"{action[0].upper()}{action[1:]}?", err=True):
            raise errors.Aborted(f"did not {action}")

    return confirm


def _version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kos")
    except PackageNotFoundError:
        return "0.1.0+source"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=_version(), prog_name="kos", message="%(prog)s %(version)s")
def cli():
    """Kubernetes on OpenStack, converged by Salt."""


@cli.command()
@common_options
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON on stdout.")
def preflight(as_json, **kw):
    """Check credentials, image, flavors, network, quotas and ssh-agent; create nothing."""
    dep = deployment.Deployment(_settings(**kw))

    def print_json(findings):
        ui.data(
            [{"check": f.check, "ok": f.ok, "message": f.message, "fix": f.fix} for f in findings]
        )

    up_steps.preflight(dep, report=print_json if as_json else None)
    return errors.EXIT_OK


@cli.command()
@common_options
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default="plan",
    show_default=True,
    help="Directory for plan.txt and changes.json (no secrets in either).",
)
@click.option(
    "--plan-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also save the plan for `kos apply --plan-file` (encrypted with KOS_PLAN_KEY when a "
    "sensitive variable is set), and <out>/report.json, GitLab's Terraform report.",
)
def plan(out_dir, plan_file, **kw):
    """What a change will do: Terraform's adds, changes and destroys, and which nodes Salt
    will converge and why (new node, changed pillar layer, ...); the plan file with
    --plan-file."""
    dep = deployment.Deployment(_settings(**kw))
    if plan_file:
        terraform_mod.check_plan_can_be_saved(dep.inputs)
    # Terraform's plan file holds every variable's value: it does not stay in the state dir.
    binary = dep.state.path / "terraform" / "plan.tfplan"
    try:
        with ui.step("terraform plan"):
            changes, text = dep.backend.plan(dep.inputs, binary)
        doc = plan_mod.terraform_of(dep.backend).show_plan(binary)
        summary = {"cluster": dep.cluster, "changes": len(changes)}
        if plan_file:
            saved = terraform_mod.save_plan(binary, plan_file)
            summary.update(plan_file=str(plan_file), encrypted=saved["encrypted"])
    finally:
        binary.unlink(missing_ok=True)
    with ui.step("which nodes Salt will converge, and why"):
        diff = plan_mod.plan_report(dep, doc)
    report_text = plan_mod.format_plan(diff["terraform"], diff["salt"], diff["salt_unknown"])
    for line in report_text.splitlines():
        ui.detail(line)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "plan.txt").write_text(text)
    (out_dir / "changes.json").write_text(json.dumps(changes, indent=2) + "\n")
    (out_dir / "diff.json").write_text(json.dumps(diff, indent=2) + "\n")
    (out_dir / "diff.txt").write_text(report_text + "\n")
    summary["plan"] = str(out_dir / "plan.txt")
    summary["terraform"] = {k: len(v) for k, v in diff["terraform"].items()}
    summary["salt"] = None if diff["salt"] is None else {
        k: sorted(m for m, e in diff["salt"].items() if e["converge"] == k)
        for k in ("highstate", "learn", "leaves")}
    if plan_file:
        report = terraform_mod.report(changes)
        (out_dir / "report.json").write_text(json.dumps(report) + "\n")
        summary.update(report)
    ui.data(summary)
    return errors.EXIT_OK


@cli.command()
@common_options
@yes_option
@click.option(
    "--plan-file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The plan `kos plan --plan-file` saved (and a person reviewed).",
)
def apply(plan_file, yes, **kw):
    """terraform apply of exactly a saved plan; refuses changed variables or a moved state."""
    dep = deployment.Deployment(_settings(**kw))
    summary = terraform_mod.apply_saved_plan(dep, plan_file, _confirmer(yes))
    ui.data({"cluster": dep.cluster, "applied": summary or {}})
    return errors.EXIT_OK


@cli.command()
@common_options
@yes_option
@wait_minions_option
@click.option(
    "--replace",
    "replace",
    multiple=True,
    metavar="HOSTNAME",
    help="Rebuild this server (bastion, salt, k8s-worker-2, ...): a node leaves the cluster "
    "first and joins again from its new server; terraform apply -replace; its name, addresses "
    "and volume stay. Not the first control plane. Repeatable.",
)
def up(yes, **kw):
    """Preflight, terraform apply, converge; re-running resumes where it stopped."""
    dep = deployment.Deployment(_settings(**kw))
    with deployment.locked(dep):
        outputs = up_steps.up(dep, _confirmer(yes))
    ui.data(
        {
            "cluster": dep.cluster,
            "bastion": outputs["bastion_floating_ip"],
            "api": outputs["api_floating_ip"],
        }
    )
    return errors.EXIT_OK


@cli.command()
@common_options
@outputs_option
@wait_minions_option
@click.option(
    "--exclude",
    "exclude",
    multiple=True,
    metavar="MINION",
    help="Leave this minion out (e.g. one that is down); repeatable.",
)
@click.option(
    "--limit",
    "limit",
    multiple=True,
    metavar="MINION",
    help="Converge only this minion; repeatable.",
)
def converge(exclude, limit, **kw):
    """Accept the expected minions' keys, push pillar, sync, run orch.deploy."""
    dep = deployment.Deployment(_settings(**kw), need_inputs=False)
    with deployment.locked(dep):
        converge_steps.converge(dep, always=True, exclude=exclude, limit=limit)
    ui.data({"cluster": dep.cluster, "converged": True})
    return errors.EXIT_OK


def report_options(what):
    """The options of a command that reports on the deployed cluster: printed as ``what``
    for a person, or as JSON."""

    def decorate(func):
        func = click.option("--json", "as_json", is_flag=True, help=f"Print {what} as JSON.")(func)
        return common_options(outputs_option(func))

    return decorate


def _report(kw, as_json, build, print_text):
    """``build(deployment)``'s report, printed as JSON or by ``print_text``; the report."""
    doc = build(deployment.Deployment(_settings(**kw), need_inputs=False))
    if as_json:
        ui.data(doc)
    else:
        print_text(doc)
    return doc


@cli.command()
@report_options("the report")
def drift(as_json, **kw):
    """What state.highstate test=True would change, and hand edits under /srv; exit 10 if any."""
    from . import drift as drift_mod

    doc = _report(kw, as_json, drift_mod.drift,
                  lambda doc: ui.data(drift_mod.format_report(doc), as_json=False))
    return errors.EXIT_DRIFT if doc["drift"] else errors.EXIT_OK


@cli.command()
@report_options("the status")
def status(as_json, **kw):
    """Every node's role, salt reachability, last highstate and Kubernetes membership."""
    doc = _report(kw, as_json, status_steps.status, tables.status)
    return errors.EXIT_OK if doc["healthy"] else errors.EXIT_DEGRADED


@cli.command()
@common_options
@outputs_option
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write it (default: <state-dir>/<cluster>/kubeconfig).",
)
@click.option(
    "--server", help="API URL to put in it (default: https://<api floating IP>:<API port>)."
)
def kubeconfig(output, server, **kw):
    """Fetch the admin kubeconfig over SSH (mode 0600; kos down removes it), pointing at
    the API's floating IP."""
    dep = deployment.Deployment(_settings(**kw), need_inputs=False)
    path, server = kubeconfig_steps.kubeconfig(dep, output or dep.state.path / "kubeconfig", server)
    ui.ok(f"kubeconfig for {server} written to {path} (mode 0600)")
    ui.data(str(path), as_json=False)
    return errors.EXIT_OK


def _day_two(kw, step, *args, **kwargs):
    """A day-two step on a running cluster, under its lock; prints what the step did."""
    dep = deployment.Deployment(_settings(**kw), need_inputs=False)
    with deployment.locked(dep):
        done = step(dep, *args, **kwargs)
    ui.data({"cluster": dep.cluster, **done})
    return errors.EXIT_OK


@cli.command("rotate-ccm-credential")
@common_options
def rotate_ccm_credential(**kw):
    """Replace the cloud-controller-manager's application credential (kubeadm)."""
    return _day_two(kw, ccm_credential.rotate_ccm_credential)


@cli.command("renew-certificates")
@common_options
@outputs_option
@click.option("--force", is_flag=True,
              help="Renew every certificate, not only those within kos:certificates:warn_days.")
def renew_certificates(force, **kw):
    """Renew the control planes' Kubernetes certificates, one control plane at a time
    (salt-run state.orchestrate orch.certificates)."""
    return _day_two(kw, certificates.renew_certificates, force=force)


@cli.command()
@common_options
@outputs_option
@click.option("--list", "list_only", is_flag=True,
              help="Only list the backups the salt master keeps.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def backup(list_only, as_json, **kw):
    """Back up the cluster's datastore (kubeadm: an etcd snapshot) to the salt master, sealed
    so only a control plane can open it (salt-run state.orchestrate orch.backup)."""
    dep = deployment.Deployment(_settings(**kw), need_inputs=False)
    with deployment.locked(dep):
        done = backup_steps.backup(dep, list_only=list_only)
    if as_json:
        ui.data({"cluster": dep.cluster, **done})
    else:
        tables.backups(done)
    return errors.EXIT_OK


@cli.command()
@common_options
@outputs_option
@yes_option
@click.option("--backup", "name", metavar="NAME",
              help="The backup to restore (kos backup --list); default: the newest.")
def restore(name, yes, **kw):
    """Put the cluster's datastore back as a backup left it, on every control plane
    (salt-run state.orchestrate orch.restore pillar='{"backup": NAME}')."""
    return _day_two(kw, backup_steps.restore, _confirmer(yes), name=name)


@cli.command()
@common_options
@outputs_option
@click.option("--version", "version", metavar="VERSION",
              help="microk8s: the channel (1.32/stable) or track (1.32) to move to; default: "
              "microk8s:channel of the pillar. kubeadm: the release (v1.32.1); default: "
              "kubeadm:version of the pillar. One minor version at a time.")
def upgrade(version, **kw):
    """Move the cluster to another Kubernetes version, one node at a time, each drained
    before and uncordoned after (salt-run state.orchestrate orch.upgrade)."""
    return _day_two(kw, upgrade_steps.upgrade, version=version)


@cli.command()
@common_options
@outputs_option
@click.argument("nodes", nargs=-1, required=True, metavar="NODE...")
def forget(nodes, **kw):
    """Forget nodes whose servers are gone: the cluster removes them (orch.remove with
    force) and the salt master deletes their keys. NODE is a host name (k8s-worker-3) or
    a minion id. A node Terraform still lists is retired by removing it from kubernetes_nodes
    instead."""
    return _day_two(kw, node_steps.forget, list(nodes))


@cli.command()
@common_options
@yes_option
def down(yes, **kw):
    """Drain nodes, remove what Kubernetes left in the cloud, terraform destroy."""
    dep = deployment.Deployment(_settings(**kw))
    with deployment.locked(dep):
        down_steps.down(dep, _confirmer(yes))
    ui.data({"cluster": dep.cluster, "destroyed": True})
    return errors.EXIT_OK


# Commands a cloud adds (the entry points of kos.commands), found as the clouds are.
for _command in metadata.entry_points(group="kos.commands"):
    cli.add_command(_command.load(), _command.name)


def main(argv=None):
    # SIGTERM takes the path of Ctrl-C: what kos started is stopped or waited for.
    take_interrupts()
    try:
        code = cli.main(args=argv, prog_name="kos", standalone_mode=False)
    except click.exceptions.Abort as exc:
        # click turns Ctrl-C into Abort; an interrupt is not a declined confirmation.
        if isinstance(exc.__cause__, KeyboardInterrupt):
            ui.error("interrupted; re-run the same command to resume")
            code = errors.EXIT_INTERRUPTED
        else:
            ui.error("aborted")
            code = errors.EXIT_ABORTED
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except errors.KosError as exc:
        ui.error(exc.problem, exc.fix, exc.details)
        code = exc.exit_code
    except KeyboardInterrupt:
        ui.error("interrupted; re-run the same command to resume")
        code = errors.EXIT_INTERRUPTED
    sys.exit(code if isinstance(code, int) else errors.EXIT_OK)


if __name__ == "__main__":
    main()
