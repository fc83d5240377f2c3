"""
The snap and microk8s execution and state modules through Salt's real loaders,
against the stand-ins (tests/standins, held to what the real snap and microk8s print).

Two simulated nodes, each with its own stand-in root and loopback address; the
cluster agents started here are stopped by pidfile when the module ends.
"""

import json
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.functional.minion import local_loaders

REPO = Path(__file__).resolve().parents[2]
STANDINS = REPO / "tests" / "standins"
SNAP_DATA = "var/snap/microk8s/current"

sys.path.insert(0, str(STANDINS / "lib"))
from microk8s_standin.agent import kill_all_agents  # noqa: E402  pylint: disable=wrong-import-position


def _free_prefix():
    """A 127.x.y. prefix with nothing listening on :25000 at .1-.3."""
    for _ in range(50):
        prefix = f"127.{random.randint(64, 250)}.{random.randint(1, 250)}."
        with socket.socket() as probe:
            probe.settimeout(0.2)
            if probe.connect_ex((prefix + "1", 25000)) != 0:
                return prefix
    raise RuntimeError("no free loopback range")


class Node:
    def __init__(self, base, name, ip):
        self.name, self.ip = name, ip
        self.root = Path(base) / name
        (self.root / "etc").mkdir(parents=True)
        (self.root / "etc" / "hostname").write_text(f"{name}\n")

    @property
    def snap_data(self):
        return str(self.root / SNAP_DATA)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = tmp_path_factory.mktemp("microk8s-fn")
    prefix = _free_prefix()
    made = {name: Node(base, name, prefix + str(i + 1)) for i, name in enumerate(["cp", "worker"])}
    hosts = "".join(f"{n.ip} {n.name}\n" for n in made.values())
    for node in made.values():
        (node.root / "etc" / "hosts").write_text(hosts)
    yield made
    for node in made.values():
        kill_all_agents(str(node.root))


@pytest.fixture(scope="module")
def loaders(tmp_path_factory):
    root = tmp_path_factory.mktemp("minion")
    # never this machine's /etc/kos, whatever a test reloads
    return local_loaders(root, "kos-fn-minion", kos={"state_dir": str(root / "kos")})


@pytest.fixture
def on(monkeypatch, loaders):
    """Point the loaders at one node: its PATH, stand-in root and address."""

    def select(node):
        monkeypatch.setenv("PATH", f"{STANDINS / 'bin'}:{node.root / 'snap' / 'bin'}:/usr/bin:/bin")
        monkeypatch.setenv("KOS_STANDIN_ROOT", str(node.root))
        monkeypatch.setenv("KOS_STANDIN_IP", node.ip)
        loaders.reload_all()
        # kos's own notes (join credentials) on the node's disk
        loaders.opts["kos"] = {"state_dir": str(node.root / "etc" / "kos")}
        return loaders

    return select


def record(nodes):
    """Where the addon states note the arguments they enabled with: on the node's disk."""
    return str(nodes["cp"].root / "etc" / "kos" / "microk8s-addons.json")


def test_microk8s_module_loads_only_after_the_snap(nodes, on):
    salt = on(nodes["cp"])
    assert "microk8s.status" not in salt.modules
    ret = salt.states.snap.installed("microk8s", channel="1.31/stable", classic=True)
    assert ret.result is True and ret.changes == {"channel": {"old": None, "new": "1.31/stable"}}
    salt.reload_all()
    assert salt.modules.microk8s.version() == {"version": "v1.31.9", "revision": "8148"}
    again = salt.states.snap.installed("microk8s", channel="1.31/stable", classic=True)
    assert again.result is True and again.changes == {}


def test_status_and_addons_against_the_standin(nodes, on):
    salt = on(nodes["cp"])
    st = salt.modules.microk8s.status()
    assert st["running"] is True and st["worker"] is False
    assert st["high_availability"]["nodes"] == [{"address": "127.0.0.1:19001", "role": "voter"}]
    assert salt.modules.microk8s_addons.addons()["dns"] == "enabled"


def test_certificates_days_from_the_standins_check(nodes, on):
    salt = on(nodes["cp"])
    # the stand-in's fresh certificates: a 10-year CA, 1-year server and proxy client, the
    # lifetimes microk8s gives them (produce_certs and gen_server_cert in
    # https://github.com/canonical/microk8s/blob/master/microk8s-resources/actions/common/utils.sh)
    days = salt.modules.microk8s_certs.certificates()
    assert sorted(days) == ["ca.crt", "front-proxy-client.crt", "server.crt"]
    assert 3649 <= days["ca.crt"] <= 3650, days
    assert 364 <= days["server.crt"] <= 365 and 364 <= days["front-proxy-client.crt"] <= 365


def test_addon_states_test_mode_then_apply(nodes, on):
    salt = on(nodes["cp"])
    predicted = salt.states.microk8s_addons.addon_enabled("hostpath-storage", test=True,
                                                          record=record(nodes))
    assert predicted.result is None
    assert predicted.changes == {"hostpath-storage": {"old": "disabled", "new": "enabled"}}
    assert salt.modules.microk8s_addons.addons()["hostpath-storage"] == "disabled"
    applied = salt.states.microk8s_addons.addon_enabled("hostpath-storage", record=record(nodes))
    assert applied.result is True and applied.changes == predicted.changes
    again = salt.states.microk8s_addons.addon_enabled("hostpath-storage", record=record(nodes))
    assert again.changes == {}
    # unknown to the catalogue: the CLI's words come back
    bad = salt.states.microk8s_addons.addon_enabled("dnss", record=record(nodes))
    assert bad.result is False


def test_helm3_cannot_be_disabled(nodes, on):
    salt = on(nodes["cp"])
    ret = salt.states.microk8s_addons.addon_disabled("helm3", record=record(nodes))
    assert ret.result is False and "is enabled" in ret.comment


WORKER_ID = "worker.kos-fn.test"


def issued(cp):
    return json.loads((cp.root / "etc" / "kos" / "join" / f"{WORKER_ID}.json").read_text())


def test_extra_sans_reach_the_certificate_and_invalidate_the_issued_credential(nodes, on):
    cp = nodes["cp"]
    salt = on(cp)
    kwargs = dict(role="worker", ttl=1800, min_remaining=600, snap_data=cp.snap_data)
    first = salt.states.microk8s.join_credential_present(WORKER_ID, **kwargs)
    assert first.result is True and first.changes
    assert salt.states.microk8s.join_credential_present(WORKER_ID, **kwargs).changes == {}
    published = issued(cp)
    assert (published["node"], published["role"]) == (WORKER_ID, "worker")

    ret = salt.states.microk8s_certs.extra_sans("csr", sans=["203.0.113.10"],
                                                snap_data=cp.snap_data)
    assert ret.result is True and ret.changes == {
        "sans": {"old": [], "new": ["203.0.113.10"]},
        "certificate": {"old": {"lacks": ["203.0.113.10"]}, "new": {"lacks": []}}}
    san = subprocess.run(
        ["openssl", "x509", "-in", f"{cp.snap_data}/certs/server.crt", "-noout", "-ext", "subjectAltName"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "IP Address:203.0.113.10" in san

    # the new certificate has a new fingerprint: the old connection string would fail (exit 4)
    again = salt.states.microk8s.join_credential_present(WORKER_ID, **kwargs)
    assert again.changes and "certificate changed" in again.comment
    assert issued(cp)["check"] != published["check"]
    # the replaced token is withdrawn
    assert not salt.modules.microk8s.token_valid(published["connection"].split("/")[1],
                                                 cp.snap_data)


def test_worker_joins_with_its_credential_which_is_then_revoked(nodes, on, tmp_path):
    cp, worker = nodes["cp"], nodes["worker"]
    published = issued(cp)
    salt = on(worker)
    assert salt.states.snap.installed("microk8s", channel="1.31/stable", classic=True).result is True
    salt.reload_all()
    salt.modules.microk8s.join(published["connection"], worker=True)
    assert salt.modules.microk8s.is_worker() is True
    salt = on(cp)
    assert salt.modules.microk8s.nodes()["worker"]["role"] == "worker"
    # a TTL token survives a join, a single-use one would be burned by it
    # (https://microk8s.io/docs/command-reference#heading--microk8s-add-node, --token-ttl):
    # it is revoked, not consumed
    token = published["connection"].split("/")[1]
    assert salt.modules.microk8s.token_valid(token, cp.snap_data)
    revoked = salt.states.microk8s.join_credentials_absent("creds", nodes=[WORKER_ID],
                                                           snap_data=cp.snap_data)
    assert revoked.result is True and revoked.changes
    assert not salt.modules.microk8s.token_valid(token, cp.snap_data)
    assert not (cp.root / "etc" / "kos" / "join" / f"{WORKER_ID}.json").exists()
    # used once: as a control plane or as a worker, it joins nothing any more
    stranger = Node(tmp_path, "stranger", cp.ip.rsplit(".", 1)[0] + ".3")
    salt = on(stranger)
    salt.states.snap.installed("microk8s", channel="1.31/stable", classic=True)
    salt.reload_all()
    try:
        for worker_join in (False, True):
            with pytest.raises(Exception, match=r"Invalid token \(500\)"):
                salt.modules.microk8s.join(published["connection"], worker=worker_join)
    finally:
        kill_all_agents(str(stranger.root))


def test_single_use_token_is_burned_by_a_failed_join(nodes, on, tmp_path):
    cp = nodes["cp"]
    salt = on(cp)
    issued = salt.modules.microk8s.add_node()  # no TTL: single use
    url = next(u for u in issued["urls"] if u.startswith(cp.ip))
    token = url.split("/")[1]
    # a stranger whose name the control plane cannot resolve
    stranger = Node(tmp_path, "stranger", cp.ip.rsplit(".", 1)[0] + ".3")
    salt = on(stranger)
    salt.states.snap.installed("microk8s", channel="1.31/stable", classic=True)
    salt.reload_all()
    try:
        with pytest.raises(Exception, match=r"does not resolve"):
            salt.modules.microk8s.join(url, worker=True)
        with pytest.raises(Exception, match=r"Invalid token \(500\)"):
            salt.modules.microk8s.join(url, worker=True)
    finally:
        kill_all_agents(str(stranger.root))
    assert not on(cp).modules.microk8s.token_valid(token, cp.snap_data)


def test_certificates_renewed_refreshes_the_server_certificate(nodes, on):
    salt = on(nodes["cp"])
    server = nodes["cp"].root / SNAP_DATA / "certs" / "server.crt"
    before = server.read_bytes()
    predicted = salt.states.microk8s_certs.certificates_renewed("c", force=True, test=True)
    assert predicted.result is None and server.read_bytes() == before
    ret = salt.states.microk8s_certs.certificates_renewed("c", force=True)
    assert ret.result is True, ret
    assert sorted(ret.changes["certificates"]["new"]) == ["front-proxy-client.crt", "server.crt"]
    assert server.read_bytes() != before
    again = salt.states.microk8s_certs.certificates_renewed("c")
    assert again.result is True and again.changes == {}
