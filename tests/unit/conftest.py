"""The extension's modules (saltext.kos, installed in this virtualenv) imported as plain
Python, and where the formula's state tree is."""

import importlib
from pathlib import Path

SALT_TREE = Path(__file__).resolve().parents[2] / "salt" / "salt"


def load(kind, name):
    """``saltext.kos.<kind>.<name>``: the module a minion's loader loads from the
    extension's ``<kind>`` directory."""
    return importlib.import_module(f"saltext.kos.{kind}.{name}")
