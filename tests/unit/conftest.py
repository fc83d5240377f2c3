"""The extension's modules (saltext.kos, installed in this virtualenv) imported as plain
Python, and where the formula's state tree is."""

import importlib
from pathlib import Path
from unittest.mock import create_autospec

import pytest
import salt.modules.cmdmod

SALT_TREE = Path(__file__).resolve().parents[2] / "salt" / "salt"


def load(kind, name):
    """``saltext.kos.<kind>.<name>``: the module a minion's loader loads from the
    extension's ``<kind>`` directory."""
    return importlib.import_module(f"saltext.kos.{kind}.{name}")


def result(stdout="", retcode=0, stderr=""):
    """What ``cmd.run_all`` returns."""
    return {"stdout": stdout, "stderr": stderr, "retcode": retcode, "pid": 1}


def called_args(run_all):
    """The argument list the last ``cmd.run_all`` ran."""
    return run_all.call_args.args[0]


@pytest.fixture
def run_all():
    """``cmd.run_all``, answering ``result()`` unless a test says otherwise."""
    return create_autospec(salt.modules.cmdmod.run_all, return_value=result())
