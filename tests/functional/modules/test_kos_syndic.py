"""
saltext.kos.modules.kos_syndic through Salt's loader, against real processes and sockets on
loopback: a listening socket stands for the top master's publisher, a child process that
holds (or does not hold) a connection to it for salt-syndic. And the pillar that schedules
it, compiled by Salt from the repository's pillar tree: on a master that joins a top
master only.
"""

import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import salt.config
import salt.pillar
import yaml

from tests.formula_loader import formula_modules

REPO = Path(__file__).resolve().parents[3]
TREE = REPO / "salt" / "salt"
MASTER = "salt.kos-sd.test"


@pytest.fixture
def modules(monkeypatch):
    return formula_modules(monkeypatch, MASTER)


@pytest.fixture
def top():
    """The top master's publisher: a socket listening on loopback."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


def syndic(tmp_path, port=None):
    """A process standing for salt-syndic, connected to ``port`` when given; its pidfile."""
    code = textwrap.dedent(f"""
        import socket, sys, time
        port = {port!r}
        if port:
            conn = socket.create_connection(("127.0.0.1", port))
        print("ready", flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    pidfile = tmp_path / f"syndic-{proc.pid}.pid"
    pidfile.write_text(f"{proc.pid}\n")
    return proc, pidfile


def heal(modules, pidfile, top, **kwargs):
    return modules.kos_syndic.heal(pidfile=str(pidfile), master="127.0.0.1",
                                   port=top.getsockname()[1], test=True, **kwargs)


def test_the_top_is_the_one_terraform_named_in_the_pillar(monkeypatch, top, tmp_path):
    modules = formula_modules(monkeypatch, MASTER, pillar={
        "kos": {"salt_master": {"syndic_master": "127.0.0.1"}}})
    proc, pidfile = syndic(tmp_path, port=top.getsockname()[1])
    try:
        found = modules.kos_syndic.status(pidfile=str(pidfile), port=top.getsockname()[1])
        assert found["master"] == "127.0.0.1"
        assert found["top_publishing"] is True and found["subscribed"] is True
    finally:
        proc.kill()
        proc.wait()


def test_a_subscribed_syndic_is_left_alone(modules, top, tmp_path):
    proc, pidfile = syndic(tmp_path, port=top.getsockname()[1])
    try:
        ret = heal(modules, pidfile, top, grace=0)
        assert ret["status"]["running"] is True and ret["status"]["pid"] == proc.pid
        assert ret["status"]["subscribed"] is True and ret["status"]["top_publishing"] is True
        assert ret["restart"] is False
    finally:
        proc.kill()
        proc.wait()


def test_a_syndic_that_lost_its_top_is_restarted_once_the_top_publishes(modules, top, tmp_path):
    proc, pidfile = syndic(tmp_path)
    try:
        # young: still subscribing
        ret = heal(modules, pidfile, top, grace=3600)
        assert ret["status"]["subscribed"] is False and ret["restart"] is False
        assert "waiting 3600 s" in ret["comment"]
        ret = heal(modules, pidfile, top, grace=0)
        assert ret["restart"] is True
        assert ret["comment"].endswith("salt-syndic would be restarted")
        assert "restarted" not in ret  # test=True changed nothing
        # the top is down: nothing to gain from a restart
        port = top.getsockname()[1]
        top.close()
        ret = modules.kos_syndic.heal(pidfile=str(pidfile), master="127.0.0.1", port=port,
                                      grace=0, test=True)
        assert ret["status"]["top_publishing"] is False and ret["restart"] is False
        assert "does not answer" in ret["comment"]
    finally:
        proc.kill()
        proc.wait()


def forward_failed(pid):
    # as salt-syndic logs it (Salt's log_fmt_logfile), each second, once a return timed out
    return (f"2026-12-03 07:53:21,112 [tornado.application:945 ][ERROR   ][{pid}] Exception in "
            "callback <bound method SyndicManager._forward_events of <salt.minion.SyndicManager"
            " object at 0x7f9b8308ef50>>\nTraceback (most recent call last):\n"
            "AttributeError: 'str' object has no attribute 'done'\n")


def test_a_syndic_that_cannot_pass_returns_up_is_restarted(modules, top, tmp_path):
    proc, pidfile = syndic(tmp_path, port=top.getsockname()[1])
    log_file = tmp_path / "syndic.log"
    try:
        # an earlier syndic process failed; this one is fine
        log_file.write_text("2026-12-03 07:40:00,000 [salt.minion][INFO    ][17] Syndic started\n"
                            + forward_failed(proc.pid + 100000))
        ret = heal(modules, pidfile, top, grace=3600, log_file=str(log_file))
        assert ret["status"]["forwarding"] is True and ret["restart"] is False
        # subscribed, and yet every return it passes up fails
        with log_file.open("a") as fh:
            fh.write(forward_failed(proc.pid) * 50)
        ret = heal(modules, pidfile, top, grace=3600, log_file=str(log_file))
        assert ret["status"]["subscribed"] is True and ret["status"]["forwarding"] is False
        assert ret["restart"] is True and "fails to pass returns up" in ret["comment"]
        assert ret["comment"].endswith("salt-syndic would be restarted")
        # the top is down: a restart would fail the same way
        port = top.getsockname()[1]
        top.close()
        ret = modules.kos_syndic.heal(pidfile=str(pidfile), master="127.0.0.1", port=port,
                                      log_file=str(log_file), test=True)
        assert ret["status"]["top_publishing"] is False and ret["restart"] is False
    finally:
        proc.kill()
        proc.wait()


def test_no_syndic_running_is_left_to_its_service_manager(modules, top, tmp_path):
    ret = heal(modules, tmp_path / "absent.pid", top, grace=0)
    assert ret["status"]["running"] is False and ret["restart"] is False
    proc, pidfile = syndic(tmp_path)
    proc.kill()
    proc.wait()
    ret = heal(modules, pidfile, top, grace=0)  # a stale pidfile
    assert ret["status"]["running"] is False and ret["restart"] is False


def compiled_pillar(tmp_path, minion_id, salt_master):
    pillar_dir = tmp_path / "pillar"
    shutil.copytree(REPO / "pillar", pillar_dir)
    (pillar_dir / "_from_terraform.sls").write_text(yaml.safe_dump({"kos": {
        "salt_master": salt_master,
        "networks": {"private_cidr": "10.20.0.0/16"},
        "nodes": {"k8s-cp-1.kos-sd.test": {"role": "control_plane"}},
        "first_control_plane": "k8s-cp-1.kos-sd.test",
    }}))
    opts = salt.config.minion_config(None)
    opts.update(id=minion_id, file_client="local", pillar_roots={"base": [str(pillar_dir)]},
                cachedir=str(tmp_path / "cache"), extension_modules=str(tmp_path / "ext"))
    return salt.pillar.get_pillar(opts, {}, minion_id, "base").compile_pillar()


def test_a_master_that_joins_a_top_schedules_the_repair(tmp_path):
    facts = {"id": MASTER, "syndic_master": "salt.top.example", "transport": "tcp"}
    pillar = compiled_pillar(tmp_path, MASTER, facts)
    assert "_errors" not in pillar, pillar["_errors"]
    job = pillar["schedule"]["kos-syndic"]
    assert job["function"] == "kos_syndic.heal" and job["minutes"] == 1


@pytest.mark.parametrize("minion_id, syndic_master", [
    (MASTER, None),                           # a master on its own
    ("k8s-cp-1.kos-sd.test", "salt.top.example"),  # not the master
])
def test_no_repair_is_scheduled_elsewhere(tmp_path, minion_id, syndic_master):
    pillar = compiled_pillar(tmp_path, minion_id, {"id": MASTER, "syndic_master": syndic_master})
    assert "_errors" not in pillar, pillar["_errors"]
    assert "kos-syndic" not in pillar.get("schedule", {})
