"""
salt-syndic's subscription to its top master (master of masters), and its repair.

Once the top master restarts, Salt 3008's salt-syndic never subscribes to its publisher
again: its reconnect path hands a coroutine where a future is expected
(``SyndicManager._mark_master_dead``). Measured with 3008.3 (the code is the same in
3008.5): after the top came back, neither syndic had a connection to its publish port
five minutes later, and the top's commands reached no environment. Returns still go up,
over a new request connection.

And once a return the syndic passes up times out (the top was down while this
environment ran a job), the syndic never passes a return up again: the timed-out call
hands back a string where a future is kept (``Syndic._return_pub_syndic``), and each
later forward fails on it, once a second, in the syndic's log. Seen on the rehearsal
cloud with 3008.3 after the top stopped for a minute.

The master's own minion runs ``heal`` on a schedule (pillar ``schedule:kos-syndic``,
from kos/derived.sls); it restarts salt-syndic when the top publishes and the syndic is
not listening, or cannot pass returns up.
"""

import logging
import socket
import time

import salt.utils.path
import salt.utils.process

try:
    import psutil

    HAS_PSUTIL = True
except ImportError:  # pragma: no cover - Salt depends on psutil
    HAS_PSUTIL = False

log = logging.getLogger(__name__)

__virtualname__ = "kos_syndic"

DEFAULT_PIDFILE = "/var/run/salt-syndic.pid"
# The port a syndic subscribes to on its top: its own master's publish_port (Salt's default).
DEFAULT_PORT = 4505
# salt-syndic subscribes within seconds of its start once the top has accepted its key;
# younger processes are left to finish. Under the schedule's minute, so that a syndic
# restarted just as the top came back, whose new subscription the top's own reconnect
# (kos-salt-master-reconnect) then dropped, is restarted at the next run, not two later.
# One waiting for the top to accept its key is restarted each minute meanwhile: harmless.
DEFAULT_GRACE = 45
# salt-syndic's log file (Salt's default) and what it logs there, with its pid, each time
# it fails to pass its master's returns up.
DEFAULT_LOG = "/var/log/salt/syndic"
FORWARD_FAILED = "Exception in callback <bound method SyndicManager._forward_events"
# How much of the log's end is read: the failure repeats every second.
LOG_TAIL = 256 * 1024


def __virtual__():
    if not HAS_PSUTIL:
        return False, "kos_syndic needs psutil"
    if salt.utils.path.which("salt-syndic") is None:
        return False, "salt-syndic is not installed"
    return __virtualname__


def _top():
    # unmasked: Salt 3008's pillar.get hands a module '**********' for every value otherwise
    return __salt__["pillar.get"]("kos:salt_master:syndic_master", unmask=True)


def _addresses(host, port):
    try:
        return {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except OSError:
        return set()


def _process(pidfile):
    pid = salt.utils.process.get_pidfile(pidfile)
    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc
    except (ValueError, psutil.Error):  # -1: no pidfile; or no such process
        return None


def _publishing(host, port, timeout):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _forward_failed(log_file, pid):
    try:
        with open(log_file, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - LOG_TAIL))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return False
    return f"][{pid}] {FORWARD_FAILED}" in tail


def status(pidfile=DEFAULT_PIDFILE, master=None, port=DEFAULT_PORT, timeout=3,
           log_file=DEFAULT_LOG):
    """
    Whether salt-syndic runs, is subscribed to its top master's publisher, and can pass
    returns up (its log, ``log_file``, names no failed forward of the running process).

    master: the top master (default: pillar kos:salt_master:syndic_master); port: the
    publish port it subscribes to.

    CLI Example:

    .. code-block:: bash

        salt-call kos_syndic.status
    """
    master = master or _top()
    port = int(port)
    ret = {"master": master, "port": port, "running": False, "pid": None, "age": None,
           "subscribed": False, "forwarding": False, "top_publishing": False}
    if not master:
        return ret
    ret["top_publishing"] = _publishing(master, port, timeout)
    proc = _process(pidfile)
    if proc is None:
        return ret
    ret.update(running=True, pid=proc.pid, age=round(time.time() - proc.create_time(), 1),
               forwarding=not _forward_failed(log_file, proc.pid))
    wanted = _addresses(master, port)
    for member in [proc] + proc.children(recursive=True):
        try:
            # net_connections since psutil 6; connections before
            conns = getattr(member, "net_connections", None) or member.connections
            conns = conns(kind="tcp")
        except psutil.Error:
            continue
        if any(c.status == psutil.CONN_ESTABLISHED and c.raddr and c.raddr.port == port
               and c.raddr.ip in wanted for c in conns):
            ret["subscribed"] = True
            break
    return ret


def heal(pidfile=DEFAULT_PIDFILE, master=None, port=DEFAULT_PORT, grace=DEFAULT_GRACE,
         service="salt-syndic", log_file=DEFAULT_LOG, test=False):
    """
    Restart salt-syndic when its top master publishes but the syndic cannot pass returns
    up, or is not subscribed (and has had ``grace`` seconds to be). Returns what it found
    and whether it restarted; ``test=True`` says what it would do.

    CLI Example:

    .. code-block:: bash

        salt-call kos_syndic.heal test=True
    """
    found = status(pidfile=pidfile, master=master, port=port, log_file=log_file)
    ret = {"status": found, "restart": False, "comment": ""}
    top = f"{found['master']}:{found['port']}"
    if not found["master"]:
        ret["comment"] = "this master joins no top master (kos:salt_master:syndic_master)"
    elif not found["running"]:
        ret["comment"] = f"{service} is not running; its service manager starts it"
    elif not found["top_publishing"] and not (found["subscribed"] and found["forwarding"]):
        ret["comment"] = (f"the top master {top} does not answer; "
                          f"{service} is left as it is until it does")
    elif not found["forwarding"]:
        ret["restart"] = True
        ret["comment"] = (f"the top master {top} publishes and {service} fails to pass "
                          f"returns up ({log_file})")
    elif found["subscribed"]:
        ret["comment"] = f"{service} is subscribed to {top}"
    elif found["age"] < grace:
        ret["comment"] = (f"{service} started {found['age']} s ago and is not subscribed yet; "
                          f"waiting {grace} s")
    else:
        ret["restart"] = True
        ret["comment"] = f"the top master {top} publishes and {service} is not subscribed"
    if ret["restart"]:
        if test:
            ret["comment"] += f": {service} would be restarted"
        else:
            log.warning("%s: restarting %s", ret["comment"], service)
            ret["restarted"] = __salt__["service.restart"](service)
    return ret
