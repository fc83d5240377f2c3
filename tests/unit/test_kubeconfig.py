"""
`kos kubeconfig` without Salt: the session that reads the admin kubeconfig goes to the
first control plane's private address through the bastion, with the agent's keys only and
host keys checked (resolved by the real OpenSSH client, ``ssh -G``, which connects nowhere);
and `kos down` removes the kubeconfigs it wrote once the servers are gone, but never one
that changed since. Over real SSH and real Salt: tests/bootstrap/test_converge.py.
"""

import json
import stat
import subprocess
from types import SimpleNamespace

import pytest
from kos.errors import ConvergeError
from kos.ssh import Ssh
from kos.steps import down, kubeconfig
from kos.state import StateDir

BASTION, MASTER, FIRST = "198.51.100.7", "10.0.0.4", "10.0.0.11"


def resolved(argv):
    """What ``ssh`` would do with ``argv``, as OpenSSH resolves it (``ssh -G``)."""
    res = subprocess.run([argv[0], "-G", *argv[1:-2]], capture_output=True, text=True,
                         check=True)
    conf = {}
    for line in res.stdout.splitlines():
        key, _, value = line.partition(" ")
        conf.setdefault(key, value)
    return conf


@pytest.fixture
def ssh(tmp_path):
    s = Ssh(tmp_path / "state", BASTION, MASTER, "debian", port=2222)
    yield s
    s.close()


def test_a_node_is_reached_through_the_bastion_with_the_agents_keys_only(ssh, tmp_path):
    argv = ssh.node_argv(FIRST, "sudo -n cat -- /etc/kubernetes/admin.conf")
    assert argv[-2:] == ["--", "sudo -n cat -- /etc/kubernetes/admin.conf"]
    conf = resolved(argv)
    assert conf["hostname"] == FIRST
    assert conf["port"] == "2222"
    assert conf["user"] == "debian"
    assert conf["proxyjump"] == "kos-bastion"
    assert conf["identityfile"] == "none"
    assert conf["batchmode"] == "yes"
    # pinned from the node's console (kos.steps.hostkeys.pin_node_host_key), never trusted on first
    # use unless the operator said so
    assert conf["stricthostkeychecking"] == "true"
    assert conf["userknownhostsfile"] == str(tmp_path / "state" / "known_hosts")
    # the hop itself is the bastion's floating IP, like the master's
    bastion = resolved(["ssh", "-F", str(ssh.config), "kos-bastion", "--", "true"])
    assert bastion["hostname"] == BASTION and bastion["port"] == "2222"


def test_the_master_is_still_the_default_host(ssh):
    conf = resolved(["ssh", "-F", str(ssh.config), "kos-master", "--", "true"])
    assert conf["hostname"] == MASTER and conf["proxyjump"] == "kos-bastion"


def test_a_failed_secret_read_never_quotes_its_output(ssh, monkeypatch):
    said = "client-key-data: S0VZ\n"

    def run(argv, **kw):
        return subprocess.CompletedProcess(argv, 1, stdout=said, stderr="")

    monkeypatch.setattr(subprocess, "run", run)
    with pytest.raises(ConvergeError) as exc:
        ssh.run(["cat", "--", "/etc/kubernetes/admin.conf"], host=FIRST, secret=True)
    assert FIRST in exc.value.problem
    assert "S0VZ" not in json.dumps([exc.value.problem, exc.value.fix, exc.value.details])


class Backend:
    """Destroys the way a backend does: terraform destroy as a step, then maybe a leak."""

    def __init__(self, fail_before=False, leak_after=False):
        self.fail_before, self.leak_after = fail_before, leak_after

    def destroy(self, inputs, steps):
        if self.fail_before:
            raise ConvergeError("terraform destroy failed")
        steps.run("terraform-destroy", "fp", "terraform destroy", lambda: None, always=True)
        if self.leak_after:
            raise ConvergeError("still in the project after destroy: network kos-private")


def deployment(tmp_path, backend):
    state = StateDir(tmp_path / ".kos", "kosu")
    dep = SimpleNamespace(state=state, cluster="kosu", backend=backend, inputs=None,
                          outputs=lambda: {})
    dep.steps = state.steps()
    return dep


def write(dep, path, text="clusters: []\n"):
    kubeconfig._record_kubeconfig(dep, path, text)
    path.write_text(text)
    path.chmod(0o600)


@pytest.mark.parametrize("backend", [Backend(), Backend(leak_after=True)],
                         ids=["destroyed", "leak-found-after-destroy"])
def test_down_removes_the_kubeconfigs_kos_wrote(tmp_path, backend):
    dep = deployment(tmp_path, backend)
    mine, merged = tmp_path / "admin.kubeconfig", tmp_path / "config"
    write(dep, mine)
    write(dep, merged)
    merged.write_text(merged.read_text() + "# another cluster's context\n")
    try:
        down.down(dep, confirm=lambda _: None)
    except ConvergeError:
        assert backend.leak_after
    assert not mine.exists()
    # changed since: someone else's too now, so it stays
    assert merged.exists() and stat.S_IMODE(merged.stat().st_mode) == 0o600
    assert not dep.state.file(kubeconfig.KUBECONFIGS).exists()


def test_a_failed_destroy_keeps_them(tmp_path):
    dep = deployment(tmp_path, Backend(fail_before=True))
    mine = tmp_path / "admin.kubeconfig"
    write(dep, mine)
    with pytest.raises(ConvergeError):
        down.down(dep, confirm=lambda _: None)
    # the cluster stands: its kubeconfig is still the way in
    assert mine.exists()
    assert json.loads(dep.state.file(kubeconfig.KUBECONFIGS).read_text()) == {
        str(mine): kubeconfig._digest("clusters: []\n")}


def test_kos_asks_salt_for_no_function_that_hands_out_a_secret():
    """What the master's job cache withholds, kos itself never calls through Salt (the
    kubeconfig was ``microk8s.config`` / ``file.read`` of admin.conf before)."""
    import ast
    from pathlib import Path

    from saltext.kos.returners import kos_job_cache as cache

    repo = Path(__file__).resolve().parents[2]
    named = {}
    for source in (repo / "bootstrap" / "kos").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Constant) and node.value in cache.WITHHOLD:
                named.setdefault(node.value, []).append(f"{source.name}:{node.lineno}")
    assert named == {}
