"""`microk8s` dispatch (microk8s-resources/wrappers/microk8s.wrapper of
https://github.com/canonical/microk8s) and the snap app aliases `microk8s.<cmd>`."""

import importlib
import os

from . import agent, common
from . import mkcommon as mk

# `ls $SNAP/microk8s-*.wrapper` of a 1.31 snap (constructed list), then `inspect`.
HELP_SUBCOMMANDS = (
    "add-node", "addons", "config", "ctr", "dashboard-proxy", "dbctl", "disable", "enable", "helm",
    "helm3", "images", "join", "kubectl", "leave", "refresh-certs", "remove-node", "reset", "start",
    "status", "stop", "version",
)

# subcommand -> (module, function, leading args); modules load on demand to keep startup short.
HANDLERS = {
    "status": ("mkstatus", "main", ()),
    "enable": ("mkaddons", "main", ("enable",)),
    "disable": ("mkaddons", "main", ("disable",)),
    "add-node": ("mkcluster", "add_node", ()),
    "join": ("mkcluster", "join", ()),
    "leave": ("mkcluster", "leave", ()),
    "remove-node": ("mkcluster", "remove_node", ()),
    "config": ("mkmisc", "config", ()),
    "dbctl": ("mkdbctl", "main", ()),
    "kubectl": ("mkmisc", "kubectl", ()),
    "version": ("mkmisc", "version", ()),
    "refresh-certs": ("mkmisc", "refresh_certs", ()),
    "start": ("mkmisc", "start", ()),
    "stop": ("mkmisc", "stop", ()),
}


def help_text():
    common.out("Available subcommands are:", *["\t" + s for s in HELP_SUBCOMMANDS], "\tinspect")


def run(app, args):
    module, func, lead = HANDLERS[app]
    handler = getattr(importlib.import_module("." + module, __package__), func)
    try:
        return handler(*lead, args)
    except mk.Exit as e:
        return e.code


def main(argv0, args):
    name = os.path.basename(argv0)
    if name.startswith("microk8s.") and name[len("microk8s."):] in HANDLERS:
        return run(name[len("microk8s."):], args)
    if args and args[0] == agent.PROCESS_TAG:
        return agent.serve(args[1], args[2] if len(args) > 2 else None)
    if not args:
        help_text()
        return 1
    app, rest = args[0], args[1:]
    if app in HANDLERS:
        return run(app, rest)
    if app in ("help", "--help", "-h"):
        help_text()
        return 0
    if app in HELP_SUBCOMMANDS or app == "inspect":
        common.err("kos stand-in: 'microk8s {}' is not implemented".format(app))
        return 1
    common.out("'{}' is not a valid MicroK8s subcommand.".format(app))
    help_text()
    return 1
