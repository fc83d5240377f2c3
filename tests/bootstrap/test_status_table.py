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
