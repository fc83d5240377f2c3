"""
kos up's preflight step is done for its inputs only: a different cloud to check, named by
--os-cloud or by OS_CLOUD (the way openstacksdk picks a clouds.yaml entry), checks again.
"""

from types import SimpleNamespace

from kos.steps.up import Preflight


def preflight_of(os_cloud=None):
    dep = SimpleNamespace(inputs=SimpleNamespace(fingerprint="inputs"),
                          settings=SimpleNamespace(cloud="openstack", os_cloud=os_cloud))
    return Preflight(dep)


def test_another_os_cloud_checks_again(monkeypatch):
    monkeypatch.delenv("OS_CLOUD", raising=False)
    before = preflight_of().fingerprint()
    assert preflight_of().fingerprint() == before
    monkeypatch.setenv("OS_CLOUD", "prod")
    by_env = preflight_of().fingerprint()
    assert by_env != before
    monkeypatch.setenv("OS_CLOUD", "staging")
    assert preflight_of().fingerprint() != by_env
    monkeypatch.delenv("OS_CLOUD")
    assert preflight_of(os_cloud="prod").fingerprint() != before
