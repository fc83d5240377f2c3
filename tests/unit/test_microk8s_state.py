"""Unit tests of the microk8s states: every state with test mode off and on."""

import json
import time
from unittest.mock import create_autospec

import pytest
import salt.modules.config
import salt.modules.mine
import salt.modules.network
from salt.exceptions import CommandExecutionError

from tests.unit.conftest import load

mod = load("modules", "microk8s")
states = load("states", "microk8s")

TEMPLATE = """[ alt_names ]
DNS.1 = kubernetes
IP.1 = 127.0.0.1
IP.2 = 10.152.183.1
#MOREIPS

[ v3_ext ]
"""


def st(running=True, worker=False, nodes=1, stopped=False, addons=None):
    return {
        "running": running,
        "worker": worker,
        "stopped": stopped,
        "high_availability": {
            "enabled": True,
            "nodes": [{"address": f"10.1.0.{10 + i}:19001", "role": "voter"} for i in range(nodes)],
        },
        "addons": {k: {"status": v} for k, v in (addons or {}).items()},
        "message": "",
    }


@pytest.fixture(params=[False, True], ids=["apply", "test"])
def test_mode(request):
    return request.param


@pytest.fixture
def m():
    """The execution functions the states call, with the real signatures."""
    names = ["status", "addons", "enable_addon", "disable_addon", "start", "join",
             "refresh_certs", "add_node", "cert_check", "token_valid"]
    mocks = {f"microk8s.{n}": create_autospec(getattr(mod, n)) for n in names}
    mocks["mine.get"] = create_autospec(salt.modules.mine.get, return_value={})
    mocks["network.ip_in_subnet"] = create_autospec(
        salt.modules.network.ip_in_subnet, side_effect=lambda ip, cidr: ip.startswith("10.1.")
    )
    mocks["config.get"] = create_autospec(salt.modules.config.get, side_effect=lambda k, d="": d)
    return mocks


@pytest.fixture
def configure_loader_modules(m, request):
    # Tests that take test_mode run twice (test=False and test=True); the others once.
    test = request.getfixturevalue("test_mode") if "test_mode" in request.fixturenames else False
    return {states: {"__salt__": m, "__opts__": {"test": test}}}


def expect_applied(ret, test_mode):
    assert ret["result"] is (None if test_mode else True), ret
    assert ret["changes"], ret


def test_running_nothing_to_do(m):
    m["microk8s.status"].return_value = st()
    ret = states.running("microk8s")
    assert ret["result"] is True and ret["changes"] == {}
    m["microk8s.start"].assert_not_called()


def test_running_starts_a_stopped_node(m, test_mode):
    m["microk8s.status"].side_effect = [st(running=False, stopped=True), st()]
    ret = states.running("microk8s", timeout=30)
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"running": {"old": False, "new": True}}
    if test_mode:
        m["microk8s.start"].assert_not_called()
    else:
        m["microk8s.start"].assert_called_once_with()
        m["microk8s.status"].assert_called_with(wait_ready=True, timeout=30)


def test_addon_enabled(m, test_mode):
    m["microk8s.addons"].side_effect = [{"dns": "disabled"}, {"dns": "enabled"}]
    ret = states.addon_enabled("dns")
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"dns": {"old": "disabled", "new": "enabled"}}
    assert m["microk8s.enable_addon"].called is (not test_mode)


def test_addon_enabled_already(m):
    m["microk8s.addons"].return_value = {"dns": "enabled"}
    ret = states.addon_enabled("dns")
    assert ret["result"] is True and ret["changes"] == {}


def test_addon_unknown_fails(m):
    m["microk8s.addons"].return_value = {"dns": "enabled"}
    ret = states.addon_enabled("dnss")
    assert ret["result"] is False and "dnss" in ret["comment"]


def test_addon_disabled_reports_cli_failure(m, test_mode):
    m["microk8s.addons"].return_value = {"ha-cluster": "enabled"}
    m["microk8s.disable_addon"].side_effect = CommandExecutionError(
        "Disabling HA will reset your cluster in a clean state."
    )
    ret = states.addon_disabled("ha-cluster")
    if test_mode:
        assert ret["result"] is None
    else:
        assert ret["result"] is False and "Disabling HA" in ret["comment"] and ret["changes"] == {}


def test_addon_still_wrong_after_apply_fails(m, test_mode):
    m["microk8s.addons"].return_value = {"helm3": "enabled"}
    ret = states.addon_disabled("helm3")
    if test_mode:
        assert ret["result"] is None
    else:
        # helm3 ships in the snap: disable runs but it stays enabled
        assert ret["result"] is False and "is enabled" in ret["comment"]


def test_extra_sans_writes_above_the_marker_and_refreshes(m, test_mode, tmp_path):
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "csr.conf.template").write_text(TEMPLATE)
    ret = states.extra_sans("csr", sans=["203.0.113.10", "api.example.com"], snap_data=str(tmp_path))
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"sans": {"old": [], "new": ["203.0.113.10", "api.example.com"]}}
    text = (certs / "csr.conf.template").read_text()
    if test_mode:
        assert text == TEMPLATE
        m["microk8s.refresh_certs"].assert_not_called()
    else:
        assert "IP.100 = 203.0.113.10\nDNS.100 = api.example.com\n#MOREIPS" in text
        m["microk8s.refresh_certs"].assert_called_once_with("server.crt")
        # second run: nothing to do
        m["microk8s.refresh_certs"].reset_mock()
        again = states.extra_sans("csr", sans=["203.0.113.10", "api.example.com"], snap_data=str(tmp_path))
        assert again["changes"] == {} and again["result"] is True
        m["microk8s.refresh_certs"].assert_not_called()
        # a SAN dropped from pillar is removed, operator lines stay
        states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path))
        text = (certs / "csr.conf.template").read_text()
        assert "api.example.com" not in text and "IP.2 = 10.152.183.1" in text


def test_extra_sans_without_marker_fails(m, tmp_path):
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "csr.conf.template").write_text("[ alt_names ]\n")
    ret = states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path))
    assert ret["result"] is False and "#MOREIPS" in ret["comment"]


def published(tmp_path, expires, check="abcdefabcdef", token="t" * 32):
    path = tmp_path / "join.json"
    path.write_text(json.dumps({"connection": f"10.1.0.11:25000/{token}/{check}", "check": check, "expires": expires}))
    return path


def test_token_reused_while_enough_ttl_remains(m, tmp_path):
    path = published(tmp_path, time.time() + 5000)
    m["microk8s.cert_check"].return_value = "abcdefabcdef"
    m["microk8s.token_valid"].return_value = True
    ret = states.join_token_published(str(path), ttl=7200, min_remaining=1800)
    assert ret["result"] is True and ret["changes"] == {}
    m["microk8s.add_node"].assert_not_called()


@pytest.mark.parametrize("why", ["near-expiry", "unknown-to-agent", "cert-changed", "none"])
def test_token_reissued(m, tmp_path, test_mode, why):
    path = tmp_path / "kos" / "join.json"
    path.parent.mkdir()
    if why != "none":
        published(path.parent, time.time() + (100 if why == "near-expiry" else 5000)).rename(path)
    m["microk8s.cert_check"].return_value = "ffffffffffff" if why == "cert-changed" else "abcdefabcdef"
    m["microk8s.token_valid"].return_value = why != "unknown-to-agent"
    m["microk8s.add_node"].return_value = {
        "token": "n" * 32 + "/abcdefabcdef",
        "urls": ["172.17.0.1:25000/" + "n" * 32 + "/abcdefabcdef", "10.1.0.11:25000/" + "n" * 32 + "/abcdefabcdef"],
        "expires": int(time.time()) + 7200,
    }
    before = path.read_text() if path.exists() else None
    ret = states.join_token_published(str(path), ttl=7200, min_remaining=1800, cidr="10.1.0.0/16")
    expect_applied(ret, test_mode)
    assert "n" * 32 not in json.dumps(ret)  # the token never shows in the state return
    if test_mode:
        m["microk8s.add_node"].assert_not_called()
        assert (path.read_text() if path.exists() else None) == before
    else:
        m["microk8s.add_node"].assert_called_once_with(ttl=7200)
        doc = json.loads(path.read_text())
        assert doc["connection"].startswith("10.1.0.11:25000/")  # the private-network URL
        assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_token_ttl_must_exceed_min_remaining(m, tmp_path):
    ret = states.join_token_published(str(tmp_path / "j.json"), ttl=600, min_remaining=1800)
    assert ret["result"] is False and "min_remaining" in ret["comment"]


def test_cluster_joined_does_nothing_when_joined(m):
    m["microk8s.status"].return_value = st(worker=True)
    ret = states.cluster_joined("cp1", source="cp1", role="worker")
    assert ret["result"] is True and ret["changes"] == {}
    m["microk8s.join"].assert_not_called()


def test_cluster_joined_worker(m, test_mode):
    m["microk8s.status"].side_effect = [st(), st(worker=True)]
    m["mine.get"].return_value = {"cp1": {"connection": "10.1.0.11:25000/" + "t" * 32 + "/c" * 1, "expires": time.time() + 3000}}
    ret = states.cluster_joined("cp1", source="cp1", role="worker")
    expect_applied(ret, test_mode)
    assert "t" * 32 not in json.dumps(ret)
    if test_mode:
        m["microk8s.join"].assert_not_called()
    else:
        m["mine.get"].assert_called_once_with("cp1", "kos_join")
        args = m["microk8s.join"].call_args
        assert args.kwargs == {"worker": True}


def test_cluster_joined_control_plane(m):
    m["microk8s.status"].side_effect = [st(), st(nodes=2)]
    m["mine.get"].return_value = {"cp1": {"connection": "x", "expires": time.time() + 3000}}
    ret = states.cluster_joined("cp1", source="cp1", role="control_plane")
    assert ret["result"] is True
    assert m["microk8s.join"].call_args.kwargs == {"worker": False}


def test_cluster_joined_reports_why_it_failed(m):
    m["microk8s.status"].return_value = st()
    m["mine.get"].return_value = {"cp1": {"connection": "x", "expires": time.time() + 3000}}
    m["microk8s.join"].side_effect = CommandExecutionError("Connection failed. Invalid token (500).")
    ret = states.cluster_joined("cp1", source="cp1")
    assert ret["result"] is False and "Invalid token (500)" in ret["comment"]


@pytest.mark.parametrize("mine", [{}, {"cp1": {"connection": "x", "expires": 1}}], ids=["missing", "expired"])
def test_cluster_joined_refuses_missing_or_expired_token(m, mine):
    m["microk8s.status"].return_value = st()
    m["mine.get"].return_value = mine
    ret = states.cluster_joined("cp1", source="cp1")
    assert ret["result"] is False and "cp1" in ret["comment"]
    m["microk8s.join"].assert_not_called()
