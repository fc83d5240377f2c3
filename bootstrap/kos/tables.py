"""The tables kos prints for a person on stdout (``--json`` prints the document instead):
the cluster's status and the backups the salt master keeps."""

import sys

from rich import box
from rich.console import Console
from rich.table import Table

from . import ui
from .ccm import SERVICE_LB_ANNOTATION


def _converged_by(last):
    """Who ran the node's last converge through kos, when the reactor did (a minion that
    started); the orchestration's is the usual case and says nothing."""
    return f" (by the reactor, {last['time']})" if last and last.get("by") == "reactor" else ""


def status(doc):
    """``kos status``: a node a row, the minion id never cut."""
    dist = doc["distribution"] or "unknown distribution"
    if doc.get("simulated"):
        dist += ", simulated on the local cloud"
    table = Table(title=f"cluster {doc['cluster']} ({dist})", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, collapse_padding=True)
    # A cut id ("k8s-work…" twice) leaves nodes that cannot be told apart: the id column
    # never wraps nor shrinks below its longest id, and the others fold instead
    # (https://rich.readthedocs.io/en/stable/tables.html#column-options).
    table.add_column("minion", no_wrap=True,
                     min_width=max((len(node["id"]) for node in doc["nodes"]), default=6))
    for column in ("role", "key", "salt", "last highstate", "kubernetes", "certificates"):
        table.add_column(column, overflow="fold")
    for node in doc["nodes"]:
        k8s = node.get("kubernetes")
        k8s_text = (
            "-"
            if k8s is None
            else (
                ("ready" if k8s["ready"] else "not ready") + f" ({k8s['role']})"
                + (f" {k8s['version']}" if k8s.get("version") else "")
                if k8s["member"]
                else "not a member"
            )
        )
        table.add_row(
            node["id"],
            node["role"],
            node["key"],
            "up" if node["reachable"] else "down",
            node["last_highstate"]["result"] + _converged_by(node.get("last_converge")),
            k8s_text,
            _certificates(node.get("certificates")),
        )
    Console(file=sys.stdout).print(table)
    _api(doc.get("api_endpoint") or {})
    for lb in doc.get("load_balancers_in_error") or []:
        if lb.get("error"):
            ui.warn(f"the Services' load balancers could not be read: {lb['error']}")
            continue
        ns, _, name = (lb["service"] or "<namespace>/<service>").partition("/")
        # the CCM finds a Service's load balancer by the ID it annotated the Service with
        # and stops at "failed to get load balancer" once that one is gone
        # (cloud-provider-openstack pkg/openstack/loadbalancer.go, ensureOctaviaLoadBalancer)
        ui.warn(f"load balancer {lb['name']} ({lb['id']}) of Service {lb['service'] or '?'} "
                "is in ERROR, and the cloud-controller-manager does not recover it: delete it "
                f"(openstack loadbalancer delete --cascade {lb['id']}) and the Service's "
                f"annotation of it (kubectl -n {ns} annotate service {name} {SERVICE_LB_ANNOTATION}-); the "
                "controller makes a new one when it next syncs the Service")
    if doc.get("kubernetes_error"):
        ui.warn(f"Kubernetes membership unknown: {doc['kubernetes_error']}")
    if doc.get("salt_master_floating_ip") or doc.get("syndics"):
        ui.info(f"top master at {doc.get('salt_master_floating_ip') or '(no floating IP)'}; "
                "syndics: " + (", ".join(f"{mid} ({key})" for mid, key in
                                         doc.get("syndics", {}).items()) or "none joined yet"))
    for key in doc.get("unexpected_keys", []):
        ui.warn(f"key {key!r} on the master is not a minion of this cluster")
    for node in doc["nodes"]:
        certs = node.get("certificates") or {}
        if certs.get("expiring"):
            ui.warn(f"{node['id']}: certificates expire within {certs['warn_days']} days: "
                    f"{', '.join(certs['expiring'])} (renew them)")


def _api(endpoint):
    lb = endpoint.get("load_balancer")
    if not lb:
        if endpoint.get("floating_ip"):
            ui.info(f"API at {endpoint['floating_ip']} (k8s-cp-1)")
        return
    where = f"API at {endpoint['floating_ip']}, load balancer {lb['id']} (VIP {lb['vip']})"
    if lb.get("error"):
        ui.warn(f"{where}: its state could not be read: {lb['error']}")
        return
    members = ", ".join(f"{name} {state}" for name, state in sorted(lb["members"].items()))
    (ui.warn if lb.get("problem") else ui.info)(
        f"{where}: {lb['provisioning']}/{lb['operating']}; pool: {members or 'no members'}")


def _certificates(certs):
    if not certs or certs.get("days_left") is None:
        return "-"
    days = certs["days_left"]
    return "expired" if days < 0 else f"{days} days left"

def backups(done):
    """``kos backup``: what the salt master keeps, the new backup marked."""
    table = Table(title="backups the salt master keeps, oldest first", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False)
    table.add_column("backup", no_wrap=True)
    table.add_column("taken (UTC)", no_wrap=True)
    table.add_column("size", overflow="fold")
    for kept in done["backups"]:
        new = " (new)" if kept["name"] == done.get("backup") else ""
        size = kept["size"]
        table.add_row(kept["name"] + new, kept["time"],
                      f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.1f} KiB")
    Console(file=sys.stdout).print(table if done["backups"] else "the salt master keeps no backup")
