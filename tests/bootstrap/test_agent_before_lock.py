"""Every kos run that takes a cluster's lock reaches it over SSH with the agent's keys: with
no agent it stops before the lock, naming SSH_AUTH_SOCK and how to add a key."""

import contextlib
import types

import pytest

from kos.errors import PreflightError
from kos.steps import deployment


class State:
    def __init__(self):
        self.taken = []

    @contextlib.contextmanager
    def locked(self, who):
        self.taken.append(who)
        yield

    def steps(self):
        return {}


def test_no_agent_stops_the_run_before_it_takes_the_lock(monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    dep = types.SimpleNamespace(state=State())
    with pytest.raises(PreflightError) as raised:
        with deployment.locked(dep):
            pytest.fail("the block ran without an agent")
    assert raised.value.problem == "no ssh-agent: SSH_AUTH_SOCK is not set"
    assert "ssh-add" in raised.value.fix and "ssh-agent" in raised.value.fix
    assert dep.state.taken == []


def test_an_agent_with_a_key_lets_the_run_take_the_lock(monkeypatch, ssh_agent):
    monkeypatch.setenv("SSH_AUTH_SOCK", str(ssh_agent.sock))
    dep = types.SimpleNamespace(state=State())
    with deployment.locked(dep):
        assert len(dep.state.taken) == 1
