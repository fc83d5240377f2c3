"""
The program kos runs on the salt master: its one channel to Salt.

It runs with the Python that runs the salt master (the onedir's, a distribution's or a
virtualenv's) and uses Salt's Python API there: ``LocalClient`` to publish, ``RunnerClient``
for orchestrations and the job cache, ``WheelClient`` for keys, the master's event bus for
progress. Nothing here parses Salt's command-line output.

How it gets there: ``kos.salt.Channel`` opens one SSH session per kos command and pipes this
file over its stdin; a short shell prelude finds the master's Python from ``salt-run``'s first
line and that Python executes it. Nothing is installed on the master, and the master always
runs the program of the kos that talks to it. Of kos it imports only ``kos.lock`` (the run
lock, standard library only), which ``kos.salt.Channel`` sends ahead of this file; otherwise
the standard library and, on the master, Salt.

Wire format, one JSON object per line. Requests on stdin::

    {"id": 1, "op": "cmd", ...}        one request; requests are served in order
    {"op": "cancel"}                    stop the request being served (see ``cancel``)

End of stdin means kos is gone: the request being served is cancelled and the program exits
when it has stopped, releasing the master lock. Events on stdout (``id`` is the request's)::

    {"event": "ready", "protocol", "salt", "python", "pid", "master"}     once, first
    {"id", "event": "progress", "message", ...}          e.g. minions still silent, or
                                                          the master not publishing yet
    {"id", "event": "job", "jid", "fun", "minions"}      a job was published
    {"id", "event": "return", "jid", "minion", "fun", "success", "retcode",
         "return" (``cmd`` only) | "summary" (during an orchestration)}
    {"id", "event": "result", "result": {...}}            the request's answer (last event)
    {"id", "event": "error", "kind", "message", ...}      the request failed (last event)

During an orchestration, ``job`` and ``return`` events follow the jobs its steps publish
(Salt fires no per-step event on the master: the master runs states with ``local`` set).
Its result is ``{"jid", "steps": [<step summary>], "retcode", "cancelled", "stopped",
"not_run", "total"}`` (or ``{"errors": [...]}`` when it did not render), a step summary
``{"id", "state", "name", "result", "comment", "run_num", "duration", "minions": {minion:
{"states", "changed", "failed": [{"id", "sls", "comment", "requisite"}]} | {"errors":
[...]}}}``. Summaries never carry a state's ``changes`` (file diffs, command output):
secrets in returns stay on the master.
"""

import hashlib
import json
import os
import queue
import re
import sys
import threading
import time
import traceback
import weakref

from .lock import FileLock, LockHeld

PROTOCOL = 1
CLUSTER = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")
MINION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Jobs the orchestration publishes that are Salt's own bookkeeping, not progress.
QUIET_FUNS = ("saltutil.find_job", "test.ping", "saltutil.running")
# Jobs that run an orchestration: state.orchestrate, and the master's reactor's runner,
# which runs orch.deploy for a minion that starts (salt://_runners/kos_reactor.py).
ORCHESTRATIONS = ("runner.state.orchestrate", "runner.kos_reactor.started")
COMMENT_LIMIT = 2000
# The longest a round of op_answering waits for the silent.
PING_MAX = 60
# How long the lock and an orchestration wait for the reactor's converge of a minion that
# started, by default.
REACTOR_WAIT = 1800


# -- summaries: what of a return crosses the wire ---------------------------------------


def comment_text(comment):
    if isinstance(comment, (list, tuple)):
        comment = "\n".join(str(c) for c in comment)
    text = str(comment if comment is not None else "").strip()
    return text if len(text) <= COMMENT_LIMIT else text[:COMMENT_LIMIT] + " [...]"


def _is_state_return(ret):
    return (
        isinstance(ret, dict)
        and bool(ret)
        and all(isinstance(v, dict) and "result" in v for v in ret.values())
    )


def _state_id(key, state):
    if state.get("__id__"):
        return state["__id__"]
    parts = str(key).split("_|-")
    return parts[1] if len(parts) == 4 else str(key)


def state_summary(ret):
    """One minion's state run: counts and the failed states (ID, sls, comment)."""
    if _is_state_return(ret):
        states = sorted(ret.items(), key=lambda kv: kv[1].get("__run_num__", 0))
        failed = []
        for key, state in states:
            if state.get("result") is False:
                comment = comment_text(state.get("comment"))
                failed.append(
                    {
                        "id": _state_id(key, state),
                        "sls": state.get("__sls__"),
                        "comment": comment,
                        "requisite": comment.startswith("One or more requisite failed"),
                    }
                )
        return {
            "states": len(states),
            "changed": sum(1 for _, s in states if s.get("changes")),
            "failed": failed,
        }
    if isinstance(ret, (list, tuple)):
        # A state run that did not render returns its errors as a list.
        return {"errors": [comment_text(e) for e in ret][:20] or ["no states returned"]}
    if isinstance(ret, dict) and not ret:
        return {"errors": ["no states matched this minion (empty state run)"]}
    return {"errors": [comment_text(ret) or repr(ret)]}


def function_error(name, ret, answered):
    """Why a ``salt.function`` step failed on one minion, or None if it did not."""
    if ret is False:
        if answered is False:
            return f"did not answer {name}"
        return f"{name} returned False (the minion gave no reason)"
    if isinstance(ret, str) and ret.strip():
        return comment_text(ret)
    return None


def bare_number(comment):
    """Salt's ``salt.function`` turns an exception into its ``str``: a KeyError of an
    object id reads as a bare number. Say what it is."""
    if re.fullmatch(r"-?[0-9]+", comment or ""):
        return (
            f"Salt raised an exception whose message is only {comment!r} inside the "
            "orchestration (no minion was asked)"
        )
    return comment


def step_summary(key, step, answered=None):
    """
    One orchestration step (``key`` is its ``mod_|-id_|-name_|-fun`` tag, or None for the
    step of a progress event). ``answered(jid, minion)`` says whether the channel saw that
    minion's return for the step's job (None: unknown).
    """
    parts = str(key).split("_|-") if key else []
    tagged = len(parts) == 4
    changes = step.get("changes") if isinstance(step.get("changes"), dict) else {}
    # salt.state marks its changes as highstate output; salt.function does not.
    is_state = changes.get("out") == "highstate" or (tagged and parts[3] == "state")
    name = step.get("name") or (parts[2] if tagged else "")
    summary = {
        "id": step.get("__id__") or (parts[1] if tagged else str(key)),
        "state": f"{parts[0]}.{parts[3]}" if tagged else ("salt.state" if is_state else ""),
        "name": name,
        "result": step.get("result"),
        "comment": bare_number(comment_text(step.get("comment"))),
        "run_num": step.get("__run_num__"),
        "duration": step.get("duration"),
        "minions": {},
    }
    ret = changes.get("ret")
    if not isinstance(ret, dict):
        return summary
    jid = step.get("__jid__")
    for minion, mret in sorted(ret.items()):
        if is_state:
            summary["minions"][minion] = state_summary(mret)
        elif step.get("result") is False:
            known = answered(jid, minion) if (answered and jid) else None
            error = function_error(name, mret, known)
            if error:
                summary["minions"][minion] = {"errors": [error]}
    return summary


def orchestration_summary(data, answered=None):
    """The runner's return of ``state.orchestrate`` as ``{"steps": [...]}`` or ``{"errors"}``."""
    ret = data.get("return") if isinstance(data, dict) else data
    if isinstance(ret, str):
        return {"errors": [ret.strip().splitlines()[-1] if ret.strip() else "no return"]}
    inner = ret.get("data") if isinstance(ret, dict) else None
    if not isinstance(inner, dict) or len(inner) != 1:
        return {"errors": [f"unexpected return from state.orchestrate: {comment_text(ret)[:300]}"]}
    steps = next(iter(inner.values()))
    if isinstance(steps, (list, tuple)):
        return {"errors": [comment_text(e) for e in steps]}
    if not isinstance(steps, dict):
        return {"errors": [comment_text(steps)]}
    summaries = [step_summary(k, v, answered) for k, v in steps.items() if isinstance(v, dict)]
    summaries.sort(key=lambda s: s["run_num"] if s["run_num"] is not None else 0)
    return {"steps": summaries, "retcode": ret.get("retcode")}


# -- Salt's own bug, mended in this process ---------------------------------------------

# The Salt releases whose race the mend closes, as (first, first not): salt.utils.optsdict
# arrived in 3008.0 (saltstack/salt#68528), and 3008.3, which kos is tested with, still looks
# the root up twice (safe_opts_copy in
# https://github.com/saltstack/salt/blob/v3008.3/salt/utils/optsdict.py).
MENDED_SALT = ((3008, 0), (3009, 0))


def unmended_salt(version):
    """Why the mend refuses Salt ``version`` (a ``salt.version.SaltStackVersion``), or None."""
    first, beyond = MENDED_SALT
    if first <= tuple(version.info[:2]) < beyond:
        return None
    return (
        f"kos mends a race in Salt {first[0]}'s salt.utils.optsdict and was not tested with "
        f"Salt {version}: run Salt {first[0]} on the master (terraform variable salt_version), "
        "or test kos with this release and widen MENDED_SALT in bootstrap/kos/onmaster.py"
    )


def mend_safe_opts_copy():
    """
    ``salt.utils.optsdict.safe_opts_copy`` (Salt 3008, tested with 3008.3: ``MENDED_SALT``)
    asks ``id(opts) in _dict_to_root``, a WeakValueDictionary, then indexes it. When the
    garbage collector frees that root in another thread between the two, it raises
    ``KeyError(<id>)``; inside an orchestration, ``salt.function`` turns that into the comment
    "140641998609280" (issue 16, at kos-orch-deploy-sync, the first step: every loader the
    step builds goes through here). Holding the root for the call closes the gap. Returns
    whether it applied: a Salt without optsdict has nothing to mend; a Salt with it but
    outside ``MENDED_SALT`` raises RuntimeError, since the mend replaces a private function.
    """
    try:
        import salt.utils.optsdict as optsdict
    except ImportError:
        return False
    import salt.version

    unmended = unmended_salt(salt.version.__saltstack_version__)
    if unmended:
        raise RuntimeError(unmended)
    roots = getattr(optsdict, "_dict_to_root", None)
    original = getattr(optsdict, "safe_opts_copy", None)
    if not isinstance(roots, weakref.WeakValueDictionary) or original is None:
        return False
    if getattr(original, "__kos_mended__", False):
        return True

    def safe_opts_copy(opts, name=None):
        key = opts.value() if type(opts).__name__ == "NamedLoaderContext" else opts
        held = roots.get(id(key))  # noqa: F841 - alive until the original has looked it up
        return original(opts, name=name)

    safe_opts_copy.__kos_mended__ = True
    safe_opts_copy.__doc__ = original.__doc__
    optsdict.safe_opts_copy = safe_opts_copy
    return True


# -- the channel ------------------------------------------------------------------------


class Failure(Exception):
    def __init__(self, kind, message, **extra):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.extra = extra


class Output:
    """JSON lines on the original stdout; everything else that prints goes to stderr."""

    def __init__(self):
        self.stream = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        os.dup2(2, 1)
        self.lock = threading.Lock()
        self.gone = False

    def emit(self, **event):
        line = json.dumps(event, default=str, sort_keys=True)
        with self.lock:
            if self.gone:
                return
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (BrokenPipeError, OSError):
                self.gone = True


def _master_config_path(syspaths):
    return os.environ.get("SALT_MASTER_CONFIG") or os.path.join(syspaths.CONFIG_DIR, "master")


class Server:
    """Serves kos's requests, in order, with Salt's Python API."""

    def __init__(self, out):
        import salt.cache
        import salt.client
        import salt.config
        import salt.exceptions
        import salt.runner
        import salt.syspaths
        import salt.utils.args
        import salt.utils.event
        import salt.utils.jid
        import salt.utils.master
        import salt.version
        import salt.wheel

        self.salt = salt
        self.mended = mend_safe_opts_copy()
        self.config = _master_config_path(salt.syspaths)
        self.opts = salt.config.master_config(self.config)
        self.out = out
        self.requests = queue.Queue()
        self.cancelled = threading.Event()
        self.cancelled_ids = set()
        self.gone = False
        self.current = None
        self.orchestration = None
        self.lock = None
        self._local = None
        self._runner = None
        self._wheel = None

    # clients are built on first use: `kos status` needs no runner, a key listing no publish
    @property
    def local(self):
        if self._local is None:
            self._local = self.salt.client.LocalClient(mopts=self.opts)
        return self._local

    @property
    def runner(self):
        if self._runner is None:
            self._runner = self.salt.runner.RunnerClient(self.opts)
        return self._runner

    @property
    def wheel(self):
        if self._wheel is None:
            self._wheel = self.salt.wheel.WheelClient(self.opts)
        return self._wheel

    def close_clients(self):
        """
        Destroy the clients, each with its event bus: a client left to the garbage collector
        prints "unclosed MasterEvent" on stderr.
        """
        for name in ("_local", "_runner", "_wheel"):
            client = getattr(self, name)
            setattr(self, name, None)
            if client is not None:
                try:
                    client.destroy()
                except Exception:  # noqa: BLE001 - the client is dropped either way
                    traceback.print_exc()

    def ready(self):
        self.out.emit(
            event="ready",
            protocol=PROTOCOL,
            salt=self.salt.version.__version__,
            python=sys.version.split()[0],
            pid=os.getpid(),
            master=self.opts.get("id"),
            mended=self.mended,
        )

    # -- serving ----------------------------------------------------------------------

    def read_requests(self, stream):
        for raw in stream:
            try:
                req = json.loads(raw.decode("utf-8"))
            except ValueError:
                self.out.emit(event="error", kind="invalid", message="unreadable request")
                continue
            if req.get("op") == "cancel":
                self.cancel(req.get("id"))
            else:
                self.requests.put(req)
        # kos is gone: whatever runs for it stops, and nothing new starts.
        self.gone = True
        self.cancel()
        self.requests.put(None)

    def cancel(self, rid=None):
        """
        Cancel request ``rid`` (None: whatever runs). Waits stop at once; an orchestration
        stops before its next step (Salt's soft kill) after the step that runs.
        """
        if rid is not None:
            self.cancelled_ids.add(rid)
            if rid != self.current:
                return
        self.cancelled.set()
        jid = self.orchestration
        if jid:
            try:
                # Its own client: this runs in the reading thread, beside the orchestration.
                with self.salt.runner.RunnerClient(self.opts) as runner:
                    runner.cmd("state.soft_kill", [jid], print_event=False)
            except Exception:  # noqa: BLE001 - reported on stderr; the run goes on
                traceback.print_exc()

    def serve(self, stream):
        threading.Thread(target=self.read_requests, args=(stream,), daemon=True).start()
        try:
            while True:
                req = self.requests.get()
                if req is None or self.gone:
                    return  # kos is gone: what it queued last does not start
                self.handle(req)
        finally:
            self.close_clients()
            if self.lock:
                self.lock.release()

    def handle(self, req):
        rid = req.get("id")
        op = getattr(self, "op_" + str(req.get("op")), None)
        self.current = rid
        self.cancelled.clear()
        if rid in self.cancelled_ids:
            self.cancelled.set()
        try:
            if op is None:
                raise Failure("invalid", f"unknown request {req.get('op')!r}")
            result = op(rid, req)
        except Failure as exc:
            self.out.emit(id=rid, event="error", kind=exc.kind, message=exc.message, **exc.extra)
        except Exception as exc:  # noqa: BLE001 - one failed request must not end the channel
            self.out.emit(
                id=rid,
                event="error",
                kind="salt",
                message=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc().splitlines()[-12:],
            )
        else:
            self.out.emit(id=rid, event="result", result=result)
        finally:
            self.current = None

    def check_cancelled(self):
        if self.cancelled.is_set():
            raise Failure("interrupted", "cancelled by kos")

    # -- requests ---------------------------------------------------------------------

    def op_hello(self, rid, req):
        return {"master": self.opts.get("id"), "config": self.config}

    def op_lock(self, rid, req):
        """Take the cluster's lock on the master for as long as this channel lives."""
        cluster = str(req.get("cluster", ""))
        if not CLUSTER.match(cluster):
            raise Failure("invalid", f"not a cluster name: {cluster!r}")
        if self.lock:
            return {"path": self.lock.path, "stale": None}
        directory = os.path.join(self.opts["cachedir"], "kos")
        os.makedirs(directory, mode=0o700, exist_ok=True)
        lock = FileLock(os.path.join(directory, f"{cluster}.lock"))
        holder = dict(req.get("holder") or {}, channel_pid=os.getpid())
        try:
            stale = lock.acquire(holder)
        except LockHeld as exc:
            raise Failure(
                "locked",
                f"another kos run holds cluster {cluster}'s lock on the salt master",
                holder=exc.holder,
                orchestrations=self.running_orchestrations(),
                path=lock.path,
            ) from None
        self.lock = lock
        # An orchestration started by hand (or by a run whose session is gone) counts too;
        # the reactor's converge of a minion that started is waited for, not refused (it
        # ends, and kos would otherwise fail for as long as it runs).
        running = self.wait_for_reactor(rid, float(req.get("reactor_wait", REACTOR_WAIT)))
        return {"path": lock.path, "stale": stale, "orchestrations": running}

    def op_keys(self, rid, req):
        return self.key_lists()

    def key_lists(self):
        ret = self.wheel.cmd("key.list_all", print_event=False)
        return {
            name: sorted(ret.get(name) or [])
            for name in ("minions", "minions_pre", "minions_rejected", "minions_denied")
        }

    def op_delete_keys(self, rid, req):
        """
        Forget these minions (nodes whose servers Terraform destroyed): their keys in every
        state, and what the master keeps of them (mine, grains, pillar). Minions that have
        no key are reported, not an error: a re-run after a partial delete finishes it.
        """
        wanted = _minion_ids(req.get("minions"))
        present = set().union(*self.key_lists().values())
        todo = sorted(set(wanted) & present)
        if todo:
            self.wheel.cmd("key.delete", kwarg={"match": todo}, print_event=False)
        cache = self.salt.cache.factory(self.opts)
        for mid in wanted:
            # key.delete flushes the grains and pillar banks only; the mine is kept per id
            cache.flush("mine", mid)
        left = sorted(set().union(*self.key_lists().values()) & set(todo))
        if left:
            raise Failure("keys", f"the keys of {', '.join(left)} are still there after key.delete")
        return {"deleted": todo, "had_no_key": sorted(set(wanted) - present)}

    def op_wait_keys(self, rid, req):
        """Until every listed minion has presented a key (in any state), or the timeout."""
        wanted = _minion_ids(req.get("minions"))
        deadline = time.monotonic() + float(req.get("timeout", 900))
        events = self.salt.utils.event.get_master_event(
            self.opts, self.opts["sock_dir"], listen=True
        )
        try:
            said = None
            while True:
                keys = self.key_lists()
                present = set().union(*keys.values())
                missing = sorted(set(wanted) - present)
                if not missing or time.monotonic() > deadline:
                    return dict(keys, missing=missing)
                if missing != said:
                    self.out.emit(
                        id=rid, event="progress", message="waiting for keys", missing=missing
                    )
                    said = missing
                # A minion presenting its key fires salt/auth; re-list then, or every few s.
                until = time.monotonic() + 5
                while time.monotonic() < until:
                    self.check_cancelled()
                    ev = events.get_event(wait=1, full=True, auto_reconnect=True)
                    if ev and str(ev.get("tag", "")).startswith(("salt/auth", "salt/key")):
                        break
        finally:
            events.destroy()

    def key_fingers(self, minions):
        """``{"minions_pre": {id: fingerprint}, "minions": {...}}`` of these minions' keys."""
        ret = self.wheel.cmd("key.print", kwarg={"match": list(minions)}, print_event=False)
        return {
            status: {
                mid: key_finger(pem)
                for mid, pem in ((ret or {}).get(status) or {}).items()
                if mid in minions and isinstance(pem, str)
            }
            for status in ("minions_pre", "minions")
        }

    def op_fingers(self, rid, req):
        """The fingerprints of these minions' pending and accepted keys."""
        found = self.key_fingers(_minion_ids(req.get("minions")))
        return {"pending": found["minions_pre"], "accepted": found["minions"]}

    def op_accept(self, rid, req):
        """
        Accept exactly these pending keys, each only while its fingerprint is the one given
        (``fingers``: {id: fingerprint}), never a rejected or denied one. A key that differs
        is left pending; one that changed while it was being accepted is rejected.
        """
        fingers = req.get("fingers")
        if not isinstance(fingers, dict):
            raise Failure("invalid", f"accept needs fingers {{id: fingerprint}}: {fingers!r}")
        wanted = _minion_ids(sorted(fingers))
        pending = self.key_fingers(wanted)["minions_pre"]
        refused = {m: pending[m] for m in wanted if m in pending and pending[m] != fingers[m]}
        todo = sorted(m for m in wanted if m in pending and m not in refused)
        if todo:
            self.wheel.cmd(
                "key.accept",
                kwarg={"match": todo, "include_rejected": False, "include_denied": False},
                print_event=False,
            )
        accepted = self.key_fingers(todo)["minions"] if todo else {}
        swapped = sorted(m for m in todo if m in accepted and accepted[m] != fingers[m])
        for mid in swapped:
            self.wheel.cmd(
                "key.reject", kwarg={"match": mid, "include_accepted": True}, print_event=False
            )
            refused[mid] = accepted[mid]
        return {
            "accepted": [m for m in todo if m in accepted and m not in swapped],
            "not_pending": sorted(set(wanted) - set(pending)),
            "refused": refused,
        }

    def _ping(self, minions, timeout):
        ret = self.local.cmd(minions, "test.ping", tgt_type="list", timeout=timeout)
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
        wanted = _minion_ids(req.get("minions"))
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
        targets = _minion_ids(req.get("tgt"))
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
        wanted = set(_minion_ids(req.get("minions")))
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
                        "time": job.get("StartTime"),
                        "result": "failed" if bad else "ok",
                        "failed": bad,
                        "states": summary.get("states", 0),
                    }
            if wanted <= set(found):
                break
        return found

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
        try:
            self.check_cancelled()
            data = self.runner.low("state.orchestrate", low, print_event=False, full_return=True)
        finally:
            self.orchestration = None
            watcher.stop()
        summary = orchestration_summary(data, watcher.answered)
        summary.update(jid=jid, cancelled=self.cancelled.is_set(), stopped=False, not_run=[])
        if summary["cancelled"] and "steps" in summary:
            # The soft kill leaves the steps it skipped out of the return: name them.
            planned = self.planned_steps(sls, low["kwarg"]["pillar"])
            ran = {s["id"] for s in summary["steps"]}
            summary.update(
                not_run=sorted(planned - ran), stopped=bool(planned - ran), total=len(planned)
            )
        return summary

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


# The user Salt's reactor runs its reactions as (salt.utils.reactor.ReactWrap.event_user).
REACTOR_USER = "Reactor"


def key_finger(pem, hash_type="sha256"):
    """
    The fingerprint ``salt-call key.finger`` prints on the minion for this public key: the
    digest of the PEM's lines between its BEGIN and END lines. Computed here because the
    master's own ``key.finger`` hashes a key read from its key cache whole, headers included,
    and so prints another value (saltstack/salt#69970, fixed by #70011).
    """
    lines = [line for line in pem.splitlines(keepends=True) if line.strip()]
    body = "".join(lines[1:-1]).replace("\r\n", "\n")
    digest = hashlib.new(hash_type, body.encode()).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def _minion_ids(value):
    ids = [str(v) for v in (value or [])]
    bad = [v for v in ids if not MINION_ID.match(v)]
    if bad or not ids:
        raise Failure("invalid", f"not a list of minion ids: {value!r}")
    return ids


def main():
    out = Output()
    try:
        server = Server(out)
    except Exception as exc:  # noqa: BLE001 - kos says which host and why
        out.emit(
            event="error",
            kind="setup",
            message=f"cannot use Salt's Python API with {sys.executable}: {type(exc).__name__}: {exc}",
        )
        return 3
    server.ready()
    server.serve(sys.stdin.buffer)
    return 0


if __name__ == "__kos_channel__":
    sys.exit(main())
