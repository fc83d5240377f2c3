"""
How kos asks the salt master: one structured channel, ``kos/onmaster.py``, that runs on the
master with the master's own Python and Salt's Python API, in one SSH session per kos
command, and streams JSON events back (its docstring gives the wire format). kos reads
events, never Salt's command-line output. The program travels over the session's stdin,
after the kos modules it imports (``MODULES``): a shell prelude finds the Python that runs
Salt from ``salt-run``'s first line (a virtualenv or distribution shebang, or the onedir's
relenv launcher), and that Python executes what it reads. Nothing is installed on the master
and the program always matches this kos.
"""

import itertools
import json
import re
import subprocess
import threading
from collections import deque
from pathlib import Path

from . import ui
from .errors import ConvergeError, Interrupted, Locked
from .onmaster import PROTOCOL
from .state import describe_holder

# The program, and the kos modules it imports, each before the modules that import it; they
# use only each other, the standard library and Salt (tests/unit/test_channel_shipment.py).
MODULES = (
    "kos.lock",
    "kos.onmaster_summary",
    "kos.onmaster_request",
    "kos.onmaster_keys",
    "kos.onmaster_minions",
    "kos.onmaster_orchestrate",
)
PROGRAM = "kos.onmaster"

# Finds the Python that runs Salt on the master and runs the channel with it. salt-run's
# first line names it: "#!/path/python" (virtualenv, distribution package),
# "#!/usr/bin/env python3", or "#!/bin/sh" for the onedir (relenv) launcher, whose
# '"exec" "$(dirname "$(readlink -f "$0")")/bin/python3.10"' line gives it relative to itself.
PRELUDE = r"""
loader=$1; py=
for c in "$(command -v salt-run)" /opt/saltstack/salt/salt-run /usr/bin/salt-run; do
  [ -n "$c" ] && [ -f "$c" ] || continue
  f=$(readlink -f "$c")
  IFS= read -r first < "$f" || continue
  case $first in
  '#!/bin/sh'*)
    rel=$(sed -n 's|^"exec" "$(dirname "$(readlink -f "$0")")\([^"]*\)".*|\1|p' "$f" | head -n 1)
    py=${f%/*}${rel:-/bin/python3} ;;
  '#!'*python*)
    set -- ${first#??}
    py=$1
    if [ "${1##*/}" = env ]; then py=$(command -v "$2"); fi ;;
  esac
  [ -n "$py" ] && [ -x "$py" ] && break
  py=
done
if [ -z "$py" ]; then
  echo "kos: no salt-run with a Python interpreter here (is this the salt master?)" >&2
  exit 127
fi
exec "$py" -c "$loader" kos-salt-channel
"""
# A line with the names of MODULES and of the program arrives on stdin first, then each one's
# text, in that order, after its length; the rest of stdin carries the requests. Each module is
# registered under its name before the next one runs, so a relative import ("from .lock
# import") finds it (importlib looks a module up in sys.modules before anything else:
# https://docs.python.org/3/reference/import.html#the-module-cache).
# "salt" in the command line lets Salt's job tracking (salt-run jobs.master) see the process.
LOADER = """
import sys, types
stdin = sys.stdin.buffer
*modules, program = stdin.readline().decode().split()
def read(name):
    return compile(stdin.read(int(stdin.readline())), name.replace(".", "/") + ".py", "exec")
for name in modules:
    module = sys.modules[name] = types.ModuleType(name)
    module.__package__ = name.rpartition(".")[0]
    exec(read(name), module.__dict__)
exec(read(program), {"__name__": "__kos_channel__", "__package__": program.rpartition(".")[0]})
"""
# What Salt (and Python) print on stderr that says nothing about a failure: log records below
# ERROR, such as "[WARNING ] unclosed MasterEvent ...; call destroy()" when a client's event
# bus is collected, and the ResourceWarning lines beside them. kos never reads the session's
# exit or a failure from stderr; these lines are only left out of the details of one.
NOISE = re.compile(
    r"^\s*(\[(TRACE|GARBAGE|DEBUG|PROFILE|INFO|WARNING)\s*\]"
    r"|(\S+:\d+: )?\w*Warning: |unclosed \S+|warnings\.warn\(|$)"
)
NO_PYTHON_FIX = (
    "kos runs a small program with the Python that runs Salt on the master: check that "
    "salt-run is installed there (salt-bootstrap onedir: /opt/saltstack/salt/salt-run)"
)


def source(name):
    """The text of kos module ``name`` (``kos.x``) in this kos."""
    return Path(__file__).parent.joinpath(*name.split(".")[1:]).with_suffix(".py").read_bytes()


def shipment():
    """What the loader reads before the requests: the names, then each text after its length."""
    names = (*MODULES, PROGRAM)
    parts = [source(name) for name in names]
    return " ".join(names).encode() + b"\n" + b"".join(b"%d\n%s" % (len(p), p) for p in parts)


class Channel:
    """One session with ``kos/onmaster.py`` on the master; requests are served in order."""

    def __init__(self, ssh):
        self.ssh = ssh
        self.proc = None
        self.info = None
        self.ids = itertools.count(1)
        self.stderr = deque(maxlen=30)
        self.busy = None

    def open(self):
        if self.proc is not None:
            return self
        self.proc = self.ssh.popen(
            ["sh", "-c", PRELUDE, "kos-salt-channel", LOADER], binary=True, stderr=True
        )
        threading.Thread(target=self._keep_stderr, daemon=True).start()
        self._write(shipment())
        event = self._next("starting kos's channel on the salt master")
        if event.get("event") == "error":
            raise ConvergeError(
                f"the salt master cannot run kos's channel: {event.get('message')}",
                fix=NO_PYTHON_FIX,
            )
        if event.get("event") != "ready" or event.get("protocol") != PROTOCOL:
            raise ConvergeError(f"unexpected first event from the salt master: {event}")
        self.info = event
        return self

    def _keep_stderr(self):
        # Kept in memory for error messages only: never written to disk or logged.
        for raw in self.proc.stderr:
            self._keep(raw)

    def _keep(self, raw):
        # Log noise would push the lines that say why a session failed out of the window.
        line = raw.decode("utf-8", "replace").rstrip()
        if not NOISE.match(line):
            self.stderr.append(line)

    def _write(self, data):
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # the session ended; reading says why

    def _send(self, message):
        self._write(json.dumps(message).encode() + b"\n")

    def _next(self, what):
        while True:
            raw = self.proc.stdout.readline()
            if not raw:
                raise self._ended(what)
            try:
                event = json.loads(raw)
            except ValueError:
                self._keep(raw)  # not an event: something printed on stdout
                continue
            if isinstance(event, dict):
                return event

    def details(self, count=12):
        """The session's last stderr lines that may say why it failed (never log noise)."""
        return list(self.stderr)[-count:]

    def _ended(self, what):
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        details = self.details()
        if code == 127:
            return ConvergeError(
                "found no Python that runs Salt on the salt master",
                fix=NO_PYTHON_FIX,
                details=details,
            )
        if code == 255:
            return ConvergeError(
                f"lost the SSH connection to the salt master while {what}",
                fix="re-run the same kos command: every step can be repeated",
                details=details,
            )
        return ConvergeError(
            f"kos's channel on the salt master ended while {what} (exit {code})", details=details
        )

    def request(self, op, on_event=None, what=None, keep_on_interrupt=False, **params):
        """
        Send one request and return its result; ``on_event`` sees every other event.

        Ctrl-C cancels the request on the master. With ``keep_on_interrupt`` (an
        orchestration), kos keeps reading until the master says the request stopped, and a
        second Ctrl-C leaves it finishing there; otherwise ``Interrupted`` is raised at once.
        """
        what = what or op
        self.open()
        rid = next(self.ids)
        self._send({"id": rid, "op": op, **params})
        self.busy = op
        cancelled = False
        while True:
            try:
                event = self._next(what)
                if event.get("id") != rid:
                    continue
                kind = event.get("event")
                if kind == "result":
                    self.busy = None
                    return event.get("result")
                if kind == "error":
                    self.busy = None
                    raise self._error(what, event)
                if on_event:
                    on_event(event)
            except KeyboardInterrupt:
                self._send({"op": "cancel", "id": rid})
                if not keep_on_interrupt or cancelled:
                    raise Interrupted(
                        f"interrupted while {what}"
                        + (
                            "; it finishes its current step on the salt master" if cancelled else ""
                        ),
                        fix="re-run the same kos command to finish",
                    ) from None
                cancelled = True
                ui.warn(
                    f"interrupted: {what} stops after its current step; waiting for it "
                    "(Ctrl-C again to leave it finishing on the master)"
                )

    def _error(self, what, event):
        kind, message = event.get("kind"), event.get("message", "")
        if kind == "locked":
            return locked_error(event)
        if kind == "busy":
            return busy_error(event.get("orchestrations") or [])
        if kind == "interrupted":
            return Interrupted(f"interrupted while {what}", fix="re-run the same kos command")
        return ConvergeError(
            f"{what} failed on the salt master: {message}",
            details=[line for line in event.get("traceback", []) if line.strip()][-6:],
        )

    def close(self):
        """End the session; the master releases its lock when its program exits."""
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            # A request still running (a second Ctrl-C) goes on without us.
            self.proc.wait(timeout=1 if self.busy else 30)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _job_line(job):
    args = " ".join(str(a) for a in job.get("fun_args") or [] if not isinstance(a, dict))
    return (
        f"orchestration jid {job.get('jid')} ({job.get('fun', '').replace('runner.', '')} "
        f"{args}), PID {job.get('pid')} on the master, user {job.get('user')}"
    )


def busy_error(jobs):
    return Locked(
        "the salt master is already running an orchestration: kos does not start a second "
        "one beside it, and changes nothing while it runs",
        fix="wait for it to end (on the master, `salt-run jobs.master` lists it; "
        "`salt-run state.soft_kill <jid>` stops it after its current step), then re-run",
        details=[_job_line(j) for j in jobs],
    )


def locked_error(event):
    holder = event.get("holder") or {}
    details = [_job_line(j) for j in event.get("orchestrations") or []]
    if details:
        details.insert(0, "it is still running on the master:")
    return Locked(
        f"another kos run is working on this cluster (lock on the salt master): "
        f"{describe_holder(holder)}",
        fix="wait for that run to end, then re-run; the master drops the lock when that run's "
        "session ends, and an orchestration it started stops after its current step",
        details=details,
    )
