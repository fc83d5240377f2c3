"""
`kos preflight` against the OpenStack API double (fakecloud.py): what an operator sees for a
good project and for each way the inputs or the project can be wrong. Bad input always
ends in one error naming the variable or check and its fix, with nothing written to the
cloud and nothing left in the working directory.

The same checks run against the real OpenStack of the rehearsal cloud in
tests/e2e/test_local_cloud.py (an unknown image and flavor, the project's real quotas, a
rejected application credential). The double stays here for what the real cloud cannot
serve in this fast suite: a cloud in seconds instead of minutes and 4 GiB; every request
logged, so "nothing was written" and "no request before validation" are asserted per call;
quotas, usage and Keystone failures (an openrc, a wrong password) set at will per test.
"""

import json

import pytest

from tests.bootstrap.conftest import Kos, base_env, required_vars
from tests.bootstrap.fakecloud import flavor

pytestmark = pytest.mark.terraform


def files_under(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_good_project_passes_every_check_and_writes_nothing(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    vars_file = write_vars(required_vars(ssh_agent.public_key))
    res = cloud_kos("preflight", "--var-file", vars_file, "--json", check=0)
    checks = {c["check"]: c for c in json.loads(res.stdout)}
    assert all(c["ok"] for c in checks.values()), checks
    for name in (
        "credentials",
        "image",
        "kube_node_flavor",
        "salt_master_flavor",
        "bastion_flavor",
        "external network",
        "quota instances",
        "quota cores",
        "quota ram",
        "quota volumes",
        "quota gigabytes",
        "quota ports",
        "quota floating_ips",
        "quota server_groups",
        "quota server_group_members",
        "ssh-agent",
    ):
        assert name in checks
    # 3 nodes of m1.large (4 vCPU) + m1.medium (2) + m1.small (1)
    assert checks["quota cores"]["message"] == "cores: need 15, 38 free"
    assert checks["quota floating_ips"]["message"] == "floating_ips: need 2, 9 free"
    assert fake_cloud.writes() == []
    assert files_under(cloud_kos.cwd) == ["cluster.tfvars.json"]


def test_application_credentials_from_clouds_yaml(cloud_kos, fake_cloud, write_vars, ssh_agent):
    clouds = fake_cloud.clouds_yaml(cloud_kos.cwd.parent, auth="application_credential", name="ci")
    vars_file = write_vars(required_vars(ssh_agent.public_key))
    cloud_kos(
        "preflight",
        "--var-file",
        vars_file,
        env={"OS_CLIENT_CONFIG_FILE": str(clouds), "OS_CLOUD": "ci"},
        check=0,
    )
    auth = [r[3]["auth"]["identity"] for r in fake_cloud.requests if r[1].endswith("/auth/tokens")]
    assert auth and all(a["methods"] == ["application_credential"] for a in auth)


def test_os_variables_from_an_openrc(workdir, fake_cloud, write_vars, ssh_agent):
    env = base_env(
        SSH_AUTH_SOCK=ssh_agent.sock,
        XDG_CONFIG_HOME=workdir / "xdg",
        OS_AUTH_URL=f"{fake_cloud.url}/identity/v3",
        OS_USERNAME="kos-operator",
        OS_PASSWORD=fake_cloud.password,
        OS_PROJECT_NAME="kos-project",
        OS_USER_DOMAIN_NAME="Default",
        OS_PROJECT_DOMAIN_NAME="Default",
        OS_REGION_NAME="RegionOne",
        OS_IDENTITY_API_VERSION="3",
        OS_CLIENT_CONFIG_FILE=workdir / "none.yaml",
    )
    vars_file = write_vars(required_vars(ssh_agent.public_key))
    Kos(workdir, env)("preflight", "--var-file", vars_file, check=0)


def test_missing_credentials_say_how_to_provide_them(workdir, fake_cloud, write_vars, ssh_agent):
    env = base_env(
        SSH_AUTH_SOCK=ssh_agent.sock,
        XDG_CONFIG_HOME=workdir / "xdg",
        OS_CLIENT_CONFIG_FILE=workdir / "none.yaml",
    )
    vars_file = write_vars(required_vars(ssh_agent.public_key))
    res = Kos(workdir, env)("preflight", "--var-file", vars_file, check=4)
    assert "no OpenStack credentials found" in res.stderr
    assert "export OS_CLOUD=<cloud>" in res.stderr
    assert fake_cloud.requests == []


def test_wrong_password_is_an_authentication_error(cloud_kos, fake_cloud, write_vars, ssh_agent):
    fake_cloud.password = "rotated"
    res = cloud_kos(
        "preflight", "--var-file", write_vars(required_vars(ssh_agent.public_key)), check=4
    )
    assert "OpenStack authentication failed" in res.stderr
    assert "(HTTP 401)" in res.stderr
    assert fake_cloud.writes() == []


def test_unknown_flavor_names_the_variable_and_the_choices(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    vars_file = write_vars(required_vars(ssh_agent.public_key, kube_node_flavor="m1.huge"))
    res = cloud_kos("preflight", "--var-file", vars_file, check=4)
    assert "kube_node_flavor 'm1.huge' is not a flavor of this cloud" in res.stderr
    assert "set kube_node_flavor to one of: m1.large, m1.medium, m1.small" in res.stderr
    assert "quotas not checked: a flavor is unknown" in res.stderr
    assert fake_cloud.writes() == []
    assert files_under(cloud_kos.cwd) == ["cluster.tfvars.json"]


def test_missing_image_and_internal_network(cloud_kos, fake_cloud, write_vars, ssh_agent):
    vars_file = write_vars(
        required_vars(
            ssh_agent.public_key, base_image="debian-13", external_network_name="shared-admin"
        )
    )
    res = cloud_kos("preflight", "--var-file", vars_file, check=4)
    assert "base_image 'debian-13' is not an active image" in res.stderr
    assert "set base_image to one of: cirros, ubuntu-24.04" in res.stderr
    assert "network 'shared-admin' exists but is not external" in res.stderr
    assert "set external_network_name to one of: public" in res.stderr
    assert "preflight: 2 problem(s); nothing was created" in res.stderr


def test_quotas_too_small_for_the_plan(cloud_kos, fake_cloud, write_vars, ssh_agent):
    fake_cloud.state["compute_limits"].update(maxTotalCores=16, totalCoresUsed=4,
                                              maxServerGroupMembers=3)
    fake_cloud.state["network_quota"]["port"] = {"limit": 20, "used": 15, "reserved": 1}
    fake_cloud.state["flavors"].append(flavor("m1.xlarge", 8, 16384))
    vars_file = write_vars(required_vars(ssh_agent.public_key, num_kube_nodes=5))
    res = cloud_kos("preflight", "--var-file", vars_file, check=4)
    # 5 x 4 + 2 + 1 cores against 16 - 4; 2 + 1 + 5 + 1 + 1 + 2 ports against 20 - 15 - 1
    assert "quota cores: this plan needs 23 but only 12 is free" in res.stderr
    assert "quota ports: this plan needs 12 but only 4 is free" in res.stderr
    assert "ask for a larger cores quota" in res.stderr
    assert "instances: need 7, 9 free" in res.stderr
    # the workers' server group (soft anti-affinity by default) holds all four
    assert "quota server_group_members: this plan needs 4 but only 3 allowed per group" \
        in res.stderr
    assert "server_groups: need 2, 10 free" in res.stderr


def test_agent_without_a_deployable_key(cloud_kos, write_vars):
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHvxk0Xtgc0Bj2cTqdaLyM6XhYPMbUPu8Lk4kBMQmrHq someone@else"
    res = cloud_kos("preflight", "--var-file", write_vars(required_vars(other)), check=4)
    assert "none of the ssh-agent's keys is in ssh_public_keys" in res.stderr
    res = cloud_kos(
        "preflight",
        "--var-file",
        write_vars(required_vars(other)),
        env={"SSH_AUTH_SOCK": ""},
        check=4,
    )
    assert "no ssh-agent: SSH_AUTH_SOCK is not set" in res.stderr


def test_bad_input_is_rejected_before_any_request(cloud_kos, fake_cloud, write_vars, ssh_agent):
    vars_file = write_vars(
        required_vars(
            ssh_agent.public_key,
            private_cidr="10.1.0.0/33",
            users=[{"nam": "alice"}],
            ssh_public_keys=["-----BEGIN OPENSSH PRIVATE KEY-----"],
            kube_node_flavour="m1.large",
            num_control_plane=2,
        )
    )
    res = cloud_kos("preflight", "--var-file", vars_file, check=3)
    # One error listing every bad variable with what to do about it.
    assert res.stderr.count("error:") == 1
    assert "invalid deployment inputs: nothing was created or changed" in res.stderr
    assert (
        f"private_cidr (from {vars_file}): private_cidr must be an IPv4 network address"
        in res.stderr
    )
    assert f'users (from {vars_file}): element 0: attribute "name" is required' in res.stderr
    assert "private keys are never accepted" in res.stderr
    assert "kube_node_flavour (from" in res.stderr and "check the spelling" in res.stderr
    assert "num_control_plane must be odd" in res.stderr
    assert fake_cloud.requests == []
    assert files_under(cloud_kos.cwd) == ["cluster.tfvars.json"]


def test_required_variable_missing(cloud_kos, fake_cloud, write_vars, ssh_agent):
    values = required_vars(ssh_agent.public_key)
    del values["external_network_name"]
    res = cloud_kos("preflight", "--var-file", write_vars(values), check=3)
    assert "external_network_name: required and not set" in res.stderr
    assert "TF_VAR_external_network_name" in res.stderr


def local_preflight(workdir, write_vars, env=(), args=(), **values):
    """`kos preflight --cloud local` of a cloud that is not up: the checks it makes before
    there is an API to ask (tools, networks, memory), all read from this machine."""
    vars_file = write_vars(required_vars(
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHvxk0Xtgc0Bj2cTqdaLyM6XhYPMbUPu8Lk4kBMQmrHq a@b",
        cluster_name="kos-preflight", **values))
    kos = Kos(workdir, base_env(XDG_CONFIG_HOME=workdir / "xdg", **dict(env)))
    return kos("preflight", "--cloud", "local", "--var-file", vars_file, *args, timeout=120)


def test_local_cloud_says_once_that_the_operators_cloud_is_ignored(workdir, write_vars):
    res = local_preflight(workdir, write_vars, env={"OS_CLOUD": "prod"},
                          args=("--os-cloud", "staging"))
    warning = ("--os-cloud=staging and OS_CLOUD=prod ignored with --cloud local: the rehearsal "
               "cloud uses its own clouds.yaml entry, kos-local-kos-preflight")
    assert res.stderr.count("ignored with --cloud local") == 1, res.stderr
    assert warning in res.stderr
    # Its own entry's name (to use the openstack CLI against it) is what it uses anyway.
    res = local_preflight(workdir, write_vars, env={"OS_CLOUD": "kos-local-kos-preflight"})
    assert "ignored with --cloud local" not in res.stderr
    assert files_under(workdir) == ["cluster.tfvars.json"]


@pytest.mark.parametrize("values, message", [
    # 2 plain hosts and 3 simulated nodes at 160 MiB
    ({"kubernetes_distribution": "microk8s", "num_kube_nodes": 3},
     "5 microk8s hosts need about 800 MiB"),
    # 2 plain hosts, 3 kubeadm control planes at 1024 MiB, a worker at 300 MiB
    ({"kubernetes_distribution": "kubeadm", "num_kube_nodes": 4, "num_control_plane": 3},
     "6 kubeadm hosts need about 4047 MiB"),
    # the same nodes written as a map by name
    ({"kubernetes_distribution": "kubeadm", "kubernetes_nodes": {
        "k8s-cp-1": {"role": "control_plane"}, "k8s-cp-2": {"role": "control_plane"},
        "k8s-cp-3": {"role": "control_plane"}, "k8s-worker-1": {"role": "worker"}}},
     "6 kubeadm hosts need about 4047 MiB"),
    # the same behind the API load balancer: its amphora, 250 MiB more
    ({"kubernetes_distribution": "kubeadm", "num_kube_nodes": 4, "num_control_plane": 3,
      "api_load_balancer": "octavia"},
     "6 kubeadm hosts need about 4297 MiB"),
])
def test_local_memory_estimate_follows_the_clusters_shape(workdir, write_vars, values, message):
    res = local_preflight(workdir, write_vars, **values)
    assert message in res.stderr, res.stderr
    # The cloud's share is counted only while it is not up; the suite's own clusters may
    # have started it by now, so either is right here (memory_finding's test pins both).
    assert "(the cloud 4400 MiB more)" in res.stderr or "(the cloud is up)" in res.stderr


@pytest.mark.parametrize("running, avail, ok, text", [
    (False, 8500, True, "6 kubeadm hosts need about 4047 MiB (the cloud 4400 MiB more); "
                        "8500 MiB available"),
    (False, 7000, False, "(the cloud 4400 MiB more); 7000 MiB available"),
    (True, 7000, True, "6 kubeadm hosts need about 4047 MiB (the cloud is up); 7000 MiB"),
    (True, 3000, False, "(the cloud is up); 3000 MiB available"),
])
def test_a_running_clouds_memory_is_not_counted_again(running, avail, ok, text):
    from kos_local import memory_finding

    values = {"kubernetes_distribution": "kubeadm"}
    nodes = {name: {"role": role} for name, role in (
        ("k8s-cp-1", "control_plane"), ("k8s-cp-2", "control_plane"),
        ("k8s-cp-3", "control_plane"), ("k8s-worker-1", "worker"))}
    found = memory_finding(values, nodes, running, avail)
    assert (found.ok, found.check) == (ok, "local memory")
    assert text in found.message, found.message


def test_a_cloud_no_clouds_yaml_defines_is_named_with_the_files_looked_in(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    clouds = cloud_kos.env["OS_CLIENT_CONFIG_FILE"]
    vars_file = write_vars(required_vars(ssh_agent.public_key))
    res = cloud_kos("preflight", "--var-file", vars_file, env={"OS_CLOUD": "prod"}, check=4)
    assert "OS_CLOUD=prod: no clouds.yaml defines the cloud 'prod' (looked in, in order: " \
        f"{clouds}, {cloud_kos.cwd}/clouds.{{yaml,yml,json}}, " \
        f"{cloud_kos.env['XDG_CONFIG_HOME']}/openstack/clouds.{{yaml,yml,json}}" in res.stderr
    assert "/etc/openstack/clouds.{yaml,yml,json}" in res.stderr
    assert f"{clouds} was read and defines kos-test)" in res.stderr
    assert f"add an entry 'prod' under clouds: in {clouds}" in res.stderr
    assert fake_cloud.requests == []

    # `kos up` stops at the same error before Terraform runs, and leaves nothing behind.
    res = cloud_kos("up", "--var-file", vars_file, "--yes", env={"OS_CLOUD": "prod"}, check=4)
    assert "no clouds.yaml defines the cloud 'prod'" in res.stderr
    assert "terraform init" not in res.stderr
    assert fake_cloud.requests == []
    assert files_under(cloud_kos.cwd) == ["cluster.tfvars.json"]


def test_an_unreadable_clouds_yaml_is_named_with_its_yaml_error(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    broken = cloud_kos.cwd.parent / "broken-clouds.yaml"
    broken.write_text("clouds:\n  kos-test:\n    auth: {auth_url: [\n")
    vars_file = write_vars(required_vars(ssh_agent.public_key))
    res = cloud_kos("preflight", "--var-file", vars_file, "--os-cloud", "kos-test",
                    env={"OS_CLIENT_CONFIG_FILE": str(broken)}, check=4)
    assert "--os-cloud kos-test: no clouds.yaml defines the cloud 'kos-test'" in res.stderr
    assert f"skipped: {broken} (unreadable: while parsing a flow" in res.stderr
    assert "line 4, column 1" in res.stderr
    assert "make the unreadable file valid and readable YAML" in res.stderr
    assert fake_cloud.requests == []


def test_octavia_needs_a_load_balancer_service_in_the_catalog(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    vars_file = write_vars(required_vars(ssh_agent.public_key, api_load_balancer="octavia"))
    res = cloud_kos("preflight", "--var-file", vars_file, "--json", check=0)
    checks = {c["check"]: c for c in json.loads(res.stdout)}
    assert checks["api load balancer"]["ok"]
    # its floating IP and VIP port are the project's: one more of each than without it
    assert checks["quota floating_ips"]["message"] == "floating_ips: need 3, 9 free"

    fake_cloud.state["without_services"] = ["load-balancer"]
    res = cloud_kos("preflight", "--var-file", vars_file, check=4)
    assert ('api_load_balancer is "octavia" but this cloud\'s catalog has no load-balancer '
            "service (Octavia)") in res.stderr
    assert 'set api_load_balancer = "none"' in res.stderr
    assert fake_cloud.writes() == []


def test_the_api_load_balancers_provider_must_be_one_octavia_offers(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    fake_cloud.state["lb_providers"] = ["amphora", "ovn"]
    vars_file = write_vars(required_vars(ssh_agent.public_key, api_load_balancer="octavia",
                                         api_load_balancer_provider="ovn"))
    cloud_kos("preflight", "--var-file", vars_file, check=0)
    fake_cloud.state["lb_providers"] = ["amphora"]
    res = cloud_kos("preflight", "--var-file", vars_file, check=4)
    said = " ".join(res.stderr.split())
    assert "api_load_balancer_provider 'ovn' is not a provider of this cloud's Octavia" in said
    assert "set api_load_balancer_provider to one of: amphora, or null" in said
