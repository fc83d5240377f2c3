"""
salt-syndic's subscription to its top master (master of masters), and its repair.

Once the top master restarts, Salt 3008's salt-syndic never subscribes to its publisher
again: its reconnect path hands a coroutine where a future is expected
(``SyndicManager._mark_master_dead``). Measured with 3008.3 (the code is the same in
3008.5): after the top came back, neither syndic had a connection to its publish port
five minutes later, and the top's commands reached no environment. Returns still go up,
over a new request connection. The master's own minion runs ``heal`` on a schedule
(pillar ``schedule:kos-syndic``, from kos/derived.sls); it restarts salt-syndic when the
top publishes again and the syndic is not listening.
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
# salt-syndic's first subscription takes a few seconds (longer while its key waits for the
# top's acceptance); younger processes are left to finish it.
DEFAULT_GRACE = 120


def __virtual__():
    if not HAS_PSUTIL:
        return False, "kos_syndic needs psutil"
    if salt.utils.path.which("salt-syndic") is None:
        return False, "salt-syndic is not installed"
    return __virtualname__


def _top():
    return __salt__["pillar.get"]("kos:salt_master:syndic_master")


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


def status(pidfile=DEFAULT_PIDFILE, master=None, port=DEFAULT_PORT, timeout=3):
    """
    Whether salt-syndic runs and is subscribed to its top master's publisher.

    master: the top master (default: pillar kos:salt_master:syndic_master); port: the
    publish port it subscribes to.

    CLI Example:

    .. code-block:: bash

        salt-call kos_syndic.status
    """
    master = master or _top()
    port = int(port)
    ret = {"master": master, "port": port, "running": False, "pid": None, "age": None,
           "subscribed": False, "top_publishing": False}
    if not master:
        return ret
    ret["top_publishing"] = _publishing(master, port, timeout)
    proc = _process(pidfile)
    if proc is None:
        return ret
    ret.update(running=True, pid=proc.pid, age=round(time.time() - proc.create_time(), 1))
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
         service="salt-syndic", test=False):
    """
    Restart salt-syndic when its top master publishes but the syndic is not subscribed
    (and has had ``grace`` seconds to be). Returns what it found and whether it restarted;
    ``test=True`` says what it would do.

    CLI Example:

    .. code-block:: bash

        salt-call kos_syndic.heal test=True
    """
    found = status(pidfile=pidfile, master=master, port=port)
    ret = {"status": found, "restart": False, "comment": ""}
    if not found["master"]:
        ret["comment"] = "this master joins no top master (kos:salt_master:syndic_master)"
    elif not found["running"]:
        ret["comment"] = f"{service} is not running; its service manager starts it"
    elif found["subscribed"]:
        ret["comment"] = f"{service} is subscribed to {found['master']}:{found['port']}"
    elif not found["top_publishing"]:
        ret["comment"] = (f"the top master {found['master']}:{found['port']} does not answer; "
                          f"{service} is left as it is until it does")
    elif found["age"] < grace:
        ret["comment"] = (f"{service} started {found['age']} s ago and is not subscribed yet; "
                          f"waiting {grace} s")
    else:
        ret["restart"] = True
        ret["comment"] = (f"the top master {found['master']}:{found['port']} publishes and "
                          f"{service} is not subscribed")
        if test:
            ret["comment"] += f": {service} would be restarted"
        else:
            log.warning("%s: restarting %s", ret["comment"], service)
            ret["restarted"] = __salt__["service.restart"](service)
    return ret
