"""Process control of the stand-in cluster agent (the daemon itself is agentd.py).

Kill every agent of a simulated root:  python3 -m microk8s_standin.agent kill-all ROOT
"""

import glob
import os
import select
import signal
import sys
import time

from . import common

PROCESS_TAG = "kos-standin-cluster-agent"
JOIN_PATH = "/cluster/api/v2.0/join"
SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "snap-apps",
    "microk8s",
)


def pidfile(snap_data=None):
    return os.path.join(snap_data or common.snap_data(), "var", "run", PROCESS_TAG + ".pid")


def logfile():
    return os.path.join(common.snap_common(), "var", "log", PROCESS_TAG + ".log")


# --------------------------------------------------------------------------- process control


def _is_our_agent(pid):
    try:
        with open("/proc/{}/cmdline".format(pid), "rb") as f:
            cmdline = f.read()
        with open("/proc/{}/stat".format(pid)) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return PROCESS_TAG.encode() in cmdline and state != "Z"


def _read_pid(path):
    try:
        return int(common.read_file(path, "").strip())
    except ValueError:
        return None


def agent_pid(snap_data=None):
    pid = _read_pid(pidfile(snap_data))
    return pid if pid and _is_our_agent(pid) else None


def _terminate(pid, timeout=5.0):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not _is_our_agent(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_agent(snap_data=None):
    path = pidfile(snap_data)
    pid = _read_pid(path)
    if pid and _is_our_agent(pid):
        _terminate(pid)
    common.remove(path)


def kill_all_agents(root):
    """Stop every stand-in agent whose pidfile lives under `root` (any revision)."""
    seen = set()
    pattern = os.path.join(root, "var", "snap", "microk8s", "*", "var", "run", PROCESS_TAG + ".pid")
    for path in glob.glob(pattern):
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        pid = _read_pid(real)
        if pid and _is_our_agent(pid):
            _terminate(pid)
        common.remove(real)


def start_agent(timeout=10.0):
    """Double-fork a detached agent and wait until it listens; False if it could not start."""
    if agent_pid():
        return True
    python = sys.executable or "/usr/bin/python3"
    os.makedirs(os.path.dirname(logfile()), exist_ok=True)
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            devnull = os.open(os.devnull, os.O_RDWR)
            log = os.open(logfile(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(devnull, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.closerange(3, w)
            os.closerange(w + 1, 65536)
            os.set_inheritable(w, True)
            os.chdir("/")
            # argv[0] must be the interpreter: Python finds its stdlib from it.
            os.execv(python, [python, SCRIPT, PROCESS_TAG, common.root(), str(w)])
        finally:
            os._exit(1)
    os.close(w)
    os.waitpid(pid, 0)
    msg = b""
    deadline = time.time() + timeout
    with os.fdopen(r, "rb") as pipe:
        while time.time() < deadline:
            ready, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.time()))
            if not ready:
                break
            chunk = os.read(pipe.fileno(), 256)
            if not chunk:
                break
            msg += chunk
            if b"\n" in msg:
                break
    return msg.startswith(b"ok")


def restart_agent():
    stop_agent()
    return start_agent()


def serve(root, ready_fd):
    """Entry point of the daemon process (argv: kos-standin-cluster-agent ROOT READY_FD)."""
    from . import agentd

    return agentd.serve(root, ready_fd)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "kill-all":
        kill_all_agents(sys.argv[2])
    else:
        sys.stderr.write("usage: python3 -m microk8s_standin.agent kill-all ROOT\n")
        sys.exit(2)
