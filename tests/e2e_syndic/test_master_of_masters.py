"""
A master of masters on the rehearsal cloud (docs/master-of-masters.md), set up as an
operator would: a top environment, then two environments whose masters join it as
syndics, each environment in a project of its own on the one rehearsal cloud, as on an
OpenStack that hosts them all: the syndics reach the top's floating IP. From the top one
command reaches the minions of both; from an environment's master, only its own.

Opt-in (KOS_E2E_SYNDIC=1): three more clusters, beyond make test's budget. The pieces are
in make test: the formula and the syndic's repair with real Salt daemons
(tests/integration/test_syndic.py), the minions' new sign-in after a master restart
(tests/integration/test_master_restart.py), the key acceptance
(tests/bootstrap/test_trust.py).
"""

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from kos_local import net as local_net
from tests.bootstrap.conftest import Kos, base_env, ssh_agent  # noqa: F401 - the fixture
from tests.e2e.conftest import CLOUD_VALUES, LocalCluster, leftovers
from tests.netlab import can_use_netns

pytestmark = [
    pytest.mark.skipif(not can_use_netns(), reason="needs root for namespaces"),
    pytest.mark.skipif(os.environ.get("KOS_E2E_SYNDIC") != "1",
                       reason="three more clusters: opt in with KOS_E2E_SYNDIC=1"),
]

ENVS = {
    "top": {"cluster_name": "kosmm-top", "deploy_domain_name": "top.kos.internal",
            "public_cidr": "10.250.0.0/24", "private_cidr": "10.251.0.0/24"},
    "dev": {"cluster_name": "kosmm-dev", "deploy_domain_name": "dev.kos.internal",
            "public_cidr": "10.252.0.0/24", "private_cidr": "10.253.0.0/24"},
    "prd": {"cluster_name": "kosmm-prd", "deploy_domain_name": "prd.kos.internal",
            "public_cidr": "10.254.0.0/24", "private_cidr": "10.255.0.0/24"},
}
SMALLEST = {"kubernetes_distribution": "microk8s", "num_control_plane": 1, "num_kube_nodes": 1}


@dataclass
class Environment(LocalCluster):
    var_file: Path = None

    @property
    def args(self):
        return ["--cloud", "local", "--var-file", self.var_file]

    def salt(self, *args, timeout=120):
        res = self.host("salt").run("salt", "--out=json", "--static", *args, timeout=timeout,
                                    check=False)
        return json.loads(res.stdout or "{}")

    def answering(self, target="*"):
        """Who answers a ping. While a syndic does not get the top's jobs yet, the CLI
        waits its timeout (60 s in kos.conf), then as long again for the syndic's
        find_job (gather_job_timeout, which it has no option for): a poll waits less."""
        found = self.salt("-t", "30", target, "test.ping", timeout=180)
        return {mid for mid, ok in found.items() if ok is True}


def up(env):
    env.up = env.kos("up", *env.args, "--yes", timeout=1500)
    assert env.up.returncode == 0, env.failed_up()


@pytest.fixture(scope="module")
def envs(tmp_path_factory, ssh_agent):  # noqa: F811 - the imported fixture
    # One operator's checkout: one clouds.yaml, a state directory per environment.
    work = tmp_path_factory.mktemp("kosmm")
    kos = Kos(work, base_env(SSH_AUTH_SOCK=ssh_agent.sock, XDG_CONFIG_HOME=work / "config"))
    found = {}
    for key, values in ENVS.items():
        values = {**values, **SMALLEST, **CLOUD_VALUES, "ssh_public_keys": [ssh_agent.public_key]}
        found[key] = Environment(kos, values, var_file=work / f"{key}.tfvars.json")
    try:
        yield found
    finally:
        for env in reversed(found.values()):
            if os.environ.get("KOS_E2E_KEEP") == "1":
                # to look inside; kos down --var-file <work>/<env>.tfvars.json ends them. Give
                # pytest a --basetemp of its own: other pytest runs meanwhile would have
                # pytest delete <work>, the state of clouds still running, as an old basetemp.
                break
            if env.var_file.exists() and (env.down is None or env.down.returncode != 0
                                          or leftovers(env.name, env.state)):
                env.down = kos("down", *env.args, "--yes", timeout=900)


def test_a_top_and_two_syndic_environments(envs):
    top, dev, prd = envs["top"], envs["dev"], envs["prd"]
    # The top first: its master's Salt ports open to the environments' clouds.
    top.values["top_master"] = {"syndic_cidrs": [str(local_net.SPACE)],
                                "syndics": [dev.name, prd.name]}
    top.var_file.write_text(json.dumps(top.values))
    up(top)
    address = top.outputs()["salt_master_floating_ip"]
    for env in (dev, prd):
        env.values["syndic_master"] = address
        env.var_file.write_text(json.dumps(env.values))
        up(env)
    # The top accepts each syndic's key as its master's console printed it.
    converged = top.kos("converge", *top.args, timeout=900)
    assert converged.returncode == 0, converged.stderr[-3000:]
    status = json.loads(top.kos("status", *top.args, "--json").stdout)
    assert status["syndics"] == {f"salt.{dev.values['deploy_domain_name']}": "accepted",
                                 f"salt.{prd.values['deploy_domain_name']}": "accepted"}

    minions = {key: set(env.outputs()["minions"]) for key, env in envs.items()}
    everyone = set().union(*minions.values())
    deadline = time.monotonic() + 180
    while True:
        # a syndic tries its key again every few seconds once the top accepted it
        answered = top.answering()
        if answered == everyone or time.monotonic() > deadline:
            break
        time.sleep(10)
    assert answered == everyone
    # One environment, picked by its domain: in the minion ids, and as the domain grain.
    assert set(top.salt(f"*.{dev.values['deploy_domain_name']}", "test.ping")) == minions["dev"]
    assert set(top.salt("-C", f"G@domain:{prd.values['deploy_domain_name']}",
                        "test.ping")) == minions["prd"]

    # An environment's own master reaches only its own minions, the top up or down.
    for key in ("dev", "prd"):
        assert set(envs[key].salt("*", "test.ping")) == minions[key]
    top.host("salt").run("systemctl", "stop", "salt-master")
    try:
        for key in ("dev", "prd"):
            assert set(envs[key].salt("*", "test.ping")) == minions[key]
    finally:
        top.host("salt").run("systemctl", "start", "salt-master")
    # Back, the top reaches every environment again (each master's kos-syndic schedule
    # restarts a syndic that no longer listens to the top).
    started = time.monotonic()
    while True:
        answered = top.answering()
        if answered == everyone or time.monotonic() > started + 300:
            break
        time.sleep(10)
    print(f"the top reached every environment again {time.monotonic() - started:.0f} s "
          "after it restarted")
    assert answered == everyone



def test_down_leaves_nothing_of_any_environment(envs):
    for env in reversed(envs.values()):
        env.down = env.kos("down", *env.args, "--yes", timeout=900)
        assert env.down.returncode == 0, env.down.stderr[-3000:]
        assert leftovers(env.name, env.state) == []
