"""
The per-cluster state directory ``<state root>/<cluster>/``: what each step did, so an
interrupted ``kos up`` picks up where it stopped. It holds progress records, the generated
ssh_config, the hosts' keys and the Terraform working copy; never a secret (no token, no
password, no private key: credentials stay in clouds.yaml/OS_*, ssh-agent and the masked
CI variables).
"""

import hashlib
import json
import os
import time
from pathlib import Path

from . import ui

STEPS_FILE = "steps.json"
FORMAT = 1


def fingerprint(*parts):
    """A stable digest of JSON-able inputs: a step re-runs when its inputs change."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class StateDir:
    def __init__(self, root, cluster):
        self.root = Path(root)
        self.cluster = cluster
        self.path = self.root / cluster

    def ensure(self):
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.path, 0o700)
        return self.path

    def file(self, name):
        return self.path / name

    def steps(self):
        return Steps(self)


class Steps:
    """
    Records of ``name -> {status, fingerprint, started, finished, detail, error}``.

    ``run`` skips a step recorded ``done`` with the same fingerprint, so re-running
    ``kos up`` after a failure resumes at the step that failed and repeats nothing that
    already succeeded for the same inputs.
    """

    def __init__(self, state):
        self.state = state
        self.path = state.path / STEPS_FILE
        self.records = self._load()
        self._started = {}

    def _load(self):
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError:
            ui.warn(f"{self.path} is unreadable; starting the step records afresh")
            return {}
        return doc.get("steps", {}) if doc.get("format") == FORMAT else {}

    def _save(self):
        self.state.ensure()
        doc = {"format": FORMAT, "cluster": self.state.cluster, "steps": self.records}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path)

    def get(self, name):
        return self.records.get(name, {})

    def status(self, name):
        return self.get(name).get("status")

    def is_done(self, name, fp):
        rec = self.get(name)
        return rec.get("status") == "done" and rec.get("fingerprint") == fp

    def begin(self, name, fp):
        self.records[name] = {"status": "running", "fingerprint": fp, "started": _now()}
        self._started[name] = time.monotonic()
        self._save()

    def finish(self, name, detail=None):
        rec = self.records.setdefault(name, {})
        rec.update(status="done", finished=_now())
        if name in self._started:
            rec["seconds"] = round(time.monotonic() - self._started.pop(name), 1)
        if detail:
            rec["detail"] = detail
        rec.pop("error", None)
        self._save()

    def failed(self, name, error):
        rec = self.records.setdefault(name, {})
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        rec.update(status="failed", finished=_now(), error=first_line[:300])
        self._save()

    def forget(self, *names):
        for name in names:
            self.records.pop(name, None)
        self._save()

    def run(self, name, fp, title, func, *, always=False, quiet_failure=False):
        """
        Run ``func()`` as step ``name`` unless it is already done for ``fp``.

        ``func`` may return a small JSON-able dict kept as the step's detail (never a
        secret); a skipped step returns the detail recorded last time. With
        ``quiet_failure`` a failure leaves no trace on disk (a preflight that rejects the
        inputs must not change anything, locally included).
        """
        if not always and self.is_done(name, fp):
            ui.ok(f"{title}: already done ({self.get(name).get('finished')}), skipped")
            return self.get(name).get("detail")
        if not quiet_failure:
            self.begin(name, fp)
        else:
            self._started[name] = time.monotonic()
        try:
            with ui.step(title):
                detail = func()
        except BaseException as exc:
            if not quiet_failure:
                self.failed(name, exc)
            raise
        if quiet_failure:
            self.records[name] = {"fingerprint": fp, "started": _now()}
        self.finish(name, detail if isinstance(detail, dict) else None)
        return detail
