"""Unit tests of the microk8s_addons states: addons enabled with their arguments, or
disabled; test mode off and on."""

import json

from salt.exceptions import CommandExecutionError

from tests.unit.states import microk8s_states as loader
from tests.unit.states.microk8s_states import STATES, expect_applied

# the fixtures: the microk8s state modules on one loader
m, test_mode, state_dir = loader.m, loader.test_mode, loader.state_dir
configure_loader_modules = loader.configure_loader_modules

states = STATES["microk8s_addons"]


def test_addon_enabled(m, test_mode):
    m["microk8s_addons.addons"].side_effect = [{"dns": "disabled"}, {"dns": "enabled"}]
    ret = states.addon_enabled("dns")
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"dns": {"old": "disabled", "new": "enabled"}}
    assert m["microk8s_addons.enable_addon"].called is (not test_mode)


def test_addon_enabled_already(m):
    m["microk8s_addons.addons"].return_value = {"dns": "enabled"}
    ret = states.addon_enabled("dns")
    assert ret["result"] is True and ret["changes"] == {}


def test_addon_enabled_again_when_its_arguments_change(m, test_mode, state_dir):
    """A new MetalLB range: `enable` on an enabled addon only says so, so disable first."""
    state_dir.mkdir()
    (state_dir / "microk8s-addons.json").write_text(json.dumps({"metallb": ["10.0.0.240-10.0.0.250"]}))
    m["microk8s_addons.addons"].return_value = {"metallb": "enabled"}
    ret = states.addon_enabled("metallb", args=["10.0.0.100-10.0.0.110"])
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"metallb": {"old": {"args": ["10.0.0.240-10.0.0.250"]},
                                          "new": {"args": ["10.0.0.100-10.0.0.110"]}}}
    if test_mode:
        m["microk8s_addons.disable_addon"].assert_not_called()
        m["microk8s_addons.enable_addon"].assert_not_called()
    else:
        m["microk8s_addons.disable_addon"].assert_called_once_with("metallb")
        m["microk8s_addons.enable_addon"].assert_called_once_with("metallb",
                                                           args=["10.0.0.100-10.0.0.110"])
        record = json.loads((state_dir / "microk8s-addons.json").read_text())
        assert record == {"metallb": ["10.0.0.100-10.0.0.110"]}
        m["microk8s_addons.enable_addon"].reset_mock()
        again = states.addon_enabled("metallb", args=["10.0.0.100-10.0.0.110"])
        assert again["result"] is True and again["changes"] == {}


def test_addon_unknown_fails(m):
    m["microk8s_addons.addons"].return_value = {"dns": "enabled"}
    ret = states.addon_enabled("dnss")
    assert ret["result"] is False and "dnss" in ret["comment"]


def test_addon_disabled_reports_cli_failure(m, test_mode):
    m["microk8s_addons.addons"].return_value = {"ha-cluster": "enabled"}
    m["microk8s_addons.disable_addon"].side_effect = CommandExecutionError(
        "Disabling HA will reset your cluster in a clean state."
    )
    ret = states.addon_disabled("ha-cluster")
    if test_mode:
        assert ret["result"] is None
    else:
        assert ret["result"] is False and "Disabling HA" in ret["comment"] and ret["changes"] == {}


def test_addon_still_wrong_after_apply_fails(m, test_mode):
    m["microk8s_addons.addons"].return_value = {"helm3": "enabled"}
    ret = states.addon_disabled("helm3")
    if test_mode:
        assert ret["result"] is None
    else:
        # helm3 ships in the snap: disable runs but it stays enabled
        assert ret["result"] is False and "is enabled" in ret["comment"]
