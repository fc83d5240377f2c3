"""
Bad pillar inputs of the unit table (tests/unit/utils/test_kos_schema.py) on a real master
and four real minions: the highstate runs nothing but the validator, which fails with one
error naming the key and the fix, and every host's disk is byte for byte what it was. An
input goes into one host's own layer (the most specific one), on top of what the
deployment wrote there; one highstate tries four inputs, one per host.

The unit table holds the validator's verdict on every input; here go the inputs whose
outcome the real path can change (a highstate costs half a minute on a loaded machine):
the layers' merge, msgpack, the hosts' own defaults, the deployment's names, and secrets
that must not come back in Salt's return.
"""

import copy
import hashlib
import ipaddress
import json
import os
import stat
from pathlib import Path

import pytest
import salt.utils.dictupdate
import yaml

from tests.integration.conftest import CIDR, DOMAIN_SLS, HOSTNAMES
from tests.unit.utils.test_kos_schema import BAD, SECRET, WORKER, with_value

VALIDATE = "kos_|-kos-validate-kos-pillar_valid_|-pillar_|-pillar_valid"
# Inputs whose value names something of the unit test's pillar: the same input here.
HERE = {"pod-overlaps-private": str(list(ipaddress.ip_network(CIDR).subnets())[1])}


def host_bytes(root):
    """Every file, directory and link under root: content hash, mode, link target."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                seen[str(path)] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                seen[str(path)] = ("file", st.st_mode, digest)
            else:
                seen[str(path)] = ("other", st.st_mode)
    return seen


@pytest.fixture(scope="module")
def layers(deployment):
    """Each host's own layer as the deployment wrote it; written back at the end."""
    paths = {name: f"minions/{DOMAIN_SLS}/{name}.sls" for name in HOSTNAMES}
    original = {name: (deployment.pillar_dir / path).read_text() for name, path in paths.items()}
    yield {name: (paths[name], yaml.safe_load(text)) for name, text in original.items()}
    for name, text in original.items():
        deployment.write(paths[name], text)


@pytest.fixture(scope="module")
def before(minions, salt_cli, host_roots, layers):
    """The hosts before any bad input, with the deployment's own pillar valid everywhere."""
    ret = salt_cli.run("state.apply", "kos.extension", minion_tgt="*")
    assert ret.returncode == 0, ret
    ret = salt_cli.run("kos.validate_pillar", minion_tgt="*")
    assert ret.data == {m: True for m in minions_ids(minions)}, ret
    return host_bytes(host_roots)


def minions_ids(minions):
    return {factory.id for factory in minions.values()}


def test_a_highstate_on_the_valid_pillar_would_change_every_host(before, salt_cli, minions):
    # What makes "unchanged" below mean something: unblocked, each host would change.
    ret = salt_cli.run("state.highstate", "test=True", minion_tgt="*")
    assert set(ret.data) == minions_ids(minions), ret
    for minion, states in ret.data.items():
        assert isinstance(states, dict), (minion, states)
        assert states[VALIDATE]["result"] is True, states[VALIDATE]
        pending = [s["__id__"] for s in states.values() if s.get("changes") or s["result"] is None]
        assert pending, minion


def here(text, deployment):
    return text.replace(WORKER, deployment.fqdn("k8s-worker-1")) if isinstance(text, str) else text


# (none that deletes a key: a later layer cannot)
SAMPLE = (
    "misspelt-section",             # a whole section no formula reads, merged in
    "huge-integer",                 # beyond msgpack: arrives as a string of digits
    "private-cidr-null",            # null in a layer on top of Terraform's value
    "pod-overlaps-private",         # against the lab's own private network
    "ttl-below-default-min",        # against the default on the host, not in pillar
    "first-control-plane-worker",   # names one of the deployment's minions
    "ssh-key-not-echoed",           # a secret: not in the highstate's return
    "credentials-not-echoed",
)
CASES = [p for p in BAD if p.id in SAMPLE]
assert len(CASES) == len(SAMPLE), "a sampled input left the unit table"


@pytest.fixture(scope="module")
def outcomes(request, before, layers, deployment, salt_cli, host_roots):
    """Each selected input on one host, four hosts (four inputs) per highstate; after each
    highstate, whether every host is byte for byte what it was."""
    name = "test_bad_input_runs_only_the_validator_and_changes_no_host"
    selected = {item.callspec.id for item in request.session.items
                if getattr(item, "originalname", None) == name}
    cases = [case for case in CASES if case.id in selected]
    results = {}
    for start in range(0, len(cases), len(HOSTNAMES)):
        group = dict(zip(HOSTNAMES, cases[start:start + len(HOSTNAMES)]))
        for host, case in group.items():
            path, value = (here(v, deployment) for v in case.values[:2])
            fragment = with_value(path, HERE.get(case.id, value), data={})
            layer, data = layers[host]
            deployment.write(layer, salt.utils.dictupdate.update(copy.deepcopy(data), fragment))
        targets = ",".join(deployment.fqdn(host) for host in group)
        ret = salt_cli.run("-L", "state.highstate", minion_tgt=targets)
        unchanged = host_bytes(host_roots) == before
        for host, case in group.items():
            results[case.id] = {"ret": ret, "states": (ret.data or {}).get(deployment.fqdn(host)),
                                "unchanged": unchanged}
    return results


@pytest.mark.parametrize("path, value, key, words", CASES)
def test_bad_input_runs_only_the_validator_and_changes_no_host(
        request, path, value, key, words, outcomes, deployment):
    outcome = outcomes[request.node.callspec.id]
    ret, states = outcome["ret"], outcome["states"]
    key = here(key, deployment)
    assert ret.returncode != 0
    assert SECRET not in ret.stdout
    # Only the validator ran (the top file gave nothing else), and it failed; before it, the
    # extension it comes from, at the release the minion has already (nothing changed).
    assert isinstance(states, dict) and VALIDATE in states, json.dumps(states)[:2000]
    before_it = {sid: s for sid, s in states.items() if sid != VALIDATE}
    assert all("_|-kos-extension-" in sid and s["result"] is True and not s["changes"]
               for sid, s in before_it.items()), json.dumps(before_it)[:2000]
    comment = states[VALIDATE]["comment"]
    head, *errors = comment.splitlines()
    assert states[VALIDATE]["result"] is False and head == "invalid pillar:", comment
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"pillar key '{key}': ") and "; " in errors[0], errors
    assert words in errors[0], errors
    assert outcome["unchanged"], "a host's disk changed"
