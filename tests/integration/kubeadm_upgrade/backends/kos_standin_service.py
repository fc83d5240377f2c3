"""
Test-only service backend for the kubeadm stand-ins: ``service.restart kubelet`` is the
stand-in's kubelet restart (``kubeadm-standin-kubelet-restart``: the node reports its
kubelet package's version), each restart appended to
``$KOS_STANDIN_ROOT/var/lib/kos-standin/restarts.log``. Loaded through Salt's
``providers: {service: kos_standin_service}``; no other service is known. Never on a real
node.
"""

import os

from salt.exceptions import CommandExecutionError


def __virtual__():
    return (False, "kos_standin_service loads only as a provider (providers: {service: ...})")


def restart(name, **kwargs):
    if name != "kubelet":
        raise CommandExecutionError(f"the test service backend knows the kubelet only, not {name}")
    # Salt injects __salt__ into a loaded module
    res = __salt__["cmd.run_all"](["kubeadm-standin-kubelet-restart"], python_shell=False,  # noqa: F821
                                  ignore_retcode=True)
    if res["retcode"] != 0:
        raise CommandExecutionError(res["stderr"] or res["stdout"])
    log = os.path.join(os.environ.get("KOS_STANDIN_ROOT", "/"), "var/lib/kos-standin",
                       "restarts.log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "a") as fh:
        fh.write("kubelet\n")
    return True
