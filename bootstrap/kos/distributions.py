"""
What differs between Kubernetes distributions, for ``kos status``, ``kos kubeconfig`` and the
drain of ``kos down``: where the admin kubeconfig is on the first control plane, which Salt
functions there read the node list, drain and delete a node, and the API port. The
distribution in use is ``kos:distribution``, which Terraform writes to the pillar from its
``kubernetes_distribution`` variable, and nothing else; every reader goes through ``named``,
which refuses a missing or unknown value rather than guess one. A new distribution is one
more class here.

The admin kubeconfig holds a client key: it is read over SSH (through the bastion, as the
operator), never as a Salt return, which the master would keep in its job cache.
"""

import yaml

from .errors import ConvergeError

# Where kos:distribution comes from, and how to set it, for every message about it.
SOURCE = "Terraform writes it to the pillar from its kubernetes_distribution variable"
FIX = "set kubernetes_distribution (microk8s or kubeadm) in the Terraform variables and run kos up"


def planned(outputs):
    """The name of the distribution Terraform deploys (``kos:distribution`` in its
    ``salt_pillar`` output), known before any minion answers."""
    pillar = yaml.safe_load(outputs.get("salt_pillar") or "") or {}
    kos = pillar.get("kos") if isinstance(pillar, dict) else None
    value = kos.get("distribution") if isinstance(kos, dict) else None
    return named(value, "Terraform's salt_pillar output").name


def _one(master, node, fun, *args):
    ret = master.salt([node], fun, *args).get(node)
    if ret is None:
        raise ConvergeError(f"{node} did not answer {fun}")
    if isinstance(ret, str) and ret.startswith(("ERROR", "The minion function caused")):
        raise ConvergeError(f"{fun} failed on {node}: {ret.strip()[:300]}")
    return ret


def _setting(master, node, formula_dir, formula, key):
    """``<formula>:<key>`` of ``node``: its pillar's, else the formula's default."""
    value = _one(master, node, "pillar.get", f"{formula}:{key}", "unmask=True")
    if value in (None, ""):
        defaults = yaml.safe_load((formula_dir / formula / "defaults.yaml").read_text())
        value = defaults[key]
    return str(value)


class Distribution:
    name = None
    api_port = None

    def kubeconfig_file(self, master, node, formula_dir):
        """Where the admin kubeconfig is on ``node`` (a path: asked through Salt)."""
        raise NotImplementedError

    def kubeconfig(self, master, node, address, formula_dir):
        """
        The admin kubeconfig's text (holds a client key: never logged), read on ``node``
        at its private ``address`` over SSH through the bastion.
        """
        path = self.kubeconfig_file(master, node, formula_dir)
        res = master.ssh.run(["cat", "--", path], host=address, timeout=120, secret=True)
        return res.stdout

    def nodes(self, master, node):
        """``{name: {"ready": bool, "role": "control-plane"|"worker", "ip": str,
        "version": the kubelet's}}``."""
        raise NotImplementedError

    def drain(self, master, node, name):
        raise NotImplementedError

    def delete(self, master, node, name):
        raise NotImplementedError


class MicroK8s(Distribution):
    name = "microk8s"
    api_port = 16443

    def kubeconfig_file(self, master, node, formula_dir):
        # What `microk8s config` prints, but for the server's address, which kos replaces
        # (https://microk8s.io/docs/command-reference#heading--microk8s-config); the command
        # itself may not be on an SSH session's PATH.
        snap_data = _setting(master, node, formula_dir, "microk8s", "snap_data")
        return f"{snap_data}/credentials/client.config"

    def nodes(self, master, node):
        return _one(master, node, "microk8s.nodes")

    def _kubectl(self, master, node, *args):
        res = _one(
            master,
            node,
            "cmd.run_all",
            " ".join(["microk8s", "kubectl", *args]),
            "python_shell=False",
        )
        if not isinstance(res, dict) or res.get("retcode") != 0:
            err = res.get("stderr") if isinstance(res, dict) else res
            raise ConvergeError(f"microk8s kubectl {args[0]} failed: {str(err).strip()[:300]}")
        return res.get("stdout", "")

    def drain(self, master, node, name):
        return self._kubectl(
            master,
            node,
            "drain",
            name,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--force",
            "--timeout=120s",
        )

    def delete(self, master, node, name):
        return self._kubectl(master, node, "delete", "node", name)


class Kubeadm(Distribution):
    name = "kubeadm"
    api_port = 6443

    def kubeconfig_file(self, master, node, formula_dir):
        return f"{_setting(master, node, formula_dir, 'kubeadm', 'kube_dir')}/admin.conf"

    def nodes(self, master, node):
        found = _one(master, node, "kos_kubectl.nodes")
        return {
            name: {
                "ready": info.get("ready"),
                "role": "control-plane" if "control-plane" in info.get("roles", []) else "worker",
                "ip": info.get("ip"),
                "version": info.get("version"),
            }
            for name, info in found.items()
        }

    def drain(self, master, node, name):
        return _one(master, node, "kos_kubectl.drain", name, "timeout=120")

    def delete(self, master, node, name):
        return _one(master, node, "kos_kubectl.delete_node", name, "ignore_not_found=True")


DISTRIBUTIONS = {cls.name: cls() for cls in (MicroK8s, Kubeadm)}


def named(name, where):
    """The Distribution ``name`` (the value of ``kos:distribution`` read from ``where``); a
    missing or unknown value is an error saying where it comes from: a default would treat a
    kubeadm cluster as microk8s."""
    found = DISTRIBUTIONS.get(name) if isinstance(name, str) else None
    if found is None:
        what = "is missing" if name in (None, "") else f"is {name!r}, not microk8s or kubeadm"
        raise ConvergeError(f"kos:distribution {what} in {where} ({SOURCE})", fix=FIX)
    return found


def detect(master, first_control_plane):
    """The Distribution the first control plane's pillar names."""
    # Salt 3008 masks pillar values in pillar.get's output unless asked not to.
    name = _one(master, first_control_plane, "pillar.get", "kos:distribution", "unmask=True")
    return named(name, f"the pillar of {first_control_plane}")


def kubernetes_members(master, first_control_plane):
    """``(distribution name, {node: ...} as Distribution.nodes lists them, None)`` from the
    first control plane, or ``(None, {}, the problem)`` when it cannot tell."""
    try:
        dist = detect(master, first_control_plane)
        return dist.name, dist.nodes(master, first_control_plane), None
    except ConvergeError as exc:
        return None, {}, exc.problem


def rewrite_server(kubeconfig_text, server):
    """Point every cluster entry at ``server`` (the API's floating IP)."""
    doc = yaml.safe_load(kubeconfig_text)
    if not isinstance(doc, dict) or not doc.get("clusters"):
        raise ConvergeError("the control plane returned no kubeconfig")
    for entry in doc["clusters"]:
        entry.setdefault("cluster", {})["server"] = server
    return yaml.safe_dump(doc, sort_keys=False)
