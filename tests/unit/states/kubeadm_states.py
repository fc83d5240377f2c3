"""What the unit tests of the kubeadm states share (``kubeadm``, ``kubeadm_join``,
``kubeadm_node``): the execution functions they call, mocked with their real signatures
under one ``__salt__``, a state directory of their own, and what those functions return.
Import the fixtures from here in a test of any of them."""

import json
from unittest.mock import create_autospec

import pytest
import salt.modules.config
import salt.modules.mine

from tests.unit.conftest import load

MODULES = {name: load("modules", name) for name in (
    "kubeadm", "kos_join", "kos_kubectl", "kos_certs", "kos_podnet", "kos_images", "kos_etcd")}
STATES = [load("states", name) for name in ("kubeadm", "kubeadm_join", "kubeadm_node")]

TOKEN = "abcdef.0123456789abcdef"
NEW_TOKEN = "newtok.0123456789abcdef"
KEY = "a" * 64
HASH = "sha256:" + "c" * 64
PROXY = MODULES["kos_join"].CERT_TOKEN_DESCRIPTION
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
             "etcd_member_list", "etcd_member_remove", "pods", "rollout_restart"]
    mocks = {}
    for n in names:
        owner = next(name for name, module in MODULES.items() if hasattr(module, n))
        mocks[f"{owner}.{n}"] = create_autospec(getattr(MODULES[owner], n))
    mocks["kos_kubectl.api_ready"].return_value = True
    mocks["kos_join.ca_cert_hash"].return_value = HASH
    mocks["kos_kubectl.nodes"].return_value = {}
    mocks["kos_kubectl.etcd_members"].return_value = []
    mocks["kos_kubectl.evictable_pods"].return_value = []
    mocks["kos_join.token_list"].return_value = []
    mocks["kubeadm.init_status"].return_value = FRESH
    mocks["mine.get"] = create_autospec(salt.modules.mine.get, return_value={})
    mocks["mine.send"] = create_autospec(salt.modules.mine.send, return_value=True)
    mocks["mine.delete"] = create_autospec(salt.modules.mine.delete, return_value=True)
    config = {"kos:state_dir": str(state_dir)}
    mocks["config.get"] = create_autospec(salt.modules.config.get,
                                          side_effect=lambda k, d="": config.get(k, d))
    mocks["config"] = config
    mocks["kubeadm.get_kube_dir"] = create_autospec(
        MODULES["kubeadm"].get_kube_dir, side_effect=lambda kube_dir=None: kube_dir or config.get(
            "kubeadm:kube_dir", "/etc/kubernetes"))
    return mocks


@pytest.fixture
def configure_loader_modules(m, request):
    test = request.getfixturevalue("test_mode") if "test_mode" in request.fixturenames else False
    return {states: {"__salt__": m, "__opts__": {"test": test, "id": ME},
                     "__grains__": {"host": "k8s-worker-1"}} for states in STATES}


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
