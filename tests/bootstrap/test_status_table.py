"""
`kos status` as an operator reads it in a pipe or a narrow terminal: rich renders 80 columns
when stdout is not a terminal, and a cut minion id (`k8s-work…` twice) leaves two workers
that cannot be told apart. The id column keeps whole ids; the other columns wrap.
"""

import pytest
from kos import tables

DOMAIN = "demo.kos.internal"


def node(hostname, role, k8s_role=None):
    return {
        "id": f"{hostname}.{DOMAIN}",
        "hostname": hostname,
        "role": role,
        "private_ip": "10.241.0.30",
        "key": "accepted",
        "reachable": True,
        "last_highstate": {"result": "succeeded"},
        "kubernetes": None if k8s_role is None else {
            "member": True, "ready": True, "role": k8s_role, "version": "v1.32.1"},
        "certificates": {"days_left": 364} if k8s_role == "control-plane" else None,
    }


@pytest.fixture
def doc():
    return {
        "cluster": "demo",
        "distribution": "microk8s",
        "simulated": True,
        "healthy": True,
        "kubernetes_error": None,
        "unexpected_keys": [],
        "nodes": [
            node("bastion", "bastion"),
            node("salt", "salt_master"),
            node("k8s-cp-1", "control_plane", "control-plane"),
            node("k8s-worker-1", "worker", "worker"),
            node("k8s-worker-2", "worker", "worker"),
        ],
    }


@pytest.mark.parametrize("width", [60, 80, 120])
def test_minion_ids_stay_whole_in_a_pipe(doc, width, capsys, monkeypatch):
    # what rich sizes a console to when stdout is a pipe
    monkeypatch.setenv("COLUMNS", str(width))
    tables.status(doc)
    out = capsys.readouterr().out
    for hostname in ("k8s-cp-1", "k8s-worker-1", "k8s-worker-2"):
        assert f"{hostname}.{DOMAIN}" in out, out
    assert "…" not in out, out
    assert max(len(line) for line in out.splitlines()) <= width, out


def test_a_node_the_reactor_converged_says_so(doc, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    doc["nodes"][3]["last_converge"] = {"time": "2026-12-06T01:02:03Z", "by": "reactor"}
    doc["nodes"][4]["last_converge"] = {"time": "2026-12-06T01:00:00Z", "by": "orchestration"}
    tables.status(doc)
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert "by the reactor, 2026-12-06T01:02:03Z" in rows[f"k8s-worker-1.{DOMAIN}"]
    assert "reactor" not in rows[f"k8s-worker-2.{DOMAIN}"]
