"""
Nothing secret at rest (issue 13, item 2), on the rehearsal cloud, for each distribution:
after a full ``kos up``, a ``kos kubeconfig`` and ad-hoc reads of a join credential as an
operator would try them (``salt <node> mine.get``, ``salt <first> kos.join_info``, a node's
``salt-call mine.get``), the salt master's cache, every log on every host, ``.kos`` (but
the kubeconfigs asked for) and everything kos printed hold no join token, certificate key,
kubeconfig client key or private key. The reads themselves did see the credential: it was
live while it was there, only never kept. ``kos down`` removing the kubeconfig is checked
in test_teardown.py, which takes the package's clusters down.

The rehearsal cloud's machine disks (``.kos/<cluster>/local``) are the cloud, not the
operator's disk: they are left out of the ``.kos`` grep, and read from inside the hosts.
"""

import json
import re
import stat
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.netns

DOMAIN = "kos.internal"
PRIVATE_KEY = "PRIVATE KEY-----"
# A microk8s join connection string, whoever issued it (the deploy's own waves included).
CONNECTION = r":25000/[0-9a-f]{32}"


def minion(hostname):
    return f"{hostname}.{DOMAIN}"


def on_master(cluster, *args, timeout=300):
    """``salt ...`` on the salt master, as an operator logged in there would run it (its
    output shows the secrets it read: it is not kos's, and not kept)."""
    return cluster.host("salt").run("salt", "--out=json", "--static", *args, timeout=timeout,
                                    check=False)


def found_in_hosts(cluster, secrets, paths, regex=False):
    """``{hostname: [files under paths holding any of secrets]}``, read inside each host
    (paths a host lacks are skipped)."""
    found = {}
    patterns = [arg for s in secrets for arg in ("-e", s)]
    for hostname in cluster.hostnames():
        host = cluster.host(hostname)
        res = host.run("grep", "-rlsa", "-E" if regex else "-F", *patterns, "--", *paths,
                       timeout=300, check=False)
        assert res.returncode in (0, 1, 2) and not res.stderr, f"{hostname}: {res.stderr}"
        if res.stdout.strip():
            found[hostname] = res.stdout.split()
    return found


def found_in_dot_kos(cluster, secrets):
    # the admin kubeconfigs an operator asked kos kubeconfig for (the default one is
    # .kos/<cluster>/kubeconfig): recorded, 0600, and removed by kos down
    asked = cluster.state / "kubeconfigs.json"
    asked = {Path(p) for p in json.loads(asked.read_text())} if asked.exists() else set()
    found = []
    for path in cluster.state.rglob("*"):
        # Terraform's provider binaries (code, not data)
        skip = ".terraform" in path.parts or path in asked
        if path.is_file() and not skip:
            data = path.read_bytes()
            found += [f"{path}: {s[:12]}..." for s in secrets if s.encode() in data]
    return found


def test_up_converges(cluster):
    assert cluster.up.returncode == 0, cluster.up.stderr[-4000:]
    cluster.extra["printed"] = [cluster.up.stdout + cluster.up.stderr]


def test_the_masters_cache_is_root_only_and_short_lived(cluster):
    salt = cluster.host("salt")
    for path in ("/var/cache/salt/master", "/var/cache/salt/master/jobs"):
        mode = salt.run("stat", "-c", "%a %U", path).stdout.split()
        assert mode == ["700", "root"], path
    conf = salt.run("cat", "/etc/salt/master.d/kos.conf").stdout
    assert re.search(r"^keep_jobs_seconds: 3600$", conf, re.M), conf
    assert re.search(r"^master_job_cache: kos_job_cache$", conf, re.M), conf
    # the running master uses it: the job of this very call is listed by the jobs runner
    ping = on_master(cluster, minion("salt"), "test.ping")
    assert ping.returncode == 0, ping.stderr
    jobs = cluster.host("salt").run("salt-run", "--out=json", "jobs.list_jobs",
                                    "search_function=test.ping").stdout
    assert json.loads(jobs), jobs


def test_kubeconfig_comes_over_ssh_and_is_written_0600(cluster):
    target = cluster.kos.cwd / "admin.kubeconfig"  # outside .kos: its own grep stays clean
    res = cluster.kos("kubeconfig", *cluster.args, "-o", target, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    cluster.extra["printed"].append(res.stdout + res.stderr)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    doc = yaml.safe_load(target.read_text())
    user = doc["users"][0]["user"]
    secrets = [v for k, v in user.items() if k in ("client-key-data", "token") and v]
    assert secrets, "the admin kubeconfig carries no client credential"
    cluster.extra["kubeconfig"] = target
    cluster.extra["secrets"] = list(secrets)


def test_ad_hoc_reads_of_a_join_credential_leave_nothing_at_rest(cluster):
    distribution = cluster.values["kubernetes_distribution"]
    first = minion("k8s-cp-1")
    worker = minion("k8s-worker-1")
    joining = [worker] + ([minion("k8s-cp-2")] if distribution == "kubeadm" else [])
    pillar = json.dumps({"kos_orchestration": {"join_nodes": joining}})
    # A deployed cluster holds no credential; issue some, as a wave would.
    issued = on_master(cluster, first, "state.apply", f"{distribution}.credentials",
                       f"pillar={pillar}", timeout=600)
    assert issued.returncode == 0, issued.stdout[-3000:] + issued.stderr[-2000:]
    secrets = list(cluster.extra.get("secrets", []))
    cp1 = cluster.host("k8s-cp-1")
    for node in joining:
        doc = json.loads(cp1.run("cat", f"/etc/kos/join/{node}.json").stdout)
        if distribution == "microk8s":
            secrets.append(doc["connection"].split("/")[1])
        else:
            secrets.append(doc["token"])
            if doc.get("certificate_key"):
                secrets.append(doc["certificate_key"])
    assert len(secrets) >= len(joining) + 1
    try:
        # what an operator tries; the node for which it was issued does get it
        seen = on_master(cluster, worker, "mine.get", first, f"kos_join_{worker}")
        assert seen.returncode == 0 and any(s in seen.stdout for s in secrets), seen.stdout
        on_master(cluster, "*", "mine.get", first, f"kos_join_{worker}")
        direct = on_master(cluster, first, "kos.join_info", worker)
        assert any(s in direct.stdout for s in secrets), direct.stdout
        call = cluster.host("k8s-worker-1").run(
            "salt-call", "--out=json", "mine.get", first, f"kos_join_{worker}", timeout=120,
            check=False)
        assert any(s in call.stdout for s in secrets), call.stdout + call.stderr
    finally:
        revoked = on_master(cluster, first, "state.apply", f"{distribution}.revoke",
                            f"pillar={pillar}", timeout=600)
    assert revoked.returncode == 0, revoked.stdout[-3000:]
    for node in joining:
        assert not cp1.path(f"/etc/kos/join/{node}.json").exists()

    # nothing kept: the master's cache (jobs, mine, minion data), every log on every host
    everything = secrets + [PRIVATE_KEY]
    assert found_in_hosts(cluster, secrets, ["/var/cache/salt", "/var/log"]) == {}
    master = found_in_hosts(cluster, [PRIVATE_KEY], ["/var/cache/salt/master/jobs"])
    assert master == {}, master
    if distribution == "microk8s":
        assert found_in_hosts(cluster, [CONNECTION], ["/var/cache/salt", "/var/log"],
                              regex=True) == {}
    assert found_in_dot_kos(cluster, everything) == []
    printed = "\n".join(cluster.extra["printed"])
    assert [s[:12] for s in secrets if s in printed] == []
