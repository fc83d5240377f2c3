"""
What differs between Kubernetes distributions, for ``kos status``, ``kos kubeconfig`` and the
drain of ``kos down``: which Salt functions on the first control plane read the admin
kubeconfig and the node list, drain and delete a node, and the API port. The distribution in
use is the pillar key ``kubernetes:distribution`` of the first control plane (an environment
layer may override Terraform's choice). A new distribution is one more class here.
"""

import yaml

from .errors import ConvergeError


def _one(master, node, fun, *args):
    ret = master.salt([node], fun, *args).get(node)
    if ret is None:
        raise ConvergeError(f"{node} did not answer {fun}")
    if isinstance(ret, str) and ret.startswith(("ERROR", "The minion function caused")):
        raise ConvergeError(f"{fun} failed on {node}: {ret.strip()[:300]}")
    return ret


class Distribution:
    name = None
    api_port = None

    def kubeconfig(self, master, node):
        """The admin kubeconfig's text (holds a client key: never logged)."""
        raise NotImplementedError

    def nodes(self, master, node):
        """``{name: {"ready": bool, "role": "control-plane"|"worker", "ip": str}}``."""
        raise NotImplementedError

    def drain(self, master, node, name):
        raise NotImplementedError

    def delete(self, master, node, name):
        raise NotImplementedError


class MicroK8s(Distribution):
    name = "microk8s"
    api_port = 16443

    def kubeconfig(self, master, node):
        return _one(master, node, "microk8s.config")

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

    def kubeconfig(self, master, node):
        kube_dir = _one(master, node, "config.get", "kubeadm:kube_dir", "/etc/kubernetes")
        return _one(master, node, "file.read", f"{kube_dir or '/etc/kubernetes'}/admin.conf")

    def nodes(self, master, node):
        found = _one(master, node, "kubeadm.nodes")
        return {
            name: {
                "ready": info.get("ready"),
                "role": "control-plane" if "control-plane" in info.get("roles", []) else "worker",
                "ip": info.get("ip"),
            }
            for name, info in found.items()
        }

    def drain(self, master, node, name):
        return _one(master, node, "kubeadm.drain", name, "timeout=120")

    def delete(self, master, node, name):
        return _one(master, node, "kubeadm.delete_node", name, "ignore_not_found=True")


DISTRIBUTIONS = {cls.name: cls() for cls in (MicroK8s, Kubeadm)}


def detect(master, first_control_plane):
    # Salt 3008 masks pillar values in pillar.get's output unless asked not to.
    ret = master.salt(
        [first_control_plane], "pillar.get", "kubernetes:distribution", "microk8s", "unmask=True"
    )
    name = ret.get(first_control_plane)
    if name not in DISTRIBUTIONS:
        raise ConvergeError(
            f"unknown or unreadable kubernetes:distribution on {first_control_plane}: {name!r}",
            fix=f"set pillar kubernetes:distribution to one of {', '.join(DISTRIBUTIONS)}",
        )
    return DISTRIBUTIONS[name]


def rewrite_server(kubeconfig_text, server):
    """Point every cluster entry at ``server`` (the API's floating IP)."""
    doc = yaml.safe_load(kubeconfig_text)
    if not isinstance(doc, dict) or not doc.get("clusters"):
        raise ConvergeError("the control plane returned no kubeconfig")
    for entry in doc["clusters"]:
        entry.setdefault("cluster", {})["server"] = server
    return yaml.safe_dump(doc, sort_keys=False)
