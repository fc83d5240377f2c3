"""`microk8s add-node | join | leave | remove-node` (add_token.py, join.py, leave.py and
remove_node.py in https://github.com/canonical/microk8s/tree/master/scripts/wrappers)."""

import argparse
import hashlib
import http.client
import ipaddress
import json
import math
import os
import re
import secrets
import shutil
import ssl
import sys
import time

from . import agent, common, datastore, layout, netinfo, pki, transport
from . import mkcommon as mk

TOKEN_MIN_LEN = 32
FINGERPRINT_MIN_LEN = 12
WORKER_MSG_ADD_NODE = (
    "This MicroK8s deployment is acting as a node in a cluster. Please use the microk8s add-node on the master."
)


# --------------------------------------------------------------------------- add-node


def cluster_agent_port():
    """utils.sh cluster_agent_port: only a line containing `port` changes the default."""
    lines = [line for line in common.read_file(common.data("args", "cluster-agent"), "").splitlines() if "port" in line]
    if not lines:
        return "25000"
    return "\n".join((line.split() + ["", ""])[1] for line in lines)


def joiner_agent_port():
    """common/cluster/utils.py get_cluster_agent_port: port of the --bind line."""
    port = "25000"
    for line in common.read_file(common.data("args", "cluster-agent"), "").splitlines():
        if line.startswith("--bind"):
            parse = line.split(" ")[-1].split("=")[-1].split(":")
            if len(parse) > 1:
                port = parse[1].rstrip()
    return port


def add_node_parser():
    parser = argparse.ArgumentParser(
        description="Produce a connection string for a node to join the cluster.", prog="microk8s add-node"
    )
    parser.add_argument(
        "--token-ttl", "-l",
        help="Specify how long the token is valid, before it expires. "
        'Value of "-1" indicates that the token is usable only once '
        "(i.e. after joining a node, the token becomes invalid)",
        type=int, default="-1",
    )
    parser.add_argument(
        "--token", "-t",
        help="Specify the bootstrap token to add, must be 32 characters long. Auto generates when empty.",
    )
    parser.add_argument(
        "--format",
        help="Format the output of the token in pretty, short, token, or token-check",
        default="pretty",
        choices=("pretty", "short", "token", "token-check", "json", "yaml"),
    )
    return parser


def _yaml_scalar(s):
    if re.fullmatch(r"[A-Za-z0-9_.][A-Za-z0-9_./:-]*", s) and "/" in s:
        return s
    return "'" + s.replace("'", "''") + "'"


def add_node(argv):
    if mk.is_worker():
        common.out(WORKER_MSG_ADD_NODE)
        return 1
    if any("help" in a for a in argv):
        add_node_parser().print_help()
        return 0
    mk.exit_if_no_permissions()
    if "127.0.0.1" in pki.ca_subject():
        common.out(
            "Clustering requires a fresh MicroK8s installation. Reinstall with:",
            "sudo snap remove microk8s",
            "sudo snap install microk8s --classic",
        )
        return 1
    mk.exit_if_stopped_stderr()
    args = add_node_parser().parse_args(argv)
    token = args.token if args.token is not None else secrets.token_hex(16)
    if len(token) < TOKEN_MIN_LEN:
        common.out("Invalid token size.  It must be 32 characters long.")
        return 1
    path = common.data("credentials", "cluster-tokens.txt")
    with open(path, "a+") as fp:
        if args.token_ttl != -1:
            fp.write("{}|{}\n".format(token, int(round(time.time())) + args.token_ttl))
        else:
            fp.write("{}\n".format(token))
    check = pki.server_cert_check()
    default_ip, all_ips, port = netinfo.default_ip(), netinfo.all_ips(), cluster_agent_port()
    if args.format == "pretty":
        common.out(
            "From the node you wish to join to this cluster, run the following:",
            "microk8s join {}:{}/{}/{}\n".format(default_ip, port, token, check),
        )
        if mk.is_ha():
            common.out(
                "Use the '--worker' flag to join a node as a worker not running the control plane, eg:",
                "microk8s join {}:{}/{}/{} --worker\n".format(default_ip, port, token, check),
            )
        common.out(
            "If the node you are adding is not reachable through the default interface you can use one of the following:"
        )
        for ip in all_ips:
            common.out("microk8s join {}:{}/{}/{}".format(ip, port, token, check))
    elif args.format == "short":
        common.out("microk8s join {}:{}/{}/{}".format(default_ip, port, token, check))
        for ip in all_ips:
            if ip != default_ip:
                common.out("microk8s join {}:{}/{}/{}".format(ip, port, token, check))
    elif args.format == "token-check":
        common.out("{}/{}".format(token, check))
    elif args.format in ("json", "yaml"):
        info = {
            "token": "{}/{}".format(token, check),
            "urls": ["{}:{}/{}/{}".format(ip, port, token, check) for ip in all_ips],
        }
        if args.format == "json":
            common.out(json.dumps(info, indent=2))
        else:
            lines = ["token: " + _yaml_scalar(info["token"]), "urls:"]
            lines += ["- " + _yaml_scalar(u) for u in info["urls"]]
            common.out("\n".join(lines) + "\n")
    else:
        common.out(token)
    return 0


# --------------------------------------------------------------------------- join


class InvalidConnectionError(Exception):
    pass


def get_valid_connection_parts(connection):
    parts = connection.split("/")
    if len(parts) not in (2, 3):
        raise InvalidConnectionError("Expected format: <master_IP>:<master_PORT>/<token>[/<fingerprint>]")
    ep = parts[0].split(":")
    if len(ep) != 2:
        raise InvalidConnectionError("Expected format: <master_IP>:<master_PORT>/<token>[/<fingerprint>]")
    try:
        ipaddress.ip_address(ep[0])
    except ValueError:
        raise InvalidConnectionError("Invalid master IP")
    try:
        port = int(ep[1])
    except ValueError:
        raise InvalidConnectionError("Master PORT not a number")
    if port < 1 or port > 65535:
        raise InvalidConnectionError("Master PORT not in range 1:65535")
    if len(parts[1]) < TOKEN_MIN_LEN:
        raise InvalidConnectionError("Cluster token size should be at least {} bytes".format(TOKEN_MIN_LEN))
    if len(parts) == 3 and len(parts[2]) < FINGERPRINT_MIN_LEN:
        raise InvalidConnectionError("Fingerprint should be at least {} bytes".format(FINGERPRINT_MIN_LEN))
    return parts


def _click_usage_error(prog, usage, message):
    common.err("Usage: {} [OPTIONS] {}".format(prog, usage), "Try '{} -h' for help.".format(prog), "", "Error: " + message)
    return 2


JOIN_HELP = (
    "Usage: microk8s join [OPTIONS] CONNECTION",
    "",
    "  Join the node to a cluster",
    "",
    "  CONNECTION: the cluster connection endpoint in format <master>:<port>/<token>",
    "",
    "Options:",
    "  --worker                    Join as a worker only node.",
    "  --controlplane              Join running the control plane on HA clusters.",
    "                              (default)",
    "  --skip-verify               Skip the certificate verification of the node we",
    "                              are joining to. (default: false)",
    "  --disable-low-memory-guard  Disable the low memory guard. (default: false)",
    "  -h, --help                  Show this message and exit.",
)


def join_request(conn, path, req, master_ip, verify, fingerprint):
    try:
        if verify and fingerprint:
            der = conn.sock.getpeercert(True)
            if not hashlib.sha256(der).hexdigest().startswith(fingerprint):
                common.out(
                    "Joining cluster failed. Could not verify the identity of {}."
                    " Use '--skip-verify' to skip server certificate check.".format(master_ip)
                )
                sys.exit(4)
        conn.request(
            "POST", path, json.dumps(req), {"Content-type": "application/json", "Accept": "application/json"}
        )
        response = conn.getresponse()
        if response.status != 200:
            message = "Connection failed."
            try:
                body = response.read().decode()
                if body:
                    data = json.loads(body)
                    if "error" in data:
                        message = "{} {}".format(message, data["error"])
            except ValueError:
                pass
            common.out("{} ({}).".format(message, response.status))
            sys.exit(6)
        return json.loads(response.read())
    except http.client.HTTPException as e:
        common.out("Please ensure the master node is reachable. {}".format(e))
        sys.exit(1)
    except ssl.SSLError as e:
        common.out("Peer node verification failed ({}).".format(e))
        sys.exit(4)


def get_connection_info(master_ip, master_port, token, verify, fingerprint, worker):
    path = "/cluster/api/v2.0/join" if mk.is_ha() else "/cluster/api/v1.0/join"
    try:
        conn = transport.connection(master_ip, master_port)
        # Connection refused/timeouts propagate as a traceback, as in the real join.py.
        conn.connect()
        req = {
            "token": token,
            "hostname": netinfo.hostname().lower(),
            "port": joiner_agent_port(),
            "worker": worker,
            "can_handle_x509_auth": True,
            "can_handle_custom_etcd": True,
            "kos_standin": {"version": mk.version_record().get("version", "")},
        }
        return join_request(conn, path, req, master_ip, verify, fingerprint)
    except http.client.HTTPException as e:
        common.out("Connecting to cluster failed with {}.".format(e))
        sys.exit(5)
    except ssl.SSLError as e:
        common.out("Peer node verification failed with {}.".format(e))
        sys.exit(4)


def _store_cert(name, payload):
    path = pki.certs(name)
    if os.path.exists(path):
        shutil.copyfile(path, path + ".backup")
    common.write_file(path, payload, mode=0o600)


def _simulated_delay():
    try:
        return max(0.0, float(os.environ.get("KOS_STANDIN_DELAY", "0") or 0))
    except ValueError:
        return 0.0


def join_worker(info, master_ip):
    common.write_file(pki.certs("ca.remote.crt"), info["ca"], mode=0o600)
    common.write_file(common.data("args", "kubelet"), info.get("kubelet_args", ""))
    if "--node-ip" in info.get("kubelet_args", ""):
        common.set_arg("kubelet", "--node-ip", info["hostname_override"])
    common.set_arg("kubelet", "--hostname-override", None)
    common.set_arg("kubelet", "--client-ca-file", "${SNAP_DATA}/certs/ca.remote.crt")
    common.set_arg(
        "kubelet", "--node-labels", '"microk8s.io/cluster=true,node.kubernetes.io/microk8s-worker=microk8s-worker"'
    )
    common.write_file(common.data("credentials", "callback-token.txt"), info.get("callback_token", ""), mode=0o600)
    common.remove(common.lock("no-apiserver-proxy"))
    servers = "".join(
        "          - address: {}:{}\n".format(ip, info.get("apiport", "16443"))
        for ip in (info.get("control_plane_nodes") or [master_ip])
    )
    common.write_file(
        common.data("args", "traefik", "provider.yaml"),
        "tcp:\n  routers:\n    Router-1:\n      rule: HostSNI(`*`)\n      service: kube-apiserver\n"
        "      tls:\n        passthrough: true\n  services:\n    kube-apiserver:\n      loadBalancer:\n"
        "        servers:\n" + servers,
    )
    common.write_file(
        common.data("var", "kos-standin", "control-plane-agents.json"),
        json.dumps(info.get("kos_standin_agents") or []) + "\n",
    )
    for name in ("clustered.lock", "no-k8s-dqlite"):
        common.touch(common.lock(name), 0o700)
    common.touch(common.lock("no-cert-reissue"), 0o700)
    time.sleep(_simulated_delay())
    agent.restart_agent()
    common.out(
        "",
        "The node has joined the cluster and will appear in the nodes list in a few seconds.",
        "",
        "This worker node gets automatically configured with the API server endpoints.",
        "If the API servers are behind a loadbalancer please set the '--refresh-interval' to '0s' in:",
        "    /var/snap/microk8s/current/args/apiserver-proxy",
        "and replace the API server endpoints with the one provided by the loadbalancer in:",
        "    /var/snap/microk8s/current/args/traefik/provider.yaml",
        "",
    )


def join_control_plane(info):
    _store_cert("ca.crt", info["ca"])
    _store_cert("ca.key", info["ca_key"])
    _store_cert("serviceaccount.key", info["service_account_key"])
    if info.get("api_authz_mode"):
        common.set_arg("kube-apiserver", "--authorization-mode", info["api_authz_mode"])
    common.write_file(common.data("args", "kubelet"), info.get("kubelet_args", ""))
    common.set_arg("kubelet", "--hostname-override", None)
    common.write_file(common.data("credentials", "callback-token.txt"), info.get("callback_token", ""), mode=0o600)
    agent.stop_agent()
    backend = datastore.backend()
    with datastore.lock():
        shutil.rmtree(backend + ".backup", ignore_errors=True)
        shutil.move(backend, backend + ".backup")
        os.makedirs(backend)
        common.write_file(os.path.join(backend, "cluster.crt"), info["cluster_cert"])
        common.write_file(os.path.join(backend, "cluster.key"), info["cluster_key"], mode=0o600)
        datastore.save(info["kos_standin_datastore"], my_addr="{}:{}".format(info["hostname_override"], datastore.DQLITE_PORT))
    sys.stdout.write("Waiting for this node to finish joining the cluster. ")
    sys.stdout.flush()
    delay = _simulated_delay()
    for _ in range(min(10, math.ceil(delay / 2))):
        time.sleep(min(2.0, delay))
        delay -= 2.0
        sys.stdout.write(".. ")
        sys.stdout.flush()
    common.out(" ")
    # The joined node serves certificates of the cluster CA from now on.
    pki.refresh_csr_conf()
    pki.gen_server_cert()
    pki.gen_admin_cert()
    layout.write_client_config()
    common.touch(common.lock("no-cert-reissue"), 0o700)
    agent.start_agent()


def join(argv):
    mk.exit_if_no_permissions()
    if os.path.exists(os.path.join(common.snap_common(), "default-storage")):
        common.out("WARNING: Hostpath storage is enabled and is not suitable for multi node clusters.", "")
    worker, skip_verify, positional = False, False, []
    for a in argv:
        if a in ("-h", "--help"):
            common.out(*JOIN_HELP)
            return 0
        if a == "--worker":
            worker = "as-worker"
        elif a == "--controlplane":
            worker = "as-master"
        elif a == "--skip-verify":
            skip_verify = True
        elif a == "--disable-low-memory-guard":
            continue
        else:
            positional.append(a)
    if not positional:
        return _click_usage_error("microk8s join", "CONNECTION", "Missing argument 'CONNECTION'.")
    if len(positional) > 1:
        return _click_usage_error(
            "microk8s join", "CONNECTION", "Got unexpected extra argument ({})".format(positional[1])
        )
    connection = positional[0]
    try:
        parts = get_valid_connection_parts(connection)
    except InvalidConnectionError as e:
        common.out("Invalid connection: {}".format(e))
        return 1
    master_ip, master_port = parts[0].split(":")
    fingerprint = parts[2] if len(parts) > 2 else None
    verify = not skip_verify and fingerprint is not None
    common.touch(common.lock("join-in-progress"))
    try:
        common.out("Contacting cluster at {}".format(master_ip))
        info = get_connection_info(master_ip, master_port, parts[1], verify, fingerprint, worker)
        if worker == "as-worker":
            if info.get("ca_key") is not None:
                common.out(
                    "Joining process failed. Make sure the cluster you connect to supports joining worker nodes."
                )
                return 1
            join_worker(info, master_ip)
        else:
            join_control_plane(info)
    finally:
        common.remove(common.lock("join-in-progress"))
    common.out("Successfully joined the cluster.")
    return 0


# --------------------------------------------------------------------------- leave


def _post_member(member_agent, path, payload):
    host, port = transport.split_hostport(member_agent)
    status, body = transport.post(host, port, path, payload, timeout=10)
    if status != 200:
        raise RuntimeError("{} ({})".format(body.get("error", "request failed"), status))


def _waiting_for_node():
    sys.stdout.write("Waiting for node to start. ")
    common.out(" ")


def leave(argv):
    mk.exit_if_stopped_stderr()
    mk.exit_if_no_permissions()
    if not os.path.exists(common.lock("no-cert-reissue")) or (
        not mk.is_worker() and not os.path.exists(common.data("args", "k8s-dqlite"))
    ):
        common.out("This MicroK8s deployment is not acting as a node in a cluster.")
        return 1
    if any(a in ("-h", "--help") for a in argv):
        common.out(
            "Usage: microk8s leave [OPTIONS]", "", "  The node will depart from the cluster it is in.", "",
            "Options:", "  -h, --help  Show this message and exit.",
        )
        return 0
    version = mk.version_record().get("version", "")
    if mk.is_worker() or not mk.is_ha():
        return _leave_worker(version)
    ds = datastore.load()
    voters = sum(1 for m in ds["members"] if m["role"] == 0)
    mine, others = datastore.split_endpoints(ds)
    is_voter = any(m["role"] == 0 and m["address"] in mine for m in ds["members"])
    if voters == 1 and is_voter and len(ds["members"]) > 1:
        common.out(
            "This node currently holds the only copy of the Kubernetes database so it cannot leave the cluster.",
            "To remove this node you can either first remove all other nodes with 'microk8s remove-node' or",
            "form a highly available cluster by adding at least three nodes.",
        )
        return 3
    agent.stop_agent()
    if mine and "127.0.0.1" not in mine[0]:
        for ep in others:
            member = next(m for m in ds["members"] if m["address"] == ep)
            try:
                if not member.get("agent"):
                    raise ConnectionRefusedError(111, "Connection refused")
                _post_member(member["agent"], "/kos-standin/v1/remove-member", {"ca": pki.ca_fingerprint(), "address": mine[0]})
                break
            except Exception as e:
                common.out("Contacting node {} failed. Error:".format(ep), repr(e))
                agent.start_agent()
                return 2
    common.out("Generating new cluster certificates.")
    with datastore.lock():
        datastore.reinit(version)
    _waiting_for_node()
    common.remove(common.lock("no-cert-reissue"))
    agent.start_agent()
    return 0


def _leave_worker(version):
    try:
        cluster_ca = pki.ca_fingerprint()  # of ca.remote.crt, removed below
    except (OSError, ValueError):
        cluster_ca = None
    common.out("Configuring services.")
    common.touch(common.lock("no-apiserver-proxy"), 0o700)
    common.remove(pki.certs("ca.remote.crt"))
    common.out("Generating new cluster certificates.")
    with datastore.lock():
        datastore.reinit(version)
    for name in ("kubelet", "kube-proxy"):
        shutil.copyfile(os.path.join(common.snap(), "default-args", name), common.data("args", name))
    common.remove(common.lock("no-cert-reissue"))
    for name in ("clustered.lock", "no-k8s-dqlite"):
        if not os.path.isfile(common.lock(name)):
            common.out("Not in clustering mode.")
            return 2
        os.remove(common.lock(name))
    # The departed worker turns NotReady on the control plane (kubelet stops reporting).
    if cluster_ca:
        mk.post_to_control_plane(
            "/kos-standin/v1/node-status", {"name": netinfo.hostname().lower(), "ready": False}, ca_fp=cluster_ca
        )
    common.remove(common.data("var", "kos-standin", "control-plane-agents.json"))
    agent.restart_agent()
    _waiting_for_node()
    return 0


# --------------------------------------------------------------------------- remove-node


def _kubectl_not_found(name):
    common.err('Error from server (NotFound): nodes "{}" not found'.format(name))


def remove_node(argv):
    if mk.is_worker():
        common.out("This MicroK8s deployment is acting as a node in a cluster. Please use microk8s leave.")
        return 1
    if not argv:
        common.out("Please provide the node you want to remove.")
        return 1
    if mk.is_ha() and len(argv) == 2 and argv[1] != "--force":
        common.out("Please provide the node and the optional --force flag.")
        return 1
    mk.exit_if_no_permissions()
    force = "--force" in argv[1:]
    node = argv[0]
    ds = datastore.load()
    reachable = mk.is_cluster_ready(with_ready_node=False)
    if not mk.is_ha():
        entry = datastore.find_node(ds, name=node) if reachable else None
        if not entry:
            _kubectl_not_found(node)
            common.out("Node {} does not exist.".format(node))
            return 1
        return _delete_node(node)
    try:
        ipaddress.ip_address(node)
        is_ip = True
    except ValueError:
        is_ip = False
    if is_ip and reachable:
        by_ip = datastore.find_node(ds, ip=node)
        if by_ip:
            node = by_ip["name"]
    entry = datastore.find_node(ds, name=node) if reachable else None
    mine, others = datastore.split_endpoints(ds)
    if not entry:
        if not reachable:
            common.err("The connection to the server 127.0.0.1:16443 was refused - did you specify the right host or port?")
        else:
            _kubectl_not_found(node)
        common.out("Node {} does not exist in Kubernetes.".format(node))
        if force:
            common.out("Attempting to remove {} from dqlite.".format(node))
            for ep in others:
                if ep.startswith("{}:".format(node)):
                    common.out("Removing node entry found in dqlite.")
                    _drop_member(ep, mine)
        return 1
    node_ep = None
    for ep in others:
        if ep.startswith("{}:".format(entry["ip"])):
            node_ep = ep
    if node_ep and not force:
        common.out(
            "Removal failed. Node {} is registered with dqlite. Please, run first 'microk8s leave' on the departing node. ".format(node),
            "If the node is not available anymore and will never attempt to join the cluster in the future use the '--force' flag ",
            "to unregister the node while removing it.",
        )
        return 1
    if node_ep:
        _drop_member(node_ep, mine)
    return _delete_node(node)


def _drop_member(ep, mine):
    if "127.0.0.1" in ep or not mine:
        return

    def mut(ds):
        ds["members"] = [m for m in ds["members"] if m["address"] != ep]
        datastore.assign_roles(ds)

    mk.update_datastore(mut)


def _delete_node(name):
    def mut(ds):
        ds["nodes"] = [n for n in ds["nodes"] if n["name"] != name]

    mk.update_datastore(mut)
    return 0
