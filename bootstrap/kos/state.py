"""
The per-cluster state directory ``<state root>/<cluster>/``: what each step did, so an
interrupted ``kos up`` picks up where it stopped. It holds progress records, the generated
ssh_config, the hosts' keys, the Terraform working copy and, while a kos command changes the
cluster, its lock; never a secret (no token, no password, no private key: credentials stay
in clouds.yaml/OS_*, ssh-agent and the masked CI variables).
"""

import getpass
import hashlib
import json
import os
import shlex
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from . import ui
from .errors import Interrupted, Locked
from .lock import FileLock, LockHeld

STEPS_FILE = "steps.json"
LOCK_FILE = "lock"
FORMAT = 1


def fingerprint(*parts):
    """A stable digest of JSON-able inputs: a step re-runs when its inputs change."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _now():
    # milliseconds: steps that start and end within one second still sort in the order they ran
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def holder(command=None):
    """Who runs: what a lock says about its holder (locally and on the salt master)."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "user": getpass.getuser(),
        "command": command or shlex.join(["kos", *sys.argv[1:]]),
        "started": _now(),
    }


def describe_holder(found):
    if not found:
        return "a run that is just starting (its lock names no holder yet)"
    return (
        f"`{found.get('command', 'kos')}` (PID {found.get('pid', '?')} on host "
        f"{found.get('host', '?')}, user {found.get('user', '?')}), started "
        f"{found.get('started', '?')}"
    )


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

    @contextmanager
    def locked(self, who):
        """
        One kos run per cluster on this machine: hold ``<state dir>/lock`` (naming ``who``)
        for the block. A lock whose holder died is taken over, and said so.
        """
        created = [d for d in (self.path, self.root) if not d.exists()]
        self.ensure()
        lock = FileLock(str(self.path / LOCK_FILE))
        try:
            stale = lock.acquire(who)
        except LockHeld as exc:
            raise Locked(
                f"another kos run is working on cluster {self.cluster}: "
                f"{describe_holder(exc.holder)}",
                fix="wait for it to end, then re-run (its lock: "
                f"{self.path / LOCK_FILE}; kos takes over the lock of a run that died)",
            ) from None
        if stale:
            ui.warn(
                f"a kos run ended without releasing cluster {self.cluster}'s lock: "
                f"{describe_holder(stale)}; taken over"
            )
        try:
            yield
        finally:
            lock.release()
            # a run that changed nothing (rejected input) leaves no trace
            for directory in created:
                try:
                    directory.rmdir()
                except OSError:
                    break


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

    def failed(self, name, error, status="failed"):
        rec = self.records.setdefault(name, {})
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        rec.update(status=status, finished=_now(), error=first_line[:300])
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
        except (KeyboardInterrupt, Interrupted) as exc:
            if not quiet_failure:
                self.failed(name, exc if str(exc) else "interrupted", status="interrupted")
            raise
        except BaseException as exc:
            if not quiet_failure:
                self.failed(name, exc)
            raise
        if quiet_failure:
            self.records[name] = {"fingerprint": fp, "started": _now()}
        self.finish(name, detail if isinstance(detail, dict) else None)
        return detail
