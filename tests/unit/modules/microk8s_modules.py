"""The execution modules of a MicroK8s node, loaded as one minion loads them: one
``__salt__`` (``cmd.run_all`` a mock, ``config.get`` the defaults, each module's public
functions under ``<virtualname>.<function>``) and one ``__context__``, so a module reads
the status another cached and a change anywhere drops it. Import the fixtures from here in
a test of any of them."""

import inspect
from unittest.mock import create_autospec

import pytest
import salt.modules.cmdmod
import salt.modules.config

from tests.unit.conftest import called_args, load, result  # noqa: F401

NAMES = ("microk8s", "microk8s_addons", "microk8s_certs", "microk8s_backup")
MODULES = {name: load("modules", name) for name in NAMES}


@pytest.fixture
def configure_loader_modules(run_all):
    found = {
        "cmd.run_all": run_all,
        "config.get": create_autospec(salt.modules.config.get,
                                      side_effect=lambda key, default="": default),
    }
    for name, module in MODULES.items():
        found.update({f"{name}.{fn}": getattr(module, fn) for fn, obj in vars(module).items()
                     if inspect.isfunction(obj) and not fn.startswith("_")
                     and obj.__module__ == module.__name__})
    context = {}
    return {module: {"__salt__": found, "__context__": context,
                     "__grains__": {"host": "k8s-cp-1"}}
            for module in MODULES.values()}
