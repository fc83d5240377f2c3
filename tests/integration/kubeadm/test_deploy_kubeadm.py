"""
orch.deploy with kos:distribution kubeadm on a real master and real minions
(salt master, two control planes, two workers), each in its own network namespace.
The first control plane runs kubeadm init behind its local haproxy; the second joins
after it, alone; the workers join together, through their own haproxy, each with the
credential the first control plane issued for it alone.
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

from tests.integration.conftest import (
    EMPTY, by_id, converged, highstated, mine_digest, orchestrate,
)
from tests.integration.kubeadm.conftest import (
    CCM_CREDENTIALS, CONTROL_PLANES, STANDINS, daemon_pid, instance_uuid, root_of,
)

TOKEN_RE = re.compile(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b")
K8S = ["k8s-cp-1", "k8s-cp-2", "k8s-worker-1", "k8s-worker-2"]
APISERVER = ("var/run/kos-standin-apiserver.pid", b"kos-standin-apiserver")
HAPROXY = ("run/haproxy.pid", b"haproxy")


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
    env = [f"KOS_STANDIN_ROOT={root_of(host_roots, name)}", f"KOS_STANDIN_IP={host.address}",
           "KOS_STANDIN_DISCOVERY_TIMEOUT=3"]
    cmd = ["ip", "netns", "exec", host.netns, "env", *env, str(STANDINS / "bin" / "kubeadm"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def issued(host_roots, minion):
    """The credential the first control plane issued for ``minion`` (None: none)."""
    path = root_of(host_roots, "k8s-cp-1") / "etc/kos/join" / f"{minion}.json"
    return json.loads(path.read_text()) if path.exists() else None


def nodes_seen_from(salt_cli, deployment, name="k8s-cp-1"):
    ret = salt_cli.run("kos_kubectl.nodes", minion_tgt=deployment.fqdn(name))
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
    expected = ["kos-orch-deploy-validate", "kos-orch-deploy-first-control-plane",
                f"kos-orch-deploy-credentials-{cp2}", f"kos-orch-deploy-control-plane-{cp2}",
                f"kos-orch-deploy-revoke-{cp2}", "kos-orch-deploy-credentials-workers",
                "kos-orch-deploy-wave", "kos-orch-deploy-spread", "kos-orch-deploy-revoke"]
    assert [i for i in order if i in expected] == expected
    assert highstated(deployed) == {
        "kos-orch-deploy-first-control-plane": {deployment.fqdn("k8s-cp-1")},
        f"kos-orch-deploy-control-plane-{cp2}": {cp2},
        "kos-orch-deploy-wave": {deployment.fqdn(n)
                                 for n in ("salt", "k8s-worker-1", "k8s-worker-2")},
    }


def test_control_planes_one_at_a_time_workers_together(deployed, deployment):
    steps = by_id(deployed)
    cp2 = deployment.fqdn("k8s-cp-2")
    first = seconds(steps["kos-orch-deploy-first-control-plane"])
    second = seconds(steps[f"kos-orch-deploy-control-plane-{cp2}"])
    workers = seconds(steps["kos-orch-deploy-wave"])
    assert first[1] <= second[0] and second[1] <= workers[0]
    wave = minion_states(steps["kos-orch-deploy-wave"])
    joined = {minion for minion, states in wave.items() if "kubeadm-joined-kubeadm-joined" in states}
    assert joined == {deployment.fqdn("k8s-worker-1"), deployment.fqdn("k8s-worker-2")}
    # Together means both highstates ran at once, not one after the other. Their joins
    # alone may not overlap: a 2 s stand-in join lands wherever each minion's earlier
    # states happened to finish on a loaded machine (CI saw them 0.1 s apart).
    spans = {}
    for minion in joined:
        times = [seconds(s) for s in wave[minion].values() if "start_time" in s]
        spans[minion] = (min(t[0] for t in times), max(t[1] for t in times))
    (a_start, a_end), (b_start, b_end) = spans.values()
    assert a_start < b_end and b_start < a_end, spans


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


def test_cluster_dns_survives_any_one_node(deployed, salt_cli, deployment):
    """kubeadm deployed both CoreDNS replicas on k8s-cp-1, then the only node; once the
    others joined, the orchestration restarted CoreDNS and the replicas parted."""
    ret = salt_cli.run("kos_kubectl.pods", "selector=k8s-app=kube-dns",
                       minion_tgt=deployment.fqdn("k8s-cp-1"))
    assert ret.returncode == 0, ret
    hosts = [pod["node"] for pod in ret.data.values()]
    assert len(hosts) == 2 and len(set(hosts)) == 2, ret.data
    spread = by_id(deployed)["kos-orch-deploy-spread"]
    assert spread["result"] is True and "were all on k8s-cp-1" in json.dumps(spread), spread


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
        ret = salt_cli.run("kos_kubectl.object_exists", kind, name, "namespace=kube-system",
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
    join_dir = root_of(host_roots, "k8s-cp-1") / "etc/kos/join"
    assert not join_dir.exists() or list(join_dir.iterdir()) == []
    tokens = salt_cli.run("kos_join.token_list", minion_tgt=deployment.fqdn("k8s-cp-1")).data
    assert [t for t in tokens if t["description"].startswith("kos: node join")] == []
    assert [t for t in tokens if t["description"].startswith("Proxy for managing TTL")] == []
    cp1 = deployment.fqdn("k8s-cp-1")
    for name in ("k8s-cp-2", "k8s-worker-1"):
        minion = deployment.fqdn(name)
        assert mine_digest(salt_cli, minion, cp1, f"kos_join_{minion}", "token") == EMPTY


def test_second_run_runs_no_highstate(deployed, salt_run):
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
    assert highstated(steps) == {} and changed_states(steps) == []


def test_an_empty_pillar_cache_still_converges_kubeadm(deployed, salt_run, deployment):
    """The distribution comes from the master's own pillar: with the minions' cached pillar
    gone (a fresh master, a cleared cache) a forced run is still one kubeadm wave that
    changes nothing."""
    assert salt_run.run("cache.clear_pillar", "tgt=*").returncode == 0
    cached = salt_run.run("cache.pillar", "tgt=*").data
    assert cached and not any(cached.values()), cached
    ret, steps = orchestrate(salt_run, pillar={"force": True})
    assert ret.returncode == 0, json.dumps(steps, default=str)[:4000]
    # the kubeadm highstate ran everywhere, and succeeded (microk8s states would fail here)
    assert highstated(steps) == {"kos-orch-deploy-wave": {deployment.fqdn(n)
                                                          for n in ("salt", *K8S)}}
    assert changed_states(steps) == []


def test_a_rebuilt_first_control_plane_would_rejoin_through_another(deployed, salt_run,
                                                                     deployment, host_roots):
    """k8s-cp-1 holds nothing of its cluster (its /etc/kubernetes gone, as on a server
    rebuilt under its name) while k8s-cp-2 and the workers are joined: orch.deploy in
    test mode has it rejoin through k8s-cp-2, which issues and revokes its credential,
    its highstate takes the joined path (kubeadm.joined, never kubeadm init), and nothing
    changes."""
    cp1, cp2 = deployment.fqdn("k8s-cp-1"), deployment.fqdn("k8s-cp-2")
    kube = root_of(host_roots, "k8s-cp-1") / "etc/kubernetes"
    aside = kube.with_name("kubernetes.kos-aside")
    kube.rename(aside)
    try:
        ret, steps = orchestrate(salt_run, test=True)
        ids = by_id(steps)
        dump = json.dumps(steps, default=str)[:6000]
        assert ids["kos-orch-deploy-plan"]["name"].endswith(
            f"{cp1} (rebuilt) rejoins the cluster through {cp2}"), dump
        assert "kos-orch-deploy-first-control-plane" not in ids
        assert "kos-orch-deploy-first-control-plane-lost" not in ids
        for step in ("credentials", "revoke"):
            assert converged(ids[f"kos-orch-deploy-{step}-{cp1}"]) == {cp2}, dump
        issuing = minion_states(ids[f"kos-orch-deploy-credentials-{cp1}"])[cp2]
        assert f"kubeadm-credentials-kubeadm_join-credential_present-{cp1}" in issuing
        joining = minion_states(ids[f"kos-orch-deploy-control-plane-{cp1}"])[cp1]
        assert "kubeadm-joined-kubeadm-joined" in joining, sorted(joining)
        assert not any(sid.startswith("kubeadm-master-") for sid in joining), sorted(joining)
        # test mode: no credential issued, no configuration written on the issuer
        cp2_root = root_of(host_roots, "k8s-cp-2")
        assert not (cp2_root / "etc/kos/join" / f"{cp1}.json").exists()
        assert not (cp2_root / "etc/kubernetes/kubeadm-config.yaml").exists()
        assert not kube.exists()
    finally:
        aside.rename(kube)
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0 and highstated(steps) == {}, json.dumps(steps, default=str)[:4000]


@pytest.fixture(scope="module")
def removed(deployed, salt_run, salt_cli, deployment):
    targets = [deployment.fqdn("k8s-cp-2"), deployment.fqdn("k8s-worker-2")]
    ret, steps = orchestrate(salt_run, {"remove": targets}, sls="orch.remove")
    assert ret.returncode == 0, json.dumps(steps, default=str)[:6000]
    return steps


def test_remove_drains_resets_and_deletes_workers_first(removed, salt_cli, deployment,
                                                         host_roots):
    order = [s["__id__"] for s in sorted(removed.values(), key=lambda s: s["__run_num__"])
             if s["__id__"] != "kos-orch-remove-extension"]
    assert order == [f"kos-orch-remove-{deployment.fqdn(node)}-{step}"
                     for node in ("k8s-worker-2", "k8s-cp-2")
                     for step in ("drain", "leave", "forget")]
    assert set(nodes_seen_from(salt_cli, deployment)) == {"k8s-cp-1", "k8s-worker-1"}
    for name in ("k8s-cp-2", "k8s-worker-2"):
        kube = root_of(host_roots, name) / "etc/kubernetes"
        assert not (kube / "kubelet.conf").exists() and not (kube / "cloud.conf").exists()
    assert daemon_pid(root_of(host_roots, "k8s-cp-2"), *APISERVER) is None


@pytest.fixture(scope="module")
def credentials(removed, salt_cli, deployment, host_roots):
    """Credentials issued for the two leavers (the orchestration's credentials step, by
    hand): each reads its own, and only its own."""
    cp1, cp2, worker = (deployment.fqdn(n) for n in ("k8s-cp-1", "k8s-cp-2", "k8s-worker-2"))
    run = {"kos_orchestration": {"join_nodes": [cp2, worker]}}
    ret = salt_cli.run("state.apply", "kubeadm.credentials", f"pillar={json.dumps(run)}",
                       minion_tgt=cp1)
    assert ret.returncode == 0, ret
    return {"cp": issued(host_roots, cp2), "worker": issued(host_roots, worker)}


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def test_each_node_reads_its_own_credential_and_only_a_control_plane_gets_a_key(
        credentials, salt_cli, deployment):
    cp1, cp2, worker = (deployment.fqdn(n) for n in ("k8s-cp-1", "k8s-cp-2", "k8s-worker-2"))
    cp_doc, worker_doc = credentials["cp"], credentials["worker"]
    assert (worker_doc["role"], cp_doc["role"]) == ("worker", "control_plane")
    assert "certificate_key" not in worker_doc and cp_doc["certificate_key"]
    assert worker_doc["token"] != cp_doc["token"]
    assert mine_digest(salt_cli, worker, cp1, f"kos_join_{worker}", "token") == \
        sha(worker_doc["token"])
    assert mine_digest(salt_cli, cp2, cp1, f"kos_join_{cp2}", "certificate_key") == \
        sha(cp_doc["certificate_key"])
    # nobody reads another node's credential: not a worker, not the master, not a control plane
    for reader in (worker, deployment.fqdn("k8s-worker-1"), deployment.fqdn("salt")):
        assert mine_digest(salt_cli, reader, cp1, f"kos_join_{cp2}", "certificate_key") == EMPTY
    assert mine_digest(salt_cli, cp2, cp1, f"kos_join_{worker}", "token") == EMPTY


def test_a_workers_credential_cannot_join_a_control_plane(credentials, netlab, host_roots):
    """The worker's own token and CA hash, while valid, on a spare host: kubeadm needs the
    control-plane certificates, which only a control plane's credential unlocks."""
    doc = credentials["worker"]
    endpoint = f"{netlab.hosts['k8s-cp-1'].address}:6443"
    res = standin(netlab, host_roots, "k8s-worker-2", "join", endpoint, "--token", doc["token"],
                  "--discovery-token-ca-cert-hash", doc["ca_cert_hash"], "--control-plane")
    assert res.returncode != 0, res.stdout
    assert "One or more conditions for hosting a new control plane instance is not " \
           "satisfied" in res.stderr, res.stderr
    assert not (root_of(host_roots, "k8s-worker-2") / "etc/kubernetes/pki/ca.key").exists()


@pytest.fixture(scope="module")
def sabotaged(credentials, salt_cli, deployment, host_roots, netlab):
    """The issued credentials made worthless behind the mine's back: the certificate key's
    Secret deleted, the worker's token deleted. A join with them fails."""
    cp1, cp2 = deployment.fqdn("k8s-cp-1"), deployment.fqdn("k8s-cp-2")
    key_doc, token_doc = credentials["cp"], credentials["worker"]
    res = standin(netlab, host_roots, "k8s-cp-1", "token", "delete", key_doc["owner_token_id"])
    assert res.returncode == 0, res.stderr
    tried_cp = salt_cli.run("state.single", "kubeadm.joined", f"name={cp1}",
                            "api_server_endpoint=127.0.0.1:7443", "role=control_plane",
                            "node_name=k8s-cp-2", "discovery_timeout=3", minion_tgt=cp2)
    assert standin(netlab, host_roots, "k8s-cp-1", "token", "delete",
                   token_doc["token_id"]).returncode == 0
    tried_worker = salt_cli.run("state.single", "kubeadm.joined", f"name={cp1}",
                                "api_server_endpoint=127.0.0.1:7443", "node_name=k8s-worker-2",
                                "discovery_timeout=3", minion_tgt=deployment.fqdn("k8s-worker-2"))
    return {"tried_cp": tried_cp, "tried_worker": tried_worker}


def _state(ret):
    return next(iter(ret.data.values()))


def test_worthless_credentials_really_fail_a_join(sabotaged):
    cp = _state(sabotaged["tried_cp"])
    assert cp["result"] is False
    assert 'Secret "kubeadm-certs" was not found' in cp["comment"], cp
    worker = _state(sabotaged["tried_worker"])
    assert worker["result"] is False
    assert "could not find a JWS signature" in worker["comment"], worker


def test_stale_credentials_are_issued_again_and_the_joins_succeed(
        sabotaged, credentials, salt_run, salt_cli, deployment, host_roots, netlab):
    ret, steps = orchestrate(salt_run)
    assert ret.returncode == 0, json.dumps(steps, default=str)[:8000]
    steps = by_id(steps)
    cp1, cp2, worker = (deployment.fqdn(n) for n in ("k8s-cp-1", "k8s-cp-2", "k8s-worker-2"))
    issued_cp = minion_states(steps[f"kos-orch-deploy-credentials-{cp2}"])[cp1]
    issued_worker = minion_states(steps["kos-orch-deploy-credentials-workers"])[cp1]
    cp_state = issued_cp[f"kubeadm-credentials-kubeadm_join-credential_present-{cp2}"]
    worker_state = issued_worker[f"kubeadm-credentials-kubeadm_join-credential_present-{worker}"]
    assert "kubeadm-certs Secret is gone" in cp_state["comment"] and cp_state["changes"]
    assert "token is gone from the cluster" in worker_state["comment"]
    assert credentials["cp"]["certificate_key"] not in json.dumps(cp_state)
    assert highstated(steps) == {f"kos-orch-deploy-control-plane-{cp2}": {cp2},
                                 "kos-orch-deploy-wave": {worker}}
    assert set(nodes_seen_from(salt_cli, deployment)) == set(K8S)
    for name in ("k8s-cp-2", "k8s-worker-2"):
        assert (root_of(host_roots, name) / "etc/kubernetes/kubelet.conf").exists()
    assert daemon_pid(root_of(host_roots, "k8s-cp-2"), *APISERVER)
    # used once: the credentials the joins used are gone, and join nothing any more
    tokens = salt_cli.run("kos_join.token_list", minion_tgt=cp1).data
    assert [t for t in tokens if t["description"].startswith("kos: node join")] == []
    assert [t for t in tokens if t["description"].startswith("Proxy for managing TTL")] == []
    assert issued(host_roots, cp2) is None and issued(host_roots, worker) is None


def test_no_log_carries_a_join_credential(credentials, sabotaged, minions, salt_master):
    secrets = [credentials["worker"]["token"], credentials["cp"]["token"],
               credentials["cp"]["certificate_key"]]
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
