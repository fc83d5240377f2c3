"""
``kos.onmaster``'s requests to minions: who answers, one published function with its returns
streamed, and the last highstates in the job cache. Runs on the salt master (standard library
and Salt).
"""

import datetime
import os
import re
import time

from .onmaster_request import Failure, minion_ids
from .onmaster_summary import state_summary

# The longest a round of op_answering waits for the silent.
PING_MAX = 60

# What salt/master.py's MWorker logs when its modules failed to load; the worker lives on
# and answers every request it is handed with nothing (saltstack/salt#61734: the loader's
# importlib.invalidate_caches() races the worker's other thread).
WORKER_BROKEN = "failed to load modules, worker will be non-functional"
# The process id in Salt's log formats: "[1234]" (salt/_logging/impl.py
# DFLT_LOG_FMT_LOGFILE) or "[MWorker-default-7(1234)]" (processName(process)).
LOG_PID = re.compile(r"[\[(](\d+)\)?\]")
LOG_TAIL = 8 * 1024 * 1024


class Minions:
    """The minion requests of ``kos.onmaster.Server``, which gives ``local``, ``runner``,
    ``salt``, ``out`` and ``check_cancelled``."""

    def _ping(self, minions, timeout):
        # After the timeout Salt asks the silent whether they still run the job
        # (saltutil.find_job) and waits gather_job_timeout for that: 10 s by default and 60
        # on kos's masters. A minion that had not connected yet when the ping was published
        # never runs it, so that wait only delayed the next round, which it answers; a slow
        # one answers a later, longer round.
        ret = self.local.cmd(minions, "test.ping", tgt_type="list", timeout=timeout,
                             gather_job_timeout=max(1, timeout // 2))
        return {m for m in minions if (ret or {}).get(m) is True}

    def op_answering(self, rid, req):
        """Ping until every listed minion answers, or the timeout: who is silent. The
        time the master cannot publish counts, except up to ``master_timeout`` seconds of it
        when given: a master that restarts, or is too busy to publish (its minions all
        authenticate again after a restart: at 53 minions on two cores that took from 1 to
        over 5 minutes), is waited for that much longer. ``master_error``: why the master
        could not publish at the end.

        Each round waits twice as long for the silent as the one before (up to a minute):
        a minion that is connected but slow still runs every ping it was sent, each in a
        process of its own, so pinging 52 minions that had just connected every few seconds
        kept some 230 of those processes on two cores and the master unable to publish."""
        wanted = minion_ids(req.get("minions"))
        timeout = float(req.get("timeout", 30))
        master_timeout = float(req.get("master_timeout") or 0)
        ping = int(req.get("ping_timeout", 5))
        started = time.monotonic()
        blocked = 0.0
        answering = set()
        said = None
        while True:
            self.check_cancelled()
            master_error = None
            began = time.monotonic()
            try:
                answering |= self._ping(sorted(set(wanted) - answering), ping)
            except self.salt.exceptions.SaltClientError as exc:
                # Salt's first sentence says which
                master_error = str(exc).split(".")[0]
            silent = sorted(set(wanted) - answering)
            now = time.monotonic()
            if master_error:
                blocked += now - began
            if not silent or now - started - min(blocked, master_timeout) > timeout:
                return {"answering": sorted(answering), "silent": silent,
                        "master_error": master_error if silent else None}
            if (silent, master_error) != said:
                self.out.emit(id=rid, event="progress", message="waiting for answers",
                              silent=silent, master_error=master_error)
                said = (silent, master_error)
            if not master_error:
                left = timeout + min(blocked, master_timeout) - (now - started)
                ping = max(1, min(ping * 2, PING_MAX, int(left)))
            time.sleep(1)
            if master_error:
                blocked += 1

    def op_cmd(self, rid, req):
        """Publish one function; stream each minion's return; say who stayed silent."""
        targets = minion_ids(req.get("tgt"))
        fun = str(req.get("fun"))
        # "key=value" arguments are keyword arguments, as on the salt command line.
        args, kwarg = self.salt.utils.args.parse_input(list(req.get("arg") or []), condition=False)
        kwarg.update(req.get("kwarg") or {})
        self.check_cancelled()
        returned, jid, minions = set(), None, []
        for ret in self.local.cmd_iter(
            targets,
            fun,
            args,
            tgt_type="list",
            timeout=int(req.get("timeout", 60)),
            kwarg=kwarg or None,
            yield_pub_data=True,
        ):
            if not ret:
                continue
            if "jid" in ret and "minions" in ret and jid is None:
                jid, minions = ret["jid"], sorted(ret["minions"])
                self.out.emit(id=rid, event="job", jid=jid, fun=fun, minions=minions)
                continue
            for minion, data in ret.items():
                if not isinstance(data, dict) or data.get("failed"):
                    continue
                returned.add(minion)
                retcode = data.get("retcode", 0)
                self.out.emit(
                    id=rid,
                    event="return",
                    jid=jid,
                    minion=minion,
                    fun=fun,
                    retcode=retcode,
                    success=data.get("success", retcode == 0),
                    **{"return": data.get("ret")},
                )
        if jid is None:
            raise Failure("salt", f"the master published no job for {fun} (no minion matched)")
        return {"jid": jid, "minions": minions, "silent": sorted(set(targets) - returned)}

    def op_last_highstates(self, rid, req):
        """Per minion, its newest state.highstate in the job cache, summarized."""
        wanted = set(minion_ids(req.get("minions")))
        jobs = self.runner.cmd(
            "jobs.list_jobs", kwarg={"search_function": "state.highstate"}, print_event=False
        )
        found = {}
        for jid in sorted(jobs or {}, reverse=True)[: int(req.get("max_jobs", 6))]:
            job = self.runner.cmd("jobs.list_job", [jid], print_event=False) or {}
            for minion, ret in (job.get("Result") or {}).items():
                if minion in wanted and minion not in found:
                    summary = state_summary((ret or {}).get("return"))
                    bad = len(summary.get("failed", [])) + len(summary.get("errors", []))
                    found[minion] = {
                        "jid": jid,
                        "time": iso_time(job.get("StartTime")),
                        "result": "failed" if bad else "ok",
                        "failed": bad,
                        "states": summary.get("states", 0),
                    }
            if wanted <= set(found):
                break
        return found


    def op_broken_workers(self, rid, req):
        """The salt master's request workers that run and whose modules failed to load, as
        its log names them (``[{"pid", "line"}]``); a worker of an earlier run of the master
        is gone, or no child of the running one, and not counted. A log that is not a local
        file names none."""
        return {"workers": broken_workers(self.opts.get("log_file"), self.opts.get("pidfile"))}


def broken_workers(log_file, pidfile, proc="/proc"):
    if not log_file or "://" in str(log_file):
        return []
    try:
        with open(pidfile) as fh:
            master = int(fh.read().strip())
        with open(log_file, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - LOG_TAIL))
            text = fh.read().decode("utf-8", "replace")
    except (OSError, TypeError, ValueError):
        return []
    found = {}
    for line in text.splitlines():
        head, marker, _ = line.partition(WORKER_BROKEN)
        pids = LOG_PID.findall(head) if marker else []
        if pids and _descends(int(pids[-1]), master, proc):
            found[int(pids[-1])] = line.strip()
    return [{"pid": pid, "line": line} for pid, line in sorted(found.items())]


def _descends(pid, ancestor, proc):
    """Whether process ``pid`` runs and ``ancestor`` started it (or started what did)."""
    for _ in range(16):
        try:
            with open(os.path.join(proc, str(pid), "stat")) as fh:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


def iso_time(start):
    """Salt's job StartTime (``2026, Dec 05 21:00:00.123456``, the master's local time,
    salt/utils/jid.py jid_to_time) as ISO 8601; what it cannot read, as it came."""
    try:
        return datetime.datetime.strptime(start, "%Y, %b %d %H:%M:%S.%f").isoformat(
            timespec="seconds")
    except (TypeError, ValueError):
        return start
