"""The execution modules of a kubeadm node, loaded as one minion loads them: one
``__salt__`` (``cmd.run_all`` a mock, ``config.get`` the minion's ``kubeadm:kube_dir``,
each module's public functions under ``<virtualname>.<function>``) and one ``__context__``.
Import the fixtures from here in a test of any of them."""

import inspect
from unittest.mock import create_autospec

import pytest
import salt.modules.cmdmod
import salt.modules.config

from tests.unit.conftest import called_args, load, result  # noqa: F401

NAMES = ("kubeadm", "kos_join", "kos_kubectl", "kos_certs", "kos_upgrade", "kos_podnet",
         "kos_images", "kos_etcd")
MODULES = {name: load("modules", name) for name in NAMES}


@pytest.fixture
def kube_dir(tmp_path):
    return tmp_path / "etc" / "kubernetes"


@pytest.fixture
def configure_loader_modules(run_all, kube_dir):
    config = {"kubeadm:kube_dir": str(kube_dir)}
    found = {
        "cmd.run_all": run_all,
        "config.get": create_autospec(
            salt.modules.config.get, side_effect=lambda key, default="": config.get(key, default)),
    }
    for name, module in MODULES.items():
        found.update({f"{name}.{fn}": getattr(module, fn) for fn, obj in vars(module).items()
                     if inspect.isfunction(obj) and not fn.startswith("_")
                     and obj.__module__ == module.__name__})
    context = {}
    return {module: {"__salt__": found, "__context__": context}
            for module in MODULES.values()}
