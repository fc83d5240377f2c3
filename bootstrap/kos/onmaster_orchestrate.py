"""
``kos.onmaster``'s orchestrations: run one ``state.orchestrate`` in the program's process,
never beside another one, and follow its jobs on the master's event bus. Runs on the salt
master (standard library and Salt).
"""

import re
import threading
import time
import traceback

from .onmaster_request import Failure
from .onmaster_summary import comment_text, orchestration_summary, state_summary

# Jobs the orchestration publishes that are Salt's own bookkeeping, not progress.
QUIET_FUNS = ("saltutil.find_job", "test.ping", "saltutil.running")
# Jobs that run an orchestration: state.orchestrate, and the master's reactor's runner,
# which runs orch.deploy for a minion that starts (saltext.kos.runners.kos_reactor).
ORCHESTRATIONS = ("runner.state.orchestrate", "runner.kos_reactor.started")
# How long the lock and an orchestration wait for the reactor's converge of a minion that
# started, by default.
REACTOR_WAIT = 1800
# The user Salt's reactor runs its reactions as (salt.utils.reactor.ReactWrap.event_user).
REACTOR_USER = "Reactor"


def master_process(opts):
    """``(pid, start time)`` of the salt-master daemon from its pidfile, None when it does not
    run: another pair after an orchestration means the master restarted while it ran."""
    try:
        with open(opts.get("pidfile") or "/var/run/salt-master.pid", encoding="utf-8") as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            # the start time is field 22; the fields after the command's ")" begin at 3
            return pid, f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, ValueError, IndexError):
        return None


class Orchestrations:
    """The orchestration requests of ``kos.onmaster.Server``, which gives ``runner``,
    ``salt``, ``opts``, ``out``, ``cancelled``, ``orchestration`` and ``check_cancelled``."""

    def running_orchestrations(self):
        return [
            {k: job.get(k) for k in ("jid", "pid", "user", "fun", "fun_args")}
            for job in self.salt.utils.master.get_running_jobs(self.opts)
            if job.get("fun") in ORCHESTRATIONS
        ]

    def wait_for_reactor(self, rid, timeout):
        """
        The orchestrations running now, once those the master's reactor started (a minion
        of the cluster that started: the same converge kos asks for) have ended, for at most
        ``timeout`` s. Another one (an operator's, another kos) is returned at once.
        """
        deadline = time.monotonic() + timeout
        said = None
        while True:
            running = self.running_orchestrations()
            if not running or any(job.get("user") != REACTOR_USER for job in running):
                return running
            if time.monotonic() > deadline:
                return running
            jids = sorted(str(job.get("jid")) for job in running)
            if jids != said:
                self.out.emit(id=rid, event="progress", jids=jids,
                              message="waiting for the orchestration the master's reactor "
                              "started: " + ", ".join(jids))
                said = jids
            self.check_cancelled()
            time.sleep(2)

    def op_orchestrate(self, rid, req):
        """
        ``state.orchestrate <sls> pillar=<pillar>`` in this process, never beside another
        one. Progress from the event bus; on cancel, a soft kill stops it before its next
        step and this waits for the step that runs.
        """
        sls = str(req.get("sls", ""))
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", sls):
            raise Failure("invalid", f"not an SLS name: {sls!r}")
        running = self.wait_for_reactor(rid, float(req.get("reactor_wait", REACTOR_WAIT)))
        if running:
            raise Failure(
                "busy",
                "an orchestration is already running on the salt master",
                orchestrations=running,
            )
        self.check_cancelled()
        jid = self.salt.utils.jid.gen_jid(self.opts)
        watcher = Watcher(self, rid, jid)
        watcher.start()
        self.out.emit(
            id=rid, event="job", jid=jid, fun="state.orchestrate", minions=[self.opts["id"]]
        )
        low = {
            "fun": "state.orchestrate",
            "arg": [sls],
            "kwarg": {"pillar": req.get("pillar") or {}, "orchestration_jid": jid},
            "__jid__": jid,
            "__user__": "kos",
        }
        # From here a cancel soft-kills it: checked once more, then it starts.
        self.orchestration = jid
        master = master_process(self.opts)
        try:
            self.check_cancelled()
            data = self.runner.low("state.orchestrate", low, print_event=False, full_return=True)
        finally:
            self.orchestration = None
            watcher.stop()
        summary = orchestration_summary(data, watcher.answered)
        summary.update(jid=jid, cancelled=self.cancelled.is_set(), stopped=False, not_run=[])
        if master and master_process(self.opts) != master:
            # The steps' returns were lost with the master's event bus, not the minions'
            # work: say what each minion really returned, from the job cache.
            summary.update(master_restarted=True, returned=self.cached_returns(watcher))
        if summary["cancelled"] and "steps" in summary:
            # The soft kill leaves the steps it skipped out of the return: name them.
            planned = self.planned_steps(sls, low["kwarg"]["pillar"])
            ran = {s["id"] for s in summary["steps"]}
            summary.update(
                not_run=sorted(planned - ran), stopped=bool(planned - ran), total=len(planned)
            )
        return summary

    def cached_returns(self, watcher, wait=30):
        """``[{"jid", "fun", "minions": {minion: state summary}}]`` of the state runs the
        orchestration published, as the master's job cache holds them. A publication the
        restart cut off is sent again under another jid: a minion's latest return of each
        function stands, and one with none is said to have none. A minion whose run
        outlived the restart may still be returning (it retries while the master is
        away): missing returns are waited for, ``wait`` seconds at most."""
        deadline = time.monotonic() + wait
        while True:
            latest = self._lookup_returns(watcher)
            missing = [key for key, (_, summary) in latest.items() if summary.get("missing")]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(2)
        out = {}
        for (minion, fun), (jid, summary) in sorted(latest.items()):
            summary.pop("missing", None)
            out.setdefault(jid, {"jid": jid, "fun": fun, "minions": {}})["minions"][minion] = summary
        return [out[jid] for jid in sorted(out)]

    def _lookup_returns(self, watcher):
        """``{(minion, fun): (jid, state summary)}``: each minion's latest state run of each
        function in the job cache (a summary with ``missing`` where it has none)."""
        latest = {}
        for jid, fun in sorted(watcher.jobs.items()):
            if not str(fun).startswith("state."):
                continue
            try:
                cached = self.runner.cmd("jobs.lookup_jid", [jid], print_event=False)
            except Exception as exc:  # noqa: BLE001 - a report, never a second failure
                cached, error = {}, f"the job cache did not answer: {exc}"
            else:
                error = "no return in the master's job cache"
            cached = cached if isinstance(cached, dict) else {}
            if "outputter" in cached and isinstance(cached.get("data"), dict):
                cached = cached["data"]
            for minion in sorted(set(watcher.targets.get(jid) or []) | set(cached)):
                if minion in cached:
                    latest[(minion, fun)] = (jid, state_summary(cached[minion]))
                else:
                    latest.setdefault((minion, fun), (jid, {"errors": [error], "missing": True}))
        return latest

    def planned_steps(self, sls, pillar):
        shown = self.runner.cmd(
            "state.orchestrate_show_sls", [sls], kwarg={"pillar": pillar}, print_event=False
        )
        high = next(iter(shown.values()), {}) if isinstance(shown, dict) else {}
        return (
            {k for k, v in high.items() if isinstance(v, dict)} if isinstance(high, dict) else set()
        )



class Watcher(threading.Thread):
    """The master's event bus while an orchestration runs: its steps and its jobs."""

    def __init__(self, channel, rid, jid):
        super().__init__(daemon=True)
        self.channel = channel
        self.rid = rid
        self.jid = jid
        self.jobs = {}
        self.targets = {}
        self.returns = {}
        self.stopping = threading.Event()
        opts = channel.opts
        # Subscribed before the orchestration starts, so no job of it is missed.
        self.events = channel.salt.utils.event.get_master_event(opts, opts["sock_dir"], listen=True)

    def answered(self, jid, minion):
        if jid not in self.jobs:
            return None
        return minion in self.returns.get(jid, set())

    def run(self):
        quiet_since = None
        while True:
            ev = self.events.get_event(wait=0.2, full=True, auto_reconnect=True)
            if ev:
                quiet_since = None
                try:
                    self.handle(str(ev.get("tag", "")), ev.get("data") or {})
                except Exception:  # noqa: BLE001 - progress is best effort
                    traceback.print_exc()
            elif self.stopping.is_set():
                # drain what the last step fired, then stop
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 0.5:
                    return

    def handle(self, tag, data):
        emit = self.channel.out.emit
        parts = tag.split("/")
        if len(parts) < 4 or parts[:2] != ["salt", "job"]:
            return
        jid, kind = parts[2], parts[3]
        if kind == "new":
            fun = data.get("fun")
            if fun in QUIET_FUNS:
                return
            self.jobs[jid] = fun
            self.targets[jid] = sorted(data.get("minions") or [])
            emit(
                id=self.rid,
                event="job",
                jid=jid,
                fun=fun,
                minions=sorted(data.get("minions") or []),
            )
        elif kind == "ret" and jid in self.jobs and len(parts) >= 5:
            minion = parts[4]
            self.returns.setdefault(jid, set()).add(minion)
            fun = data.get("fun") or self.jobs[jid]
            retcode = data.get("retcode", 0)
            event = {
                "jid": jid,
                "minion": minion,
                "fun": fun,
                "retcode": retcode,
                "success": data.get("success", retcode == 0),
            }
            ret = data.get("return")
            if str(fun).startswith("state."):
                event["summary"] = state_summary(ret)
            elif not event["success"] or (retcode not in (0, None)):
                event["summary"] = {"errors": [comment_text(ret)]}
            emit(id=self.rid, event="return", **event)

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)
        try:
            self.events.destroy()
        except Exception:  # noqa: BLE001
            pass

