"""
The pillar schema through Salt's real loaders, with the repository's state tree as the
file server: the validator reads each formula's defaults.yaml from salt://, the top file
runs nothing but the validator on an invalid pillar, sshd_config renders typed values
(and sshd accepts them), and the merged map of every formula matches its golden file.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from salt.exceptions import CommandExecutionError

from tests.functional.minion import local_loaders
from tests.unit.utils.test_kos_schema import schema

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "salt" / "salt"
EXAMPLE = yaml.safe_load((REPO / "pillar" / "pillar.example").read_text())
MINION = "k8s-cp-1.prod.example.com"
GOLDEN = Path(__file__).parent / "golden" / "maps.yaml"
@pytest.fixture(scope="module")
def pillar_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pillar")


@pytest.fixture(scope="module")
def loaders(tmp_path_factory, pillar_dir, release_root):
    (pillar_dir / "top.sls").write_text("base:\n  '*':\n    - data\n")
    (pillar_dir / "data.sls").write_text("{}\n")
    root = tmp_path_factory.mktemp("minion")
    return local_loaders(root, MINION, file_roots={"base": [str(TREE), str(release_root)]},
                         pillar_roots={"base": [str(pillar_dir)]})


@pytest.fixture
def with_pillar(loaders, pillar_dir):
    """Compile this pillar for the minion, as its master would."""

    def use(data):
        (pillar_dir / "data.sls").write_text(yaml.safe_dump(data))
        loaders.reload_all()
        return loaders.modules

    return use


def example(roles=(), **sections):
    data = json.loads(json.dumps(EXAMPLE))
    data["kos"]["roles"] = list(roles)
    for path, value in sections.items():
        node = data
        keys = path.split("__")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return data


def test_the_example_is_valid_through_the_loader(with_pillar):
    modules = with_pillar(example())
    assert modules.kos.pillar_errors() == []
    assert modules.kos.validate_pillar() is True


def test_rules_judge_the_pillar_merged_over_the_formulas_defaults(with_pillar):
    # microk8s/defaults.yaml enables 'dns': a pillar that names it 'core/dns' makes two
    # states for one addon, which flip it on every run.
    data = example()
    data["microk8s"]["addons"] = {"core/dns": False}
    modules = with_pillar(data)
    assert modules.kos.pillar_errors() == [
        "pillar key 'microk8s:addons:core/dns': names the same addon as microk8s:addons:dns "
        "(a default); set microk8s:addons:dns instead"]
    with pytest.raises(CommandExecutionError, match="invalid pillar:\npillar key 'microk8s:addons"):
        modules.kos.validate_pillar()


@pytest.mark.parametrize("key, value, words", [
    ("service_cidr", "10.96.0.0/33", "'10.96.0.0/33' is not a network in CIDR notation"),
    ("pod_cidr", "10.244.1.0/16", "(host bits set: the network is 10.244.0.0/16)"),
])
def test_a_bad_network_is_one_error_before_the_converge_not_a_traceback(
        with_pillar, key, value, words):
    data = example()
    data["kos"]["networks"][key] = value
    modules = with_pillar(data)
    # What orch.deploy runs on every minion first: it refuses before the mine is touched.
    with pytest.raises(CommandExecutionError) as refused:
        modules.kos.prepare_converge()
    lines = str(refused.value).splitlines()
    assert lines[0] == "invalid pillar:"
    assert len(lines) == 2 and lines[1].startswith(f"pillar key 'kos:networks:{key}': "), lines
    assert words in lines[1] and f"set {key} in the Terraform variables" in lines[1]


def test_the_schema_is_served_as_json_schema(with_pillar):
    served = with_pillar(example()).kos.pillar_schema()
    assert served["properties"]["core"]["properties"]["sshd"]["properties"]["port"] == {
        "type": "integer", "description": "TCP port.", "minimum": 1, "maximum": 65535}
    json.dumps(served)


def top(modules):
    return modules.state.show_top()["base"]


ROLES = ("control_plane", "kubernetes_node", "first_control_plane")


def test_top_file_on_a_valid_pillar(with_pillar):
    assert top(with_pillar(example(ROLES))) == ["kos.validate", "core", "file_transfer",
                                                 "kos.converged", "microk8s.master"]
    kubeadm = example(ROLES, kos__distribution="kubeadm", kubeadm__ccm__enabled=False)
    assert top(with_pillar(kubeadm)) == [
        "kos.validate", "core", "file_transfer", "kos.converged", "kubeadm.master"]


@pytest.mark.parametrize("distribution", ["microk8s", "kubeadm"])
def test_a_rebuilt_first_control_plane_joins_through_the_issuer_the_run_names(
        with_pillar, distribution):
    """While orch.deploy has the rebuilt first control plane rejoin (its run pillar names
    another joined control plane as kos_orchestration:issuer), that node takes the joined
    path with the issuer's credential; initialising it would start a second cluster."""
    cp2 = "k8s-cp-2.prod.example.com"
    data = example(ROLES, kos__distribution=distribution, kubeadm__ccm__enabled=False)
    data["kos"]["nodes"][cp2] = {"role": "control_plane", "ip": "10.1.0.12"}
    modules = with_pillar(data)
    assert top(modules)[-1] == f"{distribution}.master"
    data["kos_orchestration"] = {"issuer": cp2}
    modules = with_pillar(data)
    assert modules.kos.pillar_errors() == []
    assert top(modules)[-1] == f"{distribution}.joined"
    state = "cluster_joined" if distribution == "microk8s" else "joined"
    high = modules.state.show_sls(f"{distribution}.joined")
    args = high[f"{distribution}-joined-{distribution}-{state}"][distribution]
    assert state in args and {"name": cp2} in args, args
    if distribution == "microk8s":
        assert {"source": cp2} in args, args


@pytest.mark.parametrize(
    "sections",
    [
        {"kos__distribution": "k3s"},
        {"kos__distribution": None},
        {"kubernetes__distribution": "microk8s"},
        {"core": "hardened"},
        {"microk8s": ["dns"]},
        {"kos__nodes": "k8s-cp-1"},
        {"core__sshd__permit_root_login": "false"},
    ],
    ids=["terraform-distribution", "distribution-missing", "retired-distribution-key",
         "section-string", "section-list",
         "nodes-string", "sshd-quoted-false"],
)
def test_top_file_runs_only_the_validator_on_an_invalid_pillar(with_pillar, sections):
    modules = with_pillar(example(ROLES, **sections))
    assert top(modules) == ["kos.validate"]
    ran = {r.id: r for r in modules.state.sls("kos.validate")}
    # the extension the validator comes from is installed first, whatever the pillar says
    assert all(r.result for sid, r in ran.items() if sid.startswith("kos-extension-")), ran
    result = ran["kos-validate-kos-pillar_valid"]
    assert result.result is False
    assert result.comment.startswith("invalid pillar:\npillar key '")
    assert len(result.comment.splitlines()) == 2, result.comment


def render(modules, text, **context):
    return modules.file.apply_template_on_contents(text, "jinja", context, None, "base")


def sshd_config(modules, **values):
    sshd = dict(EXAMPLE["core"]["sshd"], **values)
    return render(modules, (TREE / "core/files/sshd_config.jinja").read_text(), sshd=sshd)


def option(config, name):
    return next(line.split(" ", 1)[1] for line in config.splitlines()
                if line.startswith(name + " "))


OPTION = {"permit_root_login": "PermitRootLogin",
          "password_authentication": "PasswordAuthentication",
          "allow_tcp_forwarding": "AllowTcpForwarding", "x11_forwarding": "X11Forwarding"}


@pytest.mark.parametrize("key", sorted(schema.SSHD_WORDS))
def test_sshd_config_renders_the_schemas_booleans_and_words_and_nothing_else(
        with_pillar, key, tmp_path):
    modules = with_pillar(example())
    rendered = {True: "yes", False: "no", **{w: w for w in schema.SSHD_WORDS[key]}}
    for value, word in rendered.items():
        config = sshd_config(modules, **{key: value})
        assert option(config, OPTION[key]) == word, (value, config)
        sshd_accepts(config, tmp_path)
    for value in ("false", "true", "off", 0, 1, None):
        with pytest.raises(Exception, match=f"pillar key core:sshd:{key}: "):
            sshd_config(modules, **{key: value})


def test_sshd_config_refuses_a_port_that_is_no_integer(with_pillar):
    modules = with_pillar(example())
    assert option(sshd_config(modules, port=2222), "Port") == "2222"
    for value in ("22", True, 0, 70000):
        with pytest.raises(Exception, match="pillar key core:sshd:port: "):
            sshd_config(modules, port=value)


def sshd_accepts(config, tmp_path):
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.access(sshd, os.X_OK):
        return
    # sshd -t refuses to run without its privilege separation directory, which only the
    # ssh service makes at its start (as the sshd fixture of tests/bootstrap does)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    key = tmp_path / "host_key"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    path = tmp_path / "sshd_config"
    path.write_text(config)
    done = subprocess.run([sshd, "-t", "-f", str(path), "-o", f"HostKey={key}"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, (done.stderr, config)


def test_core_map_refuses_a_flag_that_is_no_boolean(with_pillar):
    # A direct `state.apply core` renders the map without the validator.
    modules = with_pillar(example(core__manage__sshd="no"))
    with pytest.raises(Exception, match="pillar key core:manage:sshd: must be true or false"):
        render(modules, '{% from "core/map.jinja" import core with context %}{{ core | json }}')


MAPS = {
    "kos": "kos/map.jinja",
    "core": "core/map.jinja",
    "bastion": "bastion/map.jinja",
    "file_transfer": "file_transfer/map.jinja",
    "salt_master": "salt_master/map.jinja",
    "microk8s": "microk8s/map.jinja",
    "kubeadm": "kubeadm/map.jinja",
}


def merged_maps(modules):
    text = "".join(f'{{% from "{path}" import {name} with context %}}'
                   for name, path in MAPS.items())
    text += "{{ {" + ", ".join(f"'{name}': {name}" for name in MAPS) + "} | json }}"
    return json.loads(render(modules, text))


def test_merged_maps_match_the_golden_file(with_pillar):
    """pillar.example on the first control plane, through every formula's map.jinja.
    After a deliberate change: KOS_UPDATE_GOLDEN=1 rewrites the file; review its diff."""
    maps = merged_maps(with_pillar(example(ROLES)))
    # Derived from this machine's interfaces when the pillar leaves them null.
    for key in ("public_interface", "private_interface"):
        assert maps["bastion"][key]
        maps["bastion"][key] = f"<{key} from grains>"
    text = yaml.safe_dump(maps, sort_keys=True, default_flow_style=False)
    if os.environ.get("KOS_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_the_api_load_balancers_vip_is_the_clusters_endpoint_and_in_the_certificate(with_pillar):
    """With api_load_balancer = octavia, Terraform's kos:api names the VIP: kubeadm's
    controlPlaneEndpoint is the VIP and both the VIP and the floating IP are SANs."""
    api = {"load_balancer": "octavia", "vip": "10.1.0.9", "floating_ip": "203.0.113.20",
           "admin_ip": None}
    modules = with_pillar(example(ROLES, kos__api=api))
    assert modules.kos.pillar_errors() == []
    maps = merged_maps(modules)
    assert maps["kubeadm"]["control_plane_endpoint"] == "10.1.0.9:6443"
    assert maps["kubeadm"]["all_sans"] == ["10.1.0.9", "203.0.113.20"]
    assert maps["microk8s"]["all_sans"] == ["10.1.0.9", "203.0.113.20"]
    # without one, every node's local haproxy
    modules = with_pillar(example(ROLES))
    assert merged_maps(modules)["kubeadm"]["control_plane_endpoint"] == "127.0.0.1:7443"


def test_an_unknown_api_load_balancer_is_named(with_pillar):
    modules = with_pillar(example(ROLES, kos__api__load_balancer="haproxy"))
    assert any("kos:api:load_balancer" in error for error in modules.kos.pillar_errors())
