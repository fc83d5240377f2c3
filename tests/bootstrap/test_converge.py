"""
The converge path over real SSH and real Salt: `kos converge`, `kos status`, `kos kubeconfig`
and the drain of `kos down`, exactly as against a cloud, given the outputs a Terraform run
would produce for this topology.

Network namespaces (prefix ``kosbt``, bridge 10.254.0.0/24, SSH on port 2222 so a system
sshd on :22 cannot get in the way; ``--ssh-port`` carries it):

* root namespace: the test as the operator, with its ssh-agent; and the salt master's host,
  at the bridge address .1: the salt-master daemon (pytest-salt-factories; key
  auto-acceptance off), the master's own minion, and a real sshd whose sessions see the
  pillar directory at /srv/pillar (private mount namespace) and the master's CLI on PATH;
* ``bastion``: a real sshd, the only host the operator connects to directly; the master is
  reached through it (ProxyJump);
* ``k8s-cp-1``, ``k8s-worker-1``: minions with the microk8s/snap stand-ins on PATH;
* an unexpected minion whose key must stay pending.

There is no bastion minion here: the bastion formula installs packages and iptables rules on
the test machine. Its host is still the SSH hop.

`kos drift` looks at the cluster as converge left it: nothing to report, then a hand edit
under the master's /srv/pillar and a managed file changed on a minion, both reported with exit
code 10 and left as they are; pinned host keys win over the recorded ones.

Safe operation (issue 16) runs here too: two converges at once, Ctrl-C and SIGTERM during the
orchestration and the re-run, an orchestration started by hand on the master, a minion that
is down (and ``--exclude``), a failing state reported with its ID and comment.
"""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from kos.salt import release_files
from kos.steps import deployment
from kos.steps import nodes as node_steps

from tests.bootstrap.conftest import REPO, Kos, base_env, start_sshd, stop_process
from tests.integration.conftest import (
    MASTER_TIMING,
    NetnsMinion,
    kill_standin_daemons,
    netlab_up,
)

pytestmark = [pytest.mark.integration, pytest.mark.netns]

STANDINS = REPO / "tests" / "standins"
CIDR = "10.254.0.0/24"
DOMAIN = "kos-bt.test"
DOMAIN_SLS = DOMAIN.replace(".", "_")
API_FIP = "203.0.113.10"
SSH_PORT = 2222
NETNS_HOSTS = ["bastion", "k8s-cp-1", "k8s-worker-1"]
MINIONS = ["salt", "k8s-cp-1", "k8s-worker-1"]
INTRUDER = f"kosbt-intruder.{DOMAIN}"


def fqdn(name):
    return f"{name}.{DOMAIN}"


@pytest.fixture(scope="module")
def lab():
    with netlab_up("kosbt", CIDR) as lab:
        for name in NETNS_HOSTS:
            lab.add_host(name)
        yield lab


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    return tmp_path_factory.mktemp("kosbt-hosts")


@pytest.fixture(scope="module")
def pillar_dir(tmp_path_factory, roots):
    """The operator's layers; kos adds _from_terraform.sls through SSH."""
    d = tmp_path_factory.mktemp("kosbt-pillar")
    manage = {
        key: key == "hosts"
        for key in (
            "sysctl",
            "limits",
            "locale",
            "banners",
            "sshd",
            "resolver",
            "hosts",
            "packages",
            "minion",
            "users",
        )
    }
    env = {
        "core": {"manage": manage},
        "salt_master": {"manage_service": False},
        "microk8s": {"ready_timeout": 30},
    }
    (d / "environments").mkdir()
    (d / "environments" / f"{DOMAIN_SLS}.sls").write_text(yaml.safe_dump(env))
    (d / "minions" / DOMAIN_SLS).mkdir(parents=True)
    for name in MINIONS:
        root = roots / name
        (root / "etc").mkdir(parents=True)
        (root / "etc" / "hostname").write_text(f"{name}\n")
        (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
        layer = {
            "core": {"hosts_file": str(root / "etc" / "hosts")},
            "kos": {"state_dir": str(root / "etc" / "kos")},
            "microk8s": {"snap_data": str(root / "var/snap/microk8s/current")},
            "salt_master": {"config_file": str(root / "etc/salt/master.d/kos.conf"),
                            "cachedir": str(root / "var/cache/salt/master")},
        }
        (d / "minions" / DOMAIN_SLS / f"{name}.sls").write_text(yaml.safe_dump(layer))
    return d


@pytest.fixture(scope="module")
def outputs(lab, tmp_path_factory):
    """What `terraform output -json` says for this topology."""
    address = {name: host.address for name, host in lab.hosts.items()}
    address["salt"] = lab.gateway
    nodes = {
        fqdn(n): {"role": "control_plane" if "-cp-" in n else "worker", "ip": address[n]}
        for n in ("k8s-cp-1", "k8s-worker-1")
    }
    pillar = {
        "kos": {
            "distribution": "microk8s",
            "cluster_name": "kosbt",
            "domain": DOMAIN,
            "deploy_user": "root",
            "networks": {
                "public_cidr": "10.253.0.0/24",
                "private_cidr": CIDR,
                "pod_cidr": "10.244.0.0/16",
                "service_cidr": "10.96.0.0/12",
            },
            "salt_master": {"id": fqdn("salt"), "ip": address["salt"]},
            "nodes": nodes,
            "first_control_plane": fqdn("k8s-cp-1"),
            "api": {"floating_ip": API_FIP, "admin_ip": None},
        },
        "core": {"users": []},
    }
    doc = {
        "cluster_name": "kosbt",
        "ssh_user": "root",
        "bastion_floating_ip": address["bastion"],
        "salt_master_private_ip": address["salt"],
        "api_floating_ip": API_FIP,
        "minions": {
            fqdn(n): {
                "hostname": n,
                "role": "salt_master" if n == "salt" else nodes[fqdn(n)]["role"],
                "private_ip": address[n],
            }
            for n in MINIONS
        },
        "kubernetes_nodes": {
            mid: {
                "role": n["role"],
                "private_ip": n["ip"],
                "floating_ip": None,
                "availability_zone": None,
            }
            for mid, n in nodes.items()
        },
        "salt_pillar": yaml.safe_dump(pillar, sort_keys=False),
    }
    path = tmp_path_factory.mktemp("kosbt-outputs") / "outputs.json"
    path.write_text(json.dumps({k: {"sensitive": False, "value": v} for k, v in doc.items()}))
    return {"doc": doc, "path": path}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """The master's /srv: kos pushes the formula to salt/ and the repository's pillar
    (plus _from_terraform.sls) to pillar/; the operator's layers stay in pillar_dir."""
    d = tmp_path_factory.mktemp("kosbt-srv")
    for sub in ("salt", "pillar"):
        (d / sub).mkdir()
    # an orchestration an operator might start by hand (a second file root kos leaves alone)
    (d / "test" / "kostest").mkdir(parents=True)
    (d / "test" / "kostest" / "slow.sls").write_text(
        "kostest-slow:\n  salt.runner:\n    - name: test.sleep\n    - s_time: 30\n"
    )
    return d


@pytest.fixture(scope="module")
def master(salt_factories, lab, pillar_dir, srv):
    factory = salt_factories.salt_master_daemon(
        "kosbt-master",
        overrides={
            "interface": lab.gateway,
            "file_roots": {"base": [str(srv / "salt"), str(srv / "test")]},
            "pillar_roots": {"base": [str(srv / "pillar"), str(pillar_dir)]},
            "minion_data_cache": True,
            **MASTER_TIMING,
        },
        # kos accepts keys, not the test harness.
        on_auth_event_callback=lambda _master, _payload: None,
    )
    with factory.started(start_timeout=120):
        yield factory


@pytest.fixture(scope="module")
def ssh_hosts(sshd, lab, master, srv, ssh_agent, tmp_path_factory):
    d = tmp_path_factory.mktemp("kosbt-sshd")
    bin_dir = Path(sys.executable).parent
    # The bastion, and the first control plane, where `kos kubeconfig` reads the admin
    # kubeconfig over SSH (never through Salt).
    hosts = {
        name: start_sshd(
            sshd,
            d / name,
            lab.hosts[name].netns,
            lab.hosts[name].address,
            ssh_agent.public_key,
            port=SSH_PORT,
        )
        for name in ("bastion", "k8s-cp-1")
    }
    hosts["salt"] = start_sshd(
        sshd,
        d / "salt",
        None,
        lab.gateway,
        ssh_agent.public_key,
        port=SSH_PORT,
        set_env={
            "PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
            "SALT_MASTER_CONFIG": master.config_file,
        },
        mounts={"/srv/pillar": srv / "pillar", "/srv/salt": srv / "salt"},
    )
    yield hosts
    for host in hosts.values():
        stop_process(host.proc)


@pytest.fixture(scope="module")
def intruder(master, lab, tmp_path_factory):
    """A salt-minion nobody ordered, presenting its key to the master."""
    d = tmp_path_factory.mktemp("kosbt-intruder")
    conf = d / "conf"
    conf.mkdir()
    (conf / "minion").write_text(
        yaml.safe_dump(
            {
                "id": INTRUDER,
                "master": lab.gateway,
                "master_port": master.config["ret_port"],
                "publish_port": master.config["publish_port"],
                "root_dir": str(d),
                "pki_dir": str(d / "pki"),
                "cachedir": str(d / "cache"),
                "sock_dir": str(d / "sock"),
                "log_file": str(d / "minion.log"),
                "pidfile": str(d / "minion.pid"),
                "user": "root",
                "acceptance_wait_time": 2,
            }
        )
    )
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "salt-minion"), "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    yield proc
    # Its auth retry loop ignores SIGTERM; it holds nothing worth a clean shutdown.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def minions(master, lab, roots, pillar_dir):
    """The cluster's minions, started; each start completes only once its key is accepted."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    started, threads, errors = {}, [], {}
    for name in MINIONS:
        root = roots / name
        if name in lab.hosts:
            placement = {"factory_class": NetnsMinion, "netns": lab.hosts[name].netns}
        else:
            placement = {}  # the master's own minion, on the master's host
        factory = master.salt_minion_daemon(
            fqdn(name),
            overrides={"master": lab.gateway, "interface": "0.0.0.0"},
            max_start_attempts=1,
            **placement,
        )
        factory.environ.update(
            PATH=f"{STANDINS / 'bin'}:{root / 'snap' / 'bin'}:{path}", KOS_STANDIN_ROOT=str(root)
        )
        started[name] = factory

        def start(f=factory, n=name):
            try:
                f.start(start_timeout=600)
            except Exception as exc:  # noqa: BLE001 - reported by the tests
                errors[n] = exc

        thread = threading.Thread(target=start, daemon=True)
        thread.start()
        threads.append(thread)
    yield {"factories": started, "threads": threads, "errors": errors}
    for factory in started.values():
        factory.terminate()
    for thread in threads:
        thread.join(timeout=30)
    kill_standin_daemons(roots)


@pytest.fixture(scope="module")
def operator(tmp_path_factory, ssh_agent, outputs, ssh_hosts):
    work = tmp_path_factory.mktemp("kosbt-operator")
    # Outputs without a cloud: no console vouches for these hosts (test_trust.py covers that).
    return Kos(
        work,
        base_env(SSH_AUTH_SOCK=ssh_agent.sock, KOS_SSH_PORT=SSH_PORT, KOS_TRUST_UNVERIFIED=1),
    )


@pytest.fixture(scope="module")
def converged(operator, outputs, minions, intruder, ssh_hosts):
    res = operator("converge", "--outputs", outputs["path"], "--wait-minions", 300, timeout=1200)
    for thread in minions["threads"]:
        thread.join(timeout=120)
    return res


def key_lists(master):
    ret = master.salt_key_cli().run("-L")
    return ret.data


def test_converge_accepts_exactly_the_cluster_keys(converged, master, minions):
    assert converged.returncode == 0, converged.stderr
    assert not minions["errors"], minions["errors"]
    keys = key_lists(master)
    assert sorted(keys["minions"]) == sorted(fqdn(n) for n in MINIONS)
    assert keys["minions_pre"] == [INTRUDER]
    assert f"unexpected pending key {INTRUDER!r}: not accepted" in converged.stderr


def test_converge_reports_each_node_and_prints_data_on_stdout(converged):
    for name in MINIONS:
        assert f"{fqdn(name)}: highstate ok" in converged.stderr, converged.stderr
        # the extension, installed (here: found at its version) before anything else
        assert f"{fqdn(name)}: states applied ok" in converged.stderr
    assert json.loads(converged.stdout) == {"cluster": "kosbt", "converged": True}


def test_terraform_pillar_is_pushed_as_root_0640(converged, srv, outputs):
    path = srv / "pillar" / "_from_terraform.sls"
    assert path.read_text() == outputs["doc"]["salt_pillar"]
    st = path.stat()
    assert stat.S_IMODE(st.st_mode) == 0o640 and st.st_uid == 0


def test_formula_and_pillar_are_pushed_and_cloud_layers_kept(converged, srv, pillar_dir):
    def files(root):
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.name != ".kos-tree"
        }

    # the formula, and the release of the extension installed here beside it
    assert files(srv / "salt") == {**files(REPO / "salt" / "salt"), **release_files()}
    pushed = files(srv / "pillar")
    assert pushed.pop("_from_terraform.sls")
    assert pushed == files(REPO / "pillar")
    # the operator's own layers (a second pillar root here) were not touched
    assert (pillar_dir / "environments" / f"{DOMAIN_SLS}.sls").exists()


def test_steps_are_recorded_without_secrets(converged, operator):
    doc = json.loads((operator.cwd / ".kos" / "kosbt" / "steps.json").read_text())
    assert {k: v["status"] for k, v in doc["steps"].items()} == {
        "salt-keys-master": "done",
        "salt-keys": "done",
        "salt-trees": "done",
        "salt-pillar": "done",
        "ccm-credential": "done",
        "salt-master-config": "done",
        "orchestrate": "done",
        "ccm-credential-retire": "done",
    }
    text = json.dumps(doc)
    assert "BEGIN" not in text and "token" not in text.lower()


# -- kos drift, on the cluster as converge left it (before the tests below change it) --


def drift(kos, outputs_doc, *args, check):
    return kos("drift", "--outputs", outputs_doc["path"], *args, timeout=900, check=check)


def test_no_drift_right_after_converge(converged, operator, outputs):
    assert converged.returncode == 0, converged.stderr
    res = drift(operator, outputs, "--json", check=0)
    doc = json.loads(res.stdout)
    assert doc == {
        "cluster": "kosbt",
        "drift": False,
        "states": {},
        "trees": doc["trees"],
        "keys": [],
    }
    assert all(entries == [] for entries in doc["trees"].values())


def test_hand_edits_and_pending_changes_are_reported(converged, operator, outputs, srv, roots):
    layer = srv / "pillar" / "environments" / "defaults.sls"
    hosts = roots / "k8s-worker-1" / "etc" / "hosts"
    before = {path: path.read_text() for path in (layer, hosts)}
    layer.write_text(before[layer] + "# tuned by hand on the master\n")
    hosts.write_text(before[hosts].replace(f"k8s-cp-1.{DOMAIN}", f"k8s-cp-9.{DOMAIN}"))
    try:
        res = drift(operator, outputs, "--json", check=10)
        report = drift(operator, outputs, check=10).stdout
        after = {path: path.read_text() for path in (layer, hosts)}
    finally:
        for path, text in before.items():
            path.write_text(text)
    doc = json.loads(res.stdout)
    assert doc["drift"] is True
    assert doc["trees"]["/srv/pillar"] == [
        {"path": "environments/defaults.sls", "change": "edited on the master"}
    ]
    assert doc["trees"]["/srv/salt"] == []
    assert list(doc["states"]) == [fqdn("k8s-worker-1")]
    (entry,) = doc["states"][fqdn("k8s-worker-1")]
    assert (entry["state"], entry["function"], entry["change"]) == (
        "core-hosts-file-blockreplace",
        "file.blockreplace",
        "would change",
    )
    assert "cluster kosbt: DRIFT" in report
    assert "  environments/defaults.sls: edited on the master" in report
    assert f"{fqdn('k8s-worker-1')}: state.highstate test=True: 1 state(s)" in report
    # Looking changed nothing: the hand edits are still there.
    assert after[layer].endswith("# tuned by hand on the master\n")
    assert f"k8s-cp-9.{DOMAIN}" in after[hosts]


def test_pinned_host_keys_replace_the_recorded_ones(converged, operator, outputs, tmp_path):
    """--known-hosts (KOS_KNOWN_HOSTS) wins over what the state directory recorded."""
    recorded = operator.cwd / ".kos" / "kosbt" / "known_hosts"
    good = tmp_path / "pinned"
    good.write_text(recorded.read_text())
    key = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    other = key.with_suffix(".pub").read_text().split()[1]
    # Another key for the master (reached through the bastion, whose key stays right).
    master_ip = outputs["doc"]["salt_master_private_ip"]
    lines = [line.split() for line in good.read_text().splitlines() if line.strip()]
    assert any(f"[{master_ip}]" in fields[0] for fields in lines)
    bad = tmp_path / "pinned-wrong"
    bad.write_text(
        "".join(
            " ".join([*fields[:2], other if f"[{master_ip}]" in fields[0] else fields[2]]) + "\n"
            for fields in lines
        )
    )
    refused = operator(
        "drift", "--outputs", outputs["path"], env={"KOS_KNOWN_HOSTS": str(bad)}, check=6
    )
    assert "Host key verification failed" in refused.stderr
    drift(operator, outputs, "--known-hosts", good, check=0)
    assert recorded.read_text() == good.read_text()


def test_status_shows_every_node(converged, operator, outputs):
    res = operator("status", "--outputs", outputs["path"], "--json", check=0)
    doc = json.loads(res.stdout)
    assert doc["healthy"] is True and doc["distribution"] == "microk8s"
    assert doc["unexpected_keys"] == [INTRUDER]
    nodes = {n["id"]: n for n in doc["nodes"]}
    assert set(nodes) == {fqdn(n) for n in MINIONS}
    for node in nodes.values():
        assert node["key"] == "accepted" and node["reachable"] is True
        assert node["last_highstate"]["result"] == "ok"
    # each node's kubelet version, as the node reports it: one release on a fresh cluster
    versions = {n: nodes[fqdn(n)]["kubernetes"].pop("version") for n in ("k8s-cp-1", "k8s-worker-1")}
    assert len(set(versions.values())) == 1, versions
    assert re.fullmatch(r"v1\.\d+\.\d+", versions["k8s-cp-1"]), versions
    assert nodes[fqdn("k8s-cp-1")]["kubernetes"] == {
        "member": True,
        "ready": True,
        "role": "control-plane",
    }
    assert nodes[fqdn("k8s-worker-1")]["kubernetes"] == {
        "member": True,
        "ready": True,
        "role": "worker",
    }
    assert "kubernetes" not in nodes[fqdn("salt")]
    # the control plane's certificates, as microk8s refresh-certs --check counts them
    certs = nodes[fqdn("k8s-cp-1")]["certificates"]
    assert certs["days_left"] in (364, 365) and certs["expiring"] == [], certs
    assert "certificates" not in nodes[fqdn("k8s-worker-1")]
    table = operator("status", "--outputs", outputs["path"], check=0)
    assert "k8s-worker-1.kos-bt.test" in table.stdout and "ready (worker)" in table.stdout
    assert f"{certs['days_left']} days left" in table.stdout


def _gone_already(func, path, exc_info):
    # the master's own job cache cleaner may remove a job first
    if not issubclass(exc_info[0], FileNotFoundError):
        raise exc_info[1]


def test_status_still_knows_the_last_converge_once_the_job_cache_let_it_go(
        converged, operator, outputs, master):
    # what keep_jobs_seconds does to the highstates an hour later
    jobs = Path(master.config["cachedir"]) / "jobs"
    shutil.rmtree(jobs, onerror=_gone_already)
    jobs.mkdir(mode=0o700)
    res = operator("status", "--outputs", outputs["path"], "--json", check=0)
    doc = json.loads(res.stdout)
    assert doc["healthy"] is True
    for node in doc["nodes"]:
        assert node["last_highstate"]["result"] == "ok", node
        assert node["last_highstate"]["source"] == "the node's converge record"


def test_kubeconfig_points_at_the_floating_ip_with_mode_0600(converged, operator, outputs,
                                                             ssh_hosts, master):
    target = operator.cwd / "admin.kubeconfig"
    res = operator("kubeconfig", "--outputs", outputs["path"], "-o", target, check=0)
    assert res.stdout.strip() == str(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    doc = yaml.safe_load(target.read_text())
    assert [c["cluster"]["server"] for c in doc["clusters"]] == [f"https://{API_FIP}:16443"]
    key = doc["users"][0]["user"]["client-key-data"]
    # read on the first control plane over SSH (through the bastion), not as a Salt
    # return: the master's job cache never saw the client key
    assert "Accepted publickey" in ssh_hosts["k8s-cp-1"].log.read_text()
    jobs = Path(master.config["cachedir"]) / "jobs"
    assert not any(key.encode() in p.read_bytes() for p in jobs.rglob("*") if p.is_file())
    # recorded, for kos down to remove with the cluster
    written = json.loads((operator.cwd / ".kos" / "kosbt" / "kubeconfigs.json").read_text())
    assert list(written) == [str(target)]


def test_without_the_agent_key_the_master_is_unreachable(converged, operator, outputs):
    res = operator("status", "--outputs", outputs["path"], env={"SSH_AUTH_SOCK": ""}, check=6)
    assert "cannot reach the salt master over SSH" in res.stderr


def failed_converge_with(operator, outputs, layer, edit, check=6):
    """``kos converge`` (expected to exit ``check``) with ``edit(doc)`` applied to the pillar
    ``layer``, which is put back afterwards."""
    good = layer.read_text()
    doc = yaml.safe_load(good)
    edit(doc)
    layer.write_text(yaml.safe_dump(doc))
    try:
        return operator("converge", "--outputs", outputs["path"], timeout=900, check=check)
    finally:
        layer.write_text(good)


def test_bad_pillar_is_one_input_error_naming_the_key_its_minions_and_its_fix(
        converged, operator, outputs, pillar_dir):
    layer = pillar_dir / "environments" / f"{DOMAIN_SLS}.sls"
    res = failed_converge_with(operator, outputs, layer,
                               lambda doc: doc["microk8s"].update(channel="1.31/nightly"),
                               check=3)
    said = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(said) == 1, res.stderr
    assert said[0].startswith("error: invalid pillar, nothing changed: pillar key "
                              "'microk8s:channel' on "), res.stderr
    assert fqdn("k8s-cp-1") in said[0] and fqdn("k8s-worker-1") in said[0]
    assert "fix: " in res.stderr and "re-run kos converge" in res.stderr
    steps = json.loads((operator.cwd / ".kos" / "kosbt" / "steps.json").read_text())["steps"]
    assert steps["orchestrate"]["status"] == "failed"


# -- safe operation (issue 16) -------------------------------------------------------------

def steps_of(operator, state_dir=".kos"):
    return json.loads((operator.cwd / state_dir / "kosbt" / "steps.json").read_text())["steps"]


def forget_converges(roots):
    """Every node forgets its last converge (kos:state_dir/converged.json), so the next
    orchestration has work on all of them: its waves from need would otherwise find a
    converged cluster and end in seconds."""
    for name in MINIONS:
        (roots / name / "etc" / "kos" / "converged.json").unlink(missing_ok=True)


def running_orchestrations(master):
    jobs = master.salt_run_cli(timeout=120).run("jobs.master").data or []
    return [j for j in jobs if j.get("fun") == "runner.state.orchestrate"]


def test_ctrl_c_or_sigterm_stop_the_orchestration_and_the_rerun_holds_off_a_second_converge(
    converged, operator, outputs, master, roots, tmp_path
):
    """An interrupted converge stops its orchestration; the re-run finishes it. While the
    re-run works, a second converge (here, or from another machine against the same
    master) refuses and names it; a lock that a killed kos left behind is taken over."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        forget_converges(roots)
        run = operator.start("converge", "--outputs", outputs["path"])
        # a minion answered the orchestration's first step (kos.extension): it runs
        run.wait_for(": states applied ok", after="▶ salt-run state.orchestrate orch.deploy")
        run.signal(signum)
        assert run.wait() == 130, run.stderr
        assert "interrupted: orch.deploy stopped after step " in run.stderr
        assert "nothing of it runs any more" in run.stderr
        assert "cannot reach" not in run.stderr
        # it stopped before the last step (the workers' highstate) instead of going on unseen
        assert f"{fqdn('k8s-worker-1')}: highstate" not in run.stderr
        assert steps_of(operator)["orchestrate"]["status"] == "interrupted"
        assert running_orchestrations(master) == []

    lock = operator.cwd / ".kos" / "kosbt" / "lock"
    # what a kos killed with SIGKILL leaves behind: a lock file that nobody holds
    dead = {
        "pid": 999999,
        "host": "kos-gone",
        "user": "root",
        "command": "kos converge --outputs old.json",
        "started": "2020-01-01T00:00:00Z",
    }
    lock.write_text(json.dumps(dead))
    forget_converges(roots)
    again = operator.start("converge", "--outputs", outputs["path"])
    try:
        again.wait_for("▶ salt-run state.orchestrate orch.deploy")
        here = operator("converge", "--outputs", outputs["path"], check=11)
        # another machine: its own state directory, the same salt master
        elsewhere = operator(
            "converge", "--outputs", outputs["path"], "--state-dir", tmp_path / "other", check=11
        )
    finally:
        assert again.wait() == 0, again.stderr
    assert f"{fqdn('k8s-worker-1')}: highstate ok" in again.stderr
    assert steps_of(operator)["orchestrate"]["status"] == "done"
    assert (
        "a kos run ended without releasing cluster kosbt's lock: `kos converge --outputs "
        "old.json` (PID 999999 on host kos-gone, user root), started 2020-01-01T00:00:00Z; "
        "taken over" in again.stderr
    )
    holder = f"(PID {again.pid} on host {os.uname().nodename}, user root), started "
    assert "another kos run is working on cluster kosbt: `kos converge --outputs" in here.stderr
    assert holder in here.stderr
    assert "another kos run is working on this cluster (lock on the salt master)" in (
        elsewhere.stderr
    )
    assert holder in elsewhere.stderr
    assert not lock.exists()
    assert not (tmp_path / "other" / "kosbt" / "steps.json").exists()


def test_an_orchestration_running_on_the_master_keeps_kos_from_changing_anything(
    converged, operator, outputs, master
):
    before = steps_of(operator)
    by_hand = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "salt-run"),
            "-c",
            str(master.config_dir),
            "state.orchestrate",
            "kostest.slow",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not (running := running_orchestrations(master)):
            assert time.monotonic() < deadline, "the orchestration started by hand never ran"
            time.sleep(0.5)
        res = operator("converge", "--outputs", outputs["path"], check=11)
    finally:
        by_hand.wait(timeout=120)
    assert "the salt master is already running an orchestration" in res.stderr
    assert f"orchestration jid {running[0]['jid']} (state.orchestrate kostest.slow)" in res.stderr
    assert steps_of(operator) == before


def sync_jobs(master):
    """The jobs that installed the extension's release on minions (kos.extension)."""
    jobs = master.salt_run_cli(timeout=120).run(
        "jobs.list_jobs", "search_function=state.sls"
    )
    return {jid for jid, job in (jobs.data or {}).items()
            if "kos.extension" in (job.get("Arguments") or [])}


@pytest.fixture(scope="class")
def worker_down(minions):
    factory = minions["factories"]["k8s-worker-1"]
    factory.terminate()
    yield fqdn("k8s-worker-1")
    factory.start(start_timeout=300)


class TestAMinionIsDown:
    """k8s-worker-1's minion is stopped for both tests (restarting it takes a while)."""

    def test_a_silent_minion_stops_the_run_before_anything_changes(
        self, converged, operator, outputs, master, worker_down
    ):
        before, syncs = steps_of(operator), sync_jobs(master)
        started = time.monotonic()
        res = operator("converge", "--outputs", outputs["path"], check=6)
        took = time.monotonic() - started
        assert f"minions do not answer: {worker_down}; nothing was changed" in res.stderr
        assert f"kos converge --exclude {worker_down}" in res.stderr
        assert took < 120, took
        after = steps_of(operator)
        for name in ("salt-trees", "salt-pillar", "orchestrate"):
            assert after[name] == before[name], name
        assert sync_jobs(master) == syncs

    def test_exclude_is_handed_to_the_orchestration_and_the_others_converge(
        self, converged, operator, outputs, master, roots, worker_down
    ):
        forget_converges(roots)
        since = time.time()
        res = operator(
            "converge", "--outputs", outputs["path"], "--exclude", worker_down, timeout=1200,
            check=0,
        )
        # not given the extension (the orchestration installs it on the minions it converges:
        # they forgot their last converge), and handed to the orchestration as pillar
        new_jobs = master.event_listener.get_events([(master.id, "salt/job/*/new")],
                                                    after_time=since)
        syncs = [sorted(e.data["minions"]) for e in new_jobs
                 if e.data.get("fun") == "state.sls" and "kos.extension" in e.data.get("arg", [])]
        assert syncs and all(worker_down not in minions for minions in syncs), syncs
        runs = master.event_listener.get_events([(master.id, "salt/run/*/new")],
                                                after_time=since)
        orchestrations = [e.data for e in runs if e.data.get("fun") == "runner.state.orchestrate"]
        assert [o["fun_args"][0] for o in orchestrations] == ["orch.deploy"]
        assert orchestrations[0]["fun_args"][1]["pillar"] == {"exclude": [worker_down],
                                                              "limit": []}
        assert f"{fqdn('k8s-cp-1')}: highstate ok" in res.stderr
        assert f"{worker_down}: highstate" not in res.stderr


def test_bad_options_name_the_minions_and_change_nothing(converged, operator, outputs):
    before = steps_of(operator)
    res = operator("converge", "--outputs", outputs["path"], "--limit", "k8s-nope", check=3)
    assert "--limit k8s-nope: not a minion of this cluster" in res.stderr
    assert fqdn("k8s-worker-1") in res.stderr
    assert steps_of(operator) == before


def test_a_failing_state_is_reported_with_its_id_and_comment(
    converged, operator, outputs, pillar_dir, roots
):
    layer = pillar_dir / "minions" / DOMAIN_SLS / "k8s-worker-1.sls"
    missing = roots / "k8s-worker-1" / "no-such-dir" / "hosts"
    res = failed_converge_with(operator, outputs, layer,
                               lambda doc: doc["core"].update(hosts_file=str(missing)))
    assert "orch.deploy failed at kos-orch-deploy-wave" in res.stderr
    assert (
        f"{fqdn('k8s-worker-1')}: core-hosts-file-blockreplace (core.hosts): {missing}: "
        "file not found" in res.stderr
    )
    assert "-: False" not in res.stderr
    assert steps_of(operator)["orchestrate"]["status"] == "failed"


def test_upgrade_goes_through_the_orchestration_one_node_at_a_time(converged, operator,
                                                                   outputs):
    res = operator("upgrade", "--outputs", outputs["path"], "--version", "1.33", check=6)
    assert "kos-orch-upgrade-version" in res.stderr and "would skip 1.32" in res.stderr
    assert "kos upgrade --version 1.33" in res.stderr  # what to re-run after the fix
    res = operator("upgrade", "--outputs", outputs["path"], "--version", "1.32", check=0)
    doc = json.loads(res.stdout)
    assert doc["versions"] == {"k8s-cp-1": "v1.32.9", "k8s-worker-1": "v1.32.9"}
    assert doc["upgraded"] == [fqdn("k8s-cp-1"), fqdn("k8s-worker-1")]
    assert {f"kos-orch-upgrade-{fqdn(n)}-{s}" for n in ("k8s-cp-1", "k8s-worker-1")
            for s in ("drain", "refresh", "uncordon", "done")} <= set(doc["orchestration"]["seconds"])
    # not check=0: the failing-state test before this one leaves the worker's last highstate
    # failed, which status reports as unhealthy (exit 9); the versions are what this test is about
    status = json.loads(operator("status", "--outputs", outputs["path"], "--json").stdout)
    assert {n["kubernetes"]["version"] for n in status["nodes"] if "kubernetes" in n} == {"v1.32.9"}


def test_drain_removes_nodes_from_kubernetes(converged, operator, outputs, master, monkeypatch):
    monkeypatch.setenv("SSH_AUTH_SOCK", operator.env["SSH_AUTH_SOCK"])
    settings = deployment.Settings(
        terraform_dir=REPO / "terraform",
        state_root=operator.cwd / ".kos",
        outputs_file=outputs["path"],
        ssh_port=SSH_PORT,
    )
    dep = deployment.Deployment(settings, need_inputs=False)
    assert node_steps.drain(dep) == {"drained": ["k8s-worker-1"]}
    nodes = master.salt_cli(timeout=120).run("microk8s.nodes", minion_tgt=fqdn("k8s-cp-1")).data
    assert set(nodes) == {"k8s-cp-1"}


def test_renew_certificates_goes_through_the_orchestration(converged, operator, outputs, roots):
    server = roots / "k8s-cp-1" / "var/snap/microk8s/current/certs/server.crt"
    before = server.read_bytes()
    # nothing is due on fresh certificates
    res = operator("renew-certificates", "--outputs", outputs["path"], check=0)
    assert server.read_bytes() == before
    assert json.loads(res.stdout)["certificates"][fqdn("k8s-cp-1")]["expiring"] == []
    assert json.loads(res.stdout)["renewed"] == []
    assert "nothing due: no control plane's certificates expire within" in res.stderr
    res = operator("renew-certificates", "--outputs", outputs["path"], "--force", check=0)
    doc = json.loads(res.stdout)
    assert server.read_bytes() != before
    assert doc["renewed"] == [fqdn("k8s-cp-1")]
    assert f"certificates renewed on {fqdn('k8s-cp-1')}" in res.stderr
    assert f"kos-orch-certificates-{fqdn('k8s-cp-1')}" in doc["orchestration"]["seconds"]
    assert doc["certificates"][fqdn("k8s-cp-1")]["days_left"] in (364, 365)
