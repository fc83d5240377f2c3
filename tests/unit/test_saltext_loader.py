"""How Salt's loader finds the extension (saltext.kos.loader, the salt.loader entry point),
and a running minion that pip gave another release: its reloaded modules import the
utilities of that release, not the ones it had imported before."""

import importlib
import sys
from pathlib import Path

import pytest

from saltext.kos import loader

KINDS = {"modules", "states", "runners", "returners", "engines", "utils"}


@pytest.fixture
def imported_again():
    """Puts back the saltext.kos modules a test made Python import anew."""
    before = {n: m for n, m in sys.modules.items() if n.startswith("saltext.kos")}
    yield
    for name in [n for n in sys.modules if n.startswith("saltext.kos")]:
        del sys.modules[name]
    sys.modules.update(before)


def test_the_entry_point_gives_the_packages_loader_directories():
    found = loader.dirs()
    assert set(found) == KINDS
    for kind, (path,) in found.items():
        assert Path(path).is_dir() and Path(path).name == kind
        assert (Path(path) / "__init__.py").is_file()
    assert any(p.name == "kos_plan.py" for p in Path(found["runners"][0]).iterdir())


def test_the_same_release_keeps_what_was_imported():
    cached = importlib.import_module("saltext.kos.utils.kos_state")
    loader.dirs()
    assert importlib.import_module("saltext.kos.utils.kos_state") is cached


def test_another_release_installed_under_a_running_minion_is_imported_anew(imported_again):
    package = importlib.import_module("saltext.kos")
    cached = importlib.import_module("saltext.kos.utils.kos_state")
    package.__version__ = "0.0.1"  # what the minion imported before pip installed this one
    loader.dirs()
    fresh = importlib.import_module("saltext.kos.utils.kos_state")
    assert fresh is not cached
    assert importlib.import_module("saltext.kos").__version__ == loader.installed()
