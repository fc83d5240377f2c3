"""
The amphora image's one edit of Debian's Octavia agent (kos_local.amphora): only the VIP's
interface sets the amphora's policy rules, so plugging the members' network keeps the
VIP's ``from <VIP> lookup 1`` (tests/bootstrap/test_local_image_edits.py: how a release
whose code differs stops the build).
"""

import types

from kos_local import amphora
from kos_local.image import Build

# The shape of InterfaceController.up in Octavia 11.0.0
# (octavia/amphorae/backends/utils/interface.py), its netlink calls left out.
ZED_UP = """\
class InterfaceController:
    def up(self, interface):
        ipr, idx = None, 1
        if True:
            self._addresses_up(interface, ipr, idx)
            self._routes_up(interface, ipr, idx)
            self._rules_up(interface, ipr, idx)

            self._scripts_up(interface, None)
"""


def controller(text):
    scope = {}
    exec(compile(text, "interface.py", "exec"), scope)
    calls = []

    class Recording(scope["InterfaceController"]):
        def __getattr__(self, name):
            return lambda interface, *args: calls.append((name, interface.name))
    return Recording(), calls


def interface(name, rules):
    return types.SimpleNamespace(name=name, rules=rules)


def test_the_members_interface_leaves_the_vips_rules_alone():
    vip = interface("eth1", [{"src": "10.0.0.9", "src_len": 32, "table": 1}])
    members = interface("eth2", [])

    # as Debian ships it: the members' interface runs _rules_up with no rules, which
    # deletes the VIP's
    shipped, calls = controller(ZED_UP)
    shipped.up(members)
    assert ("_rules_up", "eth2") in calls

    edited, calls = controller(amphora.vip_rules_only(ZED_UP))
    edited.up(vip)
    edited.up(members)
    assert [c for c in calls if c[0] == "_rules_up"] == [("_rules_up", "eth1")]
    assert ("_routes_up", "eth2") in calls and ("_scripts_up", "eth2") in calls


def test_the_image_build_makes_the_edit_in_the_agents_file(tmp_path):
    target = tmp_path / amphora.INTERFACE_PY
    target.parent.mkdir(parents=True)
    target.write_text(ZED_UP)
    log = tmp_path / "build.log"
    log.write_text("")
    amphora._vip_rules_only(Build(amphora.layer(), tmp_path, log))
    assert target.read_text() == amphora.vip_rules_only(ZED_UP)
