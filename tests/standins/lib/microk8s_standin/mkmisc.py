"""`microk8s config | kubectl | version | refresh-certs | start | stop` (their wrappers and
scripts in https://github.com/canonical/microk8s).

`microk8s kubectl` understands `get nodes` (table, -o wide|name|json), `get all`, `delete node`,
and `cordon`/`uncordon`/`drain` (kubectl's:
https://kubernetes.io/docs/reference/kubectl/generated/kubectl_drain/): the node entry's
``unschedulable`` flag is set or cleared through the replicated datastore; a cordoned node shows
STATUS `Ready,SchedulingDisabled` and `spec.unschedulable`/the
`node.kubernetes.io/unschedulable:NoSchedule` taint.  The datastore holds no Pods, so a drain
evicts nothing and never refuses.
"""

import datetime
import json
import os
import shutil
import subprocess

from kubeadm_standin.gofmt import human_duration

from . import agent, common, datastore, layout, netinfo, pki
from . import mkcommon as mk

CONNECTION_REFUSED = "The connection to the server 127.0.0.1:16443 was refused - did you specify the right host or port?"


# --------------------------------------------------------------------------- config


def config(argv):
    if mk.is_worker():
        common.out(
            "This MicroK8s deployment is acting as a node in a cluster. Please use the microk8s config on the master."
        )
        return 0
    use_loopback = False
    for a in argv:
        if a in ("-l", "--use-loopback"):
            use_loopback = True
        elif a in ("-h", "--help"):
            common.out(
                "Usage: microk8s config [OPTIONS]",
                "",
                "Retrieve the client config, similar to microk8s.kubectl config view --raw",
                "",
                "Options:",
                " -h, --help          Show this help",
                " -l, --use-loopback  Report the cluster address using the loopback address",
                "                     (127.0.0.1) rather than the default interface address",
            )
            return 0
        else:
            common.out("microk8s config: invalid option -- {}".format(a))
            return 1
    mk.exit_if_no_permissions()
    text = common.read_file(common.data("credentials", "client.config"), "")
    if not use_loopback:
        ip = netinfo.default_ip()
        text = "".join(line.replace("127.0.0.1", ip, 1) for line in text.splitlines(True))
    common.out(text.rstrip("\n"), "")
    return 0


# --------------------------------------------------------------------------- kubectl


def _age(created):
    then = datetime.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    return human_duration((datetime.datetime.now(datetime.timezone.utc) - then).total_seconds())


def node_spec(n):
    """A cordoned node: spec.unschedulable and the taint the node lifecycle controller adds."""
    if not n.get("unschedulable"):
        return {}
    return {
        "taints": [
            {
                "effect": "NoSchedule",
                "key": "node.kubernetes.io/unschedulable",
                "timeAdded": n.get("unschedulable_since") or n["created"],
            }
        ],
        "unschedulable": True,
    }


def node_status_column(n):
    """kubectl's node printer: Ready/NotReady from the Ready condition, then SchedulingDisabled."""
    status = "Ready" if n["ready"] else "NotReady"
    return status + ",SchedulingDisabled" if n.get("unschedulable") else status


def node_object(n):
    """`kubectl get nodes -o json` node document (constructed shape, microk8s labels)."""
    role_label = (
        ("node.kubernetes.io/microk8s-worker", "microk8s-worker")
        if n["role"] == "worker"
        else ("node.kubernetes.io/microk8s-controlplane", "microk8s-controlplane")
    )
    ready = {
        "lastHeartbeatTime": n["created"],
        "lastTransitionTime": n["created"],
        "message": "kubelet is posting ready status",
        "reason": "KubeletReady",
        "status": "True",
        "type": "Ready",
    }
    if not n["ready"]:
        ready.update(
            {"message": "Kubelet stopped posting node status.", "reason": "NodeStatusUnknown", "status": "Unknown"}
        )
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": n["created"],
            "labels": {
                "beta.kubernetes.io/arch": arch,
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": arch,
                "kubernetes.io/hostname": n["name"],
                "kubernetes.io/os": "linux",
                "microk8s.io/cluster": "true",
                role_label[0]: role_label[1],
            },
            "name": n["name"],
            "resourceVersion": str(1000 + len(n["uid"])),
            "uid": n["uid"],
        },
        "spec": node_spec(n),
        "status": {
            "addresses": [
                {"address": n["ip"], "type": "InternalIP"},
                {"address": n["name"], "type": "Hostname"},
            ],
            "conditions": [ready],
            "nodeInfo": {
                "architecture": arch,
                "containerRuntimeVersion": "containerd://1.6.28",
                "kernelVersion": n.get("kernel", ""),
                "kubeProxyVersion": n["version"],
                "kubeletVersion": n["version"],
                "operatingSystem": "linux",
                "osImage": "Ubuntu 24.04.1 LTS",
            },
        },
    }


def _json(obj):
    return json.dumps(obj, indent=4, sort_keys=True)


def kubectl(argv):
    mk.exit_if_no_permissions()
    if mk.is_worker():
        common.out(
            "This MicroK8s deployment is acting as a node in a cluster. Please use the microk8s kubectl on the master."
        )
        return 0
    if mk.is_stopped():
        common.err(mk.STOPPED)
        return 1
    args = [a for a in argv if not a.startswith("--kubeconfig")]
    if args[:1] == ["version"] and "--client" in args:
        common.out("Client Version: {}".format(mk.version_record().get("version", "")), "Kustomize Version: v5.0.4")
        return 0
    if not mk.services_active():
        common.err(CONNECTION_REFUSED)
        return 1
    if args[:1] and args[0] in NODE_VERBS:
        return cordon_drain(args[0], args[1:])
    output, no_headers, positional = None, False, []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "--output"):
            i += 1
            output = args[i] if i < len(args) else ""
        elif a.startswith("-o") and len(a) > 2:
            output = a[2:].lstrip("=")
        elif a.startswith("--output="):
            output = a.split("=", 1)[1]
        elif a == "--no-headers":
            no_headers = True
        elif a in ("-A", "--all-namespaces"):
            pass
        else:
            positional.append(a)
        i += 1
    ds = datastore.load()
    if len(positional) >= 2 and positional[0] == "get" and positional[1] in ("nodes", "node", "no"):
        return _get_nodes(ds, positional[2:], output, no_headers)
    if len(positional) >= 3 and positional[0] == "delete" and positional[1] in ("nodes", "node", "no"):
        rc = 0
        for name in positional[2:]:
            if datastore.find_node(ds, name=name):
                mk.update_datastore(lambda d, n=name: d.__setitem__("nodes", [x for x in d["nodes"] if x["name"] != n]))
                common.out('node "{}" deleted'.format(name))
            else:
                common.err('Error from server (NotFound): nodes "{}" not found'.format(name))
                rc = 1
        return rc
    if positional[:2] == ["get", "all"]:
        rows = [["NAMESPACE", "NAME"]] if not no_headers else []
        rows += [["default" if r == "service/kubernetes" else "kube-system", r] for r in ds["resources"]]
        common.out(*common.tabwrite(rows, minwidth=6, padding=3))
        return 0
    common.err("error: the kos stand-in kubectl does not support: kubectl {}".format(" ".join(argv)))
    return 1


# kubectl cordon/uncordon/drain flags
# (https://kubernetes.io/docs/reference/kubectl/generated/kubectl_drain/):
# name -> kind (bool, duration, int, string).
NODE_VERBS = {
    "cordon": {"selector": "string", "dry-run": "string"},
    "uncordon": {"selector": "string", "dry-run": "string"},
    "drain": {
        "ignore-daemonsets": "bool", "delete-emptydir-data": "bool", "force": "bool", "disable-eviction": "bool",
        "timeout": "duration", "grace-period": "int", "skip-wait-for-delete-timeout": "int", "chunk-size": "int",
        "pod-selector": "string", "selector": "string", "dry-run": "string",
    },
}
# kubectl's global flags that take a value (their values are ignored here).
GLOBAL_VALUE_FLAGS = {"namespace", "server", "context", "cluster", "user", "request-timeout", "token", "v"}
GLOBAL_SHORT = {"n": "namespace", "s": "server", "v": "v"}
DRY_RUN_SUFFIX = {"none": "", "client": " (dry run)", "server": " (server dry run)"}


class KubectlError(Exception):
    """An error kubectl prints on stderr with exit status 1 (DefaultErrorExitCode)."""


def _flag_value_error(value, name, message):
    return KubectlError('error: invalid argument {} for "--{}" flag: {}'.format(common.go_quote(value), name, message))


def _check_flag_value(name, kind, value):
    """pflag Set(): bool (strconv.ParseBool), duration (time.ParseDuration), int (strconv.ParseInt)."""
    if kind == "bool":
        if value not in ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"):
            raise _flag_value_error(
                value, name, "strconv.ParseBool: parsing {}: invalid syntax".format(common.go_quote(value))
            )
        return value in ("1", "t", "T", "TRUE", "true", "True")
    if kind == "duration":
        try:
            common.parse_go_duration(value)
        except ValueError as e:
            raise _flag_value_error(value, name, str(e))
    elif kind == "int":
        try:
            int(value, 0)
        except ValueError:
            raise _flag_value_error(
                value, name, "strconv.ParseInt: parsing {}: invalid syntax".format(common.go_quote(value))
            )
    return value


def _parse_node_verb(verb, argv):
    """pflag parsing of `kubectl VERB ...`: (flag values, node names); KubectlError on bad flags."""
    spec = NODE_VERBS[verb]
    values, names = {}, []
    usage = "See 'kubectl {} --help' for usage.".format(verb)
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a == "--":
            names.extend(argv[i:])
            break
        if not a.startswith("-") or a == "-":
            names.append(a)
            continue
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
        else:
            name, value = a[1:2], a[2:].lstrip("=")
            eq = "=" if value else ""
            if name == "l":
                name = "selector"
            elif name in GLOBAL_SHORT:
                name = GLOBAL_SHORT[name]
            elif name in ("h",):
                name = "help"
            else:
                raise KubectlError("error: unknown shorthand flag: '{}' in {}\n{}".format(name, a, usage))
        if name == "help":
            raise KubectlError("error: the kos stand-in kubectl has no help for {}".format(verb))
        kind = spec.get(name) or ("string" if name in GLOBAL_VALUE_FLAGS else None)
        if kind is None:
            raise KubectlError("error: unknown flag: --{}\n{}".format(name, usage))
        if not eq:
            if kind == "bool":
                values[name] = True
                continue
            if name == "dry-run":
                values[name] = "unchanged"  # its NoOptDefVal: a bare --dry-run takes no argument
                continue
            if i >= len(argv):
                raise KubectlError("error: flag needs an argument: --{}\n{}".format(name, usage))
            value = argv[i]
            i += 1
        try:
            values[name] = _check_flag_value(name, kind, value)
        except KubectlError as e:
            raise KubectlError("{}\n{}".format(e, usage))
    return values, names


def cordon_drain(verb, argv):
    """kubectl cordon/uncordon/drain NODE... (pkg/cmd/drain/drain.go of
    https://github.com/kubernetes/kubectl/tree/v0.31.0): the named nodes must all exist (the
    resource builder stops at the first NotFound before anything changes); then each is cordoned
    (or uncordoned), and drain prints `node/<n> drained` per node after all cordon lines."""
    try:
        values, names = _parse_node_verb(verb, argv)
        if values.get("selector"):
            raise KubectlError("error: the kos stand-in kubectl does not support --selector")
        dry_run = values.get("dry-run", "none")
        if dry_run not in DRY_RUN_SUFFIX:
            raise KubectlError("error: the kos stand-in kubectl does not support --dry-run={}".format(dry_run))
        if not names:
            raise KubectlError(
                "error: USAGE: {} NODE [flags]\nSee 'kubectl {} -h' for help and examples".format(verb, verb)
            )
        names = [n.split("/", 1)[1] if n.split("/", 1)[0] in ("node", "nodes", "no") and "/" in n else n for n in names]
        ds = datastore.load()
        for name in names:
            if not datastore.find_node(ds, name=name):
                raise KubectlError('Error from server (NotFound): nodes "{}" not found'.format(name))
    except KubectlError as e:
        common.err(str(e))
        return 1
    suffix = DRY_RUN_SUFFIX[dry_run]
    want = verb != "uncordon"
    done = "cordoned" if want else "uncordoned"
    for name in names:
        node = datastore.find_node(datastore.load(), name=name)
        if bool(node.get("unschedulable")) == want:
            common.out("node/{} already {}{}".format(name, done, suffix))
            continue
        if dry_run == "none":
            mk.update_datastore(lambda d, n=name: _set_unschedulable(d, n, want))
        common.out("node/{} {}{}".format(name, done, suffix))
    if verb == "drain":
        # No Pods in the stand-in datastore: nothing to evict, no DaemonSet/emptyDir refusals.
        for name in names:
            common.out("node/{} drained{}".format(name, suffix))
    return 0


def _set_unschedulable(ds, name, value):
    node = datastore.find_node(ds, name=name)
    if not node:
        return
    if value:
        node["unschedulable"] = True
        node["unschedulable_since"] = datastore.now_iso()
    else:
        node.pop("unschedulable", None)
        node.pop("unschedulable_since", None)


def _get_nodes(ds, names, output, no_headers):
    nodes = ds["nodes"]
    if names:
        picked = []
        for name in names:
            n = datastore.find_node(ds, name=name)
            if not n:
                common.err('Error from server (NotFound): nodes "{}" not found'.format(name))
                return 1
            picked.append(n)
        nodes = picked
    if output == "json":
        if len(names) == 1:
            common.out(_json(node_object(nodes[0])))
        else:
            common.out(
                _json({"apiVersion": "v1", "items": [node_object(n) for n in nodes], "kind": "List", "metadata": {"resourceVersion": ""}})
            )
        return 0
    if output == "name":
        common.out(*["node/{}".format(n["name"]) for n in nodes])
        return 0
    wide = output == "wide"
    if output not in (None, "wide"):
        common.err("error: the kos stand-in kubectl does not support -o {}".format(output))
        return 1
    header = ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    if wide:
        header += ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    rows = [] if no_headers else [header]
    for n in nodes:
        row = [n["name"], node_status_column(n), "<none>", _age(n["created"]), n["version"]]
        if wide:
            row += [n["ip"], "<none>", "Ubuntu 24.04.1 LTS", n.get("kernel", ""), "containerd://1.6.28"]
        rows.append(row)
    if not rows:
        common.err("No resources found")
        return 0
    common.out(*common.tabwrite(rows, minwidth=6, padding=3))
    return 0


# --------------------------------------------------------------------------- version


def version(argv):
    rec = mk.version_record()
    common.out("MicroK8s {} revision {}".format(rec.get("version"), rec.get("revision")))
    return 0


# --------------------------------------------------------------------------- refresh-certs

REFRESH_HELP = (
    "Please use the '--cert' flag to select the certificate you need refreshed.",
    "",
    "Available certificate options:",
    "'server.crt': refreshes the server certificate",
    "'front-proxy-client.crt': refreshes the front proxy client certificate",
    "'ca.crt': refreshes the root CA and all certificates created from it.",
    "            Warning: refreshing the root CA requires nodes to leave and re-join the cluster",
)
CA_REPLACED = (
    "",
    "The CA certificates have been replaced. Kubernetes will restart the pods of your workloads.",
    "Any worker nodes you may have in your cluster need to be removed and re-joined to become aware of the new CA.",
    "",
)
CERT_CHOICES = ("ca.crt", "server.crt", "front-proxy-client.crt")


def _backup():
    target = os.path.join(common.snap_data_rev(), "certs-backup")
    common.out("Taking a backup of the current certificates under {}/".format(target))
    shutil.rmtree(common.data("certs-backup"), ignore_errors=True)
    shutil.copytree(pki.certs(), common.data("certs-backup"))


def _restart(services):
    for svc in services:
        common.out("Restarting service {}.".format(svc))
    if "cluster-agent" in services:
        mk.flush()
        agent.restart_agent()


def refresh_certs(argv):
    if mk.is_worker():
        common.out(
            "This MicroK8s deployment is acting as a node in a cluster. Please use the microk8s refresh-certs command on the master",
            "and then return to this node to perform a microk8s leave and re-join.",
        )
        return 0
    if os.geteuid() != 0:
        common.out("Elevated permissions is needed for this operation. Please run this command with sudo.")
        return 50
    check = undo = False
    cert = ca_dir = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            common.out(
                "Usage: microk8s refresh-certs [OPTIONS] [CA_DIR]",
                "",
                "  Replace the CA certificates with the ca.crt and ca.key found in CA_DIR.",
                "  Omit the CA_DIR argument and use the '--cert' flag to auto-generate a new CA",
                "  or any other certificate.",
                "",
                "Options:",
                "  -c, --check                     Check the expiration time of the installed",
                "                                  CA.",
                "  -e, --cert [ca.crt|server.crt|front-proxy-client.crt]",
                "                                  The certificate to be autogenerated, must be",
                "                                  one of ['ca.crt', 'server.crt', 'front-",
                "                                  proxy-client.crt']",
                "  -u, --undo                      Revert the last refresh performed.",
                "  -h, --help                      Show this message and exit.",
            )
            return 0
        if a in ("-c", "--check"):
            check = True
        elif a in ("-u", "--undo"):
            undo = True
        elif a in ("-e", "--cert") or a.startswith("--cert=") or (a.startswith("-e") and len(a) > 2):
            if a in ("-e", "--cert"):
                i += 1
                cert = argv[i] if i < len(argv) else None
                if cert is None:
                    common.err(
                        "Usage: microk8s refresh-certs [OPTIONS] [CA_DIR]",
                        "Try 'microk8s refresh-certs -h' for help.", "",
                        "Error: Option '{}' requires an argument.".format(a),
                    )
                    return 2
            else:
                cert = a.split("=", 1)[1] if "=" in a else a[2:]
            if cert not in CERT_CHOICES:
                common.err(
                    "Usage: microk8s refresh-certs [OPTIONS] [CA_DIR]",
                    "Try 'microk8s refresh-certs -h' for help.", "",
                    "Error: Invalid value for '-e' / '--cert': '{}' is not one of 'ca.crt', 'server.crt', "
                    "'front-proxy-client.crt'.".format(cert),
                )
                return 2
        elif a.startswith("-"):
            common.err(
                "Usage: microk8s refresh-certs [OPTIONS] [CA_DIR]",
                "Try 'microk8s refresh-certs -h' for help.", "",
                "Error: No such option: {}".format(a),
            )
            return 2
        else:
            ca_dir = a
        i += 1
    if ca_dir and (check or undo or cert):
        common.out("Please do not set any options in combination with the CA_DIR.")
        return 1
    if sum(bool(x) for x in (check, undo, cert)) > 1:
        common.out("Please select only one of the options -c, -u or -e.")
        return 2
    if check:
        try:
            days = [pki.expiry_days(pki.certs(n)) for n in ("ca.crt", "server.crt", "front-proxy-client.crt")]
        except (subprocess.CalledProcessError, OSError, ValueError):
            return 4
        common.out(
            "The CA certificate will expire in {} days.".format(days[0]),
            "The server certificate will expire in {} days.".format(days[1]),
            "The front proxy client certificate will expire in {} days.".format(days[2]),
        )
        return 0
    if undo:
        backup = common.data("certs-backup")
        if not os.path.isdir(backup):
            common.out("No previous backup found")
            return 1
        # (constructed) the real undo copies the backup back and restarts the services
        shutil.rmtree(pki.certs())
        shutil.copytree(backup, pki.certs())
        _restart(("kubelite", "cluster-agent"))
        return 0
    if cert:
        return _refresh_one(cert)
    if ca_dir:
        return _install_ca(ca_dir)
    common.out(*REFRESH_HELP)
    return 3


def _refresh_one(cert):
    _backup()
    common.out("Creating new certificates")
    mk.flush()
    try:
        if cert == "server.crt":
            pki.refresh_csr_conf()
            pki.gen_server_cert(show_stderr=True)
            _restart(("kubelite", "cluster-agent"))
        elif cert == "front-proxy-client.crt":
            pki.gen_front_proxy(show_stderr=True, new_ca=False)
            _restart(("kubelite",))
        else:
            pki.gen_ca()
            pki.refresh_csr_conf()
            pki.gen_server_cert(show_stderr=True)
            pki.gen_front_proxy(show_stderr=True)
            pki.gen_admin_cert()
            common.out("1", "Creating new kubeconfig file")
            layout.write_client_config()
            _restart(("kubelite", "cluster-agent"))
            common.out(*CA_REPLACED)
    except subprocess.CalledProcessError:
        shutil.rmtree(pki.certs(), ignore_errors=True)
        shutil.copytree(common.data("certs-backup"), pki.certs())
        return 20
    return 0


def _install_ca(ca_dir):
    # (constructed messages for the failure exits 30/31/32)
    common.out("Validating provided certificates")
    crt, key = os.path.join(ca_dir, "ca.crt"), os.path.join(ca_dir, "ca.key")
    if not (os.path.isfile(crt) and os.path.isfile(key)):
        common.out("Required files ca.crt and ca.key not found in {}".format(ca_dir))
        return 30
    if subprocess.run(["openssl", "pkey", "-in", key, "-noout"], capture_output=True).returncode:
        common.out("Invalid key file {}".format(key))
        return 31
    if subprocess.run(["openssl", "x509", "-in", crt, "-noout"], capture_output=True).returncode:
        common.out("Invalid certificate file {}".format(crt))
        return 32
    _backup()
    common.out("Installing provided certificates")
    shutil.copyfile(crt, pki.certs("ca.crt"))
    shutil.copyfile(key, pki.certs("ca.key"))
    pki.refresh_csr_conf()
    pki.gen_server_cert()
    pki.gen_admin_cert()
    common.out("Creating new kubeconfig file")
    layout.write_client_config()
    agent.restart_agent()
    common.out(*CA_REPLACED)
    return 0


# --------------------------------------------------------------------------- start / stop


def start(argv):
    if mk.is_worker():
        common.out(
            "This MicroK8s deployment is acting as a node in a cluster.",
            "Use 'snap start microk8s' to start services on this node.",
        )
        return 0
    mk.exit_if_no_permissions()
    rec = common.load_install()
    rec["services_active"] = True
    common.save_install(rec)
    common.remove(common.lock("stopped.lock"))
    agent.start_agent()
    mk.report_node_if_pending()
    return 0


def stop(argv):
    if mk.is_worker():
        common.out(
            "This MicroK8s deployment is acting as a node in a cluster.",
            "Use 'snap stop microk8s' to stop services on this node.",
        )
        return 0
    mk.exit_if_no_permissions()
    agent.stop_agent()
    rec = common.load_install()
    rec["services_active"] = False
    common.save_install(rec)
    common.touch(common.lock("stopped.lock"), 0o700)
    common.out("Stopped.")
    return 0
