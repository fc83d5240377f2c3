"""
Test-only package backend for the kubeadm stand-ins: what apt does to the Kubernetes
packages, kept in the stand-in's ``$KOS_STANDIN_ROOT/var/lib/kos-standin/packages.json``
(which the stand-in kubeadm, kubectl and kubelet read their versions from). The test
minions load it through Salt's ``providers: {pkg: kos_standin_pkg}`` option, so Salt's own
states and execution modules run and only the operating system's package manager is
replaced. Never on a real node.

Holds live beside it (``holds.json``); every install is appended to ``apt.log``. Arm a
failure with ``$KOS_STANDIN_ROOT/kos-test-faults/apt-install``: the next install fails
(the file is removed), as an unreachable repository would.
"""

import json
import os

from salt.exceptions import CommandExecutionError


def __virtual__():
    return (False, "kos_standin_pkg loads only as a provider (providers: {pkg: ...})")


def _path(name):
    return os.path.join(os.environ.get("KOS_STANDIN_ROOT", "/"), "var/lib/kos-standin", name)


def _read(name, default):
    try:
        with open(_path(name)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def _write(name, data):
    os.makedirs(os.path.dirname(_path(name)), exist_ok=True)
    with open(_path(name) + ".tmp", "w") as fh:
        json.dump(data, fh)
    os.replace(_path(name) + ".tmp", _path(name))


def _names(name, pkgs):
    out = []
    for item in pkgs or ([name] if name else []):
        out += list(item) if isinstance(item, dict) else [item]
    return out


def version(*names, **kwargs):
    installed = _read("packages.json", {})
    found = {n: installed.get(n, "") for n in names}
    return found[names[0]] if len(names) == 1 else found


def list_pkgs(versions_as_list=False, **kwargs):
    installed = _read("packages.json", {})
    return {n: [v] if versions_as_list else v for n, v in installed.items()}


def install(name=None, pkgs=None, refresh=False, **kwargs):
    fault = os.path.join(os.environ.get("KOS_STANDIN_ROOT", "/"), "kos-test-faults", "apt-install")
    if os.path.exists(fault):
        os.remove(fault)
        raise CommandExecutionError(
            "E: Failed to fetch https://pkgs.k8s.io/core:/stable:/v1.32/deb/Packages  503  "
            "Service Unavailable")
    wanted = {}
    for item in pkgs or [{name: kwargs.get("version")}]:
        wanted.update(item if isinstance(item, dict) else {item: None})
    held = set(_read("holds.json", []))
    installed = _read("packages.json", {})
    changes = {}
    for pkg, ver in wanted.items():
        if pkg in held and installed.get(pkg) != ver:
            raise CommandExecutionError(
                "E: Held packages were changed and -y was used without "
                "--allow-change-held-packages.")
        if installed.get(pkg) != ver:
            changes[pkg] = {"old": installed.get(pkg, ""), "new": ver}
            installed[pkg] = ver
    _write("packages.json", installed)
    with open(_path("apt.log"), "a") as fh:
        fh.write(" ".join(f"{p}={v}" for p, v in wanted.items()) + "\n")
    return changes


def _set_holds(name, pkgs, hold, comment):
    """aptpkg.hold/unhold's answer, a package each: ``changes`` only where its selection
    (``hold`` or ``install``) changed."""
    held = set(_read("holds.json", []))
    old, new = ("install", "hold") if hold else ("hold", "install")
    ret = {}
    for pkg in _names(name, pkgs):
        changed = (pkg in held) != hold
        ret[pkg] = {"name": pkg, "result": True, "comment": comment.format(pkg),
                    "changes": {"new": new, "old": old} if changed else {}}
        if hold:
            held.add(pkg)
        else:
            held.discard(pkg)
    _write("holds.json", sorted(held))
    return ret


def hold(name=None, pkgs=None, **kwargs):
    return _set_holds(name, pkgs, True, "{} set on hold.")


def unhold(name=None, pkgs=None, **kwargs):
    return _set_holds(name, pkgs, False, "Canceled hold on {}.")
