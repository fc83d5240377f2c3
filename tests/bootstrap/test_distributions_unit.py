"""
Which distribution ``kos status``, ``kos kubeconfig`` and ``kos down`` treat a cluster as:
kos:distribution alone, read from Terraform's outputs or the first control plane's pillar,
and an error saying where it comes from when it is missing, never a default.
"""

import pytest
import yaml
from kos import distributions
from kos.errors import ConvergeError

FIRST = "k8s-cp-1.example.com"


class Master:
    """The first control plane's answer to ``pillar.get``, as ``SaltMaster.salt`` returns it
    (``""``: the key is not in its pillar, Salt's default for a missing key)."""

    def __init__(self, pillar):
        self.pillar = pillar
        self.calls = []

    def salt(self, targets, fun, *args):
        self.calls.append((list(targets), fun, *args))
        value = self.pillar
        for part in args[0].split(":"):
            value = value.get(part, "") if isinstance(value, dict) else ""
        return {t: value for t in targets}


@pytest.mark.parametrize("name", ["microk8s", "kubeadm"])
def test_the_first_control_planes_kos_distribution_decides(name):
    master = Master({"kos": {"distribution": name}})
    assert distributions.detect(master, FIRST).name == name
    assert master.calls == [([FIRST], "pillar.get", "kos:distribution", "unmask=True")]


@pytest.mark.parametrize("pillar, words", [
    # the older key alone is no longer read: a kubeadm cluster is not taken for microk8s
    ({"kubernetes": {"distribution": "kubeadm"}}, "kos:distribution is missing"),
    ({}, "kos:distribution is missing"),
    ({"kos": {"distribution": "k3s"}}, "kos:distribution is 'k3s', not microk8s or kubeadm"),
])
def test_a_missing_or_unknown_distribution_says_where_it_comes_from(pillar, words):
    with pytest.raises(ConvergeError) as raised:
        distributions.detect(Master(pillar), FIRST)
    assert raised.value.problem == (
        f"{words} in the pillar of {FIRST} (Terraform writes it to the pillar from its "
        "kubernetes_distribution variable)")
    assert raised.value.fix == ("set kubernetes_distribution (microk8s or kubeadm) in the "
                                "Terraform variables and run kos up")


def test_a_silent_first_control_plane_is_not_a_missing_distribution():
    class Silent(Master):
        def salt(self, targets, fun, *args):
            return {}

    with pytest.raises(ConvergeError, match=f"{FIRST} did not answer pillar.get"):
        distributions.detect(Silent({}), FIRST)


def test_terraforms_outputs_name_the_distribution_before_any_minion_answers():
    outputs = {"salt_pillar": yaml.safe_dump({"kos": {"distribution": "kubeadm"}})}
    assert distributions.planned(outputs) == "kubeadm"
    legacy = {"salt_pillar": yaml.safe_dump({"kubernetes": {"distribution": "kubeadm"}})}
    with pytest.raises(ConvergeError, match="kos:distribution is missing in Terraform's "
                                            "salt_pillar output"):
        distributions.planned(legacy)
