#!/usr/bin/env python3
"""
The pillar step of the validate job: every environment's pillar, compiled per minion by
Salt's own pillar compiler over the repository's pillar/ tree, judged by the validator the
highstate runs (saltext.kos.utils.kos_schema, through kos.pillar_errors). No root, no
network, no cloud:

* the Terraform layer (what Terraform's ``salt_pillar`` output puts in
  _from_terraform.sls on the master) is built here from the environment's var files,
  evaluated by Terraform itself (kos.inputs.evaluate: types, defaults, validation rules,
  offline), in the shape terraform/main.tf (``local.pillar``) gives it. Addresses the cloud
  hands out (floating IPs, the admin network's port) are documentation addresses
  (RFC 5737): their shape is all the validator judges;
* a control plane of a kubeadm environment gets the ``_ccm_<hostname>`` layer kos writes on
  the master (kos.ccm.layer), with a placeholder credential.

Usage: ci/validate_pillar.py [--environments DIR] [--pillar-root DIR]. Prints
``environment <env>, minion <id>: pillar key '<key>': <problem>; <fix>`` once per key and
exits 1 on any problem.
"""

import argparse
import ipaddress
import logging
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bootstrap"))

from kos import ccm, inputs  # noqa: E402
from kos.errors import KosError  # noqa: E402
from saltext.kos.utils import kos_schema as schema  # noqa: E402

SALT_TREE = REPO / "salt" / "salt"
TERRAFORM = REPO / "terraform"
# The root module's variables local.pillar reads, with those their validation rules read;
# the node set's own (terraform/modules/node_set) are added from its declarations.
PILLAR_VARIABLES = (
    "cluster_name",
    "deploy_domain_name",
    "deploy_user",
    "users",
    "kubernetes_distribution",
    "first_control_plane_access",
    "api_load_balancer",
    "public_cidr",
    "private_cidr",
    "pod_cidr",
    "service_cidr",
    "syndic_master",
    "top_master",
)
# Given by the cloud at apply time (RFC 5737 documentation addresses).
BASTION_FLOATING_IP = "192.0.2.10"
API_FLOATING_IP = "192.0.2.11"
MASTER_FLOATING_IP = "192.0.2.12"
PUBLIC_SUBNET_ID = "00000000-0000-4000-8000-000000000001"
PRIVATE_SUBNET_ID = "00000000-0000-4000-8000-000000000002"
API_ADMIN_IP = "198.51.100.11"
CCM_PLACEHOLDER = {
    "id": "kos-validate",
    "secret": "kos-validate",
    "auth_url": "https://keystone.example.invalid:5000/v3",
    "region": "RegionOne",
}


class RenderErrors(logging.Handler):
    """Salt logs why an SLS did not render (the pillar only says "see master log"): keep the
    first paragraph of each such message, without the tracebacks."""

    def __init__(self):
        super().__init__(logging.CRITICAL)
        self.messages = []

    def emit(self, record):
        first = record.getMessage().split("\n\n")[0]
        if "failed, render error" in first:
            self.messages.append(" ".join(first.split()))


def _host(cidr, n):
    # Terraform's cidrhost(prefix, n): https://developer.hashicorp.com/terraform/language/functions/cidrhost
    return str(ipaddress.ip_network(cidr)[n])


def terraform_layer(v, node_set):
    """The pillar Terraform's ``salt_pillar`` output carries (terraform/main.tf, local.pillar)
    for these variable values and the node set Terraform evaluated from them
    (terraform/modules/node_set)."""
    domain = v["deploy_domain_name"]
    on_public = v["first_control_plane_access"] == "floating_ip"
    octavia = v["api_load_balancer"] == "octavia"
    nodes = {}
    for name, node in node_set.items():
        first = name == "k8s-cp-1"
        nodes[f"{name}.{domain}"] = {
            "role": node["role"],
            "ip": _host(v["private_cidr"], node["address"]),
            "availability_zone": node["az"],
            "floating_ip": API_FLOATING_IP if first and on_public else None,
        }
    top = v.get("top_master")
    return {
        "kos": {
            "distribution": v["kubernetes_distribution"],
            "cluster_name": v["cluster_name"],
            "domain": domain,
            "deploy_user": v["deploy_user"],
            "networks": {
                **{k: v[k] for k in ("public_cidr", "private_cidr", "pod_cidr", "service_cidr")},
                "public_subnet_id": PUBLIC_SUBNET_ID,
                "private_subnet_id": PRIVATE_SUBNET_ID,
            },
            "salt_master": {
                "id": f"salt.{domain}",
                "ip": _host(v["private_cidr"], 10),
                "floating_ip": MASTER_FLOATING_IP if top is not None else None,
                "syndic_master": v.get("syndic_master"),
                "order_masters": top is not None,
                "syndics": top["syndics"] if top is not None else [],
                "transport": "tcp" if v.get("syndic_master") or top is not None else "zeromq",
            },
            "bastion": {
                "id": f"bastion.{domain}",
                "ip": _host(v["private_cidr"], 1),
                "public_ip": _host(v["public_cidr"], 10),
                "floating_ip": BASTION_FLOATING_IP,
            },
            "nodes": nodes,
            "first_control_plane": f"k8s-cp-1.{domain}",
            "api": {
                "load_balancer": v["api_load_balancer"],
                "vip": _host(v["public_cidr"], 9) if octavia else None,
                "floating_ip": API_FLOATING_IP if on_public or octavia else None,
                "admin_ip": None if on_public else API_ADMIN_IP,
            },
        },
        "core": {
            "users": [
                {
                    "name": u["name"],
                    "ssh_keys": u.get("ssh_keys") or [],
                    "sudo": bool(u.get("sudo")),
                }
                for u in v.get("users") or []
            ],
        },
    }


def minions(layer):
    kos = layer["kos"]
    return [kos["salt_master"]["id"], kos["bastion"]["id"], *kos["nodes"]]


def compile_pillar(pillar_dir, minion_id, work):
    """The minion's pillar as its master compiles it (salt.pillar.get_pillar, the top file
    and renderers of the tree), with grains id and domain only."""
    import salt.config
    import salt.pillar

    hostname, _, domain = minion_id.partition(".")
    opts = salt.config.minion_config(None)
    opts.update(
        id=minion_id,
        file_client="local",
        pillar_roots={"base": [str(pillar_dir)]},
        cachedir=str(work / "cache"),
        extension_modules=str(work / "extmods"),
        pki_dir=str(work / "pki"),
        root_dir=str(work),
    )
    grains = {"id": minion_id, "host": hostname, "domain": domain}
    return salt.pillar.get_pillar(opts, grains, minion_id, "base").compile_pillar()


def formula_defaults(schema):
    """Each formula's defaults.yaml, which its map merges the pillar over (as kos.py reads
    them from salt://)."""
    return {
        f: yaml.safe_load((SALT_TREE / f / "defaults.yaml").read_text()) or {}
        for f in schema.formulas()
    }


def pillar_variables():
    return (*PILLAR_VARIABLES, *inputs.node_set_variables(TERRAFORM))


def check_environment(env, pillar_root, schema, defaults):
    """``({message: [minion ids]}, [minion ids])`` for one environment."""
    found = {}
    try:
        evaluated = inputs.evaluate(TERRAFORM, env.var_files, only=pillar_variables())
    except KosError as exc:
        return {f"Terraform variable {d}": [] for d in exc.details or [str(exc)]}, []
    layer = terraform_layer(evaluated.values, evaluated.nodes)
    with tempfile.TemporaryDirectory(prefix=f"kos-pillar-{env.name}-") as tmp:
        work = Path(tmp)
        tree = work / "pillar"
        shutil.copytree(pillar_root, tree)
        (tree / "_from_terraform.sls").write_text(yaml.safe_dump(layer, sort_keys=True))
        if layer["kos"]["distribution"] == "kubeadm":
            for mid, node in layer["kos"]["nodes"].items():
                if node["role"] == "control_plane":
                    hostname = mid.partition(".")[0]
                    (tree / ccm.layer_name(hostname)).write_text(ccm.layer(CCM_PLACEHOLDER))
        for mid in minions(layer):
            logged = RenderErrors()
            root = logging.getLogger()
            # Salt's own stderr handler (installed on import) prints each traceback in full.
            saved, root.handlers = root.handlers, [logged]
            try:
                pillar = compile_pillar(tree, mid, work / "minion")
            finally:
                root.handlers = saved
            errors = pillar.pop("_errors", None)
            messages = (
                [f"pillar did not render: {e}; fix that file" for e in logged.messages or errors]
                if errors
                else schema.check(pillar, defaults)
            )
            for message in messages:
                found.setdefault(message, []).append(mid)
    return found, minions(layer)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--environments", type=Path, default=REPO / "environments")
    parser.add_argument("--pillar-root", type=Path, default=REPO / "pillar")
    args = parser.parse_args(argv)
    defaults = formula_defaults(schema)
    envs = inputs.environments(args.environments)
    if not envs:
        print(f"no environment under {args.environments}", file=sys.stderr)
        return 1
    failed = False
    for name, env in envs.items():
        found, ids_checked = check_environment(env, args.pillar_root, schema, defaults)
        for message, ids in found.items():
            failed = True
            label = f", minion{'s' if len(ids) > 1 else ''} {', '.join(ids)}" if ids else ""
            print(f"environment {name}{label}: {message}")
        if not found:
            print(f"environment {name}: the pillar of {len(ids_checked)} minions is valid")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
