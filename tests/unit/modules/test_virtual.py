"""The execution modules that wrap one binary load only where that binary is
(https://docs.saltproject.io/en/latest/ref/modules/index.html#virtual-modules)."""

import pytest
import salt.utils.path

from tests.unit.conftest import load

BINARIES = {"kubeadm": "/usr/bin/kubeadm", "microk8s": "/snap/bin/microk8s",
            "microk8s_addons": "/snap/bin/microk8s", "microk8s_certs": "/snap/bin/microk8s",
            "microk8s_backup": "/snap/bin/microk8s"}


@pytest.fixture
def configure_loader_modules():
    return {load("modules", name): {} for name in BINARIES}


@pytest.mark.parametrize(("name", "path"), BINARIES.items())
def test_virtual_needs_the_binary(monkeypatch, name, path):
    module = load("modules", name)
    monkeypatch.setattr(salt.utils.path, "which", lambda _: None)
    ok, why = module.__virtual__()
    assert ok is False and name in why
    monkeypatch.setattr(salt.utils.path, "which", lambda _: path)
    assert module.__virtual__() == name
