"""Unit tests of the microk8s states: every state with test mode off and on."""

import json
import time
import types
from unittest.mock import call, create_autospec

import pytest
import salt.modules.config
import salt.modules.mine
import salt.modules.network
from salt.exceptions import CommandExecutionError

from tests.unit.conftest import load

mod = load("modules", "microk8s")
states = load("states", "microk8s")

ME = "k8s-worker-1.example.com"

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
             "token_valid", "nodes", "drain", "uncordon", "remove_node"]
    mocks = {f"microk8s.{n}": create_autospec(getattr(mod, n)) for n in names}
    mocks["mine.send"] = create_autospec(salt.modules.mine.send, return_value=True)
    mocks["mine.delete"] = create_autospec(salt.modules.mine.delete, return_value=True)
    mocks["microk8s.server_sans"].return_value = {"ip": [], "dns": []}
    mocks["microk8s.is_clustered"] = create_autospec(mod.is_clustered, return_value=False)
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
    return {states: {"__salt__": m,
                     "__opts__": {"test": test, "id": ME}}}


def expect_applied(ret, test_mode):
    assert ret["result"] is (None if test_mode else True), ret
    assert ret["changes"], ret


def expect_node_action(m, ret, test_mode, done, function, **kwargs):
    """The comment says what was (or would be) done to NODE; the module function ran only
    outside test mode."""
    if test_mode:
        assert ret["comment"] == f"node {NODE} would be {done}"
        m[function].assert_not_called()
    else:
        assert ret["comment"] == f"node {NODE} {done}"
        m[function].assert_called_once_with(NODE, **kwargs)


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


def issued(state_dir, node=ME, expires=None, check="abcdefabcdef", token="t" * 32,
           role="worker"):
    path = state_dir / "join" / f"{node}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "node": node, "role": role, "connection": f"10.1.0.11:25000/{token}/{check}",
        "check": check, "expires": time.time() + 5000 if expires is None else expires}))
    return path


def add_node(ttl=None, token=None):
    return {"token": f"{token}/abcdefabcdef",
            "urls": [f"172.17.0.1:25000/{token}/abcdefabcdef",
                     f"10.1.0.11:25000/{token}/abcdefabcdef"],
            "expires": int(time.time()) + ttl}


def test_credential_reused_while_enough_ttl_remains(m, state_dir):
    issued(state_dir)
    m["microk8s.cert_check"].return_value = "abcdefabcdef"
    m["microk8s.token_valid"].return_value = True
    ret = states.join_credential_present(ME, role="worker", ttl=1800, min_remaining=600)
    assert ret["result"] is True and ret["changes"] == {}
    m["microk8s.add_node"].assert_not_called()
    # published again, to that minion only (a cleared mine cache loses nothing)
    m["mine.send"].assert_called_once_with(f"kos_join_{ME}", mine_function="kos.join_info",
                                           node=ME, allow_tgt=ME, allow_tgt_type="list")


@pytest.mark.parametrize("why", ["near-expiry", "unknown-to-agent", "cert-changed", "none",
                                 "other-role"])
def test_credential_issued_for_the_node_alone(m, state_dir, test_mode, why):
    path = state_dir / "join" / f"{ME}.json"
    if why != "none":
        issued(state_dir, expires=time.time() + (100 if why == "near-expiry" else 5000),
               role="control_plane" if why == "other-role" else "worker")
    m["microk8s.cert_check"].return_value = "ffffffffffff" if why == "cert-changed" else "abcdefabcdef"
    m["microk8s.token_valid"].return_value = why != "unknown-to-agent"
    m["microk8s.add_node"].side_effect = add_node
    before = path.read_text() if path.exists() else None
    ret = states.join_credential_present(ME, role="worker", ttl=1800, min_remaining=600,
                                         cidr="10.1.0.0/16")
    expect_applied(ret, test_mode)
    if test_mode:
        m["microk8s.add_node"].assert_not_called()
        m["mine.send"].assert_not_called()
        assert (path.read_text() if path.exists() else None) == before
        return
    token = m["microk8s.add_node"].call_args.kwargs["token"]
    assert m["microk8s.add_node"].call_args.kwargs["ttl"] == 1800  # a TTL: survives a failed join
    assert len(token) == 32 and token not in json.dumps(ret)  # never in the state return
    doc = json.loads(path.read_text())
    assert doc["connection"] == f"10.1.0.11:25000/{token}/abcdefabcdef"  # the private URL
    assert (doc["node"], doc["role"]) == (ME, "worker")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    m["mine.send"].assert_called_once_with(f"kos_join_{ME}", mine_function="kos.join_info",
                                           node=ME, allow_tgt=ME, allow_tgt_type="list")
    if why != "none":  # the credential it replaces is withdrawn
        m["microk8s.remove_token"].assert_called_once_with("t" * 32, None)


def test_no_credential_is_issued_without_an_address_in_the_network(m):
    m["microk8s.cert_check"].return_value = "abcdefabcdef"
    m["network.ip_addrs"].return_value = []
    ret = states.join_credential_present(ME, role="worker", cidr="10.9.0.0/16")
    assert ret["result"] is False and "10.9.0.0/16" in ret["comment"]
    m["microk8s.add_node"].assert_not_called()


def test_a_credential_that_cannot_be_published_is_withdrawn(m, state_dir):
    """add-node succeeded, the publication failed: nobody may use the token."""
    m["microk8s.cert_check"].return_value = "abcdefabcdef"
    m["microk8s.add_node"].side_effect = add_node
    m["mine.send"].return_value = False
    ret = states.join_credential_present(ME, role="worker", cidr="10.1.0.0/16")
    assert ret["result"] is False and "mine.send" in ret["comment"]
    token = m["microk8s.add_node"].call_args.kwargs["token"]
    m["microk8s.remove_token"].assert_called_once_with(token, None)
    assert not (state_dir / "join" / f"{ME}.json").exists()


@pytest.mark.parametrize("kwargs, words", [
    ({"role": "worker", "ttl": 600, "min_remaining": 1800}, "min_remaining"),
    ({"role": "admin"}, "role must be worker or control_plane"),
])
def test_credential_arguments_are_checked(m, kwargs, words):
    ret = states.join_credential_present(ME, **kwargs)
    assert ret["result"] is False and words in ret["comment"]
    m["microk8s.add_node"].assert_not_called()


def test_credentials_revoked(m, state_dir, test_mode):
    one = issued(state_dir, token="a" * 32)
    other = issued(state_dir, node="k8s-worker-2.example.com", token="b" * 32)
    ret = states.join_credentials_absent("creds", nodes=[ME, "k8s-cp-9.example.com"])
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"credentials": {"old": [ME], "new": []}}
    assert "a" * 32 not in json.dumps(ret)
    assert other.exists()
    if test_mode:
        assert one.exists()
        m["microk8s.remove_token"].assert_not_called()
        return
    assert not one.exists()
    assert [c.args[0] for c in m["microk8s.remove_token"].call_args_list] == ["a" * 32]
    m["mine.delete"].assert_called_once_with(f"kos_join_{ME}")
    again = states.join_credentials_absent("creds", nodes=[ME])
    assert again["result"] is True and again["changes"] == {}


def test_every_credential_revoked_without_a_list(m, state_dir):
    issued(state_dir, token="a" * 32)
    issued(state_dir, node="k8s-worker-2.example.com", token="b" * 32)
    ret = states.join_credentials_absent("creds")
    assert ret["changes"]["credentials"]["old"] == [ME, "k8s-worker-2.example.com"]
    assert list((state_dir / "join").iterdir()) == []


def join_doc(node=ME, role="worker", expires=None):
    return {"cp1": {"node": node, "role": role,
                    "connection": "10.1.0.11:25000/" + "t" * 32 + "/c" * 1,
                    "expires": time.time() + 3000 if expires is None else expires}}


def test_cluster_joined_does_nothing_when_joined(m):
    m["microk8s.status"].return_value = st(worker=True)
    m["microk8s.is_clustered"].return_value = True
    ret = states.cluster_joined("cp1", source="cp1", role="worker")
    assert ret["result"] is True and ret["changes"] == {}
    m["microk8s.join"].assert_not_called()


def test_cluster_joined_worker_with_its_own_credential(m, test_mode):
    m["microk8s.status"].side_effect = [st(), st(worker=True)]
    m["microk8s.is_clustered"].side_effect = [False, True]
    m["mine.get"].return_value = join_doc()
    ret = states.cluster_joined("cp1", source="cp1", role="worker")
    expect_applied(ret, test_mode)
    assert "t" * 32 not in json.dumps(ret)
    if test_mode:
        m["microk8s.join"].assert_not_called()
    else:
        m["mine.get"].assert_called_once_with("cp1", f"kos_join_{ME}")
        assert m["microk8s.join"].call_args.kwargs == {"worker": True}


def test_cluster_joined_control_plane(m):
    m["microk8s.status"].side_effect = [st(), st(nodes=2)]
    m["microk8s.is_clustered"].side_effect = [False, True]
    m["mine.get"].return_value = join_doc(role="control_plane")
    ret = states.cluster_joined("cp1", source="cp1", role="control_plane")
    assert ret["result"] is True
    assert m["microk8s.join"].call_args.kwargs == {"worker": False}


def test_cluster_joined_reports_why_it_failed(m):
    m["microk8s.status"].return_value = st()
    m["mine.get"].return_value = join_doc()
    m["microk8s.join"].side_effect = CommandExecutionError("Connection failed. Invalid token (500).")
    ret = states.cluster_joined("cp1", source="cp1")
    assert ret["result"] is False and "Invalid token (500)" in ret["comment"]


@pytest.mark.parametrize("mine, words", [
    ({}, "issued no join credential"),
    (join_doc(expires=1), "expires in"),
    (join_doc(role="control_plane"), "not for"),
    (join_doc(node="k8s-worker-2.example.com"), "not for"),
], ids=["missing", "expired", "other-role", "other-node"])
def test_cluster_joined_refuses_a_credential_it_cannot_use(m, mine, words):
    m["microk8s.status"].return_value = st()
    m["mine.get"].return_value = mine
    ret = states.cluster_joined("cp1", source="cp1", role="worker")
    assert ret["result"] is False and words in ret["comment"], ret
    m["microk8s.join"].assert_not_called()


def test_cluster_left(m, test_mode):
    m["microk8s.status"].return_value = st(worker=True)
    m["microk8s.is_clustered"].side_effect = [True, False]
    ret = states.cluster_left("microk8s")
    expect_applied(ret, test_mode)
    assert m["microk8s.leave"].called is (not test_mode)
    m["microk8s.is_clustered"].side_effect = None
    m["microk8s.is_clustered"].return_value = False
    assert states.cluster_left("microk8s")["changes"] == {}


# `microk8s status` on a stopped control plane: it lists no datastore member
STOPPED = dict(st(running=False, stopped=True, nodes=0),
               high_availability={"enabled": False, "nodes": []},
               message="microk8s is not running, try microk8s start")


def test_a_stopped_member_is_never_reported_as_left(m, test_mode):
    """orch.remove took "not part of a cluster" for done, and its next step failed."""
    m["microk8s.status"].return_value = STOPPED
    m["microk8s.is_clustered"].return_value = True
    ret = states.cluster_left("microk8s")
    assert ret["result"] is False and ret["changes"] == {}, ret
    assert "start it (microk8s start), then leave" in ret["comment"]
    m["microk8s.leave"].assert_not_called()


def test_a_stopped_member_is_already_part_of_a_cluster(m, test_mode):
    m["microk8s.status"].return_value = STOPPED
    m["microk8s.is_clustered"].return_value = True
    ret = states.cluster_joined("cp1", source="cp1", role="control_plane")
    assert (ret["result"], ret["changes"]) == (True, {}), ret
    assert ret["comment"] == "already part of a cluster"
    m["microk8s.join"].assert_not_called()


def test_a_stopped_node_that_cannot_tell_fails_both_ways(m, test_mode):
    m["microk8s.status"].return_value = STOPPED
    m["microk8s.is_clustered"].side_effect = CommandExecutionError(
        "microk8s is stopped and .../cluster.yaml cannot be read, so whether this node is in a "
        "cluster cannot be told: start it (microk8s start) first")
    for ret in (states.cluster_joined("cp1", source="cp1", role="control_plane"),
                states.cluster_left("microk8s")):
        assert ret["result"] is False and "start it (microk8s start)" in ret["comment"], ret
        assert ret["changes"] == {}
    m["microk8s.join"].assert_not_called()
    m["microk8s.leave"].assert_not_called()


def test_a_test_run_without_the_snap_predicts(m, state_dir, tmp_path):
    """The snap comes in the same highstate: "State 'microk8s.running' was not found" before."""
    for name in [k for k in m if k.startswith("microk8s.")]:
        del m[name]
    states.__opts__["test"] = True
    rets = [
        states.running("microk8s"),
        states.addon_enabled("dns"),
        states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path)),
        states.join_credential_present(ME, role="worker"),
        states.cluster_joined("cp1", source="cp1", role="worker"),
    ]
    for ret in rets:
        assert ret["result"] is None and ret["changes"], ret
        assert ret["comment"].startswith("would ") and "once microk8s is installed" in ret["comment"]
    assert rets[4]["changes"] == {"cluster": {"old": "standalone", "new": "joined cp1 as worker"}}
    assert not state_dir.exists()
    states.__opts__["test"] = False
    assert states.running("microk8s")["result"] is False


@pytest.fixture
def cert_mocks(m):
    m["microk8s.certificates"] = create_autospec(mod.certificates)
    return m


def test_certificates_renewed_leaves_certificates_with_time_left(cert_mocks):
    cert_mocks["microk8s.certificates"].return_value = {
        "ca.crt": 3000, "server.crt": 100, "front-proxy-client.crt": 100}
    ret = states.certificates_renewed("control-plane certificates", within_days=30)
    assert ret["result"] is True and ret["changes"] == {}
    cert_mocks["microk8s.refresh_certs"].assert_not_called()


def test_certificates_renewed_refreshes_only_what_is_due_never_the_ca(cert_mocks, test_mode):
    cert_mocks["microk8s.certificates"].side_effect = [
        {"ca.crt": 10, "server.crt": 5, "front-proxy-client.crt": 100},
        {"ca.crt": 10, "server.crt": 365, "front-proxy-client.crt": 100}]
    ret = states.certificates_renewed("control-plane certificates", within_days=30)
    expect_applied(ret, test_mode)
    assert "the CA has 10 days left: renew it by hand" in ret["comment"]
    if test_mode:
        assert ret["changes"] == {"certificates": {"old": {"server.crt": 5}, "new": "renewed"}}
        cert_mocks["microk8s.refresh_certs"].assert_not_called()
    else:
        assert ret["changes"] == {"certificates": {"old": {"server.crt": 5},
                                                   "new": {"server.crt": 365}}}
        cert_mocks["microk8s.refresh_certs"].assert_called_once_with("server.crt")


def test_certificates_renewed_on_a_worker_does_nothing(cert_mocks):
    cert_mocks["microk8s.certificates"].return_value = {}
    ret = states.certificates_renewed("c", force=True)
    assert ret["result"] is True and ret["changes"] == {} and "a worker" in ret["comment"]


NODE = "k8s-worker-1"


def nodes(ready=True, version="v1.31.9", unschedulable=False, name=NODE):
    """What microk8s.nodes says of one node (and of a control plane next to it)."""
    return {"k8s-cp-1": {"ready": True, "role": "control-plane", "ip": "10.1.0.11",
                         "version": "v1.31.9", "unschedulable": False},
            name: {"ready": ready, "role": "worker", "ip": "10.1.0.21", "version": version,
                   "unschedulable": unschedulable}}


# kubectl's exit-1 texts as microk8s.drain raises them: a Pod without a controller
# (pkg/drain/filters.go) and an eviction a PodDisruptionBudget holds until --timeout
# (pkg/drain/drain.go), each reported by pkg/cmd/drain/drain.go, in
# https://github.com/kubernetes/kubectl/tree/v0.31.0
DRAIN_REFUSED = (
    f'error: unable to drain node "{NODE}" due to error: cannot delete cannot delete Pods that '
    "declare no controller (use --force to override): default/zingaboom, continuing command...\n"
    f"There are pending nodes to be drained:\n {NODE}\ncannot delete cannot delete Pods that "
    "declare no controller (use --force to override): default/zingaboom\n"
    f"node/{NODE} cordoned")
DRAIN_TIMED_OUT = (
    f'error: unable to drain node "{NODE}" due to error: error when evicting pods/"redis-1" -n '
    '"default": global timeout reached: 5m0s, continuing command...\n'
    f"There are pending nodes to be drained:\n {NODE}\n"
    'error when evicting pods/"redis-1" -n "default": global timeout reached: 5m0s')
CONNECTION_REFUSED = ("The connection to the server 127.0.0.1:16443 was refused - did you "
                      "specify the right host or port?")


def test_node_drained(m, test_mode):
    m["microk8s.nodes"].side_effect = [nodes(), nodes(unschedulable=True)]
    ret = states.node_drained(NODE, timeout=300)
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"schedulable": {"old": True, "new": False}}
    expect_node_action(m, ret, test_mode, "drained", "microk8s.drain", timeout=300)
    # Looked again afterwards, unless only testing.
    assert m["microk8s.nodes"].call_count == (1 if test_mode else 2)


def test_node_drained_without_timeout_passes_none(m):
    m["microk8s.nodes"].side_effect = [nodes(), nodes(unschedulable=True)]
    assert states.node_drained(NODE)["result"] is True
    m["microk8s.drain"].assert_called_once_with(NODE, timeout=None)


def test_a_cordoned_node_is_drained_again(m, test_mode):
    """An earlier drain that timed out left it cordoned, maybe with Pods still on it."""
    m["microk8s.nodes"].return_value = nodes(unschedulable=True)
    ret = states.node_drained(NODE, timeout=300)
    assert ret["result"] is True and ret["changes"] == {}, ret
    expect_node_action(m, ret, test_mode, "drained", "microk8s.drain", timeout=300)


@pytest.mark.parametrize("text", [DRAIN_REFUSED, DRAIN_TIMED_OUT], ids=["refused", "timed-out"])
def test_node_drained_reports_kubectls_failure(m, test_mode, text):
    m["microk8s.nodes"].return_value = nodes()
    m["microk8s.drain"].side_effect = CommandExecutionError(text)
    ret = states.node_drained(NODE, timeout=300)
    if test_mode:
        assert ret["result"] is None and ret["changes"]
        m["microk8s.drain"].assert_not_called()
    else:
        assert ret["result"] is False and ret["changes"] == {}, ret
        assert ret["comment"] == f"draining {NODE} failed: {text}"


@pytest.mark.parametrize(("state", "cordoned", "verb", "still"), [
    ("node_drained", False, "drain", "schedulable"),
    ("node_uncordoned", True, "uncordon", "cordoned"),
])
def test_a_node_that_stays_as_it_was_fails(m, test_mode, state, cordoned, verb, still):
    """`kubectl uncordon` exits 0 even when its patch fails: RunCordonOrUncordon prints the
    error and returns nil,
    https://github.com/kubernetes/kubectl/blob/v0.31.0/pkg/cmd/drain/drain.go."""
    m["microk8s.nodes"].return_value = nodes(unschedulable=cordoned)
    m["microk8s.uncordon"].return_value = ""
    ret = getattr(states, state)(NODE)
    if test_mode:
        assert ret["result"] is None
    else:
        assert ret["result"] is False and ret["changes"] == {}
        assert ret["comment"] == f"kubectl {verb} {NODE} ran but the node is still {still}"
        m[f"microk8s.{verb}"].assert_called_once()


@pytest.mark.parametrize("state", ["node_drained", "node_uncordoned"])
def test_an_unregistered_node_fails_in_both_modes(m, test_mode, state):
    m["microk8s.nodes"].return_value = nodes(name="k8s-worker-2")
    ret = getattr(states, state)(NODE)
    assert ret["result"] is False and ret["changes"] == {}, ret
    assert f"node {NODE} is not registered in the cluster" in ret["comment"]
    m["microk8s.drain"].assert_not_called()
    m["microk8s.uncordon"].assert_not_called()


@pytest.mark.parametrize("state, verb", [("node_drained", "draining"),
                                         ("node_uncordoned", "uncordoning")])
def test_node_states_on_a_worker_fail(m, test_mode, state, verb):
    """microk8s.nodes refuses to answer on a worker: these states run on a control plane."""
    m["microk8s.nodes"].side_effect = CommandExecutionError(
        "this node is a worker: ask a control-plane node")
    ret = getattr(states, state)(NODE)
    assert ret["result"] is False and ret["changes"] == {}
    assert ret["comment"] == f"{verb} {NODE} failed: this node is a worker: ask a control-plane node"


def test_node_uncordoned(m, test_mode):
    m["microk8s.nodes"].side_effect = [nodes(unschedulable=True), nodes()]
    ret = states.node_uncordoned(NODE)
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"schedulable": {"old": False, "new": True}}
    expect_node_action(m, ret, test_mode, "uncordoned", "microk8s.uncordon")


def test_node_uncordoned_already(m, test_mode):
    m["microk8s.nodes"].return_value = nodes()
    ret = states.node_uncordoned(NODE)
    assert ret["result"] is True and ret["changes"] == {}
    assert ret["comment"] == f"node {NODE} is schedulable"
    m["microk8s.uncordon"].assert_not_called()


def test_node_uncordoned_reports_kubectls_failure(m, test_mode):
    m["microk8s.nodes"].return_value = nodes(unschedulable=True)
    m["microk8s.uncordon"].side_effect = CommandExecutionError(CONNECTION_REFUSED)
    ret = states.node_uncordoned(NODE)
    if test_mode:
        assert ret["result"] is None and ret["changes"]
        m["microk8s.uncordon"].assert_not_called()
    else:
        assert ret["result"] is False and ret["changes"] == {}
        assert ret["comment"] == f"uncordoning {NODE} failed: {CONNECTION_REFUSED}"


class Clock:
    """time.monotonic and time.sleep for node_ready: sleeping moves the clock."""

    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(states, "time", types.SimpleNamespace(monotonic=clock.monotonic,
                                                              sleep=clock.sleep))
    return clock


def test_node_ready_waits_for_the_new_version(m, test_mode, clock):
    m["microk8s.nodes"].side_effect = [
        nodes(ready=False),                          # refreshing
        CommandExecutionError(CONNECTION_REFUSED),   # the API server restarts
        nodes(ready=True, version="v1.31.9"),        # Ready again, still the old kubelet
        nodes(ready=False, version="v1.32.3"),
        nodes(ready=True, version="v1.32.3"),
    ]
    ret = states.node_ready(NODE, track="1.32", timeout=60, interval=5)
    assert ret["result"] is True and ret["changes"] == {}, ret
    if test_mode:
        assert ret["comment"] == f"would wait for node {NODE} to be Ready on 1.32"
        m["microk8s.nodes"].assert_not_called()
        assert clock.slept == []
    else:
        assert ret["comment"] == f"node {NODE} is Ready on v1.32.3"
        assert m["microk8s.nodes"].call_args_list == [call()] * 5
        assert clock.slept == [5, 5, 5, 5]


def test_node_ready_at_once(m, clock):
    m["microk8s.nodes"].return_value = nodes(version="v1.32.3")
    ret = states.node_ready(NODE, track="1.32")
    assert ret["result"] is True and ret["comment"] == f"node {NODE} is Ready on v1.32.3"
    assert clock.slept == [] and m["microk8s.nodes"].call_count == 1


@pytest.mark.parametrize("seen, words", [
    (nodes(name="k8s-worker-2"), "is not registered"),
    (nodes(ready=False, version="v1.32.3"), "is NotReady on v1.32.3"),
    (nodes(version="v1.31.9"), "is Ready on v1.31.9"),
    (CommandExecutionError(CONNECTION_REFUSED), f"could not be read: {CONNECTION_REFUSED}"),
], ids=["unregistered", "not-ready", "old-version", "api-down"])
def test_node_ready_gives_up_after_the_timeout(m, test_mode, clock, seen, words):
    if isinstance(seen, Exception):
        m["microk8s.nodes"].side_effect = seen
    else:
        m["microk8s.nodes"].return_value = seen
    ret = states.node_ready(NODE, track="1.32", timeout=10, interval=2)
    if test_mode:
        assert ret["result"] is True and ret["changes"] == {}
        m["microk8s.nodes"].assert_not_called()
        return
    assert ret["result"] is False and ret["changes"] == {}, ret
    assert ret["comment"] == f"node {NODE} {words} after 10 s; expected Ready on 1.32"
    assert clock.slept == [2] * 5 and m["microk8s.nodes"].call_count == 6
    assert clock.now == 1010.0


def test_node_ready_with_timeout_zero_looks_once(m, clock):
    m["microk8s.nodes"].return_value = nodes(ready=False)
    ret = states.node_ready(NODE, track="1.32", timeout=0)
    assert ret["result"] is False and m["microk8s.nodes"].call_count == 1 and clock.slept == []


@pytest.mark.parametrize("version, track, ok", [
    ("v1.32.3", "1.32", True), ("v1.32.0", "1.32", True), ("v1.3.2", "1.32", False),
    ("v1.320.1", "1.32", False), ("v1.22.3-3+9ec7c40ec93c73", "1.22", True), (None, "1.32", False),
])
def test_node_ready_compares_the_track(m, clock, version, track, ok):
    m["microk8s.nodes"].return_value = nodes(version=version)
    ret = states.node_ready(NODE, track=track, timeout=0)
    assert ret["result"] is ok, ret


def test_node_ready_refuses_a_track_yaml_read_as_a_number(m, clock):
    m["microk8s.nodes"].return_value = nodes(version="v1.30.1")
    ret = states.node_ready(NODE, track=1.30, timeout=0)
    assert ret["result"] is False and "track must be a string" in ret["comment"]
    assert m["microk8s.nodes"].call_count == 0


def test_node_states_predict_without_the_snap(m):
    for name in [k for k in m if k.startswith("microk8s.")]:
        del m[name]
    states.__opts__["test"] = True
    drained = states.node_drained(NODE, timeout=300)
    uncordoned = states.node_uncordoned(NODE)
    ready = states.node_ready(NODE, track="1.32")
    assert drained["result"] is None and uncordoned["result"] is None and ready["result"] is None
    assert drained["changes"] == {"schedulable": {"old": True, "new": False}}
    assert uncordoned["changes"] == {"schedulable": {"old": False, "new": True}}
    assert ready["changes"] == {}
    assert drained["comment"] == f"would drain node {NODE} once microk8s is installed"
    assert uncordoned["comment"] == f"would uncordon node {NODE} once microk8s is installed"
    assert ready["comment"] == f"would see node {NODE} Ready on 1.32 once microk8s is installed"
    states.__opts__["test"] = False
    for ret in (states.node_drained(NODE), states.node_uncordoned(NODE),
                states.node_ready(NODE, track="1.32")):
        assert ret["result"] is False and ret["changes"] == {}, ret
        assert ret["comment"].startswith("cannot ")
        assert ret["comment"].endswith("the microk8s command is not installed")


def test_a_leaving_node_that_left_already_counts_as_drained(m, test_mode):
    """A removal that stopped after the node left runs again from the drain."""
    m["microk8s.nodes"].return_value = nodes(name="k8s-worker-2")
    ret = states.node_drained(NODE, timeout=60, absent_ok=True)
    assert ret["result"] is True and ret["changes"] == {}, ret
    assert ret["comment"] == f"node {NODE} is not registered in the cluster"
    m["microk8s.drain"].assert_not_called()


def test_node_removed(m, test_mode):
    m["microk8s.nodes"].side_effect = [nodes(ready=False), nodes(name="k8s-worker-2")]
    ret = states.node_removed(NODE)
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"member": {"old": True, "new": False}}
    expect_node_action(m, ret, test_mode, "removed from the cluster", "microk8s.remove_node",
                       force=False)


def test_node_removed_when_gone_changes_nothing(m, test_mode):
    m["microk8s.nodes"].return_value = nodes(name="k8s-worker-2")
    ret = states.node_removed(NODE, force=True)
    assert ret["result"] is True and ret["changes"] == {}
    assert ret["comment"] == f"node {NODE} is not in the cluster"
    m["microk8s.remove_node"].assert_not_called()


def test_node_removed_reports_microk8s_failure_and_a_node_that_stays(m):
    m["microk8s.nodes"].return_value = nodes()
    m["microk8s.remove_node"].side_effect = CommandExecutionError("Node k8s-worker-1 is still up")
    ret = states.node_removed(NODE)
    assert ret["result"] is False and ret["changes"] == {}
    assert ret["comment"] == f"removing node {NODE} failed: Node k8s-worker-1 is still up"
    m["microk8s.remove_node"].side_effect = None
    ret = states.node_removed(NODE, force=True)
    assert ret["result"] is False and ret["changes"] == {}
    assert ret["comment"] == f"microk8s remove-node {NODE} ran but the node is still listed"
    m["microk8s.remove_node"].assert_called_with(NODE, force=True)
