"""`kubeadm-standin-kubelet-restart`: what `systemctl restart kubelet` changes in the cluster.

No kubelet runs next to the stand-ins.  The kubelet a node registers at `kubeadm init` or
`kubeadm join` reports the version of the node's kubelet package (env.py: packages.json,
else KOS_STANDIN_KUBE_VERSION), and it keeps reporting that version until it is restarted,
as a real kubelet does after `apt-get install kubelet=...` until it is restarted
("Upgrade kubelet and kubectl" in
https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/).
This command is the restart: it reads the kubelet package's version now installed and
reports it, with Ready, for this node (the name in kubelet.conf's client certificate),
authenticating with kubelet.conf like the kubelet.  A node object that was deleted is
registered again (without the control-plane labels kubeadm had added), as a restarted
kubelet would.  On a node that never joined (no kubelet.conf or no
/var/lib/kubelet/config.yaml) the kubelet would only crash-loop: nothing is reported,
exit 0, like `systemctl restart kubelet`.

Unlike systemd, which would retry in the background, the stand-in reports at once: when
the API server cannot be reached it says so on stderr and exits 1.
"""

import os
import sys

from . import client, common, content, env, kubeconfig, pki, yamlish

KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"
PROG = "kubeadm-standin-kubelet-restart"


def _local_static_pods():
    """The mirror Pods the kubelet creates for the manifests on disk."""
    pods = {}
    for component in content.CONTROL_PLANE_COMPONENTS + ("etcd",):
        try:
            with open(env.host("/etc/kubernetes/manifests/%s.yaml" % component)) as f:
                pod = yamlish.load(f.read())
            pods[component] = pod["spec"]["containers"][0]["image"]
        except (OSError, KeyError, IndexError, TypeError, yamlish.YamlError):
            continue
    return pods


def restart():
    if not (os.path.exists(env.host(KUBELET_CONF)) and os.path.exists(env.host(KUBELET_CONFIG))):
        return 0
    try:
        kc = kubeconfig.load(KUBELET_CONF)
        cn = pki.cert_subject_cn(kc.cert_pem) if kc.cert_pem else ""
    except (OSError, ValueError, kubeconfig.KubeconfigError, pki.PKIError):
        return 0
    if not cn.startswith("system:node:"):
        return 0
    name = cn[len("system:node:"):]
    version = env.package_version("kubelet")
    api = client.Api.from_kubeconfig(kc, timeout=5.0)
    try:
        try:
            api.patch("/api/v1/nodes/" + name, {"kubeletVersion": version, "ready": True})
        except client.HTTPError as e:
            if e.code != 404:
                raise
            record = common.node_record(name, env.node_ip(), False, None, True,
                                        _local_static_pods() or None)
            api.post("/api/v1/nodes", {"node": record})
    except (client.ClientError, client.HTTPError) as e:
        sys.stderr.write('%s: the kubelet could not report node "%s" to the API server: %s\n'
                         % (PROG, name, common.api_error_text(e)))
        return 1
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        sys.stderr.write("usage: %s (takes no arguments)\n" % PROG)
        return 2
    return restart()
