"""The kos modules' shared helpers (saltext.kos.utils.kos_cli), called from a module
Salt's loader loaded, as a minion calls them."""

import pytest
import salt.config
import salt.loader
from salt.version import SaltStackVersion, __saltstack_version__

from saltext.kos.utils import kos_cli

PROBE = """
def remember():
    __context__["probe.status"] = "cached"
    __context__["other"] = 1
    return sorted(__context__)


def changed():
    from saltext.kos.utils import kos_cli

    kos_cli.forget(__context__, "probe")
    return sorted(__context__)
"""


def test_the_salt_kos_is_tested_with_is_not_refused():
    assert kos_cli.untested_salt() is None
    assert kos_cli.untested_salt(__saltstack_version__) is None


@pytest.mark.parametrize("release", ["3007.1", "3009.0"])
def test_an_untested_salt_is_named_with_the_fix(release):
    said = kos_cli.untested_salt(SaltStackVersion.parse(release))
    assert f"were not tested with Salt {release}: run Salt 3008 on this minion" in said
    assert "widen TESTED_SALT in saltext.kos.utils.kos_cli" in said


def test_forget_drops_the_cache_of_the_module_that_calls_it(tmp_path):
    """A loaded module hands its own ``__context__`` to kos_cli: ``forget`` empties the
    caller's cache of its own entries and leaves the rest."""
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "probe.py").write_text(PROBE)
    opts = salt.config.minion_config(None)
    opts.update(
        module_dirs=[str(tmp_path / "modules")],
        extension_modules=str(tmp_path / "extmods"),
        cachedir=str(tmp_path / "cache"),
    )
    mods = salt.loader.minion_mods(opts, whitelist=["probe"])
    assert mods["probe.remember"]() == ["other", "probe.status"]
    assert mods["probe.changed"]() == ["other"]
