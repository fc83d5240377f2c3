"""Unit tests of the microk8s states: every state with test mode off and on."""

import json
import time
from unittest.mock import create_autospec

import pytest
import salt.modules.config
import salt.modules.mine
import salt.modules.network
from salt.exceptions import CommandExecutionError

from tests.unit.conftest import load, utils

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
def state_dir(tmp_path):
    return tmp_path / "state"


@pytest.fixture
def m(state_dir):
    """The execution functions the states call, with the real signatures."""
    names = ["status", "addons", "enable_addon", "disable_addon", "start", "join", "leave",
             "refresh_certs", "server_sans", "add_node", "remove_token", "cert_check",
             "token_valid"]
    mocks = {f"microk8s.{n}": create_autospec(getattr(mod, n)) for n in names}
    mocks["microk8s.server_sans"].return_value = {"ip": [], "dns": []}
    mocks["mine.get"] = create_autospec(salt.modules.mine.get, return_value={})
    mocks["network.ip_in_subnet"] = create_autospec(
        salt.modules.network.ip_in_subnet, side_effect=lambda ip, cidr: ip.startswith("10.1.")
    )
    mocks["network.ip_addrs"] = create_autospec(salt.modules.network.ip_addrs,
                                                return_value=["10.1.0.11"])
    config = {"kos:state_dir": str(state_dir)}
    mocks["config.get"] = create_autospec(salt.modules.config.get,
                                          side_effect=lambda k, d="": config.get(k, d))
    return mocks


@pytest.fixture
def configure_loader_modules(m, request):
    # Tests that take test_mode run twice (test=False and test=True); the others once.
    test = request.getfixturevalue("test_mode") if "test_mode" in request.fixturenames else False
    return {states: {"__utils__": utils(), "__salt__": m, "__opts__": {"test": test}}}


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


def test_addon_enabled_again_when_its_arguments_change(m, test_mode, state_dir):
    """A new MetalLB range: `enable` on an enabled addon only says so, so disable first."""
    state_dir.mkdir()
    (state_dir / "microk8s-addons.json").write_text(json.dumps({"metallb": ["10.0.0.240-10.0.0.250"]}))
    m["microk8s.addons"].return_value = {"metallb": "enabled"}
    ret = states.addon_enabled("metallb", args=["10.0.0.100-10.0.0.110"])
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"metallb": {"old": {"args": ["10.0.0.240-10.0.0.250"]},
                                          "new": {"args": ["10.0.0.100-10.0.0.110"]}}}
    if test_mode:
        m["microk8s.disable_addon"].assert_not_called()
        m["microk8s.enable_addon"].assert_not_called()
    else:
        m["microk8s.disable_addon"].assert_called_once_with("metallb")
        m["microk8s.enable_addon"].assert_called_once_with("metallb",
                                                           args=["10.0.0.100-10.0.0.110"])
        record = json.loads((state_dir / "microk8s-addons.json").read_text())
        assert record == {"metallb": ["10.0.0.100-10.0.0.110"]}
        m["microk8s.enable_addon"].reset_mock()
        again = states.addon_enabled("metallb", args=["10.0.0.100-10.0.0.110"])
        assert again["result"] is True and again["changes"] == {}


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


def cert_with(sans):
    """What microk8s.server_sans reads from a server.crt carrying ``sans``."""
    ips = [x for x in sans if states._san_kind(x) == "IP"]
    return {"ip": ips, "dns": [x for x in sans if x not in ips]}


def test_extra_sans_writes_above_the_marker_and_refreshes(m, test_mode, tmp_path):
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "csr.conf.template").write_text(TEMPLATE)
    wanted = ["203.0.113.10", "api.example.com"]
    m["microk8s.server_sans"].side_effect = [cert_with([]), cert_with(wanted)]
    ret = states.extra_sans("csr", sans=wanted, snap_data=str(tmp_path))
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"sans": {"old": [], "new": wanted},
                              "certificate": {"old": {"lacks": wanted}, "new": {"lacks": []}}}
    text = (certs / "csr.conf.template").read_text()
    if test_mode:
        assert text == TEMPLATE
        m["microk8s.refresh_certs"].assert_not_called()
    else:
        assert "IP.100 = 203.0.113.10\nDNS.100 = api.example.com\n#MOREIPS" in text
        m["microk8s.refresh_certs"].assert_called_once_with("server.crt")
        # second run: nothing to do
        m["microk8s.refresh_certs"].reset_mock()
        m["microk8s.server_sans"].side_effect = None
        m["microk8s.server_sans"].return_value = cert_with(wanted)
        again = states.extra_sans("csr", sans=wanted, snap_data=str(tmp_path))
        assert again["changes"] == {} and again["result"] is True
        m["microk8s.refresh_certs"].assert_not_called()
        # a SAN dropped from pillar is removed, operator lines stay
        states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path))
        text = (certs / "csr.conf.template").read_text()
        assert "api.example.com" not in text and "IP.2 = 10.152.183.1" in text


@pytest.mark.parametrize("name", ["cafe", "add", "deadbeef", "k8s-api.example.com"])
def test_hex_only_names_are_dns_sans(name):
    """`[0-9a-fA-F:]+` took "cafe" for an IP and openssl refused `IP.100 = cafe`."""
    assert "DNS.100 = " + name in states._render_sans(TEMPLATE, [name])
    assert "IP.100 = 2001:db8::1" in states._render_sans(TEMPLATE, ["2001:db8::1"])


def test_the_certificate_decides_not_the_template(m, test_mode, tmp_path):
    """The template already lists the SAN (a refresh that failed): the certificate lacks it."""
    certs = tmp_path / "certs"
    certs.mkdir()
    written = TEMPLATE.replace("#MOREIPS", "IP.100 = 203.0.113.10\n#MOREIPS")
    (certs / "csr.conf.template").write_text(written)
    m["microk8s.server_sans"].side_effect = [cert_with(["127.0.0.1"]), cert_with(["203.0.113.10"])]
    ret = states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path))
    expect_applied(ret, test_mode)
    assert ret["changes"]["certificate"] == {"old": {"lacks": ["203.0.113.10"]},
                                             "new": {"lacks": []}}
    assert m["microk8s.refresh_certs"].called is (not test_mode)


def test_a_failed_refresh_fails_and_puts_the_template_back(m, tmp_path):
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "csr.conf.template").write_text(TEMPLATE)
    m["microk8s.refresh_certs"].side_effect = CommandExecutionError(
        "Taking a backup of the current certificates under /var/snap/microk8s/8148/certs-backup/\n"
        "Creating new certificates\nbad ip address in SAN value=not-an-ip")
    ret = states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path))
    assert ret["result"] is False and "bad ip address" in ret["comment"] and ret["changes"] == {}
    # unchanged template and a certificate without the SAN: the next run tries again
    assert (certs / "csr.conf.template").read_text() == TEMPLATE


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

    def add_node(ttl=None, token=None):
        return {"token": f"{token}/abcdefabcdef",
                "urls": [f"172.17.0.1:25000/{token}/abcdefabcdef",
                         f"10.1.0.11:25000/{token}/abcdefabcdef"],
                "expires": int(time.time()) + ttl}

    m["microk8s.add_node"].side_effect = add_node
    before = path.read_text() if path.exists() else None
    ret = states.join_token_published(str(path), ttl=7200, min_remaining=1800, cidr="10.1.0.0/16")
    expect_applied(ret, test_mode)
    if test_mode:
        m["microk8s.add_node"].assert_not_called()
        assert (path.read_text() if path.exists() else None) == before
    else:
        token = m["microk8s.add_node"].call_args.kwargs["token"]
        assert m["microk8s.add_node"].call_args.kwargs["ttl"] == 7200
        assert len(token) == 32 and token not in json.dumps(ret)  # never in the state return
        doc = json.loads(path.read_text())
        assert doc["connection"] == f"10.1.0.11:25000/{token}/abcdefabcdef"  # the private URL
        assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_no_token_is_issued_without_an_address_in_the_network(m, tmp_path):
    m["microk8s.cert_check"].return_value = "abcdefabcdef"
    m["network.ip_addrs"].return_value = []
    ret = states.join_token_published(str(tmp_path / "j.json"), cidr="10.9.0.0/16")
    assert ret["result"] is False and "10.9.0.0/16" in ret["comment"]
    m["microk8s.add_node"].assert_not_called()


def test_a_token_that_cannot_be_published_is_withdrawn(m, tmp_path):
    """add-node succeeded, the publication failed: nobody knows the token, nobody may use it."""
    m["microk8s.cert_check"].return_value = "abcdefabcdef"
    m["microk8s.add_node"].side_effect = lambda ttl=None, token=None: {
        "urls": [f"172.17.0.1:25000/{token}/abcdefabcdef"]}
    ret = states.join_token_published(str(tmp_path / "j.json"), cidr="10.1.0.0/16")
    assert ret["result"] is False and "no address in 10.1.0.0/16" in ret["comment"]
    token = m["microk8s.add_node"].call_args.kwargs["token"]
    m["microk8s.remove_token"].assert_called_once_with(token, None)
    assert not (tmp_path / "j.json").exists()


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


def test_cluster_left(m, test_mode):
    m["microk8s.status"].side_effect = [st(worker=True), st()]
    ret = states.cluster_left("microk8s")
    expect_applied(ret, test_mode)
    assert m["microk8s.leave"].called is (not test_mode)
    m["microk8s.status"].side_effect = None
    m["microk8s.status"].return_value = st()
    assert states.cluster_left("microk8s")["changes"] == {}


def test_a_test_run_without_the_snap_predicts(m, state_dir, tmp_path):
    """The snap comes in the same highstate: "State 'microk8s.running' was not found" before."""
    for name in [k for k in m if k.startswith("microk8s.")]:
        del m[name]
    states.__opts__["test"] = True
    rets = [
        states.running("microk8s"),
        states.addon_enabled("dns"),
        states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path)),
        states.join_token_published(str(tmp_path / "j.json")),
        states.cluster_joined("cp1", source="cp1", role="worker"),
    ]
    for ret in rets:
        assert ret["result"] is None and ret["changes"], ret
        assert ret["comment"].startswith("would ") and "once microk8s is installed" in ret["comment"]
    assert rets[4]["changes"] == {"cluster": {"old": "standalone", "new": "joined cp1 as worker"}}
    assert not state_dir.exists() and not (tmp_path / "j.json").exists()
    states.__opts__["test"] = False
    assert states.running("microk8s")["result"] is False
