"""
The program kos runs on the salt master: its one channel to Salt.

It runs with the Python that runs the salt master (the onedir's, a distribution's or a
virtualenv's) and uses Salt's Python API there: ``LocalClient`` to publish, ``RunnerClient``
for orchestrations and the job cache, ``WheelClient`` for keys, the master's event bus for
progress. Nothing here parses Salt's command-line output.

This module is the program's entry: the session, its lock and its serving loop. The requests
live beside it by concern, as mixins of ``Server``: ``kos.onmaster_keys``,
``kos.onmaster_minions`` and ``kos.onmaster_orchestrate``; ``kos.onmaster_summary`` says
what of a return crosses the wire.

How it gets there: ``kos.channel.Channel`` opens one SSH session per kos command and pipes
this file over its stdin, after the kos modules it imports (``kos.channel.MODULES``: the
``kos.onmaster_*`` modules and ``kos.lock``, the run lock); a short shell prelude finds the
master's Python from ``salt-run``'s first line and that Python executes them. Nothing is
installed on the master, and the master always runs the program of the kos that talks to it.
These modules import only each other, the standard library and, on the master, Salt.

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

import json
import os
import queue
import re
import sys
import threading
import traceback
import weakref

from .lock import FileLock, LockHeld
from .onmaster_keys import Keys
from .onmaster_minions import Minions
from .onmaster_orchestrate import REACTOR_WAIT, Orchestrations
from .onmaster_request import Failure

PROTOCOL = 1
CLUSTER = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")


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
    "140641998609280" (issue 16, at the first step of orch.deploy, then a module sync: every loader the
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


class Server(Keys, Minions, Orchestrations):
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
