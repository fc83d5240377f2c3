"""
A salt master's restart on the tcp transport (the transport of a master of masters), with a
real salt-master and salt-minion on loopback.

What an operator relies on: after the master restarts (a new configuration, a reboot, a
restart by hand), every minion answers targeted commands again. On Salt 3008.3's tcp
transport a minion that reconnects to the publisher while the master's request port does
not answer yet gives up signing in and names itself with its old session key; the master
cannot read it and never sends it a targeted job again, while the minion stays connected
(saltstack/salt#66379, seen on the rehearsal cloud). kos-salt-master-reconnect drops the
publish connections once the master serves again, so every minion reconnects and signs in
afresh; the salt_master formula runs it after each start of the master
(tests/functional/test_salt_master_formula.py).
"""

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "salt" / "salt" / "salt_master" / "files" / "kos-salt-master-reconnect"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ss"),
                       reason="ss -K needs root (CAP_NET_ADMIN)"),
]


class Gate:
    """
    A TCP relay on loopback in front of the master's request port; closed, it refuses
    connections, as a master that is still starting does.
    """

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.server = None
        self.lock = threading.Lock()
        self.pairs = []

    def open(self):
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(16)
        self.server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def close(self):
        server, self.server = self.server, None
        if server is not None:
            server.shutdown(socket.SHUT_RDWR)
            server.close()
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for sock in pairs:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self, server):
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self.lock:
                self.pairs += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def answers(master, minion_id, within):
    deadline = time.monotonic() + within
    while True:
        ret = master.salt_cli(timeout=5).run("test.ping", minion_tgt=minion_id, _timeout=10)
        # salt-factories unwraps a single minion's return
        if ret.data is True:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(1)


@pytest.fixture
def tcp_master(salt_factories):
    master = salt_factories.salt_master_daemon("kos-rs-master", overrides={"transport": "tcp"})
    with master.started(start_timeout=180):
        yield master


def test_a_restart_leaves_no_minion_deaf_to_targeted_jobs(tcp_master):
    master = tcp_master
    gate = Gate(master.config["ret_port"])
    gate.open()
    # The minion finds the master's request port behind the gate; it tries to sign in
    # once, briefly, so the fault shows in seconds rather than minutes.
    minion = master.salt_minion_daemon(
        "kos-rs-minion",
        overrides={"transport": "tcp", "master_port": gate.port, "publish_port":
                   master.config["publish_port"], "auth_timeout": 3, "auth_tries": 1,
                   "tcp_authentication_retries": 0, "acceptance_wait_time": 1})
    with minion.started(start_timeout=180):
        try:
            assert answers(master, minion.id, within=60)

            # The restart, with the request port still closed when the minion reconnects.
            gate.close()
            master.terminate()
            master.start(start_timeout=180)
            time.sleep(15)
            gate.open()
            assert not answers(master, minion.id, within=20), \
                "the fault this script cures did not show: has Salt fixed it?"

            # What kos-salt-master-reconnect.service runs each time the master starts.
            subprocess.run(["sh", SCRIPT, str(master.config["ret_port"]),
                            str(master.config["publish_port"])], check=True, timeout=180)
            assert answers(master, minion.id, within=60)
        finally:
            gate.close()
