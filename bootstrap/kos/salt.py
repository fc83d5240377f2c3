"""
What kos asks of the salt master, over SSH: key acceptance, sync, orchestration, and the
reads behind ``kos status`` and ``kos kubeconfig``. Every call is the plain Salt CLI
(``salt-key``, ``salt``, ``salt-run``) with JSON output, as an operator would type it on
the master.

Trust model for minion keys: the master never auto-accepts. kos accepts exactly the minion
ids Terraform created (``terraform output minions``), each by its full id, and never
accepts any other pending key (it reports it). A pending key is trusted because only the
cluster's VMs reach the master's ports (private network; security group open to the
private CIDR only); kos does not compare key fingerprints out of band.
"""

import base64
import hashlib
import io
import json
import re
import shlex
import tarfile
import threading
import time
from pathlib import Path

from . import ui
from .errors import ConvergeError

MINION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")
PILLAR_FILE = "/srv/pillar/_from_terraform.sls"
EVENT_FUNS = {
    "saltutil.sync_all": "modules synced",
    "saltutil.refresh_pillar": "pillar refreshed",
    "kos.validate_pillar": "pillar valid",
    "mine.update": "mine updated",
    "state.highstate": "highstate",
    "state.apply": "highstate",
}


def _json(text, what):
    text = text.strip()
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        # --static prints one document; some runners print one per line.
        docs = {}
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    docs.update(json.loads(line))
                except ValueError:
                    pass
        if docs:
            return docs
        raise ConvergeError(f"unreadable JSON from {what}: {text[:300]}") from None


def failed_states(result):
    """``[(state id, comment)]`` for every failed state in one minion's state return."""
    if not isinstance(result, dict):
        return [("(no state run)", str(result)[:500])]
    failed = []
    for key, state in result.items():
        if isinstance(state, dict) and state.get("result") is False:
            failed.append((state.get("__id__", key), str(state.get("comment", "")).strip()))
    return failed


class SaltMaster:
    def __init__(self, ssh):
        self.ssh = ssh

    # -- raw calls ---------------------------------------------------------------

    def salt(self, targets, fun, *args, timeout=60, wait=600):
        cmd = ["salt", "--out=json", "--static", "--hide-timeout", f"--timeout={timeout}"]
        if isinstance(targets, (list, tuple)):
            cmd += ["-L", ",".join(targets)]
        else:
            cmd.append(targets)
        res = self.ssh.run([*cmd, fun, *args], timeout=wait, check=False)
        return _json(res.stdout, f"salt {fun}")

    def run(self, fun, *args, wait=3600):
        res = self.ssh.run(["salt-run", "--out=json", fun, *args], timeout=wait, check=False)
        return res, _json(res.stdout, f"salt-run {fun}")

    def lookup_jids(self, jids):
        """``[(jid, {minion: return})]``: every lookup in one SSH session."""
        if not jids:
            return []
        for jid in jids:
            if not re.fullmatch(r"[0-9]{20}", jid):
                raise ConvergeError(f"not a job id: {jid!r}")
        lookup = self.ssh.wrap(["salt-run", "--out=json", "--out-indent=-1", "jobs.lookup_jid"])
        script = "; ".join(f"echo '#jid {jid}'; {lookup} {jid}" for jid in jids)
        res = self.ssh.run(script, timeout=600, check=False)
        found, current = [], None
        for line in res.stdout.splitlines():
            if line.startswith("#jid "):
                current = line.split()[1]
            elif current and line.startswith("{"):
                try:
                    found.append((current, json.loads(line)))
                except ValueError:
                    pass
                current = None
        return found

    # -- keys --------------------------------------------------------------------

    def keys(self):
        res = self.ssh.run(["salt-key", "--out=json", "-L"])
        return _json(res.stdout, "salt-key -L")

    def wait_and_accept(self, expected, timeout=900, interval=2):
        """
        Wait until every expected minion has presented its key, accept exactly those,
        and report other pending keys without accepting them.
        """
        for mid in expected:
            if not MINION_ID.match(mid):
                raise ConvergeError(f"refusing minion id {mid!r}: not a plain host name")
        deadline = time.monotonic() + timeout
        announced = set()
        while True:
            keys = self.keys()
            accepted = set(keys.get("minions", []))
            pending = set(keys.get("minions_pre", []))
            rejected = set(keys.get("minions_rejected", [])) | set(keys.get("minions_denied", []))
            bad = rejected & set(expected)
            if bad:
                raise ConvergeError(
                    f"the master rejected or denied the key of {', '.join(sorted(bad))}",
                    fix="a host presented a key different from the accepted one: check the host, then "
                    "`salt-key -d <id>` on the master and re-run kos converge",
                )
            for other in sorted(pending - set(expected) - announced):
                ui.warn(
                    f"unexpected pending key {other!r}: not accepted (not a minion of this cluster)"
                )
                announced.add(other)
            missing = set(expected) - accepted - pending
            if not missing:
                break
            if time.monotonic() > deadline:
                raise ConvergeError(
                    f"minions never presented a key: {', '.join(sorted(missing))}",
                    fix="check that those VMs booted and that cloud-init installed salt-minion "
                    "(console log), then re-run kos converge",
                )
            ui.detail(f"waiting for keys of: {', '.join(sorted(missing))}")
            time.sleep(interval)
        newly = sorted(set(expected) & pending)
        for mid in newly:
            self.ssh.run(["salt-key", "-y", "-a", mid])
            ui.ok(f"accepted key of {mid}")
        unexpected = sorted(set(keys.get("minions", [])) - set(expected))
        for mid in unexpected:
            ui.warn(f"accepted key {mid!r} is not a minion of this cluster (left as it is)")
        return {
            "accepted": newly,
            "unexpected_pending": sorted(pending - set(expected)),
            "unexpected_accepted": unexpected,
        }

    def wait_responding(self, expected, timeout=300, interval=2):
        deadline = time.monotonic() + timeout
        while True:
            pings = self.salt(list(expected), "test.ping", timeout=10, wait=120)
            silent = sorted(m for m in expected if pings.get(m) is not True)
            if not silent:
                return
            if time.monotonic() > deadline:
                raise ConvergeError(
                    f"minions do not answer: {', '.join(silent)}",
                    fix="check salt-minion on those hosts (systemctl status salt-minion) and their "
                    "connection to the master (ports 4505/4506)",
                )
            ui.detail(f"waiting for answers from: {', '.join(silent)}")
            time.sleep(interval)

    def wait_restarted(self, timeout=120, unit="kos-salt-master-restart"):
        """Until the salt_master formula's deferred restart has fired and the master is up."""
        script = (
            f"for i in $(seq {timeout}); do "
            f"systemctl is-active -q {unit}.timer || break; sleep 1; done; "
            f"for i in $(seq {timeout}); do "
            "systemctl is-active -q salt-master && exit 0; sleep 1; done; exit 1"
        )
        res = self.ssh.run(["sh", "-c", script], timeout=2 * timeout + 30, check=False)
        if res.returncode != 0:
            raise ConvergeError(
                f"the salt master did not come back within {timeout}s of its restart",
                fix="check salt-master on the master (journalctl -u salt-master)",
            )

    # -- pillar, sync, orchestration ------------------------------------------------

    def push_pillar(self, text, path=PILLAR_FILE):
        """Write the Terraform pillar layer as root, mode 0640; unchanged content is kept."""
        tmp = f"{path.rsplit('/', 1)[0]}/.kos-{path.rsplit('/', 1)[1]}.tmp"
        script = (
            f"set -e; umask 077; cat > {tmp}; "
            f"if cmp -s {tmp} {path}; then rm -f {tmp}; echo unchanged; "
            f"else chown root:root {tmp}; chmod 0640 {tmp}; mv -f {tmp} {path}; echo written; fi"
        )
        res = self.ssh.run(["sh", "-c", script], stdin=text)
        return res.stdout.strip()

    def push_tree(self, source, dest, keep=None):
        """
        Make ``dest`` on the master hold exactly the files of ``source`` (the repository's
        state tree or pillar), plus the files matching ``keep`` already there (the layers
        a cloud writes, ``_*.sls``). Answers ``unchanged`` when the same tree is there.
        """
        blob = tree_tarball(source)
        digest = hashlib.sha256(blob).hexdigest()
        d = shlex.quote(dest)
        prune = f"! -name {shlex.quote(keep)} " if keep else ""
        script = (
            f"set -e; d={d}; mkdir -p \"$d\"; "
            f"if [ \"$(cat \"$d/.kos-tree\" 2>/dev/null)\" = {digest} ]; then "
            "cat >/dev/null; echo unchanged; exit 0; fi; "
            "t=$(mktemp -d); trap 'rm -rf \"$t\"' EXIT; "
            "base64 -d | tar -x -C \"$t\" --no-same-owner; "
            f"find \"$d\" -mindepth 1 -maxdepth 1 {prune}-exec rm -rf {{}} +; "
            "cp -R \"$t/.\" \"$d/\"; chown -R root:root \"$d\"; chmod -R go-w,o-rwx \"$d\"; "
            f"echo {digest} > \"$d/.kos-tree\"; echo written"
        )
        res = self.ssh.run(["sh", "-c", script], stdin=base64.b64encode(blob).decode())
        return res.stdout.strip()

    def sync_all(self, expected):
        ret = self.salt(list(expected), "saltutil.sync_all", timeout=120, wait=900)
        missing = sorted(m for m in expected if m not in ret)
        if missing:
            raise ConvergeError(f"saltutil.sync_all got no answer from: {', '.join(missing)}")
        return {
            m: sum(len(v) for v in (r or {}).values() if isinstance(v, list))
            for m, r in ret.items()
        }

    def orchestrate(self, sls="orch.deploy", progress=None):
        """Run the orchestration; stream minion results; return the failing steps."""
        watcher = EventWatcher(self.ssh, progress) if progress else None
        if watcher:
            watcher.start()
        try:
            res, doc = self.run("state.orchestrate", sls)
        finally:
            if watcher:
                watcher.stop()
        steps = doc.get("data", doc) if isinstance(doc, dict) else {}
        if (
            isinstance(steps, dict)
            and len(steps) == 1
            and isinstance(next(iter(steps.values())), dict)
        ):
            inner = next(iter(steps.values()))
            if inner and all(isinstance(v, dict) and "__id__" in v for v in inner.values()):
                steps = inner
        if (
            not steps
            or not isinstance(steps, dict)
            or not all(isinstance(v, dict) for v in steps.values())
        ):
            raise ConvergeError(
                f"state.orchestrate {sls} failed before running any step",
                details=[line for line in (res.stdout + res.stderr).strip().splitlines()][-15:],
            )
        return orchestration_failures(steps), steps


def tree_tarball(source):
    """A reproducible tarball of ``source``: same files, same bytes (no times, no owners)."""
    source = Path(source)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source)
            if "__pycache__" in rel.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            info = tarfile.TarInfo(str(rel))
            data = path.read_bytes()
            info.size = len(data)
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def orchestration_failures(steps):
    """``[(step id, minion or None, state id, comment)]`` for the failing steps' states."""
    failures = []
    for step in sorted(steps.values(), key=lambda s: s.get("__run_num__", 0)):
        if step.get("result") is not False:
            continue
        ret = (step.get("changes") or {}).get("ret")
        found = False
        if isinstance(ret, dict):
            for minion, result in sorted(ret.items()):
                if isinstance(result, dict) and any(isinstance(v, dict) for v in result.values()):
                    for state_id, comment in failed_states(result):
                        failures.append((step.get("__id__"), minion, state_id, comment))
                        found = True
                elif result is False or (isinstance(result, str) and result):
                    failures.append((step.get("__id__"), minion, "-", str(result)))
                    found = True
        if not found:
            failures.append((step.get("__id__"), None, "-", str(step.get("comment", "")).strip()))
    return failures


class EventWatcher:
    """
    Follows the master's event bus (``salt-run state.event``) in a second SSH session while
    the orchestration runs, and reports every minion's job result as it arrives.
    """

    def __init__(self, ssh, report):
        self.ssh = ssh
        self.report = report
        self.proc = None
        self.thread = None

    def start(self):
        # The remote watcher ends when its stdin closes (stop()), so it never outlives kos.
        watch = self.ssh.wrap(
            ["salt-run", "state.event", "salt/job/*/ret/*", "count=-1", "pretty=False"]
        )
        self.proc = self.ssh.popen(f"{watch} & w=$!; cat >/dev/null; kill $w 2>/dev/null; wait $w")
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            tag, _, body = line.rstrip("\n").partition("\t")
            if not tag.startswith("salt/job/") or not body:
                continue
            try:
                data = json.loads(body)
            except ValueError:
                continue
            fun = data.get("fun")
            if fun in EVENT_FUNS:
                self.report(data.get("id"), fun, data)

    def stop(self):
        if not self.proc:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=15)
        except Exception:  # noqa: BLE001 - a stuck watcher must not fail the converge
            self.proc.kill()
        self.thread.join(timeout=5)


def report_event(minion, fun, data):
    """Default progress printer: one line per minion result."""
    what = EVENT_FUNS[fun]
    ret = data.get("return")
    if fun in ("state.highstate", "state.apply"):
        if isinstance(ret, dict):
            states = [v for v in ret.values() if isinstance(v, dict)]
            changed = sum(1 for v in states if v.get("changes"))
            bad = failed_states(ret)
            if bad:
                ui.fail(f"{minion}: {what} failed ({len(bad)} of {len(states)} states)")
                for state_id, comment in bad[:5]:
                    ui.detail(f"{state_id}: {comment}")
            else:
                ui.ok(f"{minion}: {what} ok ({len(states)} states, {changed} changed)")
        else:
            ui.fail(f"{minion}: {what} failed: {str(ret)[:300]}")
    elif data.get("success") is False or data.get("retcode", 0) not in (0, None):
        ui.fail(f"{minion}: {fun} failed: {str(ret)[:300]}")
    else:
        ui.ok(f"{minion}: {what}")
