"""Unit tests of the snap module's parsing and the snap states."""

from unittest.mock import create_autospec

import pytest
import salt.modules.cmdmod
from salt.exceptions import CommandExecutionError

from tests.unit.conftest import load

snap_mod = load("modules", "snap")
snap_state = load("states", "snap")

# `snap list microk8s`, non-TTY publisher form
# (https://github.com/canonical/snapd/blob/master/cmd/snap/cmd_list.go)
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
        "snap.held": create_autospec(snap_mod.held),
        "snap.hold": create_autospec(snap_mod.hold),
    }
    return {
        snap_mod: {"__salt__": {"cmd.run_all": run_all}},
        snap_state: {"__salt__": functions, "__opts__": {"test": test}},
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


def listed(notes):
    """The `snap list` table above with ``notes`` in the Notes column."""
    return LIST.replace("  classic\n", f"  {notes}\n")


@pytest.mark.parametrize("notes, held", [
    ("classic,held", True), ("held", True), ("classic", False), ("-", False),
    ("disabled,classic", False),
])
def test_held_reads_the_notes_column(run_all, notes, held):
    run_all.return_value = {"stdout": listed(notes), "stderr": "", "retcode": 0}
    assert snap_mod.list_("microk8s")["microk8s"]["notes"] == notes
    assert snap_mod.held("microk8s") is held
    assert run_all.call_args.args[0] == ["snap", "list", "microk8s"]


def test_held_is_false_when_not_installed(run_all):
    run_all.return_value = {"stdout": "", "stderr": "error: no matching snaps installed",
                            "retcode": 1}
    assert snap_mod.held("microk8s") is False


def test_hold_and_unhold_args(run_all):
    # https://snapcraft.io/docs/managing-updates ("Pause or stop automatic updates")
    run_all.return_value = {"stdout": 'General refreshes of "microk8s" held indefinitely\n',
                            "stderr": "", "retcode": 0}
    assert snap_mod.hold("microk8s") == 'General refreshes of "microk8s" held indefinitely'
    assert run_all.call_args.args[0] == ["snap", "refresh", "--hold", "microk8s"]
    assert run_all.call_args.kwargs["python_shell"] is False
    run_all.return_value = {"stdout": 'Removed general refresh hold of "microk8s"\n',
                            "stderr": "", "retcode": 0}
    assert snap_mod.unhold("microk8s") == 'Removed general refresh hold of "microk8s"'
    assert run_all.call_args.args[0] == ["snap", "refresh", "--unhold", "microk8s"]
    assert run_all.call_count == 2


def test_hold_failure_raises_with_snapds_text(run_all):
    # snapd before 2.58 knows no --hold; snap prints "error: <msg>" on stderr, exit 1
    run_all.return_value = {"stdout": "", "stderr": "error: unknown flag `hold'\n", "retcode": 1}
    with pytest.raises(CommandExecutionError, match="unknown flag `hold'") as exc:
        snap_mod.hold("microk8s")
    assert exc.value.info["retcode"] == 1


def test_installed_without_refresh_leaves_another_channel(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].return_value = {"microk8s": {"tracking": "1.30/stable"}}
    ret = snap_state.installed("microk8s", channel="1.31/stable", classic=True, refresh=False)
    assert ret["result"] is True and ret["changes"] == {}, ret
    assert ret["comment"] == ("microk8s tracks 1.30/stable, not 1.31/stable: left as it is "
                              "(moving an installed snap to another channel is an upgrade)")
    fn["snap.refresh"].assert_not_called()
    fn["snap.install"].assert_not_called()


def test_installed_without_refresh_still_installs_a_missing_snap(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].side_effect = [{}, {"microk8s": {"tracking": "1.31/stable"}}]
    ret = snap_state.installed("microk8s", channel="1.31/stable", classic=True, refresh=False)
    assert ret["result"] is (None if test_mode else True), ret
    assert ret["changes"] == {"channel": {"old": None, "new": "1.31/stable"}}
    if test_mode:
        fn["snap.install"].assert_not_called()
    else:
        fn["snap.install"].assert_called_once_with("microk8s", channel="1.31/stable",
                                                   classic=True)
    fn["snap.refresh"].assert_not_called()


def test_installed_without_refresh_on_its_channel_does_nothing(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].return_value = {"microk8s": {"tracking": "1.31/stable"}}
    ret = snap_state.installed("microk8s", channel="1.31/stable", refresh=False)
    assert ret["result"] is True and ret["changes"] == {}
    assert ret["comment"] == "microk8s is installed from 1.31/stable"


def test_held_holds_refreshes(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].return_value = {"microk8s": {"tracking": "1.31/stable", "notes": "classic"}}
    fn["snap.held"].side_effect = [False, True]
    ret = snap_state.held("microk8s")
    assert ret["result"] is (None if test_mode else True), ret
    assert ret["changes"] == {"held": {"old": False, "new": True}}
    if test_mode:
        assert ret["comment"] == "refreshes of microk8s would be held"
        fn["snap.hold"].assert_not_called()
    else:
        assert ret["comment"] == "refreshes of microk8s held"
        fn["snap.hold"].assert_called_once_with("microk8s")
        assert fn["snap.held"].call_count == 2  # looked again after holding


def test_held_already_held_does_nothing(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].return_value = {"microk8s": {"tracking": "1.31/stable",
                                                 "notes": "classic,held"}}
    fn["snap.held"].return_value = True
    ret = snap_state.held("microk8s")
    assert ret["result"] is True and ret["changes"] == {}, ret
    assert ret["comment"] == "refreshes of microk8s are held"
    fn["snap.hold"].assert_not_called()


def test_held_needs_the_snap_installed(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].return_value = {}
    ret = snap_state.held("microk8s")
    if test_mode:
        # the installation comes earlier in the same run
        assert ret["result"] is None
        assert ret["changes"] == {"held": {"old": False, "new": True}}
        assert ret["comment"] == "refreshes of microk8s would be held once it is installed"
    else:
        assert ret["result"] is False and ret["changes"] == {}
        assert ret["comment"] == "cannot hold refreshes of microk8s: it is not installed"
    fn["snap.hold"].assert_not_called()
    fn["snap.held"].assert_not_called()


def test_held_fails_when_the_hold_does_not_show(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].return_value = {"microk8s": {"tracking": "1.31/stable", "notes": "classic"}}
    fn["snap.held"].return_value = False
    fn["snap.hold"].return_value = 'General refreshes of "microk8s" held indefinitely'
    ret = snap_state.held("microk8s")
    if test_mode:
        assert ret["result"] is None and ret["changes"]
        fn["snap.hold"].assert_not_called()
    else:
        assert ret["result"] is False and ret["changes"] == {}, ret
        assert ret["comment"] == ("snap refresh --hold microk8s ran but snap list does not "
                                  "show it held")
        fn["snap.hold"].assert_called_once_with("microk8s")


def test_held_reports_snapds_failure(test_mode):
    fn = snap_state.__salt__
    fn["snap.list"].return_value = {"microk8s": {"tracking": "1.31/stable", "notes": "classic"}}
    fn["snap.held"].return_value = False
    fn["snap.hold"].side_effect = CommandExecutionError("error: unknown flag `hold'")
    ret = snap_state.held("microk8s")
    if test_mode:
        assert ret["result"] is None
    else:
        assert ret["result"] is False and ret["changes"] == {}
        assert ret["comment"] == "error: unknown flag `hold'"


def test_held_predicted_on_a_node_without_snapd():
    fn = snap_state.__salt__
    for name in list(fn):
        del fn[name]
    snap_state.__opts__["test"] = True
    ret = snap_state.held("microk8s")
    assert ret["result"] is None and ret["changes"] == {"held": {"old": False, "new": True}}
    assert ret["comment"] == "would hold refreshes of microk8s once snap is installed"
    snap_state.__opts__["test"] = False
    ret = snap_state.held("microk8s")
    assert ret["result"] is False and ret["changes"] == {}
    assert ret["comment"] == "cannot hold refreshes of microk8s: the snap command is not installed"
