"""pillar.example documents every key of the schema, the schema accepts every key of
pillar.example, and the formulas' defaults are valid pillar: the three cannot drift."""

import pytest
import yaml

from tests.unit.conftest import SALT_TREE
from tests.unit.utils.test_kos_schema import DEFAULTS, check, schema

REPO = SALT_TREE.parents[1]
EXAMPLE_TEXT = (REPO / "pillar" / "pillar.example").read_text()
EXAMPLE = yaml.safe_load(EXAMPLE_TEXT)
# Documented in comments only: never set in a repository file, or set by Salt or kos itself.
COMMENTED = {"kubeadm:ccm:credentials": "# credentials:", "mine_functions": "and mine_functions",
             "microk8s:addons": "{enabled: bool, args: [...]}", "_errors": None,
             "schedule": "schedule (", "beacons": "beacons,", "master": "master (pillar_opts)",
             "kos_orchestration": "orch.deploy passes kos_orchestration"}
ANY = object()


def key_paths(data, prefix=""):
    for key, value in data.items():
        path = f"{prefix}{key}"
        yield path
        if isinstance(value, dict) and value:
            yield from key_paths(value, f"{path}:")


def declared(node, value=ANY, prefix=""):
    """The schema's key paths, '*' for list items and free keys; with a value, only the
    paths that value sets."""
    for option in node.get("anyOf", [node]):
        fixed = option.get("properties", {})
        for key, child in fixed.items():
            if value is ANY or isinstance(value, dict) and key in value:
                yield prefix + key
                if prefix + key not in COMMENTED:
                    yield from declared(child, value if value is ANY else value[key],
                                        f"{prefix}{key}:")
        free = [*option.get("patternProperties", {}).values(), option.get("additionalProperties")]
        for child in (c for c in free if isinstance(c, dict)):
            entries = [ANY] if value is ANY else \
                [v for k, v in value.items() if k not in fixed] if isinstance(value, dict) else []
            for entry in entries:
                yield from declared(child, entry, f"{prefix}*:")
        if isinstance(option.get("items"), dict):
            entries = [ANY] if value is ANY else value if isinstance(value, list) else []
            for entry in entries:
                yield from declared(option["items"], entry, f"{prefix}*:")


def lookup(data, path):
    for part in path.split(":"):
        data = data[part]
    return data


def test_example_is_valid():
    assert check(EXAMPLE) == []


def test_every_schema_key_is_documented_in_the_example():
    missing = set(declared(schema.SCHEMA)) - set(declared(schema.SCHEMA, EXAMPLE)) - set(COMMENTED)
    assert not missing, f"pillar.example does not document {sorted(missing)}"
    for path, comment in COMMENTED.items():
        assert comment is None or comment in EXAMPLE_TEXT, path


@pytest.mark.parametrize("formula", schema.FORMULAS)
def test_every_default_is_documented(formula):
    missing = []
    for path in key_paths(DEFAULTS[formula]):
        try:
            lookup(EXAMPLE[formula], path)
        except (KeyError, TypeError):
            missing.append(f"{formula}:{path}")
    assert not missing, f"pillar.example does not document {missing}"


@pytest.mark.parametrize("formula", schema.FORMULAS)
def test_defaults_are_valid_pillar(formula):
    assert schema.check({formula: DEFAULTS[formula]}) == []


def test_documented_defaults_match_defaults_yaml():
    # The example shows defaults; they must not drift from the formulas' own.
    for formula in ["core", "salt_master", "microk8s"]:
        for path in key_paths(DEFAULTS[formula]):
            value = lookup(DEFAULTS[formula], path)
            if not isinstance(value, dict) and path not in ("users",):
                assert lookup(EXAMPLE[formula], path) == value, f"{formula}:{path}"
