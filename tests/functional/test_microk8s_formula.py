"""
The microk8s formula (its SLS files, rendered from pillar the way a minion renders them)
and the microk8s states against the stand-ins: a test run on a node without the snap,
the cluster's networks in the launch configuration, certificate SANs that really reach
server.crt, and a clean that leaves nothing behind.

Each simulated node has its own stand-in root and loopback address; the cluster agents
started here are stopped by pidfile when the module ends.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from saltfactories.utils.functional import Loaders

from tests.functional.test_microk8s_functional import STANDINS, Node, _free_prefix

sys.path.insert(0, str(STANDINS / "lib"))
from microk8s_standin.agent import kill_all_agents  # noqa: E402  pylint: disable=wrong-import-position

REPO = Path(__file__).resolve().parents[2]
DOMAIN = "kos-mf.test"
MINION_ID = f"k8s-cp-1.{DOMAIN}"
POD_CIDR, SERVICE_CIDR = "10.20.0.0/16", "10.30.0.0/24"
# An operator's own line in the template that openssl refuses: refresh-certs exits 20.
BROKEN = "IP.50 = not-an-ip\n"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    base = tmp_path_factory.mktemp("microk8s-formula")
    prefix = _free_prefix()
    made = {name: Node(base, name, prefix + str(i + 1))
            for i, name in enumerate(["fresh", "solo"])}
    for node in made.values():
        (node.root / "etc" / "hosts").write_text(f"{node.ip} {node.name}\n")
    yield made
    for node in made.values():
        kill_all_agents(str(node.root))


def pillar_for(node):
    return {
        "kos": {
            "distribution": "microk8s",
            "cluster_name": "kos-mf",
            "domain": DOMAIN,
            "networks": {"private_cidr": "127.0.0.0/8", "pod_cidr": POD_CIDR,
                         "service_cidr": SERVICE_CIDR},
            "salt_master": {"id": f"salt.{DOMAIN}"},
            "nodes": {MINION_ID: {"role": "control_plane", "ip": node.ip},
                      f"fresh.{DOMAIN}": {"role": "control_plane", "ip": node.ip}},
            "first_control_plane": MINION_ID,
            "api": {"floating_ip": "203.0.113.10"},
            "roles": ["control_plane", "kubernetes_node", "first_control_plane"],
            "state_dir": str(node.root / "etc" / "kos"),
        },
        "microk8s": {
            "snap_data": node.snap_data,
            "ready_timeout": 30,
            # what the stand-in enables quickly; observability pulls in three more
            "addons": {"dns": True, "hostpath-storage": False, "helm3": True,
                       "ha-cluster": True, "observability": False, "registry": False},
        },
    }


@pytest.fixture(scope="module")
def environ():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def loaders_for(salt_factories, tmp_path_factory, environ, release_root):
    """Loaders of a minion whose pillar and PATH are those of ``node``."""
    made = {}

    def make(node):
        if node.name not in made:
            pillar_dir = tmp_path_factory.mktemp(f"pillar-{node.name}")
            (pillar_dir / "top.sls").write_text("base:\n  '*':\n    - node\n")
            (pillar_dir / "node.sls").write_text(yaml.safe_dump(pillar_for(node)))
            factory = salt_factories.salt_minion_daemon(
                MINION_ID if node.name == "solo" else f"{node.name}.{DOMAIN}",
                overrides={
                    "file_client": "local",
                    "file_roots": {"base": [str(REPO / "salt" / "salt"), str(release_root)]},
                    "pillar_roots": {"base": [str(pillar_dir)]},
                },
            )
            made[node.name] = factory.config.copy()
        environ.setenv("PATH", f"{STANDINS / 'bin'}:{node.root / 'snap' / 'bin'}:/usr/bin:/bin")
        environ.setenv("KOS_STANDIN_ROOT", str(node.root))
        environ.setenv("KOS_STANDIN_IP", node.ip)
        return Loaders(made[node.name])

    return make


def files_under(root):
    return {str(p.relative_to(root)) for p in Path(root).rglob("*") if not p.is_dir()}


def test_a_test_run_on_a_node_without_the_snap_predicts_and_changes_nothing(nodes, loaders_for):
    """Before: "State 'microk8s.running' was not found" and every dependent state failed."""
    node = nodes["fresh"]
    salt = loaders_for(node)
    assert "microk8s.status" not in salt.modules
    before = files_under(node.root)
    ret = salt.modules.state.sls("microk8s.joined", test=True)
    results = ret.raw
    assert isinstance(results, dict), results
    failed = {k: v["comment"] for k, v in results.items() if v["result"] is False}
    assert not failed, failed
    by_id = {v["__id__"]: v for v in results.values()}
    for state_id in ("microk8s-init-file-managed-launch_config", "microk8s-init-snap-installed",
                     "microk8s-init-microk8s-running", "microk8s-sans-microk8s_certs-extra_sans",
                     "microk8s-joined-microk8s-cluster_joined"):
        assert by_id[state_id]["result"] is None, (state_id, by_id[state_id])
    assert by_id["microk8s-init-snap-installed"]["changes"] == {
        "channel": {"old": None, "new": "1.31/stable"}}
    joined = by_id["microk8s-joined-microk8s-cluster_joined"]
    assert joined["comment"].startswith(f"would join the cluster of {MINION_ID}")
    assert joined["changes"]["cluster"]["new"] == f"joined {MINION_ID} as control_plane"
    assert files_under(node.root) == before


def test_the_launch_configuration_carries_the_cluster_networks(nodes, loaders_for):
    node = nodes["solo"]
    chunks = loaders_for(node).modules.state.show_low_sls("microk8s.init")
    assert isinstance(chunks, list), chunks
    ids = {c["__id__"]: c for c in chunks}
    launch = ids["microk8s-init-file-managed-launch_config"]
    assert launch["name"] == str(node.root / "var/snap/microk8s/common/.microk8s.yaml")
    config = yaml.safe_load(launch["contents"])
    assert config == {
        "version": "0.1.0",
        "extraCNIEnv": {"IPv4_SUPPORT": True, "IPv4_CLUSTER_CIDR": POD_CIDR,
                        "IPv4_SERVICE_CIDR": SERVICE_CIDR},
        "extraSANs": ["10.30.0.1"],
    }
    # in place before the snap is installed: microk8s reads it at installation only
    assert {"file": "microk8s-init-file-managed-launch_config"} in \
        ids["microk8s-init-snap-installed"]["require"]


def sans_of(node):
    return subprocess.run(
        ["openssl", "x509", "-in", f"{node.snap_data}/certs/server.crt", "-noout", "-ext",
         "subjectAltName"], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def master(nodes, loaders_for):
    """microk8s.master applied on the solo node: what its clean has to undo."""
    node = nodes["solo"]
    before = files_under(node.root)
    salt = loaders_for(node)
    ret = salt.modules.state.sls("microk8s.master")
    failed = {k: v["comment"] for k, v in ret.raw.items() if v["result"] is not True}
    assert not failed, failed
    return {"before": before}


def test_hex_only_names_are_dns_sans(master, nodes, loaders_for):
    """`cafe` was taken for an IP: openssl refused `IP.100 = cafe` (refresh-certs exit 20)."""
    node = nodes["solo"]
    salt = loaders_for(node)
    ret = salt.states.microk8s_certs.extra_sans("csr", sans=["203.0.113.10", "cafe", "deadbeef"],
                                          snap_data=node.snap_data)
    assert ret.result is True, ret
    text = sans_of(node)
    assert "DNS:cafe" in text and "DNS:deadbeef" in text and "IP Address:203.0.113.10" in text


def test_a_failed_refresh_fails_until_the_certificate_has_the_san(master, nodes, loaders_for):
    node = nodes["solo"]
    salt = loaders_for(node)
    template = Path(node.snap_data) / "certs" / "csr.conf.template"
    original = template.read_text()
    template.write_text(original.replace("#MOREIPS", BROKEN + "#MOREIPS"))
    try:
        first = salt.states.microk8s_certs.extra_sans("csr", sans=["203.0.113.20"],
                                                snap_data=node.snap_data)
        # nothing fixed: the certificate still lacks the SAN, so this run fails again
        second = salt.states.microk8s_certs.extra_sans("csr", sans=["203.0.113.20"],
                                                 snap_data=node.snap_data)
    finally:
        template.write_text(template.read_text().replace(BROKEN, ""))
    assert first.result is False and first.changes == {}, first
    assert "not-an-ip" in first.comment  # openssl's complaint, through refresh-certs
    assert second.result is False, second
    assert "203.0.113.20" not in sans_of(node)
    fixed = salt.states.microk8s_certs.extra_sans("csr", sans=["203.0.113.20"],
                                            snap_data=node.snap_data)
    assert fixed.result is True and fixed.changes, fixed
    assert "IP Address:203.0.113.20" in sans_of(node)
    assert salt.states.microk8s_certs.extra_sans("csr", sans=["203.0.113.20"],
                                           snap_data=node.snap_data).changes == {}


def test_a_credential_is_issued_for_the_named_node_only_with_its_terraform_role(
        master, nodes, loaders_for):
    node = nodes["solo"]
    salt = loaders_for(node)
    fresh = f"fresh.{DOMAIN}"
    ret = salt.modules.state.sls("microk8s.credentials",
                                 pillar={"kos_orchestration": {"join_nodes": [fresh]}})
    failed = {k: v["comment"] for k, v in ret.raw.items() if v["result"] is not True}
    assert not failed, failed
    doc = json.loads((node.root / "etc/kos/join" / f"{fresh}.json").read_text())
    assert (doc["node"], doc["role"]) == (fresh, "control_plane")
    assert list((node.root / "etc/kos/join").iterdir()) == [
        node.root / "etc/kos/join" / f"{fresh}.json"]
    # a node Terraform does not list, or the issuing node itself: nothing issued
    bad = salt.modules.state.sls("microk8s.credentials", pillar={"kos_orchestration": {
        "join_nodes": ["stranger.example.com", MINION_ID]}})
    failing = [v for v in bad.raw.values() if v["result"] is False]
    assert len(failing) == 1 and "stranger.example.com, " + MINION_ID in failing[0]["name"]
    assert len(list((node.root / "etc/kos/join").iterdir())) == 1


def test_clean_leaves_no_file_behind(master, nodes, loaders_for):
    node = nodes["solo"]
    salt = loaders_for(node)
    assert list((node.root / "etc/kos/join").iterdir())
    assert (node.root / "var/snap/microk8s/common/.microk8s.yaml").exists()
    ret = salt.modules.state.sls("microk8s.clean")
    failed = {k: v["comment"] for k, v in ret.raw.items() if v["result"] is not True}
    assert not failed, failed
    assert files_under(node.root) == master["before"], sorted(
        files_under(node.root) ^ master["before"])
    again = loaders_for(node).modules.state.sls("microk8s.clean")
    assert all(not v["changes"] for v in again.raw.values()), again.raw
    assert not os.path.exists(node.root / "snap" / "bin" / "microk8s")
