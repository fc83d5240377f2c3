"""The kos modules' shared helpers (salt/salt/_utils/kos_cli.py), loaded through Salt's
loaders as a minion loads them."""

import pytest
import salt.config
import salt.loader
from salt.version import SaltStackVersion, __saltstack_version__

from tests.unit.conftest import SALT_TREE, utils

PROBE = """
def remember():
    __context__["probe.status"] = "cached"
    __context__["other"] = 1
    return sorted(__context__)


def changed():
    __utils__["kos_cli.forget"](__context__, "probe")
    return sorted(__context__)
"""


def test_the_salt_kos_is_tested_with_is_not_refused():
    assert utils()["kos_cli.untested_salt"]() is None
    assert utils()["kos_cli.untested_salt"](__saltstack_version__) is None


@pytest.mark.parametrize("release", ["3007.1", "3009.0"])
def test_an_untested_salt_is_named_with_the_fix(release):
    said = utils()["kos_cli.untested_salt"](SaltStackVersion.parse(release))
    assert f"were not tested with Salt {release}: run Salt 3008 on this minion" in said
    assert "widen TESTED_SALT in salt/salt/_utils/kos_cli.py" in said


def test_forget_drops_the_cache_of_the_module_that_calls_it(tmp_path):
    """A loaded module's ``__context__`` reaches kos_cli as the utils loader's: ``forget``
    finds the caller's through the loader (the Salt internals TESTED_SALT guards)."""
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "probe.py").write_text(PROBE)
    opts = salt.config.minion_config(None)
    opts.update(
        module_dirs=[str(tmp_path / "modules")],
        utils_dirs=[str(SALT_TREE / "_utils")],
        extension_modules=str(tmp_path / "extmods"),
        cachedir=str(tmp_path / "cache"),
    )
    mods = salt.loader.minion_mods(opts, whitelist=["probe"], utils=salt.loader.utils(opts))
    assert mods["probe.remember"]() == ["other", "probe.status"]
    assert mods["probe.changed"]() == ["other"]
