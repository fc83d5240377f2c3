"""Unit tests of the snap module's parsing and the snap states."""

from unittest.mock import create_autospec

import pytest
import salt.modules.cmdmod

from tests.unit.conftest import load, utils

snap_mod = load("modules", "snap")
snap_state = load("states", "snap")

# Reference A.2.3 (non-TTY publisher form)
LIST = (
    "Name      Version  Rev   Tracking     Publisher    Notes\n"
    "microk8s  v1.31.9  8148  1.31/stable  canonical**  classic\n"
)


@pytest.fixture(params=[False, True], ids=["apply", "test"])
def test_mode(request):
    return request.param


@pytest.fixture
def run_all():
    return create_autospec(salt.modules.cmdmod.run_all)


@pytest.fixture
def configure_loader_modules(run_all, request):
    test = request.getfixturevalue("test_mode") if "test_mode" in request.fixturenames else False
    functions = {
        "snap.list": create_autospec(snap_mod.list_),
        "snap.install": create_autospec(snap_mod.install),
        "snap.refresh": create_autospec(snap_mod.refresh),
        "snap.remove": create_autospec(snap_mod.remove),
    }
    return {
        snap_mod: {"__utils__": utils(), "__salt__": {"cmd.run_all": run_all}},
        snap_state: {"__utils__": utils(), "__salt__": functions, "__opts__": {"test": test}},
    }


def test_list_parses_the_table(run_all):
    run_all.return_value = {"stdout": LIST, "stderr": "", "retcode": 0}
    assert snap_mod.list_("microk8s") == {
        "microk8s": {"version": "v1.31.9", "rev": "8148", "tracking": "1.31/stable",
                     "publisher": "canonical", "notes": "classic"}
    }
    assert run_all.call_args.args[0] == ["snap", "list", "microk8s"]


def test_list_not_installed_is_empty(run_all):
    run_all.return_value = {"stdout": "", "stderr": "error: no matching snaps installed", "retcode": 1}
    assert snap_mod.list_("microk8s") == {}


def test_install_args(run_all):
    run_all.return_value = {"stdout": "microk8s (1.31/stable) v1.31.9 from Canonical** installed", "stderr": "", "retcode": 0}
    snap_mod.install("microk8s", channel="1.31/stable", classic=True)
    assert run_all.call_args.args[0] == ["snap", "install", "microk8s", "--channel=1.31/stable", "--classic"]
    assert run_all.call_args.kwargs["python_shell"] is False


def test_installed_fresh(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].side_effect = [{}, {"microk8s": {"tracking": "1.31/stable"}}]
    ret = snap_state.installed("microk8s", channel="1.31/stable", classic=True)
    assert ret["changes"] == {"channel": {"old": None, "new": "1.31/stable"}}
    assert ret["result"] is (None if test_mode else True)
    assert fn["snap.install"].called is (not test_mode)


def test_installed_other_channel_refreshes(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].side_effect = [{"microk8s": {"tracking": "1.30/stable"}}, {"microk8s": {"tracking": "1.31/stable"}}]
    ret = snap_state.installed("microk8s", channel="1.31/stable", classic=True)
    assert ret["changes"] == {"channel": {"old": "1.30/stable", "new": "1.31/stable"}}
    if not test_mode:
        fn["snap.refresh"].assert_called_once_with("microk8s", "1.31/stable")


def test_installed_nothing_to_do():
    fn = snap_state.__salt__
    fn["snap.list"].return_value = {"microk8s": {"tracking": "1.31/stable"}}
    ret = snap_state.installed("microk8s", channel="1.31/stable")
    assert ret["result"] is True and ret["changes"] == {}


def test_removed(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].return_value = {"microk8s": {"tracking": "1.31/stable"}}
    ret = snap_state.removed("microk8s")
    assert ret["changes"] == {"installed": {"old": "1.31/stable", "new": None}}
    assert fn["snap.remove"].called is (not test_mode)


def test_installed_predicted_on_a_node_without_snapd():
    fn = snap_state.__salt__
    for name in list(fn):
        del fn[name]
    snap_state.__opts__["test"] = True
    ret = snap_state.installed("microk8s", channel="1.31/stable", classic=True)
    assert ret["result"] is None and ret["changes"] == {"channel": {"old": None,
                                                                    "new": "1.31/stable"}}
    assert ret["comment"] == "would install microk8s from 1.31/stable once snap is installed"
    snap_state.__opts__["test"] = False
    assert snap_state.installed("microk8s", channel="1.31/stable")["result"] is False
