"""
What kos asks of the salt master: key acceptance, sync, pillar refresh, orchestration, and
the reads behind ``kos status`` and ``kos kubeconfig``. How it asks (one structured channel
to a program that runs on the master) is ``kos.channel``.

The formula and pillar trees are files, not Salt requests: they are pushed as tarballs over
the same SSH connection (``push_tree``, ``push_pillar``).

Trust model for minion keys: the master never auto-accepts. kos accepts exactly the minion
ids Terraform created (``terraform output minions``), each by its full id, and never
accepts any other pending key (it reports it). A pending key is accepted only when its
fingerprint is the one the minion printed on its console at first boot (``kos.trust``);
the master checks it again as it accepts. A different key is refused and stays pending;
a minion whose console showed no fingerprint is refused unless the operator accepts
unverified keys (``--trust-unverified``).
"""

import base64
import hashlib
import io
import re
import shlex
import tarfile
from pathlib import Path

from saltext.kos.utils import kos_release

from . import trust, ui
from .channel import Channel, busy_error
from .errors import ConvergeError, Interrupted, KosError
from .onmaster_summary import state_summary
from .refusal import pillar_refusal
from .state import describe_holder

MINION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")
PILLAR_FILE = "/srv/pillar/_from_terraform.sls"
EVENT_FUNS = {
    # orch.deploy's first step on a minion that may lack the extension: kos.extension
    "state.sls": "states applied",
    "saltutil.refresh_pillar": "pillar refreshed",
    "kos.validate_pillar": "pillar valid",
    "kos.prepare_converge": "pillar valid, mine updated",
    "mine.update": "mine updated",
    "state.highstate": "highstate",
    "state.apply": "highstate",
}


def _refuse_odd_ids(ids, kind):
    for mid in ids:
        if not MINION_ID.match(mid):
            raise ConvergeError(f"refusing {kind} id {mid!r}: not a plain host name")


class SaltMaster:
    def __init__(self, ssh):
        self.ssh = ssh
        self.channel = Channel(ssh)

    def close(self):
        self.channel.close()

    def request(self, op, **params):
        return self.channel.request(op, **params)

    # -- the run lock --------------------------------------------------------------------

    def lock(self, cluster, holder):
        """Hold the cluster's lock on the master for as long as this channel lives."""
        res = self.request(
            "lock", what="locking the cluster on the salt master", cluster=cluster,
            holder=holder, on_event=lambda e: e.get("message") and ui.detail(e["message"]),
        )
        if res.get("stale"):
            ui.warn(
                "a kos run that ended without releasing the salt master's lock left it: "
                f"{describe_holder(res['stale'])}; taken over"
            )
        if res.get("orchestrations"):
            raise busy_error(res["orchestrations"])

    # -- keys ----------------------------------------------------------------------------

    def keys(self):
        return self.request("keys", what="listing the keys")

    def delete_keys(self, minions):
        """Forget minions whose servers are gone: keys in every state, mine and cached data."""
        return self.request("delete_keys", what="deleting the keys of retired nodes",
                            minions=sorted(minions))

    def wait_and_accept(
        self, expected, timeout=900, only=None, consoles=None, trust_unverified=False,
        syndics=(),
    ):
        """
        Wait until every expected minion (or those of ``only``) has presented its key,
        accept those whose fingerprint is the one their console printed (``consoles``:
        ``kos.trust`` records by minion id), and report other pending keys without
        accepting them (but the ``syndics``', a top master's, which accept_syndics takes).
        Refused keys stay pending and end the step with one error.
        """
        wanted = sorted(only if only is not None else expected)
        _refuse_odd_ids(expected, "minion")

        def progress(event):
            ui.detail(f"waiting for keys of: {', '.join(event.get('missing', []))}")

        keys = self.channel.request(
            "wait_keys",
            on_event=progress,
            what="waiting for the minions' keys",
            minions=wanted,
            timeout=timeout,
        )
        accepted = set(keys.get("minions", []))
        pending = set(keys.get("minions_pre", []))
        rejected = set(keys.get("minions_rejected", [])) | set(keys.get("minions_denied", []))
        bad = rejected & set(wanted)
        if bad:
            raise ConvergeError(
                f"the master rejected or denied the key of {', '.join(sorted(bad))}",
                fix="a host presented a key different from the accepted one: check the host, then "
                "`salt-key -d <id>` on the master and re-run kos converge",
            )
        for other in sorted(pending - set(expected) - set(syndics)):
            ui.warn(
                f"unexpected pending key {other!r}: not accepted (not a minion of this cluster)"
            )
        if keys.get("missing"):
            raise ConvergeError(
                f"minions never presented a key: {', '.join(keys['missing'])}",
                fix="check that those VMs booted and that cloud-init installed salt-minion "
                "(console log), then re-run kos converge",
            )
        newly, unverified = self._accept_verified(
            sorted(set(wanted) & pending), consoles or {}, trust_unverified
        )
        unexpected = sorted(accepted - set(expected) - set(syndics))
        for mid in unexpected:
            ui.warn(f"accepted key {mid!r} is not a minion of this cluster (left as it is)")
        return {
            "accepted": newly,
            "unverified": unverified,
            "unexpected_pending": sorted(pending - set(expected) - set(syndics)),
            "unexpected_accepted": unexpected,
        }

    def accept_syndics(self, masters, trust_unverified=False):
        """
        On a top master: accept the pending keys of the syndics, the salt masters of the
        environments in ``masters`` (``{cluster: (minion id, console record) or None}``),
        each only as its console printed it (salt-syndic authenticates with its host's
        minion id and key). ``{"accepted", "unverified", "joined", "waiting"}``: joined and
        waiting are cluster names.
        """
        ids = {cluster: found[0] for cluster, found in masters.items() if found}
        _refuse_odd_ids(ids.values(), "syndic")
        consoles = {found[0]: found[1] for found in masters.values() if found}
        keys = self.keys()
        newly, unverified = self._accept_verified(
            sorted(set(keys["minions_pre"]) & set(consoles)), consoles, trust_unverified
        )
        joined = set(keys["minions"]) | set(newly)
        return {
            "ids": sorted(ids.values()),
            "accepted": newly,
            "unverified": unverified,
            "joined": sorted(c for c, mid in ids.items() if mid in joined),
            "waiting": sorted(c for c in masters if ids.get(c) not in joined),
        }

    def _accept_verified(self, candidates, consoles, trust_unverified):
        """Accept the candidates whose console vouches for their key; refuse the others."""
        if not candidates:
            return [], []
        fingers = self.request(
            "fingers", what="reading the pending keys' fingerprints", minions=candidates
        )["pending"]
        verdicts = [
            trust.judge(mid, fingers[mid], consoles.get(mid), trust_unverified)
            for mid in candidates
            if mid in fingers
        ]
        take = {v.minion: v.presented for v in verdicts if v.accept}
        done = {"accepted": [], "refused": {}}
        if take:
            done = self.request("accept", what="accepting the keys", fingers=take)
        unverified = []
        for v in verdicts:
            if v.minion not in done["accepted"]:
                continue
            if v.verified:
                ui.ok(f"accepted key of {v.minion} ({trust.HASH} {v.presented}, as its console)")
            else:
                unverified.append(v.minion)
                ui.warn(
                    f"accepted key of {v.minion} UNVERIFIED ({trust.HASH} {v.presented}): its "
                    f"console showed no fingerprint; accepted because of {trust.UNVERIFIED_FLAG}"
                )
        changed = [
            trust.Verdict(
                mid,
                False,
                True,
                now,
                [take[mid]],
                problem=f"{mid}: its pending key changed while kos accepted it (now {trust.HASH} "
                f"{now}, checked {trust.HASH} {take[mid]}); it is not accepted",
                fix=f"find who else presents the id {mid}, then `salt-key -d {mid}` on the "
                "master and re-run kos converge",
            )
            for mid, now in sorted(done.get("refused", {}).items())
        ]
        refused = [v for v in verdicts if not v.accept] + changed
        if refused:
            raise trust.refusal(refused)
        return sorted(done["accepted"]), sorted(unverified)

    def answering(self, minions, timeout=30):
        """``(answering, silent)`` after pinging until all answer or ``timeout`` s passed
        (while the master could publish: a busy master is waited for, see ``silence``)."""
        res = self.silence(minions, timeout)
        return res["answering"], res["silent"]

    def silence(self, minions, timeout=30, master_timeout=None):
        """The channel's whole answer: ``answering``, ``silent``, and ``master_error``
        when the master itself could not publish at the end. Up to ``master_timeout``
        seconds the master cannot publish do not count against ``timeout``."""

        def progress(event):
            if event.get("master_error"):
                ui.detail(f"waiting for the master to publish: {event['master_error']}")
            else:
                ui.detail(f"waiting for answers from: {', '.join(event.get('silent', []))}")

        return self.channel.request(
            "answering",
            on_event=progress,
            what="checking that the minions answer",
            minions=sorted(minions),
            timeout=timeout,
            master_timeout=master_timeout,
        )

    def wait_responding(self, expected, timeout=300, master_timeout=900):
        """Every minion of ``expected`` answers within ``timeout`` s of the master
        publishing; a master busy after its restart is waited for up to ``master_timeout``
        s more."""
        res = self.silence(expected, timeout, master_timeout)
        if res.get("master_error"):
            raise ConvergeError(
                f"the salt master could not publish: {res['master_error']}; not heard from: "
                f"{', '.join(res['silent'])}",
                fix="check salt-master on the master (journalctl -u salt-master, its load), "
                "then re-run the same kos command",
            )
        if res["silent"]:
            raise ConvergeError(
                f"minions do not answer: {', '.join(res['silent'])}",
                fix="check salt-minion on those hosts (systemctl status salt-minion) and their "
                "connection to the master (ports 4505/4506)",
            )

    def wait_restarted(self, timeout=120, unit="kos-salt-master-restart"):
        """
        Start the salt_master formula's deferred restart (a systemd timer, ``unit``) now:
        kos calls this once it holds the run's return, which is all the deferral waits for
        (stopping a timer leaves the service it started running). Then until its
        ``systemctl restart`` has ended (on tcp, after the master's minions were
        told to sign in again: kos-salt-master-reconnect) and salt-master is active; systemd
        is asked over SSH. The channel rides through the restart (its clients reconnect, its
        lock is its own process's); the minions take a while to find the new master: follow
        with ``wait_responding``.
        """
        timer, service = (shlex.quote(f"{unit}.{kind}") for kind in ("timer", "service"))
        script = (
            f"if systemctl is-active -q {timer}; then "
            f"systemctl start {service} && systemctl stop {timer}; fi; "
        ) + "".join(
            f"for i in $(seq {int(timeout)}); do "
            f"systemctl is-active -q {shlex.quote(name)} || break; sleep 1; done; "
            for name in (f"{unit}.timer", f"{unit}.service")
        ) + (
            f"for i in $(seq {int(timeout)}); do "
            "systemctl is-active -q salt-master && exit 0; sleep 1; done; exit 1"
        )
        res = self.ssh.run(["sh", "-c", script], timeout=3 * timeout + 30, check=False)
        if res.returncode != 0:
            raise ConvergeError(
                f"the salt master did not come back within {timeout}s of its restart",
                fix="check salt-master on the master (journalctl -u salt-master)",
            )

    def mend_broken_workers(self, expected, restarts=2, unit="kos-salt-master-reconnect"):
        """
        Restart the salt master while a request worker of it runs whose modules failed to
        load (saltstack/salt#61734, a race at the worker's start): such a worker answers
        each request it is handed with nothing, so a minion's return it takes is lost and an
        orchestration fails on a minion that answered. A restart starts new workers; after
        ``restarts`` of them the master is named as broken. On tcp the reconnect unit (the
        salt_master formula's) has the minions sign in again, as after the formula's restart.
        How many restarts it took.
        """
        for attempt in range(restarts + 1):
            broken = self.request("broken_workers", what="checking the master's workers")
            if not broken["workers"]:
                return attempt
            if attempt == restarts:
                raise ConvergeError(
                    f"the salt master's request workers fail to load their modules after "
                    f"{restarts} restarts",
                    fix="read the traceback in the master's log (/var/log/salt/master), fix "
                    "its cause and re-run the same kos command",
                    details=[w["line"] for w in broken["workers"]],
                )
            ui.warn(
                f"{len(broken['workers'])} of the salt master's request workers failed to load "
                "their modules (Salt's race saltstack/salt#61734): restarting the master"
            )
            reconnect = shlex.quote(f"{unit}.service")
            script = (
                f"units=salt-master; systemctl cat {reconnect} >/dev/null 2>&1 && "
                f"units=\"$units {reconnect}\"; systemctl restart $units"
            )
            res = self.ssh.run(["sh", "-c", script], timeout=300, check=False)
            if res.returncode != 0:
                raise ConvergeError(
                    "restarting the salt master failed",
                    fix="check salt-master on the master (journalctl -u salt-master)",
                )
            self.wait_responding(expected)
        return restarts

    # -- functions -----------------------------------------------------------------------

    def salt(self, targets, fun, *args, timeout=60, wait=None, on_event=None):
        """``{minion: return}`` of ``fun`` on ``targets`` (a list of minion ids); arguments
        as on the salt command line ("key=value" is a keyword argument). Silent minions are
        left out. ``timeout`` is Salt's (how long minions get to answer); ``wait`` is
        accepted and unused (it bounded the former SSH command: the channel never hangs on a
        silent minion, and Ctrl-C cancels the request)."""
        targets = [targets] if isinstance(targets, str) else list(targets)
        returns = {}

        def collect(event):
            if event.get("event") == "return":
                returns[event["minion"]] = event.get("return")
            if on_event:
                on_event(event)

        self.channel.request(
            "cmd", on_event=collect, what=fun, tgt=targets, fun=fun, arg=list(args), timeout=timeout
        )
        return returns

    def refresh_pillar(self, targets):
        return self.salt(list(targets), "saltutil.refresh_pillar", "wait=True", timeout=120)

    def last_highstates(self, ids, max_jobs=6):
        """``{minion: {"jid", "result", "failed", "states"}}`` from the master's job cache."""
        return self.request(
            "last_highstates", what="reading the job cache", minions=sorted(ids), max_jobs=max_jobs
        )

    # -- files, pushed over the same SSH connection (not Salt requests) -----------------

    def push_pillar(self, text, path=PILLAR_FILE, mode="0640"):
        """Write a pillar layer as root (the Terraform one by default), ``mode``; unchanged
        content is kept. The text goes over the SSH connection's stdin, never a command line."""
        if not re.fullmatch(r"0[0-7]{3}", mode):
            raise ValueError(f"not a file mode: {mode!r}")
        tmp = f"{path.rsplit('/', 1)[0]}/.kos-{path.rsplit('/', 1)[1]}.tmp"
        script = (
            f"set -e; umask 077; cat > {tmp}; "
            f"if cmp -s {tmp} {path}; then rm -f {tmp}; echo unchanged; "
            f"else chown root:root {tmp}; chmod {mode} {tmp}; mv -f {tmp} {path}; echo written; fi"
        )
        res = self.ssh.run(["sh", "-c", script], stdin=text)
        return res.stdout.strip()

    def layer_values(self, pillar_dir, pattern, key):
        """``{path: value}`` of one plain ``key: value`` line in each pillar file matching
        ``pattern`` under ``pillar_dir`` (None where it has none). Reads that line only."""
        script = (
            f"for f in {shlex.quote(pillar_dir)}/{pattern}; do [ -f \"$f\" ] || continue; "
            f"printf '%s\\t%s\\n' \"$f\" "
            f"\"$(sed -n 's/^ *{key}: *//p' \"$f\" | head -n 1)\"; done"
        )
        found = {}
        for line in self.ssh.run(["sh", "-c", script]).stdout.splitlines():
            path, _, value = line.partition("\t")
            found[path] = value.strip() or None
        return found

    def remove_files(self, paths):
        """Remove these files on the master (as root); missing ones are fine."""
        paths = list(paths)
        if paths:
            self.ssh.run(["rm", "-f", "--", *paths])
        return paths

    def push_tree(self, source, dest, keep=None, extra=None):
        """
        Make ``dest`` on the master hold exactly the files of ``source`` (the repository's
        state tree or pillar) and ``extra``, plus the files matching ``keep`` already there
        (the layers a cloud writes, ``_*.sls``). Answers ``unchanged`` when the same tree is
        there.
        """
        blob = tree_tarball(source, extra)
        digest = hashlib.sha256(blob).hexdigest()
        d = shlex.quote(dest)
        prune = f"! -name {shlex.quote(keep)} " if keep else ""
        script = (
            f'set -e; d={d}; mkdir -p "$d"; '
            f'if [ "$(cat "$d/.kos-tree" 2>/dev/null)" = {digest} ]; then '
            "cat >/dev/null; echo unchanged; exit 0; fi; "
            "t=$(mktemp -d); trap 'rm -rf \"$t\"' EXIT; "
            'base64 -d | tar -x -C "$t" --no-same-owner; '
            f'find "$d" -mindepth 1 -maxdepth 1 {prune}-exec rm -rf {{}} +; '
            'cp -R "$t/." "$d/"; chown -R root:root "$d"; chmod -R go-w,o-rwx "$d"; '
            f'echo {digest} > "$d/.kos-tree"; echo written'
        )
        res = self.ssh.run(["sh", "-c", script], stdin=base64.b64encode(blob).decode())
        return res.stdout.strip()

    # -- orchestration -------------------------------------------------------------------

    def orchestrate(self, sls="orch.deploy", pillar=None, progress=None, rerun="kos converge"):
        """
        Run the orchestration and follow it. Returns its summary when every step succeeded;
        raises ``ConvergeError`` with each failing state's ID and comment, or
        ``Interrupted`` when Ctrl-C stopped it before its last step.
        """
        summary = self.channel.request(
            "orchestrate",
            on_event=progress or report_event,
            what=f"running {sls}",
            keep_on_interrupt=True,
            sls=sls,
            pillar=pillar or {},
        )
        if summary.get("errors"):
            raise ConvergeError(
                f"state.orchestrate {sls} failed before running any step",
                fix=f"fix the orchestration's SLS or pillar named below, then re-run {rerun}",
                details=summary["errors"][:15],
            )
        steps = summary.get("steps", [])
        failures, not_run = orchestration_failures(steps)
        if summary.get("master_restarted") and (failures or summary.get("stopped")):
            raise ConvergeError(
                f"{sls} was cut short: the salt master restarted while it ran (orchestration "
                f"{summary.get('jid')}); its steps lost the minions' returns, so what each "
                "minion really returned is read from the master's job cache",
                fix=f"re-run {rerun}: what the minions finished stays done and states are "
                "idempotent; if the master restarted by itself, read `journalctl -u "
                "salt-master` on it",
                details=cached_returns(summary.get("returned") or [])
                + ([f"steps cut short: {', '.join(sorted({i for i, _ in failures}))}"]
                   if failures else []),
            )
        if summary.get("stopped"):
            last = steps[-1]["id"] if steps else None
            raise Interrupted(
                f"interrupted: {sls} stopped "
                + (f"after step {last}" if last else "before its first step")
                + f" ({len(steps)} of {summary.get('total')} steps ran, orchestration "
                f"{summary.get('jid')}); nothing of it runs any more",
                fix=f"re-run {rerun} to finish: states are idempotent",
                details=[f"not run: {', '.join(summary.get('not_run', []))}"]
                + [f"{line}" for _, line in failures],
            )
        refused = pillar_refusal(failures, rerun)
        if refused:
            raise refused
        if failures:
            raise ConvergeError(
                f"{sls} failed at {failures[0][0]}",
                fix=f"fix the failing state (or its pillar) and re-run {rerun}; "
                "states are idempotent, so a re-run only changes what still differs",
                details=[f"{where}: {what}" for where, what in failures]
                + ([f"not run (an earlier step failed): {', '.join(not_run)}"] if not_run else []),
            )
        return summary


def cached_returns(jobs):
    """One line per minion and state run of ``jobs`` (the orchestration summary's
    ``returned``): what it returned, as the master's job cache holds it."""
    lines = []
    for job in jobs:
        what = f"{job.get('fun')} (job {job.get('jid')})"
        for minion, summary in sorted((job.get("minions") or {}).items()):
            failed = state_failures(summary)
            if "states" in summary and not failed:
                lines.append(f"{minion}: {what} ok ({state_counts(summary)})")
            elif failed:
                lines += [f"{minion}: {what} failed at {f['id']}: {f['comment'] or 'failed'}"
                          for f in failed[:5]]
            else:
                lines.append(f"{minion}: {what}: {'; '.join(summary.get('errors') or [])}")
    return lines or ["the orchestration ran no state before the restart"]


def state_failures(summary):
    """The failed states of one state run's summary that failed by themselves; those that
    failed only for a requisite when nothing else failed."""
    failed = summary.get("failed") or []
    return [f for f in failed if not f.get("requisite")] or failed


def state_counts(summary):
    return f"{summary['states']} states, {summary['changed']} changed"


def key_holders(master, minions):
    """Those of ``minions`` whose key the master holds, in any state (accepted, pending,
    rejected, denied): what the master still knows of them."""
    return sorted(set(minions) & set().union(*master.keys().values()))


def failed_states(result):
    """``[(state id, comment)]`` for every failed state in one minion's state return."""
    summary = state_summary(result)
    return [(f["id"], f["comment"]) for f in summary.get("failed", [])] + [
        ("(no state run)", error) for error in summary.get("errors", [])
    ]


def orchestration_failures(steps):
    """
    ``([(step id, "minion: state ID (sls): comment")], [steps not run])`` for the failed
    steps of an orchestration summary: every failing state with its ID and comment, every
    minion error with its reason; steps that failed only because a requisite did are
    listed apart.
    """
    failures, not_run = [], []
    for step in steps:
        if step.get("result") is not False:
            continue
        comment = step.get("comment") or ""
        if comment.startswith("One or more requisite failed"):
            not_run.append(step["id"])
            continue
        lines = []
        for minion, detail in sorted((step.get("minions") or {}).items()):
            failed = detail.get("failed") or []
            for state in sorted(failed, key=lambda f: f.get("requisite", False)):
                if state.get("requisite") and len(failed) > 1:
                    continue
                sls = f" ({state['sls']})" if state.get("sls") else ""
                lines.append(f"{minion}: {state['id']}{sls}: {state['comment'] or 'failed'}")
            for error in detail.get("errors") or []:
                lines.append(f"{minion}: {error}")
        if not lines:
            what = f" ({step['name']})" if step.get("name") else ""
            lines.append(f"{step['id']}{what}: {comment or 'failed without a comment'}")
        failures += [(step["id"], line) for line in lines]
    return failures, not_run


def report_event(event):
    """Progress printer: what the orchestration publishes, and each minion's result."""
    kind = event.get("event")
    if kind == "job":
        if event.get("fun") == "state.orchestrate":
            ui.info(f"orchestration {event['jid']} started on the salt master")
        else:
            minions = event.get("minions") or []
            ui.info(
                f"{event.get('fun')} on {', '.join(minions) if len(minions) < 4 else f'{len(minions)} minions'}"
            )
    elif kind == "return" and event.get("fun") in EVENT_FUNS:
        report_return(event)
    elif kind == "progress" and event.get("message"):
        ui.detail(event["message"])


def report_return(event):
    minion, fun = event["minion"], event["fun"]
    what = EVENT_FUNS[fun]
    summary = event.get("summary") or {}
    if fun in ("state.highstate", "state.apply", "state.sls"):
        if "states" in summary:
            bad = state_failures(summary)
            if bad:
                ui.fail(f"{minion}: {what} failed ({len(bad)} of {summary['states']} states)")
                for state in bad[:5]:
                    ui.detail(f"{state['id']}: {state['comment']}")
            else:
                ui.ok(f"{minion}: {what} ok ({state_counts(summary)})")
        else:
            ui.fail(f"{minion}: {what} failed: {'; '.join(summary.get('errors', []))[:300]}")
    elif event.get("success") is False or event.get("retcode") not in (0, None):
        errors = summary.get("errors") or [str(event.get("return"))]
        ui.fail(f"{minion}: {fun} failed: {'; '.join(errors)[:300]}")
    else:
        ui.ok(f"{minion}: {what}")


def release_files():
    """The release of the extension installed here (``{path: bytes}`` under kos/release),
    which kos pushes with the formula."""
    try:
        return kos_release.files()
    except kos_release.ReleaseError as exc:
        raise KosError(
            f"cannot build the release of saltext.kos the master serves: {exc}",
            fix="reinstall kos with its dependencies (make venv), then re-run",
        ) from exc


def tree_files(source, extra=None):
    """``{relative path: (bytes, mode)}`` of the tree kos pushes from ``source``, plus
    ``extra`` (``{relative path: bytes}``, the extension's release in the state tree)."""
    source = Path(source)
    found = {}
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if "__pycache__" in rel.parts or path.suffix == ".pyc" or not path.is_file():
            continue
        found[rel.as_posix()] = (path.read_bytes(), 0o755 if path.stat().st_mode & 0o111 else 0o644)
    for rel, data in (extra or {}).items():
        found[rel] = (data, 0o644)
    return found


def tree_tarball(source, extra=None):
    """A reproducible tarball of ``source`` (and ``extra``): same files, same bytes (no
    times, no owners)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, (data, mode) in sorted(tree_files(source, extra).items()):
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
