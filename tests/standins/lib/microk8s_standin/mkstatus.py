"""`microk8s status`: microk8s-status.wrapper + scripts/wrappers/status.py of
https://github.com/canonical/microk8s."""

import argparse

from . import common, datastore
from . import mkcommon as mk


def etcd_endpoints():
    value = common.get_arg("kube-apiserver", "--etcd-servers") or ""
    return [ep.split("//", 1)[1] for ep in value.split(",") if "//" in ep]


def dqlite_info():
    ds = datastore.load()
    return datastore.dqlite_info(ds) if ds and mk.is_ha() else []


def ha_cluster_formed(info):
    return sum(1 for _, role in info if role == "voter") > 2


def addon_line(a):
    return "{:>3} {:<20} # ({}) {}".format("", a["name"], a["repository"], a["description"])


def print_pretty(ready, enabled, disabled):
    if not ready:
        common.out(mk.NOT_RUNNING)
        return
    common.out("microk8s is running")
    if not mk.is_ha():
        common.out("high-availability: no", "  datastore endpoints:")
        for ep in etcd_endpoints():
            common.out("    {}".format(ep))
    else:
        info = dqlite_info()
        masters = " ".join(addr for addr, role in info if role == "voter") or "none"
        standby = " ".join(addr for addr, role in info if role == "standby") or "none"
        common.out(
            "high-availability: {}".format("yes" if ha_cluster_formed(info) else "no"),
            "  datastore master nodes: {}".format(masters),
            "  datastore standby nodes: {}".format(standby),
        )
    common.out("addons:")
    if enabled:
        common.out("  enabled:", *[addon_line(a) for a in enabled])
    if disabled:
        common.out("  disabled:", *[addon_line(a) for a in disabled])


def print_yaml(ready, enabled, disabled):
    lines = ["microk8s:", "  running: {}".format(ready), "high-availability:"]
    ha = mk.is_ha()
    lines.append("  enabled: {}".format(ha))
    if ha:
        lines.append("  nodes:")
        for addr, role in dqlite_info():
            lines += ["    - address: {}".format(addr), "      role: {}".format(role)]
    if ready:
        lines.append("addons:")
        for group, state in ((enabled, "enabled"), (disabled, "disabled")):
            for a in group:
                lines += [
                    "  - name: {}".format(a["name"]),
                    "    repository: {}".format(a["repository"]),
                    "    description: {}".format(a["description"]),
                    "    version: {:<1}".format(a["version"]),
                    "    status: {}".format(state),
                ]
    else:
        lines.append("  message: {}".format(mk.NOT_RUNNING))
    common.out(*lines)


def print_short(ready, enabled, disabled):
    if not ready:
        common.out(mk.NOT_RUNNING)
        return
    common.out("microk8s is running", "addons:")
    for a in enabled:
        common.out("{}/{}: enabled".format(a["repository"], a["name"]))
    for a in disabled:
        common.out("{}/{}: disabled".format(a["repository"], a["name"]))


def print_short_yaml(ready, enabled, disabled):
    common.out("microk8s:", "  running: {}".format(ready))
    if ready:
        common.out("addons:")
        for a in enabled:
            common.out("  {}/{}: enabled".format(a["repository"], a["name"]))
        for a in disabled:
            common.out("  {}/{}: disabled".format(a["repository"], a["name"]))
    else:
        common.out("  message: {}".format(mk.NOT_RUNNING))


def main(args):
    mk.exit_if_no_permissions()
    if mk.is_worker():
        common.out(
            "This MicroK8s deployment is acting as a node in a cluster.",
            "Please use the control plane node.",
        )
        return 0
    mk.exit_if_no_permission_py()
    if mk.is_stopped():
        common.out(mk.STOPPED)
        return 0
    parser = argparse.ArgumentParser(description="Microk8s cluster status check.", prog="microk8s status")
    parser.add_argument(
        "--format",
        help="print cluster and addon status, output can be in yaml, pretty or short",
        default="pretty",
        choices=("pretty", "yaml", "short"),
    )
    parser.add_argument("-w", "--wait-ready", action="store_true", help="wait until the cluster is in ready state")
    parser.add_argument(
        "-t", "--timeout",
        help="specify a timeout in seconds when waiting for the cluster to be ready.",
        type=int, default=0,
    )
    parser.add_argument("-a", "--addon", help="check the status of an addon.", default="all")
    parser.add_argument("--yaml", action="store_true", help="DEPRECATED, use '--format yaml' instead")
    opts = parser.parse_args(args)

    ready = mk.wait_for_ready(opts.timeout) if opts.wait_ready else mk.is_cluster_ready()
    addons = mk.available_addons()
    if opts.addon != "all":
        addons = mk.get_addon_by_name(addons, opts.addon)
    enabled, disabled = mk.get_status(addons, ready)
    if opts.addon != "all":
        common.out("enabled" if enabled else "disabled")
    elif opts.format == "yaml":
        print_yaml(ready, enabled, disabled)
    elif opts.format == "pretty":
        (print_short_yaml if opts.yaml else print_pretty)(ready, enabled, disabled)
    else:
        print_short(ready, enabled, disabled)
    return 0 if ready else 1
