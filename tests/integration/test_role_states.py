"""
The role formulas the deploy scenario switches off on this shared test machine
(core's system parts, bastion, salt_master) compile and predict their changes in
test mode; file_transfer really delivers a file.
"""

import json
import os
import stat
import subprocess

import yaml

from tests.integration.conftest import DOMAIN_SLS

ALL_CORE = {"core": {"manage": {k: True for k in (
    "sysctl", "limits", "locale", "banners", "sshd", "resolver", "hosts", "packages", "minion", "users")},
    "nameservers": ["192.0.2.53"],
    "sysctl": {"net.ipv4.tcp_syncookies": 1},
    "users": [{"name": "kosdemo", "ssh_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKosTest kos@test"], "sudo": True}]}}


def apply(salt_cli, minion, sls, **kwargs):
    args = [f"{k}={v}" for k, v in kwargs.items()]
    ret = salt_cli.run("state.apply", sls, *args, minion_tgt=minion)
    return ret.returncode, ret.data


def test_core_with_every_part_on_predicts_and_fails_nothing(salt_cli, minions, deployment):
    code, data = apply(salt_cli, deployment.fqdn("k8s-worker-1"), "core", test=True, pillar=json.dumps(ALL_CORE))
    assert isinstance(data, dict), data
    failed = {k: v["comment"] for k, v in data.items() if v["result"] is False}
    assert not failed, failed
    ids = {v["__id__"] for v in data.values()}
    for expected in ("core-sshd-file-managed-config", "core-users-user-present-kosdemo",
                     "core-resolver-file-managed-resolv_conf", "core-banners-file-managed-motd",
                     "core-sysctl-sysctl-present-net.ipv4.tcp_syncookies", "core-locale-locale-system"):
        assert expected in ids, expected
    # in a container (this test machine may be one) only net.* sysctls are the host's own
    virtual = salt_cli.run("grains.get", "virtual", minion_tgt=deployment.fqdn("k8s-worker-1")).data
    in_container = virtual in ("systemd-nspawn", "container")
    assert ("core-sysctl-sysctl-present-fs.file-max" in ids) is not in_container, virtual
    # the test user does not exist here: its creation is predicted, not done
    user = next(v for v in data.values() if v["__id__"] == "core-users-user-present-kosdemo")
    assert user["result"] is None
    assert not os.path.exists("/home/kosdemo")


def test_salt_master_config_is_written(salt_cli, minions, deployment, host_roots):
    code, data = apply(salt_cli, deployment.fqdn("salt"), "salt_master")
    assert code == 0, data
    conf = yaml.safe_load((host_roots / "salt" / "etc/salt/master.d/kos.conf").read_text())
    # the state tree, and the sealed backups served back to the control planes
    assert conf["file_roots"] == {"base": ["/srv/salt"],
                                  "kos-backups": ["/var/lib/kos-salt/backups"]}
    assert conf["auto_accept"] is False
    assert conf["file_recv"] is True and conf["schedule"]["kos-backup"]["args"] == ["orch.backup"]
    # sized from the master's cores, and patient: a busy master makes a wave wait
    cores = salt_cli.run("grains.get", "num_cpus", minion_tgt=deployment.fqdn("salt")).data
    assert conf["worker_threads"] == max(5, 4 * cores)
    assert conf["gather_job_timeout"] == 60 and conf["timeout"] == 60
    assert conf["publish_drain_timeout"] == 600
    # a minion that starts is converged by the reactor (tests/integration/test_reactor.py)
    assert conf["reactor"] == [{"salt/minion/*/start": ["salt://reactor/start.sls"]}]
    # the job cache: root only, an hour, no secret kept (functional/test_salt_master_formula)
    assert conf["keep_jobs_seconds"] == 3600 and conf["master_job_cache"] == "kos_job_cache"
    cache = host_roots / "salt" / "var/cache/salt/master"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert conf["engines"] == [{"kos_batch_scrub": {}}]
    # the returner and engine it names are the extension's, the release this master serves,
    # installed before the config (not copies in the master's extmods)
    installed = [s for s in data.values() if s["__id__"] == "kos-extension-installed"]
    assert [s["result"] for s in installed] == [True], data
    assert not (cache / "extmods").exists()
    code, again = apply(salt_cli, deployment.fqdn("salt"), "salt_master")
    assert all(not v["changes"] for v in again.values())


def test_bastion_nat_rules_in_the_hosts_namespace_and_clean(salt_cli, minions, deployment, host_roots, netlab):
    """Real iptables rules, inside the test host's own network namespace."""
    root = host_roots / "salt"
    pillar = {"bastion": {"packages": [], "public_interface": "eth0", "private_interface": "eth0",
                          "rules_file": str(root / "etc/iptables/rules.v4"),
                          "sysctl_file": str(root / "etc/sysctl.d/90-kos-bastion.conf")}}
    minion = deployment.fqdn("salt")
    code, data = apply(salt_cli, minion, "bastion.nat", pillar=json.dumps(pillar))
    assert code == 0, data
    netns = netlab.hosts["salt"].netns
    rules = subprocess.run(["ip", "netns", "exec", netns, "iptables", "-t", "nat", "-S", "POSTROUTING"],
                           capture_output=True, text=True, check=True).stdout
    assert "-A POSTROUTING -s 10.250.0.0/24 -o eth0 -j MASQUERADE" in rules
    forward = subprocess.run(["ip", "netns", "exec", netns, "iptables", "-S", "FORWARD"],
                             capture_output=True, text=True, check=True).stdout
    assert "-P FORWARD DROP" in forward and "--ctstate RELATED,ESTABLISHED -j ACCEPT" in forward
    assert "MASQUERADE" in (root / "etc/iptables/rules.v4").read_text()
    fwd = subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-n", "net.ipv4.ip_forward"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert fwd == "1"
    code, again = apply(salt_cli, minion, "bastion.nat", pillar=json.dumps(pillar))
    assert code == 0 and all(not v["changes"] for v in again.values()), again

    # clean takes every rule, the policy, the forwarding and its file away again
    code, data = apply(salt_cli, minion, "bastion.clean", pillar=json.dumps(pillar))
    assert code == 0, data
    rules = subprocess.run(["ip", "netns", "exec", netns, "iptables-save"],
                           capture_output=True, text=True, check=True).stdout
    assert "MASQUERADE" not in rules and "-A FORWARD" not in rules, rules
    assert ":FORWARD ACCEPT" in rules, rules
    saved = (root / "etc/iptables/rules.v4").read_text()
    assert "MASQUERADE" not in saved and "-A FORWARD" not in saved and ":FORWARD ACCEPT" in saved
    assert not (root / "etc/sysctl.d/90-kos-bastion.conf").exists()
    fwd = subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-n", "net.ipv4.ip_forward"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert fwd == "0"
    code, again = apply(salt_cli, minion, "bastion.clean", pillar=json.dumps(pillar))
    assert code == 0 and all(not v["changes"] for v in again.values()), again


def test_file_transfer_delivers_files_from_the_file_server(salt_cli, minions, deployment, files_dir, host_roots):
    (files_dir / "kos-it").mkdir(exist_ok=True)
    (files_dir / "kos-it" / "greeting.conf").write_text("hello from the salt file server\n")
    target = host_roots / "k8s-worker-2" / "opt" / "kos" / "greeting.conf"
    layer = f"minions/{DOMAIN_SLS}/k8s-worker-2.sls"
    original = (deployment.pillar_dir / layer).read_text()
    deployment.write(layer, original + f"""
file_transfer:
  files:
    - path: {target}
      source: salt://kos-it/greeting.conf
      mode: '0640'
""")
    minion = deployment.fqdn("k8s-worker-2")
    try:
        salt_cli.run("saltutil.refresh_pillar", "wait=True", minion_tgt=minion)
        code, data = apply(salt_cli, minion, "file_transfer")
        assert code == 0, data
        assert target.read_text() == "hello from the salt file server\n"
        assert oct(target.stat().st_mode & 0o777) == "0o640"
        code, again = apply(salt_cli, minion, "file_transfer")
        assert all(not v["changes"] for v in again.values())
    finally:
        deployment.write(layer, original)
        salt_cli.run("saltutil.refresh_pillar", "wait=True", minion_tgt=minion)
