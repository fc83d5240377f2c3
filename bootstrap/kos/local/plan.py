"""
The local cloud's addressing plan: the hosts, addresses, outputs and pillar that the
Terraform root module (terraform/main.tf, outputs.tf) derives from the same variables.

On the local cloud a "floating IP" is the host's own address on the public bridge: there
is no separate external network, the machine running kos stands where the internet is.
"""

import ipaddress
from dataclasses import dataclass

import yaml

from ..errors import InputError

API_PORTS = {"microk8s": 16443, "kubeadm": 6443}


@dataclass(frozen=True)
class HostSpec:
    hostname: str
    role: str  # bastion, salt_master, control_plane or worker
    private_ip: str
    public_ip: str = None
    availability_zone: str = None

    def fqdn(self, domain):
        return f"{self.hostname}.{domain}"


def cidrhost(cidr, index):
    return str(ipaddress.ip_network(cidr)[index])


def public_gateway(values):
    """Where the OpenStack router's public port would be: the machine running kos."""
    return cidrhost(values["public_cidr"], 1)


def hosts(values):
    """Every VM of the Terraform plan, in creation order (bastion, salt master, nodes)."""
    if values["first_control_plane_access"] != "floating_ip":
        raise InputError(
            "first_control_plane_access = "
            f"{values['first_control_plane_access']!r} has no local equivalent "
            "(the local cloud has no admin network)",
            fix='set first_control_plane_access = "floating_ip" for --cloud local',
        )
    public, private = values["public_cidr"], values["private_cidr"]
    zones = values.get("availability_zones") or []
    specs = [
        HostSpec("bastion", "bastion", cidrhost(private, 1), cidrhost(public, 10)),
        HostSpec("salt", "salt_master", cidrhost(private, 10)),
    ]
    cps = values["num_control_plane"]
    for i in range(values["num_kube_nodes"]):
        control = i < cps
        specs.append(
            HostSpec(
                f"k8s-cp-{i + 1}" if control else f"k8s-worker-{i - cps + 1}",
                "control_plane" if control else "worker",
                cidrhost(private, 20 + i),
                cidrhost(public, 11) if i == 0 else None,
                zones[i % len(zones)] if zones else None,
            )
        )
    return specs


def pillar(values):
    """The pillar terraform/main.tf (local.pillar) renders for these variables."""
    domain = values["deploy_domain_name"]
    specs = hosts(values)
    by_name = {h.hostname: h for h in specs}
    nodes = [h for h in specs if h.role in ("control_plane", "worker")]
    bastion, first = by_name["bastion"], nodes[0]
    return {
        "kos": {
            "distribution": values["kubernetes_distribution"],
            "cluster_name": values["cluster_name"],
            "domain": domain,
            "deploy_user": values["deploy_user"],
            "networks": {
                "public_cidr": values["public_cidr"],
                "private_cidr": values["private_cidr"],
                "pod_cidr": values["pod_cidr"],
                "service_cidr": values["service_cidr"],
            },
            "salt_master": {"id": f"salt.{domain}", "ip": by_name["salt"].private_ip},
            "bastion": {
                "id": f"bastion.{domain}",
                "ip": bastion.private_ip,
                "public_ip": bastion.public_ip,
                "floating_ip": bastion.public_ip,
            },
            "nodes": {
                h.fqdn(domain): {
                    "role": h.role,
                    "ip": h.private_ip,
                    "availability_zone": h.availability_zone,
                    "floating_ip": h.public_ip,
                }
                for h in nodes
            },
            "first_control_plane": first.fqdn(domain),
            "api": {"floating_ip": first.public_ip, "admin_ip": None},
        },
        "kubernetes": {"distribution": values["kubernetes_distribution"]},
        "core": {
            "users": [
                {"name": u["name"], "ssh_keys": u["ssh_keys"], "sudo": u["sudo"]}
                for u in values.get("users") or []
            ]
        },
    }


def outputs(values):
    """What ``terraform output -json`` gives for these variables (values only)."""
    domain = values["deploy_domain_name"]
    specs = hosts(values)
    doc = pillar(values)
    return {
        "cluster_name": values["cluster_name"],
        "ssh_user": values["deploy_user"],
        "bastion_floating_ip": doc["kos"]["bastion"]["floating_ip"],
        "salt_master_private_ip": doc["kos"]["salt_master"]["ip"],
        "api_floating_ip": doc["kos"]["api"]["floating_ip"],
        "minions": {
            h.fqdn(domain): {"hostname": h.hostname, "role": h.role, "private_ip": h.private_ip}
            for h in specs
        },
        "kubernetes_nodes": {
            mid: {
                "role": n["role"],
                "private_ip": n["ip"],
                "floating_ip": n["floating_ip"],
                "availability_zone": n["availability_zone"],
            }
            for mid, n in doc["kos"]["nodes"].items()
        },
        "salt_pillar": yaml.safe_dump(doc, sort_keys=True),
    }
