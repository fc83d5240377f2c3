"""
``kos drift`` on a converged cluster over real SSH and real Salt (the topology and fixtures
of test_converge.py, started afresh for this module): nothing to report right after
converge; a hand edit under the master's /srv/pillar and a managed file changed on a minion
are both reported, with exit code 10, and nothing is changed by looking.

Needs root (network namespaces): run under the shared lock, e.g.
``flock /tmp/kos-netns.lock .venv/bin/pytest tests/bootstrap/test_drift.py``.
"""
# ruff: noqa: F811 - the tests take the fixtures imported from test_converge by name

import json
import subprocess

import pytest

from tests.bootstrap.test_converge import (  # noqa: F401 - fixtures, started afresh here
    DOMAIN,
    converged,
    fqdn,
    intruder,
    lab,
    master,
    minions,
    operator,
    outputs,
    pillar_dir,
    roots,
    srv,
    ssh_hosts,
)

pytestmark = [pytest.mark.integration, pytest.mark.netns]


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
