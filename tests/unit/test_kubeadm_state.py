"""Unit tests of the kubeadm states: every state with test mode off and on."""

import json
import time
from unittest.mock import create_autospec

import pytest
import salt.modules.config
import salt.modules.mine
from salt.exceptions import CommandExecutionError

from tests.unit.conftest import load

mod = load("modules", "kubeadm")
MODULES = {name: load("modules", name) for name in (
    "kubeadm", "kos_kubectl", "kos_certs", "kos_podnet", "kos_images", "kos_etcd")}
states = load("states", "kubeadm")

TOKEN = "abcdef.0123456789abcdef"
NEW_TOKEN = "newtok.0123456789abcdef"
KEY = "a" * 64
HASH = "sha256:" + "c" * 64
PROXY = mod.CERT_TOKEN_DESCRIPTION
ME = "k8s-worker-1.example.com"
CP2 = "k8s-cp-2.example.com"


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
             "object_exists", "images", "archive_images", "import_images", "sync_pod_network",
             "etcd_member_list", "etcd_member_remove"]
    mocks = {}
    for n in names:
        owner = next(name for name, module in MODULES.items() if hasattr(module, n))
        mocks[f"{owner}.{n}"] = create_autospec(getattr(MODULES[owner], n))
    mocks["kos_kubectl.api_ready"].return_value = True
    mocks["kubeadm.ca_cert_hash"].return_value = HASH
    mocks["kos_kubectl.nodes"].return_value = {}
    mocks["kos_kubectl.etcd_members"].return_value = []
    mocks["kos_kubectl.evictable_pods"].return_value = []
    mocks["kubeadm.token_list"].return_value = []
    mocks["kubeadm.init_status"].return_value = FRESH
    mocks["mine.get"] = create_autospec(salt.modules.mine.get, return_value={})
    mocks["mine.send"] = create_autospec(salt.modules.mine.send, return_value=True)
    mocks["mine.delete"] = create_autospec(salt.modules.mine.delete, return_value=True)
    config = {"kos:state_dir": str(state_dir)}
    mocks["config.get"] = create_autospec(salt.modules.config.get,
                                          side_effect=lambda k, d="": config.get(k, d))
    mocks["config"] = config
    mocks["kubeadm.get_kube_dir"] = create_autospec(
        mod.get_kube_dir, side_effect=lambda kube_dir=None: kube_dir or config.get(
            "kubeadm:kube_dir", "/etc/kubernetes"))
    return mocks


@pytest.fixture
def configure_loader_modules(m, request):
    test = request.getfixturevalue("test_mode") if "test_mode" in request.fixturenames else False
    return {states: {"__salt__": m, "__opts__": {"test": test, "id": ME},
                     "__grains__": {"host": "k8s-worker-1"}}}


def expect_applied(ret, test_mode):
    assert ret["result"] is (None if test_mode else True), ret
    assert ret["changes"], ret


def expect_reset_and_redone(m, test_mode, action):
    """A half-done init or join is reset and done again, outside test mode only."""
    if test_mode:
        m["kubeadm.reset"].assert_not_called()
        m[f"kubeadm.{action}"].assert_not_called()
    else:
        m["kubeadm.reset"].assert_called_once_with()
        assert m[f"kubeadm.{action}"].call_count == 1


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
        m["kos_kubectl.api_ready"].assert_not_called()
    else:
        m["kubeadm.init"].assert_called_once_with(str(config), upload_certs=False,
                                                  ignore_preflight_errors=None, kube_dir=None)
        m["kos_kubectl.api_ready"].assert_called_once_with(timeout=30)
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
    m["kos_kubectl.api_ready"].return_value = False
    ret = states.initialized("/k/c.yaml", timeout=5)
    assert ret["result"] is False and "does not answer" in ret["comment"]
    assert ret["changes"] == {"control_plane": {"old": None,
                                                "new": "kubeadm init ran, not seen initialized"}}


def test_an_init_that_fails_after_the_reset_reports_the_reset(m, tmp_path, state_dir):
    config = tmp_path / "c.yaml"
    config.write_text("x")
    state_dir.mkdir()
    (state_dir / "kubeadm-init.json").write_text(json.dumps({"started": 1}))
    m["kubeadm.init_status"].return_value = TIMED_OUT
    m["kubeadm.init"].side_effect = CommandExecutionError("[ERROR Port-6443]: Port 6443 is in use")
    ret = states.initialized(str(config), timeout=5)
    assert ret["result"] is False and "Port 6443 is in use" in ret["comment"], ret
    m["kubeadm.reset"].assert_called_once_with()
    assert ret["changes"] == {"control_plane": {"old": f"half-initialized: {TIMED_OUT['reason']}",
                                                "new": "reset (kubeadm reset -f)"}}


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
    expect_reset_and_redone(m, test_mode, "init")
    # The note of the half-done init goes with the init done again.
    assert (state_dir / "kubeadm-init.json").exists() is test_mode


def test_a_control_plane_this_state_did_not_start_is_never_reset(m, test_mode, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("x")
    m["kubeadm.init_status"].return_value = TIMED_OUT
    m["kos_kubectl.api_ready"].return_value = False
    ret = states.initialized(str(config), timeout=1)
    assert ret["result"] is False and "not reset" in ret["comment"], ret
    assert "127.0.0.1:7443 was refused" in ret["comment"]
    m["kos_kubectl.api_ready"].assert_called_once_with(timeout=1)
    m["kubeadm.reset"].assert_not_called()
    m["kubeadm.init"].assert_not_called()


def test_a_slow_api_of_an_initialized_node_is_waited_for(m, tmp_path):
    m["kubeadm.init_status"].side_effect = [TIMED_OUT, INITIALIZED]
    ret = states.initialized(str(tmp_path / "c.yaml"), timeout=7)
    assert ret["result"] is True and ret["changes"] == {}
    m["kos_kubectl.api_ready"].assert_called_once_with(timeout=7)


# --- join_credential_present -----------------------------------------------------------------

def issued(state_dir, node=ME, role="worker", token_id="abcdef", ca=HASH, key=None,
           owner="q1w2e3"):
    path = state_dir / "join" / f"{node}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"node": node, "role": role, "token": f"{token_id}.0123456789abcdef",
           "token_id": token_id, "ca_cert_hash": ca, "expires": int(time.time() + 1500)}
    if key:
        doc.update(certificate_key=key, owner_token_id=owner)
    path.write_text(json.dumps(doc))
    return path


def sends(m):
    return [c.args[0] for c in m["mine.send"].call_args_list]


def test_credential_reused_while_enough_ttl_remains(m, state_dir):
    issued(state_dir)
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_list"].return_value = [tok("abcdef", time.time() + 1500)]
    ret = states.join_credential_present(ME, role="worker", ttl=1800, min_remaining=600)
    assert ret["result"] is True and ret["changes"] == {}, ret
    m["kubeadm.token_create"].assert_not_called()
    m["mine.send"].assert_called_once_with(f"kos_join_{ME}", mine_function="kos.join_info",
                                           node=ME, allow_tgt=ME, allow_tgt_type="list")


@pytest.mark.parametrize("why", ["none", "gone", "near-expiry", "ca-changed", "other-role"])
def test_a_workers_credential_is_a_token_of_its_own(m, state_dir, test_mode, why):
    path = state_dir / "join" / f"{ME}.json"
    listed = [tok("abcdef", time.time() + (100 if why == "near-expiry" else 1500))]
    if why == "other-role":
        issued(state_dir, role="control_plane", key=KEY)
        listed.append(tok("q1w2e3", time.time() + 6000, PROXY))
    elif why != "none":
        issued(state_dir, ca=HASH if why != "ca-changed" else "sha256:x")
    if why == "gone":
        listed = []  # expired tokens vanish from the cluster
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_create"].return_value = NEW_TOKEN
    new_expiry = time.time() + 1800
    fresh = listed + [tok("newtok", new_expiry)]
    m["kubeadm.token_list"].side_effect = [listed, fresh, fresh]
    before = path.read_text() if path.exists() else None
    ret = states.join_credential_present(ME, role="worker", node_name="k8s-worker-1", ttl=1800,
                                         min_remaining=600)
    expect_applied(ret, test_mode)
    no_secrets(ret)
    if test_mode:
        m["kubeadm.token_create"].assert_not_called()
        assert (path.read_text() if path.exists() else None) == before
        return
    m["kubeadm.token_create"].assert_called_once_with(ttl=1800,
                                                      description="kos: node join k8s-worker-1")
    m["kubeadm.upload_certs"].assert_not_called()  # a worker never gets the certificate key
    doc = json.loads(path.read_text())
    assert doc["token"] == NEW_TOKEN and doc["ca_cert_hash"] == HASH
    assert (doc["node"], doc["role"], doc["expires"]) == (ME, "worker", int(new_expiry))
    assert "certificate_key" not in doc
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert sends(m) == [f"kos_join_{ME}"]
    deleted = sorted(c.args[0] for c in m["kubeadm.token_delete"].call_args_list)
    expected = {"near-expiry": ["abcdef"], "ca-changed": ["abcdef"],
                "other-role": ["abcdef", "q1w2e3"]}.get(why, [])
    assert deleted == expected


class Cluster:
    """The tokens kubeadm lists: token create and upload-certs add theirs, delete removes."""

    def __init__(self, m, tokens, owner_expires=None):
        self.tokens = list(tokens)
        m["kubeadm.token_list"].side_effect = lambda: list(self.tokens)
        m["kubeadm.token_create"].side_effect = self.create
        m["kubeadm.token_delete"].side_effect = self.delete
        m["kubeadm.upload_certs"].side_effect = self.upload
        self.owner_expires = owner_expires

    def create(self, ttl=None, description=None, **kwargs):
        self.tokens.append(tok("newtok", time.time() + ttl, description))
        return NEW_TOKEN

    def delete(self, token_id):
        self.tokens = [t for t in self.tokens if t["id"] != token_id]

    def upload(self, config=None):
        if self.owner_expires:
            self.tokens.append(tok("fresh1", self.owner_expires, PROXY))
        return "b" * 64


@pytest.mark.parametrize("why", ["none", "secret-gone", "stale", "replaced"])
def test_a_control_planes_credential_carries_a_certificate_key(m, state_dir, test_mode, why):
    now = time.time()
    owner = tok("q1w2e3", now + (600 if why == "stale" else 6000), PROXY)
    listed = [tok("abcdef", now + 1500), owner]
    if why == "secret-gone":
        listed = listed[:1]
    if why == "replaced":
        listed.append(tok("later1", now + 7000, PROXY))
    if why != "none":
        issued(state_dir, node=CP2, role="control_plane", key=KEY)
    m["kubeadm.init_status"].return_value = INITIALIZED
    cluster = Cluster(m, listed, owner_expires=now + 7200)
    ret = states.join_credential_present(CP2, role="control_plane", config="/k/c.yaml")
    expect_applied(ret, test_mode)
    no_secrets(ret)
    assert "b" * 64 not in json.dumps(ret)
    if test_mode:
        m["kubeadm.upload_certs"].assert_not_called()
        return
    m["kubeadm.upload_certs"].assert_called_once_with(config="/k/c.yaml")
    doc = json.loads((state_dir / "join" / f"{CP2}.json").read_text())
    assert doc["certificate_key"] == "b" * 64 and doc["owner_token_id"] == "fresh1"
    assert doc["key_expires"] == int(now + 7200) and doc["role"] == "control_plane"
    # only what was stale is issued again, and what it replaces is deleted
    assert m["kubeadm.token_create"].called is (why == "none")
    ids = {t["id"] for t in cluster.tokens}
    assert ("q1w2e3" in ids) is (why == "none")


def test_credential_arguments_are_checked(m, state_dir):
    for kwargs, words in (({"role": "worker", "ttl": 600, "min_remaining": 900}, "min_remaining"),
                          ({"role": "etcd"}, "role must be")):
        ret = states.join_credential_present(ME, **kwargs)
        assert ret["result"] is False and words in ret["comment"]
    m["kubeadm.token_create"].assert_not_called()


def test_credentials_need_a_control_plane(m, test_mode):
    m["kubeadm.init_status"].return_value = FRESH
    ret = states.join_credential_present(ME, role="worker")
    if test_mode:
        # a test run on a fresh node: init comes first in the same run
        assert ret["result"] is None and "once the control plane is initialized" in ret["comment"]
    else:
        assert ret["result"] is False and "runs no initialized control plane" in ret["comment"]
        assert FRESH["reason"] in ret["comment"]
    m["kubeadm.token_create"].assert_not_called()


def test_a_credential_that_cannot_be_published_is_deleted_again(m, state_dir):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_create"].return_value = NEW_TOKEN
    m["kubeadm.token_list"].side_effect = [[], [tok("newtok", time.time() + 1800)]]
    m["mine.send"].return_value = False
    ret = states.join_credential_present(ME, role="worker")
    assert ret["result"] is False and "issuing a join credential" in ret["comment"]
    m["kubeadm.token_delete"].assert_called_once_with("newtok")


def test_certificate_key_upload_without_owner_fails(m, state_dir):
    m["kubeadm.init_status"].return_value = INITIALIZED
    cluster = Cluster(m, [], owner_expires=None)
    ret = states.join_credential_present(CP2, role="control_plane")
    assert ret["result"] is False and "no token owns" in ret["comment"]
    assert KEY not in json.dumps(ret) and "b" * 64 not in json.dumps(ret)
    assert cluster.tokens == []  # the token this run created is deleted again


# --- join_credentials_absent -----------------------------------------------------------------

def test_credentials_absent_nothing_left(m):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_list"].return_value = [tok("zz9yx8", None, "")]
    ret = states.join_credentials_absent("creds", nodes=[ME])
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.token_delete"].assert_not_called()


def test_credentials_revoked(m, state_dir, test_mode):
    worker = issued(state_dir, token_id="abcdef")
    cp = issued(state_dir, node=CP2, role="control_plane", token_id="cp2tok", key=KEY)
    kept = issued(state_dir, node="k8s-worker-2.example.com", token_id="w2tokn")
    m["kubeadm.init_status"].return_value = INITIALIZED
    own = "kos: node join k8s-"
    m["kubeadm.token_list"].return_value = [
        tok("abcdef", time.time() + 1500, own + "worker-1"),
        tok("cp2tok", time.time() + 1500, own + "cp-2"),
        tok("w2tokn", time.time() + 1500, own + "worker-2"),
        tok("initkn", time.time() + 300),  # kubeadm init's own token
        tok("q1w2e3", time.time() + 6000, PROXY), tok("other1", None, "someone else's"),
    ]
    ret = states.join_credentials_absent("creds", nodes=[ME, CP2])
    expect_applied(ret, test_mode)
    no_secrets(ret)
    assert ret["changes"]["credentials"]["old"] == [CP2, ME]
    assert ret["changes"]["tokens"] == {"old": 4, "new": 0}
    assert kept.exists()
    if test_mode:
        m["kubeadm.token_delete"].assert_not_called()
        assert worker.exists() and cp.exists()
        return
    deleted = [c.args[0] for c in m["kubeadm.token_delete"].call_args_list]
    assert deleted == ["abcdef", "cp2tok", "initkn", "q1w2e3"]
    assert not worker.exists() and not cp.exists()
    assert sorted(c.args[0] for c in m["mine.delete"].call_args_list) == [
        f"kos_join_{CP2}", f"kos_join_{ME}"]


def test_the_shared_tokens_go_with_an_empty_list(m, state_dir, test_mode):
    """kubeadm init's own token (the description alone) goes; a node's own stays."""
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_list"].return_value = [tok("initkn", time.time() + 600),
                                            tok("w1tokn", time.time() + 900,
                                                "kos: node join k8s-worker-1")]
    ret = states.join_credentials_absent("creds", nodes=[])
    expect_applied(ret, test_mode)
    assert ret["changes"]["tokens"] == {"old": 1, "new": 0}
    deleted = [c.args[0] for c in m["kubeadm.token_delete"].call_args_list]
    assert deleted == ([] if test_mode else ["initkn"])


def test_without_a_list_every_kos_token_goes(m, state_dir):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kubeadm.token_list"].return_value = [tok("stray1", time.time() + 300),
                                            tok("other1", None, "someone else's")]
    ret = states.join_credentials_absent("creds")
    assert ret["result"] is True and ret["changes"]["tokens"] == {"old": 1, "new": 0}
    m["kubeadm.token_delete"].assert_called_once_with("stray1")


# --- joined ----------------------------------------------------------------------------------

def mine(m, node=ME, role="worker", token=None, key=None, left=1500, key_left=6000):
    doc = {"node": node, "role": role, "token": token or TOKEN, "ca_cert_hash": HASH,
           "expires": time.time() + left}
    if role == "control_plane" and key is not False:
        doc.update(certificate_key=key or KEY, key_expires=time.time() + key_left)
    m["mine.get"].side_effect = lambda tgt, fun, *a, **kw: (
        {"k8s-cp-1": doc} if fun == f"kos_join_{ME}" else {})


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
        m["kos_kubectl.api_ready"].assert_not_called()
        m["kubeadm.reset"].assert_not_called()
        assert [c.args for c in m["mine.get"].call_args_list] == [("k8s-cp-1", f"kos_join_{ME}")]


def test_joined_control_plane_uses_the_certificate_key(m):
    m["kubeadm.join_status"].side_effect = [NOT_JOINED, JOINED]
    mine(m, role="control_plane")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", advertise_address="10.1.0.12", bind_port=6443,
                        timeout=30)
    assert ret["result"] is True, ret
    kwargs = m["kubeadm.join"].call_args.kwargs
    assert kwargs["control_plane"] is True and kwargs["certificate_key"] == KEY
    assert kwargs["advertise_address"] == "10.1.0.12"
    m["kos_kubectl.api_ready"].assert_called_once_with(timeout=30)
    no_secrets(ret)


ETCD_STEP_FAILED = join(False, True, True, "node k8s-cp-2 is registered but runs no etcd member "
                                           "(no Pod kube-system/etcd-k8s-cp-2)")


def test_a_control_plane_join_that_failed_at_etcd_is_reset_and_redone(m, test_mode):
    """kubelet.conf exists and the node is registered: the old check said joined, forever."""
    m["kubeadm.join_status"].side_effect = [ETCD_STEP_FAILED, JOINED]
    mine(m, role="control_plane")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", timeout=5)
    expect_applied(ret, test_mode)
    assert ret["changes"]["cluster"]["old"] == f"half-joined: {ETCD_STEP_FAILED['reason']}"
    assert ETCD_STEP_FAILED["reason"] in ret["comment"]
    expect_reset_and_redone(m, test_mode, "join")


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


def test_a_join_that_fails_after_the_reset_reports_the_reset(m):
    """The node lost its cluster files: a failed state that says "no changes" hides that."""
    m["kubeadm.join_status"].return_value = ETCD_STEP_FAILED
    m["kubeadm.join"].side_effect = CommandExecutionError("couldn't validate the identity of "
                                                          "the API Server")
    mine(m, role="control_plane")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2")
    assert ret["result"] is False and "identity of the API Server" in ret["comment"], ret
    m["kubeadm.reset"].assert_called_once_with()
    assert ret["changes"] == {"cluster": {"old": f"half-joined: {ETCD_STEP_FAILED['reason']}",
                                          "new": "reset (kubeadm reset -f)"}}


def test_a_join_that_never_shows_reports_that_it_ran(m):
    m["kubeadm.join_status"].side_effect = [NOT_JOINED] + [ETCD_STEP_FAILED] * 5
    mine(m, role="control_plane")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", timeout=0)
    assert ret["result"] is False
    assert ret["changes"] == {"cluster": {"old": None,
                                          "new": "kubeadm join ran, not seen joined"}}


def test_a_failure_before_anything_ran_reports_no_changes(m):
    m["kubeadm.join_status"].return_value = ETCD_STEP_FAILED
    mine(m, role="control_plane", key=False)
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2")
    assert ret["result"] is False and ret["changes"] == {}, ret
    m["kubeadm.reset"].assert_not_called()


def test_a_member_in_the_configured_directory_is_never_reset(m, tmp_path, test_mode):
    """kubeadm:kube_dir set in the minion configuration, no kube_dir argument: the state
    looked for kubelet.conf in /etc/kubernetes and reset the member."""
    kube = tmp_path / "kube"
    kube.mkdir()
    (kube / "kubelet.conf").write_text("x")
    m["config"]["kubeadm:kube_dir"] = str(kube)
    m["kubeadm.join_status"].return_value = join(False, True, False,
                                                 "the API does not answer (EOF)")
    mine(m, role="worker")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443")
    assert ret["result"] is False and "never reset on a guess" in ret["comment"], ret
    assert ret["changes"] == {}
    m["kubeadm.reset"].assert_not_called()
    m["kubeadm.join"].assert_not_called()


def test_a_join_that_never_shows_as_joined_fails_with_the_reason(m):
    m["kubeadm.join_status"].side_effect = [NOT_JOINED] + [ETCD_STEP_FAILED] * 5
    mine(m, role="control_plane")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", timeout=0)
    assert ret["result"] is False and "runs no etcd member" in ret["comment"]


@pytest.mark.parametrize("case, words", [
    ("no-token", "issued no join credential"), ("token-expiring", "expires in"),
    ("no-key", "holds no certificate key"), ("key-expiring", "certificate key k8s-cp-1 issued"),
    ("worker-credential", "not for"), ("other-node", "not for"),
])
def test_joined_refuses_unusable_credentials(m, case, words):
    m["kubeadm.join_status"].return_value = NOT_JOINED
    if case == "no-token":
        m["mine.get"].return_value = {}
    elif case == "worker-credential":
        mine(m, role="worker")  # a worker's credential: never a control plane's
    elif case == "other-node":
        mine(m, node="k8s-cp-3.example.com", role="control_plane")
    else:
        mine(m, role="control_plane", left=10 if case == "token-expiring" else 1500,
             key_left=10 if case == "key-expiring" else 6000,
             key=False if case == "no-key" else None)
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane")
    assert ret["result"] is False and words in ret["comment"], ret
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
    m["kos_kubectl.object_exists"].return_value = False
    m["kos_kubectl.apply"].return_value = {"serviceaccount/kube-router": "created",
                                       "clusterrole.rbac.authorization.k8s.io/kube-router":
                                           "unchanged"}
    ret = states.manifest_applied(str(path), record=str(record), kubeconfig="/a.conf")
    expect_applied(ret, test_mode)
    if test_mode:
        m["kos_kubectl.apply"].assert_not_called()
        assert [c.args for c in m["kos_kubectl.object_exists"].call_args_list] == [
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
    m["kos_kubectl.object_exists"].return_value = True
    m["kos_kubectl.apply"].return_value = {"serviceaccount/kube-router": "unchanged"}
    ret = states.manifest_applied(str(path), record=str(record))
    assert ret["result"] is True and ret["changes"] == {}, ret


def test_manifest_predicted_while_the_cluster_does_not_answer(m, tmp_path):
    states.__opts__["test"] = True
    path = tmp_path / "x.yaml"
    path.write_text(MANIFEST)
    m["kos_kubectl.object_exists"].side_effect = CommandExecutionError(
        "error: stat /etc/kubernetes/admin.conf: no such file or directory")
    ret = states.manifest_applied(str(path), record=str(tmp_path / "r"))
    assert ret["result"] is None and "would be applied" in ret["comment"]


def test_manifest_apply_failure(m, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(MANIFEST)
    m["kos_kubectl.apply"].side_effect = CommandExecutionError("The connection to the server was refused")
    ret = states.manifest_applied(str(path), record=str(tmp_path / "r"))
    assert ret["result"] is False and "refused" in ret["comment"]


# --- node_drained / node_absent / reset ------------------------------------------------------

def test_node_drained(m, test_mode):
    m["kos_kubectl.nodes"].side_effect = [{"w2": {"unschedulable": False}},
                                      {"w2": {"unschedulable": True}}]
    m["kos_kubectl.evictable_pods"].side_effect = [["default/web-1"], []]
    ret = states.node_drained("w2", timeout=60, kubeconfig="/a.conf")
    expect_applied(ret, test_mode)
    assert ret["changes"]["drained"]["old"] == {"schedulable": True, "pods": ["default/web-1"]}
    if test_mode:
        m["kos_kubectl.drain"].assert_not_called()
    else:
        m["kos_kubectl.drain"].assert_called_once_with("w2", timeout=60, kubeconfig="/a.conf")


def test_a_cordoned_node_with_pods_left_is_drained_again(m, test_mode):
    """A drain that timed out leaves the node cordoned: that is not drained."""
    m["kos_kubectl.nodes"].return_value = {"w2": {"unschedulable": True}}
    m["kos_kubectl.evictable_pods"].side_effect = [["default/redis-1"], []]
    ret = states.node_drained("w2", timeout=60)
    expect_applied(ret, test_mode)
    assert m["kos_kubectl.drain"].called is (not test_mode)


def test_a_drain_that_leaves_pods_fails(m):
    m["kos_kubectl.nodes"].return_value = {"w2": {"unschedulable": True}}
    m["kos_kubectl.evictable_pods"].return_value = ["default/redis-1"]
    ret = states.node_drained("w2", timeout=60)
    assert ret["result"] is False and "default/redis-1" in ret["comment"]


@pytest.mark.parametrize("nodes", [{}, {"w2": {"unschedulable": True}}], ids=["gone", "drained"])
def test_node_drained_nothing_to_do(m, nodes):
    m["kos_kubectl.nodes"].return_value = nodes
    ret = states.node_drained("w2")
    assert ret["result"] is True and ret["changes"] == {}


def test_node_absent(m, test_mode):
    m["kos_kubectl.nodes"].side_effect = [{"w2": {}}, {}]
    ret = states.node_absent("w2", kubeconfig="/a.conf")
    expect_applied(ret, test_mode)
    assert m["kos_kubectl.delete_node"].called is (not test_mode)


def test_node_absent_nothing_to_do(m):
    m["kos_kubectl.nodes"].return_value = {"w1": {}}
    assert states.node_absent("w2")["changes"] == {}


def test_etcd_member_absent(m, test_mode):
    url = "https://10.0.0.22:2380"
    m["kos_etcd.etcd_member_list"].return_value = [
        {"id": "a1", "name": "k8s-cp-1", "peer_urls": ["https://10.0.0.20:2380"]},
        {"id": "c3", "name": "k8s-cp-3", "peer_urls": [url]},
        {"id": "d4", "name": "", "peer_urls": [url]}]
    ret = states.etcd_member_absent("k8s-cp-3", peer_url=url, kube_dir="/k")
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"etcd_members": {"old": ["c3", "d4"], "new": []}}
    if test_mode:
        m["kos_etcd.etcd_member_remove"].assert_not_called()
    else:
        m["kos_etcd.etcd_member_remove"].assert_called_once_with("k8s-cp-3", peer_url=url,
                                                                kube_dir="/k")


def test_etcd_member_absent_nothing_to_do_and_a_failure_named(m):
    m["kos_etcd.etcd_member_list"].return_value = [
        {"id": "a1", "name": "k8s-cp-1", "peer_urls": ["https://10.0.0.20:2380"]}]
    ret = states.etcd_member_absent("k8s-cp-3", peer_url="https://10.0.0.22:2380")
    assert (ret["result"], ret["changes"], ret["comment"]) == (True, {}, "k8s-cp-3 has no etcd member")
    m["kos_etcd.etcd_member_list"].side_effect = CommandExecutionError("context deadline exceeded")
    ret = states.etcd_member_absent("k8s-cp-3")
    assert ret["result"] is False and "context deadline exceeded" in ret["comment"]


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


def test_a_reset_that_leaves_files_reports_that_it_ran(m):
    m["kubeadm.has_local_files"].return_value = True
    ret = states.reset("k8s-worker-2")
    assert ret["result"] is False and "still has its cluster files" in ret["comment"]
    assert ret["changes"] == {"cluster": {"old": "member", "new": "kubeadm reset ran"}}


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


def certs(**days):
    """What kos_certs.certificates returns: ``name=days`` leaves (None: missing), one CA."""
    return {"certificates": {name.replace("_", "-"): None if d is None else
                             {"days": d, "externally_managed": name == "external"}
                             for name, d in days.items()},
            "authorities": {"ca": {"days": 3000, "externally_managed": False}}}


@pytest.fixture
def cert_mocks(m):
    for name in ("certificates", "renew_certificates", "restart_control_plane"):
        m[f"kos_certs.{name}"] = create_autospec(getattr(MODULES["kos_certs"], name))
    m["kos_certs.renew_certificates"].return_value = ["apiserver", "admin.conf"]
    m["kos_certs.restart_control_plane"].return_value = ["etcd.yaml", "kube-apiserver.yaml"]
    return m


def test_certificates_renewed_leaves_certificates_with_time_left(cert_mocks):
    cert_mocks["kos_certs.certificates"].return_value = certs(apiserver=200, admin_conf=31,
                                                            super_admin_conf=None)
    ret = states.certificates_renewed("control-plane certificates", within_days=30)
    assert ret["result"] is True and ret["changes"] == {}
    assert "the fewest: 31" in ret["comment"]
    cert_mocks["kos_certs.renew_certificates"].assert_not_called()


def test_certificates_renewed_renews_and_restarts_when_one_is_due(cert_mocks, test_mode):
    cert_mocks["kos_certs.certificates"].side_effect = [
        certs(apiserver=29, admin_conf=200, external=3), certs(apiserver=365, admin_conf=365)]
    ret = states.certificates_renewed("control-plane certificates", within_days=30,
                                      restart_wait=0, kube_dir="/k")
    expect_applied(ret, test_mode)
    # an externally managed certificate is its CA's owner's to renew
    if test_mode:
        assert ret["changes"] == {"certificates": {"old": {"apiserver": 29}, "new": "renewed"}}
        cert_mocks["kos_certs.renew_certificates"].assert_not_called()
        cert_mocks["kos_certs.restart_control_plane"].assert_not_called()
    else:
        assert ret["changes"] == {"certificates": {"old": {"apiserver": 29},
                                                   "new": {"apiserver": 365}}}
        cert_mocks["kos_certs.renew_certificates"].assert_called_once_with("all", kube_dir="/k")
        cert_mocks["kos_certs.restart_control_plane"].assert_called_once_with(
            wait=0, timeout=120, kube_dir="/k")
        assert "restarted etcd, kube-apiserver" in ret["comment"]


def test_certificates_renewed_with_force_renews_whatever_is_left(cert_mocks):
    cert_mocks["kos_certs.certificates"].side_effect = [certs(apiserver=300), certs(apiserver=365)]
    ret = states.certificates_renewed("c", force=True, restart_wait=0)
    assert ret["changes"] == {"certificates": {"old": {"apiserver": 300}, "new": {"apiserver": 365}}}


def test_certificates_renewed_fails_when_the_api_does_not_come_back(cert_mocks):
    cert_mocks["kos_certs.certificates"].return_value = certs(apiserver=1)
    cert_mocks["kos_certs.restart_control_plane"].side_effect = CommandExecutionError(
        "the API did not answer within 120 s after the control plane restarted")
    ret = states.certificates_renewed("c", restart_wait=0)
    assert ret["result"] is False and ret["changes"] == {}
    assert "did not answer within 120 s" in ret["comment"]


# --- images_imported -------------------------------------------------------------------------

@pytest.fixture
def archives(tmp_path):
    d = tmp_path / "images"
    d.mkdir()
    for name in ("etcd", "pause"):
        (d / f"{name}.tar").write_bytes(b"")
    return d


def refs_of(path):
    return {"etcd.tar": ["registry.k8s.io/etcd:3.5.15-0"],
            "pause.tar": ["registry.k8s.io/pause:3.10"]}[path.rsplit("/", 1)[1]]


def test_images_imported_imports_only_what_containerd_lacks(m, archives, test_mode):
    m["kos_images.images"].return_value = ["registry.k8s.io/pause:3.10"]
    m["kos_images.archive_images"].side_effect = refs_of
    ret = states.images_imported(str(archives))
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"images": {"old": [], "new": ["registry.k8s.io/etcd:3.5.15-0"]}}
    if test_mode:
        m["kos_images.import_images"].assert_not_called()
    else:
        m["kos_images.import_images"].assert_called_once_with(str(archives / "etcd.tar"), "k8s.io")


def test_images_imported_nothing_to_do_and_bad_directories(m, archives, tmp_path):
    m["kos_images.images"].return_value = ["registry.k8s.io/etcd:3.5.15-0",
                                        "registry.k8s.io/pause:3.10"]
    m["kos_images.archive_images"].side_effect = refs_of
    ret = states.images_imported(str(archives))
    assert ret["result"] is True and ret["changes"] == {}
    ret = states.images_imported(str(tmp_path / "nowhere"))
    assert ret["result"] is False and "no image archives" in ret["comment"]
    m["kos_images.archive_images"].side_effect = CommandExecutionError("x.tar is not an image archive")
    ret = states.images_imported(str(archives))
    assert ret["result"] is False and "not an image archive" in ret["comment"]


# --- pod_network_routed ----------------------------------------------------------------------

@pytest.fixture
def kubelet_conf(tmp_path):
    kube = tmp_path / "kube"
    kube.mkdir()
    (kube / "kubelet.conf").write_text("")
    return kube


def test_pod_network_routed_applies_what_the_sync_reports(m, kubelet_conf, test_mode):
    changes = {"routes": {"old": {}, "new": {"10.244.1.0/24": "10.1.0.21"}}}
    m["kos_podnet.sync_pod_network"].return_value = {"pod_cidr": "10.244.0.0/24",
                                                  "changes": changes}
    ret = states.pod_network_routed("k8s-cp-1", "10.244.0.0/16", kube_dir=str(kubelet_conf))
    expect_applied(ret, test_mode)
    assert ret["changes"] == changes
    m["kos_podnet.sync_pod_network"].assert_called_once_with(
        "k8s-cp-1", "10.244.0.0/16", kube_dir=str(kubelet_conf), test=test_mode)


def test_pod_network_routed_waits_for_the_nodes_cidr(m, kubelet_conf, monkeypatch):
    monkeypatch.setattr(states.time, "sleep", lambda s: None)
    m["kos_podnet.sync_pod_network"].side_effect = [
        CommandExecutionError("the API gives node k8s-cp-1 no pod CIDR (yet)"),
        {"pod_cidr": "10.244.0.0/24", "changes": {}}]
    ret = states.pod_network_routed("k8s-cp-1", "10.244.0.0/16", kube_dir=str(kubelet_conf))
    assert ret["result"] is True and ret["changes"] == {} and "matches" in ret["comment"]
    m["kos_podnet.sync_pod_network"].side_effect = CommandExecutionError("ip: RTNETLINK failed")
    ret = states.pod_network_routed("k8s-cp-1", "10.244.0.0/16", kube_dir=str(kubelet_conf))
    assert ret["result"] is False and "RTNETLINK" in ret["comment"]


def test_pod_network_routed_reads_the_configured_directory(m, kubelet_conf, test_mode):
    m["config"]["kubeadm:kube_dir"] = str(kubelet_conf)
    m["kos_podnet.sync_pod_network"].return_value = {"pod_cidr": "10.244.0.0/24", "changes": {}}
    ret = states.pod_network_routed("k8s-cp-1", "10.244.0.0/16")
    assert ret["result"] is True and "matches" in ret["comment"], ret
    m["kos_podnet.sync_pod_network"].assert_called_once_with(
        "k8s-cp-1", "10.244.0.0/16", kube_dir=None, test=test_mode)


def test_pod_network_routed_before_the_join(m, tmp_path, test_mode):
    ret = states.pod_network_routed("k8s-worker-1", "10.244.0.0/16", kube_dir=str(tmp_path))
    if test_mode:
        assert ret["result"] is None and "once it joined" in ret["comment"]
    else:
        assert ret["result"] is False and "has not joined" in ret["comment"]
    m["kos_podnet.sync_pod_network"].assert_not_called()
