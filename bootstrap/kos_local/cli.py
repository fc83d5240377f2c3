"""
``kos cloud``: the rehearsal cloud itself, apart from any cluster on it (the entry point
``cloud`` of the group ``kos.commands``). ``kos up --cloud local`` brings it up when no
cluster has yet, and ``kos down`` of its last cluster takes it away; these commands do
it by hand: ``up`` to have it ready, ``status`` to see it and its clusters, ``down`` to
remove it with whatever is on it.
"""

import json

import click


def _cloud():
    from .openstack.cloud import Cloud

    return Cloud()


@click.group("cloud")
def cloud():
    """The rehearsal cloud on this machine (--cloud local), which every local cluster shares."""


@cloud.command()
def up():
    """Bring the rehearsal cloud up (or finish bringing it up), with no cluster on it."""
    from kos import ui

    from . import bring_up, cloud_api_errors

    c = _cloud()
    with ui.step(f"the rehearsal cloud {c.name}: OpenStack on this machine"):
        with c.lock(), cloud_api_errors(c):
            bring_up(c)
    ui.data({"cloud": c.name, "api": c.auth_url(), "clusters": c.clusters()})


@cloud.command()
@click.option("--json", "as_json", is_flag=True, help="Print the cloud's status as JSON.")
def status(as_json):
    """Whether the cloud runs, where its API answers, and the clusters on it."""
    from kos import ui

    c = _cloud()
    plan = c.plan() if c.running() else None
    doc = {
        "cloud": c.name,
        "running": c.running(),
        "usable": c.usable(),
        "api": c.auth_url() if plan else None,
        "external_network": str(plan.external) if plan else None,
        "directory": str(c.root),
        "clusters": {name: {k: (c.profile(name) or {}).get(k)
                            for k in ("distribution", "state", "project_id")}
                     for name in c.clusters()},
    }
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return
    if not doc["running"]:
        ui.info(f"the rehearsal cloud {c.name} is not running"
                + (f" (its disk is at {c.root})" if c.root.exists() else ""))
    else:
        ui.ok(f"the rehearsal cloud {c.name} runs: API {doc['api']}, external network "
              f"{doc['external_network']}")
    for name, info in doc["clusters"].items():
        ui.detail(f"{name}: {info['distribution']}, state {info['state']}")
    if not doc["clusters"]:
        ui.detail("no cluster on it")


@cloud.command()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (CI).")
def down(yes):
    """Remove the rehearsal cloud from this machine, with every cluster on it."""
    from kos import errors, ui

    from . import forget_servers

    c = _cloud()
    clusters = {name: (c.profile(name) or {}).get("state") for name in c.clusters()}
    if clusters and not yes:
        raise errors.Aborted(
            f"the rehearsal cloud holds {', '.join(clusters)}: kos cloud down removes them too",
            fix="take them down with kos down --cloud local, or pass --yes")
    with c.lock():
        removed = c.destroy()
    for state in filter(None, clusters.values()):
        forget_servers(state)
    ui.ok(f"the rehearsal cloud {c.name} removed ({len(removed)} machines, links and mounts)"
          + (f" with {', '.join(clusters)}" if clusters else ""))
