"""pillar.example documents every key the formulas read, and is itself valid."""


import pytest
import yaml

from tests.unit.conftest import SALT_TREE, load

kos = load("modules", "kos")
REPO = SALT_TREE.parents[1]
EXAMPLE = yaml.safe_load((REPO / "pillar" / "pillar.example").read_text())


def key_paths(data, prefix=""):
    for key, value in data.items():
        path = f"{prefix}{key}"
        yield path
        if isinstance(value, dict) and value:
            yield from key_paths(value, f"{path}:")


def lookup(data, path):
    for part in path.split(":"):
        data = data[part]
    return data


@pytest.mark.parametrize("formula", ["core", "bastion", "file_transfer", "salt_master", "microk8s", "kubeadm"])
def test_every_default_is_documented(formula):
    defaults = yaml.safe_load((SALT_TREE / formula / "defaults.yaml").read_text())
    missing = []
    for path in key_paths(defaults):
        try:
            lookup(EXAMPLE[formula], path)
        except (KeyError, TypeError):
            missing.append(f"{formula}:{path}")
    assert not missing, f"pillar.example does not document {missing}"


def test_documented_defaults_match_defaults_yaml():
    # The example shows defaults; they must not drift from the formulas' own.
    for formula in ["core", "salt_master", "microk8s"]:
        defaults = yaml.safe_load((SALT_TREE / formula / "defaults.yaml").read_text())
        for path in key_paths(defaults):
            value = lookup(defaults, path)
            if not isinstance(value, dict) and path not in ("users",):
                assert lookup(EXAMPLE[formula], path) == value, f"{formula}:{path}"


def test_example_is_valid():
    assert kos.check_pillar(EXAMPLE) == []
