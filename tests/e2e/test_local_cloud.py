"""
``kos up --cloud local`` with 1 control plane + 2 workers (microk8s, the stand-ins) and
with 3 control planes + 1 worker (kubeadm, real Kubernetes), through a real OpenStack: every server ACTIVE and booted by
cloud-init with its port's DHCP address, every node joined, Neutron's security groups and
floating-IP NAT doing what the Terraform says, the salt master rebuilt on its volume
keeping its minions, a second orchestration changing nothing (``kos down`` leaving
nothing in the cloud nor on this machine: test_teardown.py).
"""

import ipaddress
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kos_local import net as local_net
from kos_local.openstack import config as local_config
from kos_local.openstack import materialiser as local_materialiser
from tests.bootstrap.conftest import Kos
from tests.e2e.conftest import (Listener, cloud, connects, node_map, once, operator_kubectl,
                                tcp_peer_seen_by_listener)

pytestmark = pytest.mark.netns


def test_up_converges_every_node(cluster):
    assert cluster.up.returncode == 0, cluster.failed_up()
    # microk8s (a snap) is the stand-ins here; kubeadm is real Kubernetes
    simulated = cluster.values["kubernetes_distribution"] == "microk8s"
    assert ("simulated" in cluster.up.stderr) is simulated
    # data on stdout and nothing else (progress goes to stderr)
    assert json.loads(cluster.up.stdout)["bastion"] == cluster.outputs()["bastion_floating_ip"]
    status = cluster.kos("status", *cluster.args, "--json", timeout=300)
    assert status.returncode == 0, status.stderr[-2000:]
    doc = json.loads(status.stdout)
    assert doc["healthy"] is True
    assert doc["simulated"] is simulated
    assert doc["distribution"] == cluster.values["kubernetes_distribution"]
    nodes = {n["hostname"]: n for n in doc["nodes"]}
    assert sorted(nodes) == sorted(cluster.hostnames())
    kube = {h: n["kubernetes"] for h, n in nodes.items() if "kubernetes" in n}
    assert len(kube) == len(cluster.values["kubernetes_nodes"])
    # every kubelet reports its version: one release across a fresh cluster
    versions = {h: k8s.pop("version") for h, k8s in kube.items()}
    assert len(set(versions.values())) == 1 and re.fullmatch(
        r"v1\.\d+\.\d+", next(iter(versions.values()))), versions
    for hostname, k8s in kube.items():
        want = "control-plane" if hostname.startswith("k8s-cp-") else "worker"
        assert k8s == {"member": True, "ready": True, "role": want}, hostname
        # every control plane's certificates, fresh: a year left on the leaves
        if want == "control-plane":
            assert nodes[hostname]["certificates"]["days_left"] in (364, 365), hostname
        else:
            assert "certificates" not in nodes[hostname], hostname
    for n in nodes.values():
        assert n["key"] == "accepted" and n["reachable"] and n["last_highstate"]["result"] == "ok"
    table = cluster.kos("status", *cluster.args, timeout=300)
    assert ("simulated on the local cloud" in table.stdout) is simulated
    assert next(iter(versions.values())) in table.stdout


def test_servers_are_active_and_booted_by_cloud_init_with_dhcp(cluster):
    conn = cluster.conn()
    servers = {s.name: s for s in conn.compute.servers()}
    assert sorted(servers) == sorted(f"{cluster.name}-{h}" for h in cluster.hostnames())
    for name, server in servers.items():
        assert server.status == "ACTIVE", name
        hostname = name[len(cluster.name) + 1:]
        host = cluster.host(hostname)
        # cloud-init ran to the end, from Nova's config drive (the instance is the server)
        assert host.path("/var/lib/cloud/data/instance-id").read_text().strip() == server.id
        assert host.path(f"/var/lib/cloud/instances/{server.id}/boot-finished").exists(), name
        console = conn.compute.get_server_console_output(server)["output"]
        assert f"kos: first boot done on {hostname}." in console, console[-2000:]
        # every port's fixed address was leased by Neutron's DHCP (a dynamic address)
        addrs = subprocess.run(["ip", "-n", cluster.netns(hostname), "-4", "-o", "addr"],
                               capture_output=True, text=True, check=True).stdout
        for port in conn.network.ports(device_id=server.id):
            ip = port.fixed_ips[0]["ip_address"]
            line = next((ln for ln in addrs.splitlines() if f" {ip}/" in ln), "")
            said = "\n".join(ln for ln in console.splitlines() if "kos:" in ln)
            assert "dynamic" in line, f"{name}: {ip} not leased by DHCP:\n{addrs}\n{said}"


def test_hosts_files_list_every_other_host(cluster):
    domain = "kos.internal"
    minions = cluster.outputs()["minions"]
    for hostname in cluster.hostnames():
        text = cluster.host(hostname).path("/etc/hosts").read_text()
        for other in minions.values():
            if other["hostname"] == hostname:
                continue
            line = f"{other['private_ip']} {other['hostname']}.{domain} {other['hostname']}"
            assert re.search(rf"^{re.escape(other['private_ip'])}\s.*\b{re.escape(other['hostname'])}\.{re.escape(domain)}\b",
                             text, re.M), f"{hostname}: /etc/hosts lacks {line}\n{text}"


def test_floating_ip_reaches_the_bastions_sshd_from_this_machine(cluster):
    out = cluster.outputs()
    fip = ipaddress.ip_address(out["bastion_floating_ip"])
    assert fip in local_net.SPACE  # a floating IP of the cloud's external network
    assert connects(None, str(fip), 22)


def test_any_node_is_reached_by_its_host_name_with_its_host_key_pinned(cluster):
    """The state directory's ssh_config names each server behind the bastion; its host key
    came from its console, and plain ssh checks it strictly (StrictHostKeyChecking yes)."""
    assert cluster.up.returncode == 0, cluster.failed_up()
    worker = next(m for m in cluster.outputs()["minions"].values() if m["role"] == "worker")
    res = subprocess.run(
        ["ssh", "-F", str(cluster.state / "ssh_config"), worker["hostname"], "hostname"],
        env={**os.environ, "SSH_AUTH_SOCK": cluster.kos.env["SSH_AUTH_SOCK"]},
        capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert worker["hostname"] in res.stdout


def test_a_host_sees_salts_runtime_and_nothing_else_of_this_machine(cluster):
    """Root on a worker finds the virtualenv Salt runs from, and none of the checkout, the
    state directory (the operator's keys, the other hosts' disks) or the cloud's disk."""
    assert cluster.up.returncode == 0, cluster.failed_up()
    worker = next(m for m in cluster.outputs()["minions"].values() if m["role"] == "worker")
    repo = Path(__file__).resolve().parents[2]
    local = cloud().root
    hidden = [repo / "README.md", repo / ".git", repo / "pillar", repo / "terraform",
              cluster.state / "ssh_config", local / "cloud", local / "hosts"]
    runtime = [Path(sys.prefix) / "bin" / "salt-minion"]
    probe = "for p; do if [ -e \"$p\" ]; then echo \"seen $p\"; fi; done"
    res = subprocess.run(
        ["ssh", "-F", str(cluster.state / "ssh_config"), worker["hostname"],
         shlex.join(["sudo", "sh", "-c", probe, "probe", *map(str, hidden + runtime)])],
        env={**os.environ, "SSH_AUTH_SOCK": cluster.kos.env["SSH_AUTH_SOCK"]},
        capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    seen = {line.removeprefix("seen ") for line in res.stdout.splitlines()}
    assert seen == {str(p) for p in runtime}, seen


def test_bastion_nat_lets_a_private_host_out(cluster):
    out = cluster.outputs()
    plan = local_net.existing_plan(cloud().name)
    worker = next(h for h in cluster.hostnames() if h.startswith("k8s-worker-"))
    # the worker has only a private address; this machine sees the bastion's floating IP
    # (the bastion's NAT, then the router's floating-IP SNAT)
    seen = tcp_peer_seen_by_listener(plan.gateway, cluster.netns(worker))
    assert seen == out["bastion_floating_ip"]


def test_security_groups_filter_between_hosts(cluster):
    out = cluster.outputs()
    first = out["kubernetes_nodes"][f"k8s-cp-1.{'kos.internal'}"]["private_ip"]
    worker = next(h for h in cluster.hostnames() if h.startswith("k8s-worker-"))
    cp1 = cluster.netns("k8s-cp-1")
    # NodePorts are open between nodes; 12345 is in no rule of the cluster's group
    with Listener(cp1, first, 30999), Listener(cp1, first, 12345):
        assert connects(cluster.netns(worker), first, 30999)
        assert not connects(cluster.netns(worker), first, 12345, timeout=2)
        # the salt master is not a node: its own group opens only Salt and SSH
        assert not connects(cluster.netns("salt"), first, 12345, timeout=2)


def test_etcd_is_open_between_control_planes_on_kubeadm(cluster):
    if cluster.values["kubernetes_distribution"] != "kubeadm":
        pytest.skip("etcd's ports are opened on kubeadm clusters only")
    out = cluster.outputs()
    first = out["kubernetes_nodes"]["k8s-cp-1.kos.internal"]["private_ip"]
    # the real etcd of k8s-cp-1 listens there (kubeadm is real Kubernetes here)
    assert connects(cluster.netns("k8s-cp-2"), first, 2379)
    # the salt master shares the private network but is no node: the nodes' own group
    # (the rules' remote group) does not let it in
    assert not connects(cluster.netns("salt"), first, 2379, timeout=2)


def test_only_the_bastion_leads_into_the_private_network(cluster):
    out = cluster.outputs()
    salt_ip = out["salt_master_private_ip"]
    # this machine's routes never lead into the private network through the cloud
    route = subprocess.run(["ip", "-o", "route", "get", salt_ip], capture_output=True, text=True)
    assert local_net.uplink(cloud().name) not in route.stdout
    assert local_net.mgmt_link(cloud().name) not in route.stdout


def test_salt_master_rebuilt_on_its_volume_keeps_its_minions(cluster):
    once(cluster, "a master is rebuilt the same way on either distribution")
    before = cluster.server("salt").id
    res = cluster.kos("up", *cluster.args, "--yes", "--replace", "salt", timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]
    after = cluster.server("salt").id
    assert after != before
    # no key needed accepting again: the new master found them on the volume
    assert "accepted key of" not in res.stderr
    status = json.loads(cluster.kos("status", *cluster.args, "--json", timeout=300).stdout)
    assert all(n["key"] == "accepted" and n["reachable"] for n in status["nodes"])


def test_second_orchestration_changes_nothing(cluster):
    """A converge of a converged cluster runs no highstate (its waves come from need), and
    what a highstate would change there is nothing (kos drift: state.highstate test=True
    on every node, and the master's trees against this checkout)."""
    res = cluster.kos("converge", *cluster.args, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    assert re.findall(r"✓ (\S+): highstate ", res.stderr) == [], res.stderr[-3000:]
    res = cluster.kos("drift", "--json", *cluster.args, timeout=1200)
    assert res.returncode == 0, (res.stdout[-3000:], res.stderr[-2000:])
    doc = json.loads(res.stdout)
    assert (doc["drift"], doc["states"], doc["keys"]) == (False, {}, []), doc


def test_kubeconfig_points_at_the_api_load_balancer_and_answers_through_it(cluster):
    """Both clusters have their API behind Octavia: an operator's kubeconfig names the load
    balancer's floating IP, the API's certificate carries it, and kos status sees every
    control plane healthy in the pool. microk8s's API here is the stand-in's public
    endpoints (/readyz, /version) on 16443, served with the certificate microk8s made."""
    res = cluster.kos("kubeconfig", *cluster.args, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    config = cluster.state / "kubeconfig"
    port = 16443 if cluster.values["kubernetes_distribution"] == "microk8s" else 6443
    fip = cluster.outputs()["api_floating_ip"]
    assert f"server: https://{fip}:{port}" in config.read_text()
    lb = cluster.conn().load_balancer.find_load_balancer(f"{cluster.name}-api")
    assert lb is not None and lb.provisioning_status == "ACTIVE"
    assert next(cluster.conn().network.ips(floating_ip_address=fip)).port_id == lb.vip_port_id

    kubectl = operator_kubectl(config, "--request-timeout=20s")
    ready = subprocess.run([*kubectl, "get", "--raw", "/readyz"], capture_output=True,
                           text=True, timeout=60)
    assert (ready.returncode, ready.stdout) == (0, "ok"), ready.stderr
    version = subprocess.run([*kubectl, "version", "-o", "json"], capture_output=True,
                             text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    assert re.fullmatch(r"v1\.\d+\.\d+", json.loads(version.stdout)["serverVersion"]["gitVersion"])

    status = cluster.kos("status", *cluster.args, "--json", timeout=300)
    api = json.loads(status.stdout)["api_endpoint"]
    cps = [h for h in cluster.hostnames() if h.startswith("k8s-cp-")]
    assert api["load_balancer"]["members"] == dict.fromkeys(cps, "ONLINE"), api

    # the VIP: the nodes' own way in, from the private network; the bastion, on the VIP's
    # subnet but outside the listener's allowed_cidrs, is refused
    readyz = ["curl", "-sk", "-m", "10", f"https://{lb.vip_address}:{port}/readyz"]
    worker = next(h for h in cluster.hostnames() if h.startswith("k8s-worker-"))
    answer = cluster.host(worker).run(*readyz, check=False)
    assert (answer.returncode, answer.stdout) == (0, "ok"), answer
    refused = cluster.host("bastion").run(*readyz, check=False)
    assert refused.returncode != 0 and "ok" not in refused.stdout, refused


def openstack_path(cluster, values, tmp_path, clouds_yaml=None):
    """``kos preflight`` on the plain OpenStack path, with the clouds.yaml entry kos wrote."""
    work = tmp_path / "operator"
    work.mkdir(exist_ok=True)
    (work / "bad.tfvars.json").write_text(json.dumps({**cluster.values, **values}))
    clouds = clouds_yaml or Path(cluster.kos.env["XDG_CONFIG_HOME"]) / "openstack" / "clouds.yaml"
    env = {"OS_CLOUD": f"kos-local-{cluster.name}", "OS_CLIENT_CONFIG_FILE": str(clouds)}
    res = Kos(work, {**cluster.kos.env, **env})("preflight", "--var-file", "bad.tfvars.json",
                                                timeout=300)
    assert sorted(p.name for p in work.iterdir()) == ["bad.tfvars.json"]  # nothing written
    return res


def inventory(conn):
    project = conn.current_project_id
    return (sorted(s.id for s in conn.compute.servers()),
            sorted(p.id for p in conn.network.ports(project_id=project)),
            sorted(v.id for v in conn.block_storage.volumes()),
            sorted(ip.id for ip in conn.network.ips(project_id=project)))


def test_preflight_reads_the_real_clouds_images_flavors_and_quotas(cluster, tmp_path):
    once(cluster, "the real API answers the same for both clusters")
    conn = cluster.conn()
    before = inventory(conn)
    res = openstack_path(cluster, {"kube_node_flavor": "m1.huge", "base_image": "debian-13"},
                         tmp_path)
    assert res.returncode == 4, res.stderr
    assert "set base_image to one of: debian-12-rehearsal" in res.stderr
    flavors = "m1.large, m1.medium, m1.small, m1.tiny, m1.xlarge"
    assert f"set kube_node_flavor to one of: {flavors}" in res.stderr
    # a node's own flavor is checked as well
    nodes = {**cluster.values["kubernetes_nodes"],
             "gpu-1": {"role": "worker", "address": 60, "flavor": "g1.huge"}}
    res = openstack_path(cluster, {"kubernetes_nodes": nodes}, tmp_path)
    assert res.returncode == 4, res.stderr
    assert "kubernetes_nodes: gpu-1's flavor 'g1.huge' is not a flavor of this cloud" in res.stderr
    assert f"set its flavor to one of: {flavors}" in res.stderr
    # 300 nodes + bastion + master against the project's real instance quota and usage
    limits = conn.compute.get_limits().absolute
    free = limits.instances - limits.instances_used
    res = openstack_path(cluster, {"kubernetes_nodes": node_map(1, 299),
                                   "private_cidr": "10.247.0.0/16"}, tmp_path)
    assert res.returncode == 4, res.stderr
    assert f"quota instances: this plan needs 302 but only {free} is free" in res.stderr
    # and the workers' server group against Nova's members per group
    assert ("quota server_group_members: this plan needs 299 but only "
            f"{limits.server_group_members} allowed per group") in res.stderr
    assert inventory(conn) == before


def test_each_role_is_a_server_group_nova_keeps(cluster):
    """The cluster's own server groups, as Nova holds them: every node in its role's group
    with the policy chosen, and under the default hard anti-affinity the control planes each
    on a compute host of its own (the kubeadm cluster's three on the cloud's three)."""
    groups = {g.name: g for g in cluster.conn().compute.server_groups()}
    servers = {s.id: (s.metadata or {}).get("kos_role") for s in cluster.conn().compute.servers()
               if (s.metadata or {}).get("kos_cluster") == cluster.name}
    policies = {"control_plane": "anti-affinity", "worker": "soft-anti-affinity",
                **cluster.values.get("server_group_policies", {})}
    for role, policy in policies.items():
        group = groups[f"{cluster.name}-{role.replace('_', '-')}"]
        assert (group.policy or group.policies[0]) == policy
        assert sorted(group.member_ids) == sorted(i for i, r in servers.items() if r == role)
    assert policies["control_plane"] == "anti-affinity"
    # the host as `openstack server show` gives it to the cloud's admin
    admin = cloud().admin()
    hosts = {i: admin.compute.get_server(i).compute_host
             for i, r in servers.items() if r == "control_plane"}
    assert len(set(hosts.values())) == len(hosts), hosts
    assert set(hosts.values()) <= set(local_config.COMPUTE_ZONES), hosts


def test_workers_boot_from_cinder_volumes_that_hold_what_they_write(cluster):
    """A node with a boot volume (the microk8s cluster's workers: boot_volumes.worker; the
    kubeadm cluster's k8s-worker-1, its own boot_volume) boots from a Cinder volume made
    from the image: Nova names no image of the server's own and the volume attached,
    bootable, of the size asked, made from the cluster's image; what the host writes to its
    root is in that volume's file system, read from Cinder's file."""
    per_role = cluster.values.get("boot_volumes") or {}
    sizes = {name: (node.get("boot_volume") or per_role.get(node["role"]) or {}).get("size")
             for name, node in cluster.values["kubernetes_nodes"].items()}
    sizes = {name: size for name, size in sizes.items() if size}
    workers = sorted(name for name in sizes if name.startswith("k8s-worker-"))
    assert workers, "each e2e cluster has a worker that boots from a volume"
    conn = cluster.conn()
    roots = {}
    for name in workers:
        size = sizes[name]
        server = conn.compute.get_server(cluster.server(name).id)
        assert not (server.image and server.image.id), (name, server.image)
        attached = [conn.block_storage.get_volume(v["id"]) for v in server.attached_volumes]
        root = [v for v in attached if v.is_bootable]
        assert len(root) == 1, (name, attached)
        assert root[0].size == size and root[0].status == "in-use", name
        assert root[0].volume_image_metadata["image_name"] == cluster.values["base_image"], name
        roots[name] = root[0]
    name = workers[0]
    marker = f"kos-boot-volume-{cluster.name}"
    host = cluster.host(name)
    host.run("sh", "-c", f"echo {marker} > /var/tmp/kos-marker && sync")
    # debugfs reads the file system as written in place: freezing it checkpoints ext4's
    # journal there first
    mount = host.dir / local_materialiser.BOOT_VOLUME_MOUNT
    subprocess.run(["fsfreeze", "--freeze", str(mount)], check=True, timeout=60)
    subprocess.run(["fsfreeze", "--unfreeze", str(mount)], check=True, timeout=60)
    backing = (cloud().machine.merged / local_config.VOLUME_DIR.lstrip("/")
               / f"volume-{roots[name].id}")
    res = subprocess.run(["debugfs", "-R", "cat /upper/var/tmp/kos-marker", str(backing)],
                         capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == marker, (res.stdout, res.stderr)


def test_a_host_reads_its_identity_from_the_metadata_service(cluster):
    """What the Cinder CSI's node plugin and cloud-init read at 169.254.169.254 (the
    private network has no router: Neutron's DHCP namespace answers, through its metadata
    agent, from Nova's metadata API): the server's own ID and zone."""
    once(cluster, "the cloud's metadata service is the same for both clusters")
    worker = next(h for h in cluster.hostnames() if h.startswith("k8s-worker-"))
    server = cluster.conn().compute.get_server(cluster.server(worker).id)
    res = cluster.host(worker).run(
        "curl", "-sf", "-m", "20", "http://169.254.169.254/openstack/latest/meta_data.json",
        timeout=60)
    doc = json.loads(res.stdout)
    assert doc["uuid"] == server.id
    assert doc["availability_zone"] == server.availability_zone
    minion = next(mid for mid, m in cluster.outputs()["minions"].items()
                  if m["hostname"] == worker)
    assert doc["meta"]["kos_minion_id"] == minion


def test_a_volume_attaches_to_a_running_host_grows_there_and_detaches(cluster):
    """What the Cinder CSI asks of the cloud while a node runs, with the deployment's own
    credential: a new volume attached to the running worker appears there under its
    serial; once Cinder extends it in use, the host's disk has the new size and its file
    system grows into it, keeping what it held; detached, it is gone from the host, and
    deleted."""
    once(cluster, "the cloud's volumes behave the same for both clusters")
    conn = cluster.conn()
    name = next(h for h in cluster.hostnames() if h.startswith("k8s-worker-"))
    server, host = cluster.server(name), cluster.host(name)
    volume = conn.block_storage.create_volume(size=1, name=f"kos-e2e-{cluster.name}-hot")
    link = f"/dev/disk/by-id/virtio-{volume.id[:20]}"
    mnt = "/mnt/kos-e2e-hot"

    def disk_bytes():
        return int(host.run("blockdev", "--getsize64", link).stdout)

    def wait_for(what, check, timeout=120):
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, what
            time.sleep(1)

    try:
        conn.block_storage.wait_for_status(volume, "available", wait=120)
        conn.compute.create_volume_attachment(server, volume_id=volume.id)
        conn.block_storage.wait_for_status(volume, "in-use", wait=120)
        assert disk_bytes() == 1 << 30
        host.run("sh", "-c", f"mkfs.ext4 -q {link} && mkdir -p {mnt} && mount {link} {mnt} "
                 f"&& echo kos > {mnt}/marker")
        before = int(host.run("df", "-B1", "--output=size", mnt).stdout.split()[-1])
        conn.block_storage.extend_volume(volume, 2)
        conn.block_storage.wait_for_status(volume, "in-use", wait=120)
        wait_for("the host's disk took the volume's new size", lambda: disk_bytes() == 2 << 30)
        # grown offline: ext4's online resize (EXT4_IOC_RESIZE_FS) needs CAP_SYS_RESOURCE,
        # which root on the machines this runs on lacks, here and in every host
        host.run("umount", mnt)
        host.run("e2fsck", "-fp", link)
        host.run("resize2fs", link)
        host.run("mount", link, mnt)
        after = int(host.run("df", "-B1", "--output=size", mnt).stdout.split()[-1])
        assert after > before + (1 << 29), (before, after)
        assert host.run("cat", f"{mnt}/marker").stdout.strip() == "kos"
        host.run("umount", mnt)
        conn.compute.delete_volume_attachment(server, volume.id)
        conn.block_storage.wait_for_status(volume, "available", wait=120)
        assert host.run("test", "-e", link, check=False).returncode != 0
    finally:
        host.run("umount", mnt, check=False)
        volume = conn.block_storage.get_volume(volume.id)
        if volume.status == "in-use":
            conn.compute.delete_volume_attachment(server, volume.id)
            conn.block_storage.wait_for_status(volume, "available", wait=120)
        conn.block_storage.delete_volume(volume.id)
        conn.block_storage.wait_for_delete(volume, wait=120)


def test_preflight_refuses_control_planes_apart_on_too_few_hosts(cluster, tmp_path):
    """Hard anti-affinity for more control planes than the cloud has compute hosts, in all
    or in a zone, is refused before anything is built, counted with the cloud's admin."""
    if cluster.values["kubernetes_distribution"] != "kubeadm":
        pytest.skip("the kubeadm cluster has the three control planes")
    nodes = {**cluster.values["kubernetes_nodes"],
             **{f"k8s-cp-{n}": {"role": "control_plane", "az": "kos-az-2"} for n in (3, 4, 5)}}
    values = {**cluster.values, "kubernetes_nodes": nodes}
    var_file = tmp_path / "apart.tfvars.json"
    var_file.write_text(json.dumps(values))
    before = inventory(cluster.conn())
    res = cluster.kos("preflight", "--cloud", "local", "--var-file", var_file, timeout=300)
    assert res.returncode == 4, res.stderr
    assert ("server_group_policies.control_plane = anti-affinity puts each of the control "
            "planes on its own compute host, and the cloud has too few: 5 in all with 3 hosts; "
            "3 in zone kos-az-2 with 1 host" in res.stderr), res.stderr
    assert ('set server_group_policies = { control_plane = "soft-anti-affinity" }'
            in res.stderr), res.stderr
    assert inventory(cluster.conn()) == before


def test_preflight_names_a_rejected_credential(cluster, tmp_path):
    once(cluster, "Keystone answers the same for both clusters")
    clouds = Path(cluster.kos.env["XDG_CONFIG_HOME"]) / "openstack" / "clouds.yaml"
    text = re.sub(r"(application_credential_secret: )\S+", r"\1not-the-secret", clouds.read_text())
    assert "not-the-secret" in text
    wrong = tmp_path / "clouds.yaml"
    wrong.write_text(text)
    res = openstack_path(cluster, {}, tmp_path, clouds_yaml=wrong)
    assert res.returncode == 4, res.stderr
    assert "OpenStack authentication failed" in res.stderr and "(HTTP 401)" in res.stderr
