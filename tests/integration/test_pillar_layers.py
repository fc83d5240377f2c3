"""The layered pillar on a real master: derived roles, overrides, skipped layers."""


from tests.integration.conftest import DOMAIN_SLS


def pillar_of(salt_cli, minion):
    ret = salt_cli.run("pillar.items", "unmask=True", minion_tgt=minion)
    assert ret.returncode == 0, ret
    return ret.data


def test_roles_are_derived_from_the_terraform_layer(salt_cli, minions, deployment):
    cp = pillar_of(salt_cli, deployment.fqdn("k8s-cp-1"))
    worker = pillar_of(salt_cli, deployment.fqdn("k8s-worker-1"))
    master = pillar_of(salt_cli, deployment.fqdn("salt"))
    assert set(cp["kos"]["roles"]) == {"control_plane", "kubernetes_node", "first_control_plane"}
    assert set(worker["kos"]["roles"]) == {"worker", "kubernetes_node"}
    assert master["kos"]["roles"] == ["salt_master"]
    # Every Kubernetes node says where it stands in its cluster: the first control plane
    # whether the cluster is up (for the reactor), the others whether they joined (for the
    # reactor, and the first control plane's init guard). No node publishes a join
    # credential through pillar-defined mine functions: the orchestration issues one per
    # joining node.
    assert set(cp["mine_functions"]) == {"kos_private_ips", "kos_kubernetes"}
    assert set(worker["mine_functions"]) == {"kos_private_ips", "kos_kubernetes"}
    assert set(master["mine_functions"]) == {"kos_private_ips"}


def test_later_layer_wins_and_missing_layers_are_skipped(salt_cli, minions, deployment):
    worker = deployment.fqdn("k8s-worker-2")
    deployment.write("minions/defaults/k8s-worker-2.sls", {"core": {"motd": "hostname layer\n", "issue": "hostname layer\n"}})
    host_layer = f"minions/{DOMAIN_SLS}/k8s-worker-2.sls"
    original = (deployment.pillar_dir / host_layer).read_text()
    deployment.write(host_layer, original + "\n" + 'core_override_marker: true\n')
    try:
        # environment layer (this file) overrides environments/defaults.sls
        deployment.write(
            f"environments/{DOMAIN_SLS}.sls",
            (deployment.pillar_dir / f"environments/{DOMAIN_SLS}.sls").read_text(),
        )
        assert salt_cli.run("saltutil.refresh_pillar", "wait=True", minion_tgt=worker).returncode == 0
        data = pillar_of(salt_cli, worker)
        assert "_errors" not in data
        assert data["core"]["motd"] == "hostname layer\n"
        assert data["core_override_marker"] is True
        # the Terraform layer's distribution survives environments/defaults.sls
        assert data["kos"]["distribution"] == "microk8s"
        # the environment layer switched every core part but hosts off
        assert data["core"]["manage"]["hosts"] is True and data["core"]["manage"]["sshd"] is False
        # k8s-cp-1 has no minions/defaults/k8s-cp-1.sls: skipped, no pillar error
        cp = pillar_of(salt_cli, deployment.fqdn("k8s-cp-1"))
        assert "_errors" not in cp
        assert "motd" not in cp.get("core", {})
    finally:
        deployment.remove("minions/defaults/k8s-worker-2.sls")
        deployment.write(host_layer, original)
        salt_cli.run("saltutil.refresh_pillar", "wait=True", minion_tgt=worker)
