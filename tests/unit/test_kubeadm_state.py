"""Unit tests of the kubeadm states: every state with test mode off and on."""

import json
import time
from unittest.mock import create_autospec

import pytest
import salt.modules.config
import salt.modules.mine
from salt.exceptions import CommandExecutionError

from tests.unit.conftest import load, utils

mod = load("modules", "kubeadm")
states = load("states", "kubeadm")

TOKEN = "abcdef.0123456789abcdef"
NEW_TOKEN = "newtok.0123456789abcdef"
KEY = "a" * 64
HASH = "sha256:" + "c" * 64
PROXY = mod.CERT_TOKEN_DESCRIPTION


def tok(token_id, expires, description="kos: node join"):
    return {"id": token_id, "expires": expires, "usages": [], "description": description,
            "groups": []}


@pytest.fixture(params=[False, True], ids=["apply", "test"])
def test_mode(request):
    return request.param


def init(initialized=False, started=False, answers=False, reason="kubeadm init has not run"):
    """What kubeadm.init_status returns."""
    return {"initialized": initialized, "started": started, "answers": answers, "reason": reason}


INITIALIZED = init(True, True, True, "the control plane is initialized")
FRESH = init()
TIMED_OUT = init(False, True, False, "the API does not answer through the control-plane endpoint "
                                     "(The connection to the server 127.0.0.1:7443 was refused)")


def join(joined=False, started=False, answers=False, reason="kubeadm join has not run here"):
    """What kubeadm.join_status returns."""
    return {"joined": joined, "started": started, "answers": answers, "reason": reason}


JOINED = join(True, True, True, "node has joined")
NOT_JOINED = join()


@pytest.fixture
def state_dir(tmp_path):
    return tmp_path / "state"


@pytest.fixture
def m(state_dir):
    """The execution functions the states call, with the real signatures."""
    names = ["init_status", "join_status", "has_local_files", "init", "api_ready", "token_list",
             "token_create", "token_delete", "upload_certs", "ca_cert_hash", "nodes",
             "etcd_members", "evictable_pods", "join", "reset", "drain", "delete_node", "apply",
             "object_exists"]
    mocks = {f"kubeadm.{n}": create_autospec(getattr(mod, n)) for n in names}
    mocks["kubeadm.api_ready"].return_value = True
    mocks["kubeadm.ca_cert_hash"].return_value = HASH
    mocks["kubeadm.nodes"].return_value = {}
    mocks["kubeadm.etcd_members"].return_value = []
    mocks["kubeadm.evictable_pods"].return_value = []
    mocks["kubeadm.token_list"].return_value = []
    mocks["kubeadm.init_status"].return_value = FRESH
    mocks["mine.get"] = create_autospec(salt.modules.mine.get, return_value={})
    config = {"kos:state_dir": str(state_dir)}
    mocks["config.get"] = create_autospec(salt.modules.config.get,
                                          side_effect=lambda k, d="": config.get(k, d))
    return mocks


@pytest.fixture
def configure_loader_modules(m, request):
    test = request.getfixturevalue("test_mode") if "test_mode" in request.fixturenames else False
    return {states: {"__utils__": utils(), "__salt__": m, "__opts__": {"test": test},
                     "__grains__": {"host": "k8s-worker-1"}}}


def expect_applied(ret, test_mode):
    assert ret["result"] is (None if test_mode else True), ret
    assert ret["changes"], ret


def no_secrets(ret):
    text = json.dumps(ret)
    assert TOKEN not in text and NEW_TOKEN not in text and KEY not in text, text


# --- initialized -----------------------------------------------------------------------------

def test_initialized_nothing_to_do(m):
    m["kubeadm.init_status"].return_value = INITIALIZED
    ret = states.initialized("/k/kubeadm-config.yaml")
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.init"].assert_not_called()


def test_initialized_runs_init_or_its_dry_run(m, test_mode, tmp_path, state_dir):
    config = tmp_path / "kubeadm-config.yaml"
    config.write_text("kind: InitConfiguration\n")
    m["kubeadm.init_status"].side_effect = [FRESH, INITIALIZED]
    ret = states.initialized(str(config), timeout=30)
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"control_plane": {"old": None, "new": "initialized"}}
    if test_mode:
        m["kubeadm.init"].assert_called_once_with(str(config), dry_run=True,
                                                  ignore_preflight_errors=None, kube_dir=None)
        m["kubeadm.api_ready"].assert_not_called()
    else:
        m["kubeadm.init"].assert_called_once_with(str(config), upload_certs=False,
                                                  ignore_preflight_errors=None, kube_dir=None)
        m["kubeadm.api_ready"].assert_called_once_with(timeout=30)
        m["kubeadm.reset"].assert_not_called()
    # the note of an init under way is gone once it is seen finished
    assert not (state_dir / "kubeadm-init.json").exists()


def test_initialized_test_mode_without_the_file_yet(m, tmp_path):
    states.__opts__["test"] = True
    ret = states.initialized(str(tmp_path / "missing.yaml"))
    assert ret["result"] is None and "once" in ret["comment"]
    m["kubeadm.init"].assert_not_called()


def test_initialized_reports_preflight_failure_and_keeps_its_note(m, test_mode, tmp_path,
                                                                   state_dir):
    config = tmp_path / "c.yaml"
    config.write_text("x")
    m["kubeadm.init"].side_effect = CommandExecutionError(
        "error execution phase preflight: [preflight] Some fatal errors occurred:\n"
        "\t[ERROR Swap]: running with swap on is not supported. Please disable swap")
    ret = states.initialized(str(config))
    assert ret["result"] is False and "Swap" in ret["comment"] and ret["changes"] == {}
    # a real run noted its init before kubeadm started: the next run knows it as its own
    assert (state_dir / "kubeadm-init.json").exists() is (not test_mode)


def test_initialized_fails_when_the_api_never_answers(m):
    m["kubeadm.init_status"].side_effect = [FRESH, INITIALIZED]
    m["kubeadm.api_ready"].return_value = False
    ret = states.initialized("/k/c.yaml", timeout=5)
    assert ret["result"] is False and "does not answer" in ret["comment"]


@pytest.mark.parametrize("half", [
    TIMED_OUT,
    init(False, True, True, "kubeadm init stopped before upload-config "
                            "(no kube-system/kubeadm-config)"),
], ids=["api-down", "no-kubeadm-config"])
def test_a_half_done_init_of_ours_is_reset_and_redone(m, test_mode, tmp_path, state_dir, half):
    """The manifests exist (control-plane phase) but init never finished: the old
    `kube-apiserver.yaml exists` check called that initialized, forever."""
    config = tmp_path / "c.yaml"
    config.write_text("x")
    state_dir.mkdir()
    (state_dir / "kubeadm-init.json").write_text(json.dumps({"started": 1}))
    m["kubeadm.init_status"].side_effect = [half, INITIALIZED]
    ret = states.initialized(str(config), timeout=5)
    expect_applied(ret, test_mode)
    assert ret["changes"]["control_plane"]["old"] == f"half-initialized: {half['reason']}"
    assert half["reason"] in ret["comment"]
    if test_mode:
        m["kubeadm.reset"].assert_not_called()
        m["kubeadm.init"].assert_not_called()
    else:
        m["kubeadm.reset"].assert_called_once_with()
        assert m["kubeadm.init"].call_count == 1
        assert not (state_dir / "kubeadm-init.json").exists()


def test_a_control_plane_this_state_did_not_start_is_never_reset(m, test_mode, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("x")
    m["kubeadm.init_status"].return_value = TIMED_OUT
    m["kubeadm.api_ready"].return_value = False
    ret = states.initialized(str(config), timeout=1)
    assert ret["result"] is False and "not reset" in ret["comment"], ret
    assert "127.0.0.1:7443 was refused" in ret["comment"]
    m["kubeadm.api_ready"].assert_called_once_with(timeout=1)
    m["kubeadm.reset"].assert_not_called()
    m["kubeadm.init"].assert_not_called()


def test_a_slow_api_of_an_initialized_node_is_waited_for(m, tmp_path):
    m["kubeadm.init_status"].side_effect = [TIMED_OUT, INITIALIZED]
    ret = states.initialized(str(tmp_path / "c.yaml"), timeout=7)
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.api_ready"].assert_called_once_with(timeout=7)


# --- token_present ---------------------------------------------------------------------------

def publish(path, token_id="abcdef", expires=None, ca=HASH):
    path.write_text(json.dumps({"token": f"{token_id}.0123456789abcdef", "token_id": token_id,
                                "ca_cert_hash": ca, "expires": expires}))


def test_token_reused_while_enough_ttl_remains(m, tmp_path):
    path = tmp_path / "join.json"
    publish(path, expires=time.time() + 3000)
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_list"].return_value = [tok("abcdef", time.time() + 3000)]
    ret = states.token_present(str(path), ttl=3600, min_remaining=900)
    assert ret["result"] is True and ret["changes"] == {}, ret
    m["kubeadm.token_create"].assert_not_called()


@pytest.mark.parametrize("why", ["none", "gone", "near-expiry", "ca-changed"])
def test_token_reissued(m, tmp_path, test_mode, why):
    path = tmp_path / "kos" / "join.json"
    path.parent.mkdir()
    listed = [tok("abcdef", time.time() + (100 if why == "near-expiry" else 3000))]
    if why != "none":
        publish(path, expires=time.time() + 3000, ca=HASH if why != "ca-changed" else "sha256:x")
    if why == "gone":
        listed = []  # expired tokens vanish from the cluster
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_create"].return_value = NEW_TOKEN
    new_expiry = time.time() + 3600
    m["kubeadm.token_list"].side_effect = [listed, listed + [tok("newtok", new_expiry)]]
    before = path.read_text() if path.exists() else None
    ret = states.token_present(str(path), ttl=3600, min_remaining=900)
    expect_applied(ret, test_mode)
    no_secrets(ret)
    if test_mode:
        m["kubeadm.token_create"].assert_not_called()
        assert (path.read_text() if path.exists() else None) == before
    else:
        m["kubeadm.token_create"].assert_called_once_with(ttl=3600, description="kos: node join")
        doc = json.loads(path.read_text())
        assert doc["token"] == NEW_TOKEN and doc["ca_cert_hash"] == HASH
        assert doc["expires"] == int(new_expiry)
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        assert ret["changes"]["token"]["new"]["expires"] == int(new_expiry)
        if why in ("near-expiry", "ca-changed"):
            m["kubeadm.token_delete"].assert_called_once_with("abcdef")
        else:
            m["kubeadm.token_delete"].assert_not_called()


def test_token_not_issued_when_every_node_joined(m, tmp_path, test_mode):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.nodes"].return_value = {"k8s-cp-1": {}, "k8s-worker-1": {}}
    ret = states.token_present(str(tmp_path / "join.json"),
                               wanted_nodes=["k8s-cp-1", "k8s-worker-1"])
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.token_create"].assert_not_called()


def test_token_issued_for_pending_nodes(m, tmp_path):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.nodes"].return_value = {"k8s-cp-1": {}}
    m["kubeadm.token_create"].return_value = NEW_TOKEN
    m["kubeadm.token_list"].side_effect = [[], [tok("newtok", time.time() + 3600)]]
    ret = states.token_present(str(tmp_path / "join.json"),
                               wanted_nodes=["k8s-cp-1", "k8s-worker-1"])
    assert ret["result"] is True and "k8s-worker-1" in ret["comment"]


def test_token_ttl_must_exceed_min_remaining(m, tmp_path):
    ret = states.token_present(str(tmp_path / "j.json"), ttl=600, min_remaining=900)
    assert ret["result"] is False and "min_remaining" in ret["comment"]


@pytest.mark.parametrize("state", ["token_present", "certificate_key_present"])
def test_credentials_need_a_control_plane(m, tmp_path, test_mode, state):
    m["kubeadm.init_status"].return_value = FRESH
    ret = getattr(states, state)(str(tmp_path / "j.json"))
    if test_mode:
        # a test run on a fresh node: init comes first in the same run
        assert ret["result"] is None and "once the control plane is initialized" in ret["comment"]
    else:
        assert ret["result"] is False and "runs no initialized control plane" in ret["comment"]
        assert FRESH["reason"] in ret["comment"]
    m["kubeadm.token_create"].assert_not_called()
    m["kubeadm.upload_certs"].assert_not_called()


# --- certificate_key_present -----------------------------------------------------------------

def publish_key(path, owner="q1w2e3", expires=None):
    path.write_text(json.dumps({"certificate_key": KEY, "owner_token_id": owner,
                                "expires": expires}))


def test_certificate_key_reused_while_fresh(m, tmp_path):
    path = tmp_path / "join-control-plane.json"
    expires = time.time() + 6000
    publish_key(path, expires=int(expires))
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_list"].return_value = [tok("q1w2e3", expires, PROXY), tok("abcdef", 1)]
    ret = states.certificate_key_present(str(path), min_remaining=900)
    assert ret["result"] is True and ret["changes"] == {}, ret
    m["kubeadm.upload_certs"].assert_not_called()


@pytest.mark.parametrize("why", ["none", "secret-gone", "stale", "replaced"])
def test_certificate_key_reuploaded(m, tmp_path, test_mode, why):
    path = tmp_path / "join-control-plane.json"
    now = time.time()
    owner = tok("q1w2e3", now + (600 if why == "stale" else 6000), PROXY)
    listed = [owner]
    if why == "secret-gone":
        listed = []
    if why == "replaced":
        listed.append(tok("later1", now + 7000, PROXY))
    if why != "none":
        publish_key(path, expires=int(owner["expires"]))
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.upload_certs"].return_value = "b" * 64
    fresh = tok("fresh1", now + 7200, PROXY)
    m["kubeadm.token_list"].side_effect = [listed, listed + [fresh]]
    ret = states.certificate_key_present(str(path), min_remaining=900, config="/k/c.yaml")
    expect_applied(ret, test_mode)
    no_secrets(ret)
    assert "b" * 64 not in json.dumps(ret)
    if test_mode:
        m["kubeadm.upload_certs"].assert_not_called()
    else:
        m["kubeadm.upload_certs"].assert_called_once_with(config="/k/c.yaml")
        doc = json.loads(path.read_text())
        assert doc == {"certificate_key": "b" * 64, "owner_token_id": "fresh1",
                       "uploaded": doc["uploaded"], "expires": int(fresh["expires"])}
        assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_certificate_key_not_uploaded_when_every_control_plane_joined(m, tmp_path):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.nodes"].return_value = {"k8s-cp-1": {}, "k8s-cp-2": {}, "k8s-worker-1": {}}
    m["kubeadm.etcd_members"].return_value = ["k8s-cp-1", "k8s-cp-2"]
    ret = states.certificate_key_present(str(tmp_path / "k.json"),
                                         wanted_nodes=["k8s-cp-1", "k8s-cp-2"])
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.upload_certs"].assert_not_called()


@pytest.mark.parametrize("state", ["token_present", "certificate_key_present"])
def test_credentials_still_issued_for_a_control_plane_without_its_etcd_member(m, tmp_path, state):
    """A join that failed at the etcd step registered the node: it still needs credentials
    for its next attempt."""
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.nodes"].return_value = {"k8s-cp-1": {}, "k8s-cp-2": {}}
    m["kubeadm.etcd_members"].return_value = ["k8s-cp-1"]
    m["kubeadm.token_create"].return_value = NEW_TOKEN
    m["kubeadm.upload_certs"].return_value = "b" * 64
    m["kubeadm.token_list"].side_effect = [[], [tok("newtok", time.time() + 3600),
                                                tok("fresh1", time.time() + 7200, PROXY)]]
    if state == "token_present":
        ret = states.token_present(str(tmp_path / "j.json"), wanted_nodes=["k8s-cp-1", "k8s-cp-2"],
                                   control_planes=["k8s-cp-1", "k8s-cp-2"])
    else:
        ret = states.certificate_key_present(str(tmp_path / "k.json"),
                                             wanted_nodes=["k8s-cp-1", "k8s-cp-2"])
    assert ret["result"] is True and ret["changes"], ret


def test_a_token_that_cannot_be_published_is_deleted_again(m, tmp_path):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_create"].return_value = NEW_TOKEN
    m["kubeadm.token_list"].side_effect = [[], [tok("newtok", time.time() + 3600)]]
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("x")
    ret = states.token_present(str(blocked / "join.json"))
    assert ret["result"] is False and "issuing a join token failed" in ret["comment"]
    m["kubeadm.token_delete"].assert_called_once_with("newtok")


def test_certificate_key_upload_without_owner_fails(m, tmp_path):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.upload_certs"].return_value = KEY
    m["kubeadm.token_list"].return_value = []
    ret = states.certificate_key_present(str(tmp_path / "k.json"))
    assert ret["result"] is False and "no token owns" in ret["comment"]
    assert KEY not in json.dumps(ret)


# --- join_credentials_absent -----------------------------------------------------------------

def test_credentials_absent_nothing_left(m, tmp_path):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_list"].return_value = [tok("zz9yx8", None, "")]
    ret = states.join_credentials_absent(str(tmp_path / "join.json"),
                                         certificate_key_file=str(tmp_path / "cp.json"))
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.token_delete"].assert_not_called()


def test_credentials_revoked(m, tmp_path, test_mode):
    join, cp = tmp_path / "join.json", tmp_path / "cp.json"
    publish(join, expires=time.time() + 3000)
    publish_key(cp, owner="q1w2e3", expires=int(time.time() + 6000))
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_list"].return_value = [
        tok("abcdef", time.time() + 3000), tok("initkn", time.time() + 300),
        tok("q1w2e3", time.time() + 6000, PROXY), tok("other1", None, "someone else's"),
    ]
    ret = states.join_credentials_absent(str(join), certificate_key_file=str(cp))
    expect_applied(ret, test_mode)
    no_secrets(ret)
    assert ret["changes"]["tokens"] == {"old": 2, "new": 0}
    if test_mode:
        m["kubeadm.token_delete"].assert_not_called()
        assert join.exists() and cp.exists()
    else:
        deleted = [c.args[0] for c in m["kubeadm.token_delete"].call_args_list]
        assert deleted == ["abcdef", "initkn", "q1w2e3"]
        assert not join.exists() and not cp.exists()


# --- joined ----------------------------------------------------------------------------------

def mine(m, token=None, key=None, left=3000, key_left=6000):
    data = {
        "kos_join": {"k8s-cp-1": {"token": token or TOKEN, "ca_cert_hash": HASH,
                                  "expires": time.time() + left}},
        "kos_join_control_plane": {"k8s-cp-1": {"certificate_key": key or KEY,
                                                "expires": time.time() + key_left}},
    }
    m["mine.get"].side_effect = lambda tgt, fun, *a, **kw: data[fun]


def test_joined_does_nothing_when_joined(m):
    m["kubeadm.join_status"].return_value = JOINED
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443")
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.join"].assert_not_called()


def test_joined_worker(m, test_mode):
    m["kubeadm.join_status"].side_effect = [NOT_JOINED, JOINED]
    mine(m)
    args = [{"name": "cloud-provider", "value": "external"}]
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", node_name="k8s-worker-1",
                        kubelet_extra_args=args, discovery_timeout=300)
    expect_applied(ret, test_mode)
    no_secrets(ret)
    m["kubeadm.join_status"].assert_called_with("k8s-worker-1", control_plane=False,
                                                stacked_etcd=True, kube_dir=None)
    if test_mode:
        m["kubeadm.join"].assert_not_called()
        m["mine.get"].assert_not_called()
    else:
        m["kubeadm.join"].assert_called_once_with(
            "127.0.0.1:7443", TOKEN, HASH, control_plane=False, certificate_key=None,
            node_name="k8s-worker-1", advertise_address=None, bind_port=None, cri_socket=None,
            kubelet_extra_args=args, discovery_timeout=300)
        m["kubeadm.api_ready"].assert_not_called()
        m["kubeadm.reset"].assert_not_called()
        assert [c.args for c in m["mine.get"].call_args_list] == [("k8s-cp-1", "kos_join")]


def test_joined_control_plane_uses_the_certificate_key(m):
    m["kubeadm.join_status"].side_effect = [NOT_JOINED, JOINED]
    mine(m)
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", advertise_address="10.1.0.12", bind_port=6443,
                        timeout=30)
    assert ret["result"] is True, ret
    kwargs = m["kubeadm.join"].call_args.kwargs
    assert kwargs["control_plane"] is True and kwargs["certificate_key"] == KEY
    assert kwargs["advertise_address"] == "10.1.0.12"
    m["kubeadm.api_ready"].assert_called_once_with(timeout=30)
    no_secrets(ret)


ETCD_STEP_FAILED = join(False, True, True, "node k8s-cp-2 is registered but runs no etcd member "
                                           "(no Pod kube-system/etcd-k8s-cp-2)")


def test_a_control_plane_join_that_failed_at_etcd_is_reset_and_redone(m, test_mode):
    """kubelet.conf exists and the node is registered: the old check said joined, forever."""
    m["kubeadm.join_status"].side_effect = [ETCD_STEP_FAILED, JOINED]
    mine(m)
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", timeout=5)
    expect_applied(ret, test_mode)
    assert ret["changes"]["cluster"]["old"] == f"half-joined: {ETCD_STEP_FAILED['reason']}"
    assert ETCD_STEP_FAILED["reason"] in ret["comment"]
    if test_mode:
        m["kubeadm.reset"].assert_not_called()
        m["kubeadm.join"].assert_not_called()
    else:
        m["kubeadm.reset"].assert_called_once_with()
        assert m["kubeadm.join"].call_count == 1


def test_a_member_whose_api_does_not_answer_is_never_reset(m, tmp_path, test_mode):
    kube = tmp_path / "kube"
    kube.mkdir()
    (kube / "kubelet.conf").write_text("x")
    m["kubeadm.join_status"].return_value = join(False, True, False,
                                                 "the API does not answer (EOF)")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", kube_dir=str(kube))
    assert ret["result"] is False and "EOF" in ret["comment"], ret
    m["kubeadm.reset"].assert_not_called()
    m["kubeadm.join"].assert_not_called()


def test_a_join_that_never_shows_as_joined_fails_with_the_reason(m):
    m["kubeadm.join_status"].side_effect = [NOT_JOINED] + [ETCD_STEP_FAILED] * 5
    mine(m)
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", timeout=0)
    assert ret["result"] is False and "runs no etcd member" in ret["comment"]


@pytest.mark.parametrize("case", ["no-token", "token-expiring", "no-key", "key-expiring"])
def test_joined_refuses_unusable_credentials(m, case):
    m["kubeadm.join_status"].return_value = NOT_JOINED
    if case == "no-token":
        m["mine.get"].return_value = {}
    else:
        mine(m, left=10 if case == "token-expiring" else 3000,
             key_left=10 if case == "key-expiring" else 6000)
        if case == "no-key":
            m["mine.get"].side_effect = lambda tgt, fun, *a, **kw: (
                {"k8s-cp-1": {"token": TOKEN, "ca_cert_hash": HASH, "expires": time.time() + 3000}}
                if fun == "kos_join" else {})
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane")
    assert ret["result"] is False and "k8s-cp-1" in ret["comment"], ret
    m["kubeadm.join"].assert_not_called()


def test_joined_reports_kubeadms_error(m):
    m["kubeadm.join_status"].return_value = NOT_JOINED
    mine(m)
    m["kubeadm.join"].side_effect = CommandExecutionError(
        "error execution phase preflight: couldn't validate the identity of the API Server: "
        'could not find a JWS signature in the cluster-info ConfigMap for token ID "abcdef"')
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443")
    assert ret["result"] is False and "JWS signature" in ret["comment"]


def test_joined_rejects_an_unknown_role(m):
    ret = states.joined("k8s-cp-1", api_server_endpoint="x:1", role="etcd")
    assert ret["result"] is False


# --- manifest_applied ------------------------------------------------------------------------

MANIFEST = """apiVersion: v1
kind: ServiceAccount
metadata:
  name: kube-router
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kube-router
"""


def test_manifest_applied(m, tmp_path, test_mode):
    path = tmp_path / "kube-router.yaml"
    path.write_text(MANIFEST)
    record = tmp_path / "applied" / "kube-router.yaml.sha256"
    m["kubeadm.object_exists"].return_value = False
    m["kubeadm.apply"].return_value = {"serviceaccount/kube-router": "created",
                                       "clusterrole.rbac.authorization.k8s.io/kube-router":
                                           "unchanged"}
    ret = states.manifest_applied(str(path), record=str(record), kubeconfig="/a.conf")
    expect_applied(ret, test_mode)
    if test_mode:
        m["kubeadm.apply"].assert_not_called()
        assert [c.args for c in m["kubeadm.object_exists"].call_args_list] == [
            ("ServiceAccount", "kube-router"), ("ClusterRole", "kube-router")]
        assert not record.exists()
    else:
        assert ret["changes"] == {"objects": {"serviceaccount/kube-router": "created"}}
        assert record.read_text()


def test_manifest_unchanged(m, tmp_path, test_mode):
    import hashlib

    path = tmp_path / "kube-router.yaml"
    path.write_text(MANIFEST)
    record = tmp_path / "kube-router.yaml.sha256"
    record.write_text(hashlib.sha256(MANIFEST.encode()).hexdigest())
    m["kubeadm.object_exists"].return_value = True
    m["kubeadm.apply"].return_value = {"serviceaccount/kube-router": "unchanged"}
    ret = states.manifest_applied(str(path), record=str(record))
    assert ret["result"] is True and ret["changes"] == {}, ret


def test_manifest_predicted_while_the_cluster_does_not_answer(m, tmp_path):
    states.__opts__["test"] = True
    path = tmp_path / "x.yaml"
    path.write_text(MANIFEST)
    m["kubeadm.object_exists"].side_effect = CommandExecutionError(
        "error: stat /etc/kubernetes/admin.conf: no such file or directory")
    ret = states.manifest_applied(str(path), record=str(tmp_path / "r"))
    assert ret["result"] is None and "would be applied" in ret["comment"]


def test_manifest_apply_failure(m, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(MANIFEST)
    m["kubeadm.apply"].side_effect = CommandExecutionError("The connection to the server was refused")
    ret = states.manifest_applied(str(path), record=str(tmp_path / "r"))
    assert ret["result"] is False and "refused" in ret["comment"]


# --- node_drained / node_absent / reset ------------------------------------------------------

def test_node_drained(m, test_mode):
    m["kubeadm.nodes"].side_effect = [{"w2": {"unschedulable": False}},
                                      {"w2": {"unschedulable": True}}]
    m["kubeadm.evictable_pods"].side_effect = [["default/web-1"], []]
    ret = states.node_drained("w2", timeout=60, kubeconfig="/a.conf")
    expect_applied(ret, test_mode)
    assert ret["changes"]["drained"]["old"] == {"schedulable": True, "pods": ["default/web-1"]}
    if test_mode:
        m["kubeadm.drain"].assert_not_called()
    else:
        m["kubeadm.drain"].assert_called_once_with("w2", timeout=60, kubeconfig="/a.conf")


def test_a_cordoned_node_with_pods_left_is_drained_again(m, test_mode):
    """A drain that timed out leaves the node cordoned: that is not drained."""
    m["kubeadm.nodes"].return_value = {"w2": {"unschedulable": True}}
    m["kubeadm.evictable_pods"].side_effect = [["default/redis-1"], []]
    ret = states.node_drained("w2", timeout=60)
    expect_applied(ret, test_mode)
    assert m["kubeadm.drain"].called is (not test_mode)


def test_a_drain_that_leaves_pods_fails(m):
    m["kubeadm.nodes"].return_value = {"w2": {"unschedulable": True}}
    m["kubeadm.evictable_pods"].return_value = ["default/redis-1"]
    ret = states.node_drained("w2", timeout=60)
    assert ret["result"] is False and "default/redis-1" in ret["comment"]


@pytest.mark.parametrize("nodes", [{}, {"w2": {"unschedulable": True}}], ids=["gone", "drained"])
def test_node_drained_nothing_to_do(m, nodes):
    m["kubeadm.nodes"].return_value = nodes
    ret = states.node_drained("w2")
    assert ret["result"] is True and ret["changes"] == {}


def test_node_absent(m, test_mode):
    m["kubeadm.nodes"].side_effect = [{"w2": {}}, {}]
    ret = states.node_absent("w2", kubeconfig="/a.conf")
    expect_applied(ret, test_mode)
    assert m["kubeadm.delete_node"].called is (not test_mode)


def test_node_absent_nothing_to_do(m):
    m["kubeadm.nodes"].return_value = {"w1": {}}
    assert states.node_absent("w2")["changes"] == {}


def test_reset(m, test_mode, state_dir):
    state_dir.mkdir()
    (state_dir / "kubeadm-init.json").write_text("{}")
    m["kubeadm.has_local_files"].side_effect = [True, False]
    ret = states.reset("k8s-worker-2")
    expect_applied(ret, test_mode)
    if test_mode:
        m["kubeadm.reset"].assert_called_once_with(dry_run=True)
    else:
        m["kubeadm.reset"].assert_called_once_with()
    assert (state_dir / "kubeadm-init.json").exists() is test_mode


def test_reset_nothing_to_do(m):
    m["kubeadm.has_local_files"].return_value = False
    ret = states.reset("k8s-worker-2")
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.reset"].assert_not_called()


def test_states_predict_on_a_node_without_kubeadm(m, tmp_path):
    """The packages come in the same highstate: a test run predicts instead of failing."""
    for name in [k for k in m if k.startswith("kubeadm.")]:
        del m[name]
    states.__opts__["test"] = True
    ret = states.initialized(str(tmp_path / "c.yaml"))
    assert ret["result"] is None and "once kubeadm is installed" in ret["comment"]
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443")
    assert ret["result"] is None
    states.__opts__["test"] = False
    assert states.initialized(str(tmp_path / "c.yaml"))["result"] is False
