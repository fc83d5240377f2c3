"""`kubeadm` stand-in: command dispatch, version, token, init phase upload-certs."""

import json
import re
import sys
import time

from . import client, common, config, env, gofmt, pki, yamlish
from .common import Failure
from .flags import Flag, FlagError, find_command, parse

GLOBAL = [Flag("v", "string", short="v"), Flag("log-file"), Flag("log-file-max-size"),
          Flag("rootfs"), Flag("add-dir-header", "bool"), Flag("skip-headers", "bool"),
          Flag("skip-log-headers", "bool"), Flag("one-output", "bool"),
          Flag("help", "bool", short="h")]

INIT = [Flag("config"), Flag("upload-certs", "bool"), Flag("dry-run", "bool"),
        Flag("ignore-preflight-errors", "slice"), Flag("skip-phases", "slice"),
        Flag("skip-token-print", "bool"), Flag("skip-certificate-key-print", "bool"),
        Flag("certificate-key"), Flag("node-name"), Flag("apiserver-advertise-address"),
        Flag("apiserver-bind-port", "int"), Flag("control-plane-endpoint"),
        Flag("pod-network-cidr"), Flag("service-cidr"), Flag("service-dns-domain"),
        Flag("kubernetes-version"), Flag("token"), Flag("token-ttl", "duration"),
        Flag("cri-socket"), Flag("apiserver-cert-extra-sans", "slice"), Flag("cert-dir"),
        Flag("image-repository"), Flag("feature-gates"), Flag("patches")]

UPLOAD_CERTS = [Flag("config"), Flag("upload-certs", "bool"), Flag("certificate-key"),
                Flag("skip-certificate-key-print", "bool"), Flag("kubeconfig"),
                Flag("dry-run", "bool")]

TOKEN_COMMON = [Flag("kubeconfig"), Flag("dry-run", "bool")]
TOKEN_CREATE = [Flag("config"), Flag("print-join-command", "bool"),
                Flag("ttl", "duration", default=86400.0), Flag("usages", "slice"),
                Flag("groups", "slice"), Flag("description"), Flag("certificate-key")]
TOKEN_LIST = [Flag("output", short="o", default="text"), Flag("experimental-output"),
              Flag("show-managed-fields", "bool"),
              Flag("allow-missing-template-keys", "bool", default=True)]

JOIN = [Flag("config"), Flag("token"), Flag("discovery-token"), Flag("tls-bootstrap-token"),
        Flag("discovery-token-ca-cert-hash", "slice"),
        Flag("discovery-token-unsafe-skip-ca-verification", "bool"), Flag("discovery-file"),
        Flag("control-plane", "bool"), Flag("certificate-key"),
        Flag("apiserver-advertise-address"), Flag("apiserver-bind-port", "int"),
        Flag("node-name"), Flag("cri-socket"), Flag("ignore-preflight-errors", "slice"),
        Flag("skip-phases", "slice"), Flag("dry-run", "bool"), Flag("patches")]

RESET = [Flag("force", "bool", short="f"), Flag("ignore-preflight-errors", "slice"),
         Flag("dry-run", "bool"), Flag("kubeconfig"), Flag("config"), Flag("cri-socket"),
         Flag("cert-dir"), Flag("cleanup-tmp-dir", "bool"), Flag("skip-phases", "slice")]

VERSION = [Flag("output", short="o", default="")]

# the flags of `kubeadm upgrade plan|apply|node`
# (https://github.com/kubernetes/kubernetes/tree/v1.31.0/cmd/kubeadm/app/cmd/upgrade)
UPGRADE_COMMON = [Flag("config"), Flag("kubeconfig"), Flag("ignore-preflight-errors", "slice")]
UPGRADE_ALLOW = [Flag("allow-experimental-upgrades", "bool"),
                 Flag("allow-release-candidate-upgrades", "bool"), Flag("print-config", "bool")]
UPGRADE_PLAN = UPGRADE_COMMON + UPGRADE_ALLOW + [
    Flag("output", short="o", default="text"), Flag("show-managed-fields", "bool"),
    Flag("allow-missing-template-keys", "bool", default=True)]
UPGRADE_NODE = UPGRADE_COMMON + [
    Flag("dry-run", "bool"), Flag("etcd-upgrade", "bool", default=True),
    Flag("certificate-renewal", "bool", default=True), Flag("patches"),
    Flag("skip-phases", "slice")]
UPGRADE_APPLY = UPGRADE_NODE + UPGRADE_ALLOW + [
    Flag("yes", "bool", short="y"), Flag("force", "bool", short="f")]

# what `kubeadm certs renew` takes
# (https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-certs/)
RENEW_NAMES = ("admin.conf", "apiserver", "apiserver-etcd-client", "apiserver-kubelet-client",
               "controller-manager.conf", "etcd-healthcheck-client", "etcd-peer", "etcd-server",
               "front-proxy-client", "scheduler.conf", "super-admin.conf", "all")

TREE = {
    "version": None,
    "init": {"phase": {"upload-certs": None}},
    "join": None,
    "reset": None,
    "token": {"create": None, "list": None, "delete": None, "generate": None},
    "certs": {"certificate-key": None, "check-expiration": None,
              "renew": {name: None for name in RENEW_NAMES}},
    "upgrade": {"plan": None, "apply": None, "node": None},
}

FLAGS = {
    (): [],
    ("version",): VERSION,
    ("init",): INIT,
    ("init", "phase"): [],
    ("init", "phase", "upload-certs"): UPLOAD_CERTS,
    ("join",): JOIN,
    ("reset",): RESET,
    ("token",): TOKEN_COMMON,
    ("token", "create"): TOKEN_COMMON + TOKEN_CREATE,
    ("token", "list"): TOKEN_COMMON + TOKEN_LIST,
    ("token", "delete"): TOKEN_COMMON,
    ("token", "generate"): TOKEN_COMMON,
    ("certs",): [],
    ("certs", "certificate-key"): [],
    ("certs", "check-expiration"): [Flag("output", short="o", default=""), Flag("config"),
                                    Flag("cert-dir"), Flag("kubeconfig")],
    ("certs", "renew"): [],
    **{("certs", "renew", name): [Flag("config"), Flag("cert-dir"), Flag("kubeconfig")]
       for name in RENEW_NAMES},
    ("upgrade",): [],
    ("upgrade", "plan"): UPGRADE_PLAN,
    ("upgrade", "apply"): UPGRADE_APPLY,
    ("upgrade", "node"): UPGRADE_NODE,
}

# what may accompany --config: isAllowedFlag in
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/apis/kubeadm/validation/validation.go
_ALLOWED_WITH_CONFIG = {"config", "ignore-preflight-errors", "dry-run", "kubeconfig",
                        "node-name", "kubeconfig-dir", "upload-certs", "print-join-command",
                        "rootfs", "v", "log-file"}


def validate_mixed_arguments(values, set_names):
    if not values.get("config"):
        return
    bad = sorted(set(n for n in set_names
                     if n not in _ALLOWED_WITH_CONFIG and not n.startswith("skip-")))
    if bad:
        raise Failure("can not mix '--config' with arguments [%s]" % " ".join(bad))


def flags_for(path):
    return FLAGS.get(tuple(path), []) + GLOBAL


def parse_for(path, args):
    try:
        return parse(args, flags_for(path))
    except FlagError as e:
        raise Failure(str(e))


# ---------------------------------------------------------------------------
# version

_GIT_COMMITS = {"v1.31.4": ("a78aa47129b8539636eb86a9d00e31b2720fe06b", "2024-12-10T11:42:09Z",
                            "go1.22.9"),
                "v1.31.5": ("af64d838aacd9173317b39cf273741816bd82377", "2025-01-15T14:39:21Z",
                            "go1.22.10"),
                "v1.32.0": ("70d3cc986aa8221cd1dfb1121852688902d3bf53", "2024-12-11T18:04:20Z",
                            "go1.23.3")}


def version_info():
    v = env.version()
    major, minor, _ = env.version_tuple(v)
    commit, date, go = _GIT_COMMITS.get(v, ("0" * 40, "2025-01-01T00:00:00Z", "go1.23.6"))
    info = [("Major", str(major)), ("Minor", str(minor))]
    if minor >= 33:
        info += [("EmulationMajor", ""), ("EmulationMinor", ""), ("MinCompatibilityMajor", ""),
                 ("MinCompatibilityMinor", "")]
    info += [("GitVersion", v), ("GitCommit", commit), ("GitTreeState", "clean"),
             ("BuildDate", date), ("GoVersion", go), ("Compiler", "gc"),
             ("Platform", "linux/amd64")]
    return info


def cmd_version(args):
    values, _, _ = parse_for(["version"], args)
    fmt = values["output"]
    info = version_info()
    if fmt == "":
        env.out("kubeadm version: &version.Info{%s}"
                % ", ".join('%s:"%s"' % kv for kv in info))
    elif fmt == "short":
        env.out(env.version())
    elif fmt in ("json", "yaml"):
        doc = {"clientVersion": {k[0].lower() + k[1:]: v for k, v in info}}
        if fmt == "json":
            env.out(json.dumps(doc, indent=2))
        else:
            sys.stdout.write(yamlish.dump(doc))
    else:
        raise Failure("invalid output format: %s" % fmt)


# ---------------------------------------------------------------------------
# token (https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-token/,
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/token.go)

def _join_command(kc, token, certificate_key=None):
    """joinCommand() with the continuation lines removed (RunCreateToken)."""
    ca_hash = pki.ca_cert_hash(kc.ca_pem)
    cmd = "kubeadm join %s --token %s --discovery-token-ca-cert-hash %s " % (
        kc.host_port, token, ca_hash)
    if certificate_key:
        cmd += "--control-plane --certificate-key %s" % certificate_key
    return cmd


def cmd_token_create(args):
    values, set_names, pos = parse_for(["token", "create"], args)
    validate_mixed_arguments(values, set_names)
    token = pos[0] if pos else None
    if token is not None and not common.valid_token(token):
        raise Failure('the bootstrap token "%s" was not of the form "%s"'
                      % (token, common.TOKEN_PATTERN))
    if values["certificate-key"] and not values["print-join-command"]:
        raise Failure("cannot use --certificate-key without --print-join-command")
    token = token or common.random_token()
    usages = values["usages"] or None
    groups = values["groups"] or None
    description = values["description"] or ""
    ttl = values["ttl"]
    if values["config"]:
        docs = common.config_documents(values["config"],
                                       ("InitConfiguration", "ClusterConfiguration"))
        bts = (docs.get("InitConfiguration") or {}).get("bootstrapTokens") or []
        if bts:
            bt = bts[0]
            token = bt.get("token") or token
            ttl = config.duration_seconds(bt.get("ttl"), 86400.0)
            usages = bt.get("usages") or usages
            groups = bt.get("groups") or groups
            description = bt.get("description") or description
    kc_path = values["kubeconfig"] or "/etc/kubernetes/admin.conf"
    kc, api = common.admin_api(kc_path)
    rec = common.token_record(token, ttl, usages, groups, description)
    try:
        api.post("/api/v1/namespaces/kube-system/secrets", {"token": rec})
    except client.HTTPError as e:
        if e.reason == "AlreadyExists":
            raise Failure('a token with id "%s" already exists' % rec["id"])
        raise Failure("failed to create or update bootstrap token with name "
                      "bootstrap-token-%s: %s" % (rec["id"], e.message))
    except client.ClientError as e:
        raise Failure("failed to create or update bootstrap token with name "
                      "bootstrap-token-%s: %s" % (rec["id"], e.text))
    if values["print-join-command"]:
        env.out(_join_command(kc, token, values["certificate-key"] or None))
    else:
        env.out(token)


def _token_output_object(tok):
    obj = {"kind": "BootstrapToken", "apiVersion": "output.kubeadm.k8s.io/v1alpha3",
           "creationTimestamp": None,
           "token": "%s.%s" % (tok["id"], tok["secret"])}
    if tok.get("description"):
        obj["description"] = tok["description"]
    if tok.get("expires") is not None:
        obj["expires"] = gofmt.rfc3339(tok["expires"])
    if tok.get("usages"):
        obj["usages"] = sorted(tok["usages"])
    if tok.get("groups"):
        obj["groups"] = tok["groups"]
    return obj


def cmd_token_list(args):
    values, _, pos = parse_for(["token", "list"], args)
    if pos:
        raise Failure('unknown command "%s" for "kubeadm token list"' % pos[0])
    fmt = values["experimental-output"] or values["output"] or "text"
    if fmt not in ("text", "json", "yaml"):
        raise Failure('could not construct output printer: unable to match a printer suitable '
                      'for the output format "%s", allowed formats are: json,text,yaml' % fmt)
    _, api = common.admin_api(values["kubeconfig"] or "/etc/kubernetes/admin.conf")
    try:
        items = api.get("/api/v1/namespaces/kube-system/secrets"
                        "?fieldSelector=type%3Dbootstrap.kubernetes.io%2Ftoken")["items"]
    except (client.ClientError, client.HTTPError) as e:
        raise Failure("failed to list bootstrap tokens: %s" % common.api_error_text(e))
    now = time.time()
    header_done = False
    for tok in items:
        if fmt == "json":
            env.out(json.dumps(_token_output_object(tok), indent=4))
            continue
        if fmt == "yaml":
            sys.stdout.write(yamlish.dump(_token_output_object(tok)))
            continue
        # formatBootstrapToken + one tabwriter per token (cmd/token.go)
        ttl, expires = "<forever>", "<never>"
        if tok.get("expires") is not None:
            ttl = gofmt.short_human_duration(tok["expires"] - now)
            expires = gofmt.rfc3339(tok["expires"])
        usages = ",".join(sorted(tok.get("usages") or [])) or "<none>"
        groups = ",".join(tok.get("groups") or []) or "<none>"
        text = ""
        if not header_done:
            text += "TOKEN\tTTL\tEXPIRES\tUSAGES\tDESCRIPTION\tEXTRA GROUPS\n"
            header_done = True
        text += "%s.%s\t%-9s\t%s\t%-22s\t%-56s\t%s\n" % (
            tok["id"], tok["secret"], ttl, expires, usages,
            tok.get("description") or "<none>", groups)
        sys.stdout.write(gofmt.tabwrite(text, 10, 4, 3))
    sys.stdout.flush()


def cmd_token_delete(args):
    values, _, pos = parse_for(["token", "delete"], args)
    if not pos:
        raise Failure("missing argument; 'token delete' is missing token of form "
                      '"%s" or "%s"' % (common.TOKEN_PATTERN, r"\\A([a-z0-9]{6})\\z"))
    _, api = common.admin_api(values["kubeconfig"] or "/etc/kubernetes/admin.conf")
    for arg in pos:
        tid = arg
        if not re.match(r"^[a-z0-9]{6}$", arg):
            if not common.valid_token(arg):
                raise Failure('given token didn\'t match pattern "%s" or "%s"'
                              % (common.TOKEN_PATTERN, r"\\A([a-z0-9]{6})\\z"))
            tid = arg.split(".")[0]
        try:
            api.delete("/api/v1/namespaces/kube-system/secrets/bootstrap-token-" + tid)
        except (client.ClientError, client.HTTPError) as e:
            raise Failure('failed to delete bootstrap token "%s": %s'
                          % (tid, common.api_error_text(e)))
        env.out('bootstrap token "%s" deleted' % tid)


def cmd_token_generate(args):
    parse_for(["token", "generate"], args)
    env.out(common.random_token())


# ---------------------------------------------------------------------------
# init phase upload-certs
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/phases/init/uploadcerts.go
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/phases/copycerts/copycerts.go

def cmd_upload_certs(args):
    values, set_names, _ = parse_for(["init", "phase", "upload-certs"], args)
    validate_mixed_arguments(values, set_names)
    if not values["upload-certs"]:
        env.out("[upload-certs] Skipping phase. Please see --upload-certs")
        return
    cc = config.normalize_cluster(None)
    key = values["certificate-key"]
    if values["config"]:
        docs = common.config_documents(values["config"],
                                       ("InitConfiguration", "ClusterConfiguration"))
        cc = config.normalize_cluster(docs.get("ClusterConfiguration"))
        key = key or (docs.get("InitConfiguration") or {}).get("certificateKey")
    key = key or common.new_certificate_key()
    try:
        _, api = common.admin_api(values["kubeconfig"] or "/etc/kubernetes/admin.conf")
        if not values["config"]:
            # without --config kubeadm reads the ClusterConfiguration from the cluster
            try:
                cm = api.get("/api/v1/namespaces/kube-system/configmaps/kubeadm-config")
                cc = config.normalize_cluster(yamlish.load(cm["data"]["ClusterConfiguration"]))
            except (client.ClientError, client.HTTPError) as e:
                raise Failure("unable to fetch the kubeadm-config ConfigMap: failed to get "
                              "config map: %s" % common.api_error_text(e))
        data = common.encrypt_shared_certs(cc, key)
        env.out('[upload-certs] Storing the certificates in Secret "kubeadm-certs" in the '
                '"kube-system" Namespace')
        if not values["dry-run"]:
            try:
                api.put("/api/v1/namespaces/kube-system/secrets/kubeadm-certs",
                        {"ownerToken": common.cert_token_record(), "data": data})
            except (client.ClientError, client.HTTPError) as e:
                raise Failure("error uploading certs: %s" % common.api_error_text(e))
    except Failure as f:
        raise common.phase_failure("upload-certs", f.text)
    if not values["skip-certificate-key-print"]:
        env.out("[upload-certs] Using certificate key:")
        env.out(key)


def cmd_certificate_key(args):
    parse_for(["certs", "certificate-key"], args)
    env.out(common.new_certificate_key())


# ---------------------------------------------------------------------------

def run(argv):
    path, rest = find_command(argv, TREE, flags_for)
    key = tuple(path)
    if not path:
        if rest and not rest[0].startswith("-"):
            raise Failure('unknown command "%s" for "kubeadm"' % rest[0])
        parse_for([], rest)
        env.out("kubeadm: easily bootstrap a secure Kubernetes cluster\n\n"
                "Usage:\n  kubeadm [command]")
        return 0
    if key in (("token",), ("init", "phase"), ("certs",), ("certs", "renew"), ("upgrade",)):
        values, _, pos = parse_for(path, rest)
        name = '"%s"' % " ".join(path) if key != ("init", "phase") else '"phase"'
        if not pos:
            raise Failure("missing subcommand; %s is not meant to be run on its own" % name)
        raise Failure('invalid subcommand: "%s"' % pos[0])
    if "-h" in rest or "--help" in rest:
        env.out("Usage:\n  kubeadm %s [flags]" % " ".join(path))
        return 0
    if key == ("version",):
        cmd_version(rest)
    elif key == ("init",):
        from . import kubeadm_init
        kubeadm_init.cmd_init(rest, parse_for, validate_mixed_arguments)
    elif key == ("init", "phase", "upload-certs"):
        cmd_upload_certs(rest)
    elif key == ("join",):
        from . import kubeadm_join
        kubeadm_join.cmd_join(rest, parse_for, validate_mixed_arguments)
    elif key == ("reset",):
        from . import kubeadm_reset
        kubeadm_reset.cmd_reset(rest, parse_for)
    elif key == ("token", "create"):
        cmd_token_create(rest)
    elif key == ("token", "list"):
        cmd_token_list(rest)
    elif key == ("token", "delete"):
        cmd_token_delete(rest)
    elif key == ("token", "generate"):
        cmd_token_generate(rest)
    elif key == ("certs", "certificate-key"):
        cmd_certificate_key(rest)
    elif key == ("certs", "check-expiration"):
        from . import kubeadm_certs
        kubeadm_certs.cmd_check_expiration(rest, parse_for)
    elif key[:2] == ("certs", "renew"):
        from . import kubeadm_certs
        kubeadm_certs.cmd_renew(key[2], rest, parse_for)
    elif key[0] == "upgrade":
        from . import kubeadm_upgrade
        {"plan": kubeadm_upgrade.cmd_plan, "apply": kubeadm_upgrade.cmd_apply,
         "node": kubeadm_upgrade.cmd_node}[key[1]](rest, parse_for)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    env.set_tool("kubeadm")  # `kubeadm version` and the texts follow the kubeadm package
    try:
        return run(argv)
    except Failure as f:
        common.report(f)
        return f.exit_code
    except KeyboardInterrupt:
        return 130
