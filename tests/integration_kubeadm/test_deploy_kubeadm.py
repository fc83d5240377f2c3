"""
orch.deploy with kubernetes:distribution kubeadm on a real master and real minions
(salt master, two control planes, two workers), each in its own network namespace.
The first control plane runs kubeadm init behind its local haproxy; the second joins
after it, alone; the workers join together, through their own haproxy, with the
credentials the first control plane published in the mine.
"""

import datetime
import hashlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration_kubeadm.conftest import (
    CCM_CREDENTIALS, CONTROL_PLANES, STANDINS, daemon_pid, instance_uuid, root_of,
)

TOKEN_RE = re.compile(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b")
K8S = ["k8s-cp-1", "k8s-cp-2", "k8s-worker-1", "k8s-worker-2"]
APISERVER = ("var/run/kos-standin-apiserver.pid", b"kos-standin-apiserver")
HAPROXY = ("run/haproxy.pid", b"haproxy")


def orchestrate(salt_run, mods="orch.deploy", pillar=None):
    args = ["state.orchestrate", mods]
    if pillar is not None:
        args.append(f"pillar={json.dumps(pillar)}")
    ret = salt_run.run(*args)
    data = ret.data
    steps = next(iter(data["data"].values())) if isinstance(data, dict) and "data" in data else data
    return ret, steps


def by_id(steps):
    return {v["__id__"]: v for v in steps.values()}


def seconds(step):
    """(start, end) of a state run, in seconds of the day."""
    t = datetime.datetime.strptime(step["start_time"], "%H:%M:%S.%f")
    start = t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6
    return start, start + step["duration"] / 1000


def minion_states(step):
    """{minion: {state id: result}} of a salt.state orchestration step."""
    out = {}
    for minion, states in ((step.get("changes") or {}).get("ret") or {}).items():
        if isinstance(states, dict):
            out[minion] = {v["__id__"]: v for v in states.values() if isinstance(v, dict)}
    return out


def changed_states(steps):
    changed = []
    for step in steps.values():
        for minion, states in minion_states(step).items():
            changed += [(minion, sid, s["changes"]) for sid, s in states.items() if s.get("changes")]
    return changed


def standin(netlab, host_roots, name, *args):
    """The kubeadm stand-in run by hand on a host (test sabotage, never through Salt)."""
    host = netlab.hosts[name]
    env = [f"KOS_STANDIN_ROOT={root_of(host_roots, name)}", f"KOS_STANDIN_IP={host.address}"]
    cmd = ["ip", "netns", "exec", host.netns, "env", *env, str(STANDINS / "bin" / "kubeadm"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def published(host_roots, name="join.json"):
    path = root_of(host_roots, "k8s-cp-1") / "etc" / "kos" / name
    return json.loads(path.read_text()) if path.exists() else None


EMPTY = hashlib.sha256(b"").hexdigest()


def mine_digest(salt_cli, reader, source, function, field):
    """What ``reader`` gets from the mine, as a digest: a job's return lands in the minion
    log, so a test that asked for the credential itself would leak it there."""
    template = ("{{ ((salt['mine.get']('%s', '%s').get('%s') or {}).get('%s') or '') | sha256 }}"
                % (source, function, source, field))
    ret = salt_cli.run("slsutil.renderer", f"string={template}", "default_renderer=jinja",
                       minion_tgt=reader)
    assert ret.returncode == 0, ret
    return ret.data.strip()


def nodes_seen_from(salt_cli, deployment, name="k8s-cp-1"):
    ret = salt_cli.run("kubeadm.nodes", minion_tgt=deployment.fqdn(name))
    assert ret.returncode == 0, ret
    return ret.data


@pytest.fixture(scope="module")
def deployed(salt_run, minions):
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, indent=1, default=str)[:8000]
    return steps


def test_every_step_succeeded_in_order(deployed, deployment):
    steps = by_id(deployed)
    assert all(s["result"] for s in steps.values()), {k: s["result"] for k, s in steps.items()}
    order = [s["__id__"] for s in sorted(steps.values(), key=lambda s: s["__run_num__"])]
    cp2 = deployment.fqdn("k8s-cp-2")
    expected = ["kos-orch-deploy-validate", "kos-orch-deploy-salt-master",
                "kos-orch-deploy-first-control-plane",
                f"kos-orch-deploy-kubeadm-credentials-{cp2}", f"kos-orch-deploy-control-plane-{cp2}",
                "kos-orch-deploy-kubeadm-credentials-workers", "kos-orch-deploy-workers",
                "kos-orch-deploy-kubeadm-revoke"]
    assert [i for i in order if i in expected] == expected


def test_control_planes_one_at_a_time_workers_together(deployed, deployment):
    steps = by_id(deployed)
    cp2 = deployment.fqdn("k8s-cp-2")
    first = seconds(steps["kos-orch-deploy-first-control-plane"])
    second = seconds(steps[f"kos-orch-deploy-control-plane-{cp2}"])
    workers = seconds(steps["kos-orch-deploy-workers"])
    assert first[1] <= second[0] and second[1] <= workers[0]
    joins = {
        minion: seconds(states["kubeadm-joined-kubeadm-joined"])
        for minion, states in minion_states(steps["kos-orch-deploy-workers"]).items()
    }
    assert set(joins) == {deployment.fqdn("k8s-worker-1"), deployment.fqdn("k8s-worker-2")}
    (a_start, a_end), (b_start, b_end) = joins.values()
    assert a_start < b_end and b_start < a_end, joins  # the two joins overlapped


def test_cluster_has_every_node_with_its_role(deployed, salt_cli, deployment, host_roots):
    nodes = nodes_seen_from(salt_cli, deployment)
    assert {n: v["roles"] for n, v in nodes.items()} == {
        "k8s-cp-1": ["control-plane"], "k8s-cp-2": ["control-plane"],
        "k8s-worker-1": [], "k8s-worker-2": [],
    }
    for name in K8S:
        assert nodes[name]["ip"] == deployment.lab.hosts[name].address
        flags = (root_of(host_roots, name) / "var/lib/kubelet/kubeadm-flags.env").read_text()
        assert "--cloud-provider=external" in flags, (name, flags)
        # servers are <cluster>-<host>: the cloud controller finds them by this UUID
        assert f"--provider-id=openstack:///{instance_uuid(name)}" in flags, (name, flags)
        assert f"--node-ip={deployment.lab.hosts[name].address}" in flags
    # a stand-in API server per control plane, on its own address
    for name in CONTROL_PLANES:
        assert daemon_pid(root_of(host_roots, name), *APISERVER)
    for name in ("k8s-worker-1", "k8s-worker-2"):
        assert daemon_pid(root_of(host_roots, name), *APISERVER) is None


def test_every_node_reaches_the_api_through_its_own_haproxy(deployed, salt_cli, deployment,
                                                             host_roots, netlab):
    for name in K8S:
        root = root_of(host_roots, name)
        pid = daemon_pid(root, *HAPROXY)
        assert pid, f"no haproxy on {name}"
        # it runs inside the host's network namespace
        netns_inode = os.stat(f"/run/netns/{netlab.hosts[name].netns}").st_ino
        assert os.stat(f"/proc/{pid}/ns/net").st_ino == netns_inode
        cfg = (root / "etc/haproxy/haproxy.cfg").read_text()
        for cp in CONTROL_PLANES:
            assert f"server {cp} {netlab.hosts[cp].address}:6443 check" in cfg
        kubelet_conf = root / "etc/kubernetes/kubelet.conf"
        assert "server: https://127.0.0.1:7443" in kubelet_conf.read_text()
        ret = salt_cli.run("cmd.run_all", f"kubectl --kubeconfig {kubelet_conf} get nodes -o name",
                           minion_tgt=deployment.fqdn(name))
        assert ret.data["retcode"] == 0, ret.data
        assert set(ret.data["stdout"].split()) == {f"node/{n}" for n in K8S}


def test_pod_network_and_cloud_controller(deployed, salt_cli, deployment, host_roots):
    cp1 = deployment.fqdn("k8s-cp-1")
    for kind, name in (("DaemonSet", "kube-router"), ("ConfigMap", "kube-router-cfg"),
                       ("ClusterRoleBinding", "kos:cloud-controller-manager")):
        ret = salt_cli.run("kubeadm.object_exists", kind, name, "namespace=kube-system",
                           minion_tgt=cp1)
        assert ret.data is True, (kind, name, ret)
    for name in K8S:
        kube = root_of(host_roots, name) / "etc/kubernetes"
        pod = kube / "manifests/openstack-cloud-controller-manager.yaml"
        cloud_conf = kube / "cloud.conf"
        if name in CONTROL_PLANES:
            assert str(cloud_conf) in pod.read_text()
            assert oct(cloud_conf.stat().st_mode & 0o777) == "0o600"
            text = cloud_conf.read_text()
            assert f'application-credential-secret="{CCM_CREDENTIALS["application_credential_secret"]}"' in text
        else:
            assert not pod.exists() and not cloud_conf.exists()
    worker_pillar = salt_cli.run("pillar.get", "kubeadm:ccm", minion_tgt=deployment.fqdn("k8s-worker-1"))
    assert "credentials" not in worker_pillar.data


def test_join_credentials_are_revoked_after_the_deploy(deployed, salt_cli, deployment, host_roots):
    assert published(host_roots) is None and published(host_roots, "join-control-plane.json") is None
    tokens = salt_cli.run("kubeadm.token_list", minion_tgt=deployment.fqdn("k8s-cp-1")).data
    assert [t for t in tokens if t["description"] == "kos: node join"] == []
    assert [t for t in tokens if t["description"].startswith("Proxy for managing TTL")] == []
    seen = salt_cli.run("mine.get", deployment.fqdn("k8s-cp-1"), "kos_join",
                        minion_tgt=deployment.fqdn("k8s-worker-1")).data
    assert not seen or not list(seen.values())[0]


def test_second_run_changes_nothing(deployed, salt_run):
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
    assert changed_states(steps) == []


def test_an_empty_pillar_cache_still_runs_the_credential_steps(deployed, salt_run, deployment):
    """The distribution comes from the master's own pillar: with the minions' cached pillar
    gone (a fresh master, a cleared cache) the kubeadm join and revoke steps still run."""
    assert salt_run.run("cache.clear_pillar", "tgt=*").returncode == 0
    cached = salt_run.run("cache.pillar", "tgt=*").data
    assert cached and not any(cached.values()), cached
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
    ids = set(by_id(steps))
    cp2 = deployment.fqdn("k8s-cp-2")
    assert {f"kos-orch-deploy-kubeadm-credentials-{cp2}", "kos-orch-deploy-kubeadm-credentials-workers",
            "kos-orch-deploy-kubeadm-revoke"} <= ids, sorted(ids)
    assert changed_states(steps) == []


@pytest.fixture(scope="module")
def removed(deployed, salt_run, salt_cli, deployment):
    targets = [deployment.fqdn("k8s-cp-2"), deployment.fqdn("k8s-worker-2")]
    ret, steps = orchestrate(salt_run, "kubeadm.orch.remove", {"kubeadm_remove": targets})
    assert ret.returncode == 0, json.dumps(steps, default=str)[:6000]
    return steps


def test_remove_drains_resets_and_deletes(removed, salt_cli, deployment, host_roots):
    order = [s["__id__"] for s in sorted(removed.values(), key=lambda s: s["__run_num__"])]
    assert order == [f"kubeadm-orch-remove-{step}-{node}" for node in ("k8s-cp-2", "k8s-worker-2")
                     for step in ("drain", "reset", "delete")]
    assert set(nodes_seen_from(salt_cli, deployment)) == {"k8s-cp-1", "k8s-worker-1"}
    for name in ("k8s-cp-2", "k8s-worker-2"):
        kube = root_of(host_roots, name) / "etc/kubernetes"
        assert not (kube / "kubelet.conf").exists() and not (kube / "cloud.conf").exists()
    assert daemon_pid(root_of(host_roots, "k8s-cp-2"), *APISERVER) is None


@pytest.fixture(scope="module")
def sabotaged(removed, salt_cli, deployment, host_roots, netlab):
    """Credentials published for the two leavers, then made worthless behind the mine's back:
    the certificate key's Secret deleted, the token swapped for one that expired."""
    cp1 = deployment.fqdn("k8s-cp-1")
    ret = salt_cli.run("state.apply", "kubeadm.credentials", minion_tgt=cp1)
    assert ret.returncode == 0, ret
    token_doc, key_doc = published(host_roots), published(host_roots, "join-control-plane.json")
    assert token_doc and key_doc
    # the mine serves the token to Kubernetes nodes and the key to control planes only
    worker, cp2 = deployment.fqdn("k8s-worker-1"), deployment.fqdn("k8s-cp-2")
    master = deployment.fqdn("salt")
    token_hash = hashlib.sha256(token_doc["token"].encode()).hexdigest()
    key_hash = hashlib.sha256(key_doc["certificate_key"].encode()).hexdigest()
    assert mine_digest(salt_cli, worker, cp1, "kos_join", "token") == token_hash
    assert mine_digest(salt_cli, cp2, cp1, "kos_join", "token") == token_hash
    assert mine_digest(salt_cli, master, cp1, "kos_join", "token") == EMPTY
    assert mine_digest(salt_cli, cp2, cp1, "kos_join_control_plane", "certificate_key") == key_hash
    assert mine_digest(salt_cli, worker, cp1, "kos_join_control_plane", "certificate_key") == EMPTY

    res = standin(netlab, host_roots, "k8s-cp-1", "token", "delete", key_doc["owner_token_id"])
    assert res.returncode == 0, res.stderr
    # cp2 with the published key: the Secret is gone
    tried_cp = salt_cli.run("state.single", "kubeadm.joined", f"name={cp1}",
                            "api_server_endpoint=127.0.0.1:7443", "role=control_plane",
                            "node_name=k8s-cp-2", "discovery_timeout=3", minion_tgt=cp2)

    dead = standin(netlab, host_roots, "k8s-cp-1", "token", "create", "--ttl", "1s",
                   "--description", "kos: node join").stdout.strip()
    assert TOKEN_RE.fullmatch(dead)
    assert standin(netlab, host_roots, "k8s-cp-1", "token", "delete",
                   token_doc["token_id"]).returncode == 0
    path = root_of(host_roots, "k8s-cp-1") / "etc/kos/join.json"
    path.write_text(json.dumps(dict(token_doc, token=dead, token_id=dead.split(".")[0])))
    assert salt_cli.run("mine.update", minion_tgt=cp1).returncode == 0
    time.sleep(1.5)
    tried_worker = salt_cli.run("state.single", "kubeadm.joined", f"name={cp1}",
                                "api_server_endpoint=127.0.0.1:7443", "node_name=k8s-worker-2",
                                "discovery_timeout=3", minion_tgt=deployment.fqdn("k8s-worker-2"))
    return {"token": token_doc, "key": key_doc, "dead": dead, "tried_cp": tried_cp,
            "tried_worker": tried_worker}


def _state(ret):
    return next(iter(ret.data.values()))


def test_worthless_credentials_really_fail_a_join(sabotaged):
    cp = _state(sabotaged["tried_cp"])
    assert cp["result"] is False
    assert 'Secret "kubeadm-certs" was not found' in cp["comment"], cp
    worker = _state(sabotaged["tried_worker"])
    assert worker["result"] is False
    assert "could not find a JWS signature" in worker["comment"], worker


def test_expired_token_and_stale_key_are_replaced_and_the_joins_succeed(
        sabotaged, salt_run, salt_cli, deployment, host_roots):
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, default=str)[:8000]
    cp1 = deployment.fqdn("k8s-cp-1")
    # the first control plane's own highstate renewed both, before any join wave
    first = minion_states(by_id(steps)["kos-orch-deploy-first-control-plane"])[cp1]
    token = first["kubeadm-credentials-kubeadm-token_present"]
    key = first["kubeadm-credentials-kubeadm-certificate_key_present"]
    assert "gone from the cluster" in token["comment"] and token["changes"], token
    assert "kubeadm-certs Secret is gone" in key["comment"] and key["changes"], key
    assert sabotaged["key"]["certificate_key"] not in json.dumps(key)
    assert set(nodes_seen_from(salt_cli, deployment)) == set(K8S)
    for name in ("k8s-cp-2", "k8s-worker-2"):
        assert (root_of(host_roots, name) / "etc/kubernetes/kubelet.conf").exists()
    assert daemon_pid(root_of(host_roots, "k8s-cp-2"), *APISERVER)


def test_no_log_carries_a_join_credential(sabotaged, minions, salt_master):
    secrets = [sabotaged["token"]["token"], sabotaged["dead"], sabotaged["key"]["certificate_key"]]
    logs = [Path(f.config["log_file"]) for f in minions.values()]
    logs.append(Path(salt_master.config["log_file"]))
    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        for secret in secrets:
            assert secret not in text, log
        assert not TOKEN_RE.search(text), (log, TOKEN_RE.search(text).group(0))


def test_api_survives_losing_a_control_plane(sabotaged, salt_cli, deployment, host_roots):
    """Last: the first control plane's API server dies; workers go on through haproxy."""
    pid = daemon_pid(root_of(host_roots, "k8s-cp-1"), *APISERVER)
    assert pid
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.05)
    kubelet_conf = root_of(host_roots, "k8s-worker-1") / "etc/kubernetes/kubelet.conf"
    ret = salt_cli.run("cmd.run_all", f"kubectl --kubeconfig {kubelet_conf} get nodes -o name",
                       minion_tgt=deployment.fqdn("k8s-worker-1"))
    assert ret.data["retcode"] == 0, ret.data
    assert "node/k8s-worker-2" in ret.data["stdout"].split()
