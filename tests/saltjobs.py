"""A job of a salt master as Salt tracks it (salt.utils.master.get_running_jobs): a proc
file under the master's cachedir naming a live process whose command line says salt."""

import subprocess
import sys
import time
from pathlib import Path

import salt.payload


def running_job(cachedir, fun, jid, seconds, user="root", fun_args=()):
    """The job ``jid`` running ``fun`` for ``user``; its process ends after ``seconds``
    (Salt forgets the file once the process is gone). Returns the process."""
    proc = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})",
                             "salt-run"])
    while b"salt-run" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        time.sleep(0.01)  # until it runs its own command line, not this one's (forked)
    proc_dir = Path(cachedir) / "proc"
    proc_dir.mkdir(exist_ok=True)
    (proc_dir / jid).write_bytes(salt.payload.dumps(
        {"fun": fun, "jid": jid, "pid": proc.pid, "user": user, "fun_args": list(fun_args)}))
    return proc
