"""The microk8s state modules (``microk8s``, ``microk8s_addons``, ``microk8s_certs``) on one
loader: one ``__salt__`` of mocks with the real signatures of the execution functions they
call, one ``__opts__`` (test mode on or off). Import the fixtures from here in a test of
any of them."""

from unittest.mock import create_autospec

import pytest
import salt.modules.config
import salt.modules.mine
import salt.modules.network

from tests.unit.conftest import load
from tests.unit.modules.microk8s_modules import MODULES

STATES = {name: load("states", name) for name in ("microk8s", "microk8s_addons", "microk8s_certs")}
# The execution functions the states call, by module.
CALLED = {
    "microk8s": ["status", "start", "join", "leave", "add_node", "remove_token", "cert_check",
                 "token_valid", "nodes", "drain", "uncordon", "remove_node"],
    "microk8s_addons": ["addons", "enable_addon", "disable_addon"],
    "microk8s_certs": ["refresh_certs", "server_sans", "certificates"],
}

ME = "k8s-worker-1.example.com"


def st(running=True, worker=False, nodes=1, stopped=False, addons=None):
    """What microk8s.status says of a node."""
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
    mocks = {f"{module}.{n}": create_autospec(getattr(MODULES[module], n))
             for module, names in CALLED.items() for n in names}
    mocks["mine.send"] = create_autospec(salt.modules.mine.send, return_value=True)
    mocks["mine.delete"] = create_autospec(salt.modules.mine.delete, return_value=True)
    mocks["microk8s_certs.server_sans"].return_value = {"ip": [], "dns": []}
    mocks["microk8s.is_clustered"] = create_autospec(MODULES["microk8s"].is_clustered,
                                                     return_value=False)
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
    opts = {"test": test, "id": ME}
    return {module: {"__salt__": m, "__opts__": opts} for module in STATES.values()}


def expect_applied(ret, test_mode):
    assert ret["result"] is (None if test_mode else True), ret
    assert ret["changes"], ret


def without_the_snap(m):
    """A node where the snap is not installed yet: no microk8s execution module loaded."""
    for name in [k for k in m if k.split(".", 1)[0] in CALLED]:
        del m[name]
