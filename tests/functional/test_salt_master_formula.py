"""
The salt_master formula applied through Salt's real loaders into a directory of its own,
and the master it configures storing returns through Salt's own job-cache code
(``salt.utils.job.store_job``, what the master runs for every return): the cache
directory is 0700, jobs are kept an hour, and no join credential, token, certificate key
or kubeconfig key reaches the disk, from a published ``mine.get``, a node's ``salt-call
mine.get`` or a state that echoed one; every other return is stored as before.
"""

import configparser
import importlib
import os
import stat
import types
from pathlib import Path

import pytest
import salt.config
import salt.loader
import salt.utils.batch_output
import salt.utils.batch_state
import salt.utils.jid
import salt.utils.job
import yaml
from saltfactories.utils.functional import Loaders

from tests.release import release_root

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "salt" / "salt"
MASTER_ID = "salt.kos-sm.test"
WORKER = "k8s-worker-1.kos-sm.test"
FIRST = "k8s-cp-1.kos-sm.test"

# What a first control plane publishes under kos_join_<node> (microk8s and kubeadm).
CONNECTION = "10.0.0.5:25000/0123456789abcdef0123456789abcdef/7f3a9c2b1d0e"
TOKEN = "abcdef.0123456789abcdef"
CERT_KEY = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
PRIVATE_KEY = (
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIKosKosKosKosKosKosKosKosKosKos\n"
    "-----END EC PRIVATE KEY-----\n"
)
CLIENT_KEY = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLUtvc0tvc0tvcw=="
KUBECONFIG = (
    "apiVersion: v1\nclusters:\n- cluster:\n    server: https://10.0.0.5:16443\n  name: kos\n"
    "users:\n- name: admin\n  user:\n    client-certificate-data: Q0VSVA==\n"
    f"    client-key-data: {CLIENT_KEY}\n"
)
SECRETS = (CONNECTION.split("/")[1], TOKEN, CERT_KEY, "KosKosKosKos", CLIENT_KEY)


@pytest.fixture(scope="module")
def applied(tmp_path_factory):
    """The formula applied with its config and cache under a directory of this test."""
    root = tmp_path_factory.mktemp("salt-master")
    cachedir = root / "var" / "cache" / "salt" / "master"
    # as Salt leaves them
    (cachedir / "jobs").mkdir(parents=True)
    os.chmod(cachedir, 0o755)
    os.chmod(cachedir / "jobs", 0o755)
    pillar_dir = root / "pillar"
    pillar_dir.mkdir()
    (pillar_dir / "top.sls").write_text("base:\n  '*':\n    - data\n")
    (pillar_dir / "data.sls").write_text(yaml.safe_dump({"salt_master": {
        "config_file": str(root / "etc" / "salt" / "master.d" / "kos.conf"),
        "cachedir": str(cachedir),
        "manage_service": False,
        "backups": {"dir": str(root / "backups"), "keep": 2},
    }}))
    opts = salt.config.minion_config(None)
    opts.update(
        id=MASTER_ID,
        file_client="local",
        root_dir=str(root / "minion"),
        cachedir=str(root / "minion" / "cache"),
        # Salt derives it from the default cachedir: this machine's /var/cache/salt
        extension_modules=str(root / "minion" / "extmods"),
        pki_dir=str(root / "minion" / "pki"),
        file_roots={"base": [str(TREE), str(release_root())]},
        pillar_roots={"base": [str(pillar_dir)]},
    )
    loaders = Loaders(opts)
    first = loaders.modules.state.sls("salt_master")
    again = loaders.modules.state.sls("salt_master")
    return types.SimpleNamespace(root=root, cachedir=cachedir, first=first.raw,
                                 again=again.raw, loaders=loaders)


def master_opts(applied, **overrides):
    """The options a salt-master reading the formula's config would run with."""
    master_file = applied.root / "etc" / "salt" / "master"
    master_file.write_text("")
    opts = salt.config.master_config(str(master_file))
    opts.update({
        "root_dir": str(applied.root),
        "cachedir": str(applied.cachedir),
        "extension_modules": str(applied.cachedir / "extmods"),
        "pki_dir": str(applied.root / "pki"),
        "sock_dir": str(applied.root / "sock"),
        **overrides,
    })
    return opts


def test_the_formula_writes_a_config_the_master_reads(applied):
    failed = {k: v["comment"] for k, v in applied.first.items() if v["result"] is not True}
    assert not failed, failed
    assert all(not v["changes"] for v in applied.again.values()), applied.again
    opts = master_opts(applied)
    # master.d/kos.conf, read by Salt's own config loader (which checks the types)
    assert opts["keep_jobs_seconds"] == 3600
    assert opts["master_job_cache"] == "kos_job_cache"
    assert opts["job_cache"] is True  # the highstates kos status reads stay
    for path in (applied.cachedir, applied.cachedir / "jobs"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    # the extension's release, installed before the config that names its returner
    installed = [v["result"] for k, v in applied.first.items()
                 if "_|-kos-extension-installed_|-saltext.kos==" in k]
    assert installed == [True], applied.first
    assert "kos_job_cache.returner" in salt.loader.returners(opts, {})
    assert opts["engines"] == [{"kos_batch_scrub": {}}]
    assert "kos_batch_scrub.start" in salt.loader.engines(opts, {}, {}, {})
    # the reactor's runner, where the master's own runner loader finds it
    assert opts["reactor"] == [{"salt/minion/*/start": ["salt://reactor/start.sls"]}]
    assert "kos_reactor.started" in salt.loader.runner(opts)
    # control planes push sealed backups; the master serves them back as saltenv kos-backups
    # and takes one on its schedule
    assert opts["file_recv"] is True and opts["file_recv_max_size"] == 2100
    assert opts["file_roots"]["kos-backups"] == [str(applied.root / "backups")]
    assert opts["schedule"]["kos-backup"] == {
        "function": "state.orchestrate", "args": ["orch.backup"], "hours": 24,
        "run_on_start": False}


def test_the_master_files_what_control_planes_pushed_and_keeps_the_newest(applied):
    pushed = applied.cachedir / "minions" / FIRST / "files" / "var" / "lib" / "kos" / "backups"
    pushed.mkdir(parents=True)
    names = [f"etcd-k8s-cp-1-2026112{d}T180000Z.kosbak" for d in (5, 6, 7)]
    for name in names:
        (pushed / name).write_bytes(b"KOSBAK1\n" + name.encode())
    ret = applied.loaders.modules.state.sls("salt_master.backups").raw
    (state,) = ret.values()
    assert state["result"] is True, state
    assert state["changes"] == {"filed": names, "removed": names[:1]}
    kept = applied.root / "backups"
    assert sorted(os.listdir(kept)) == names[1:]
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    assert list(pushed.iterdir()) == []
    assert applied.loaders.modules.kos.backups(str(kept)) == [
        {"name": n, "size": len(b"KOSBAK1\n" + n.encode()), "time": f"2026-11-2{d}T18:00:00Z"}
        for n, d in zip(names[1:], (6, 7), strict=True)]


def cache_bytes(cachedir):
    return b"".join(p.read_bytes() for p in Path(cachedir, "jobs").rglob("*") if p.is_file())


def store_returns(opts):
    """What the master does with a published mine.get, a salt-call mine.get, a highstate
    and a file.read, through Salt's own job-cache code; the jids of the published jobs."""
    mminion = types.SimpleNamespace(returners=salt.loader.returners(opts, {}))
    cache = opts["master_job_cache"]
    jids = {}
    for fun, arg, minion, ret in (
        ("mine.get", [WORKER, f"kos_join_{WORKER}"], WORKER,
         {FIRST: {"node": WORKER, "role": "worker", "connection": CONNECTION}}),
        ("test.ping", [], WORKER, True),
        # an operator's own command line with a token in it
        ("cmd.run", [f"kubeadm token delete {TOKEN}"], FIRST, "bootstrap token deleted"),
        ("state.highstate", [], FIRST,
         {"cmd_|-kos_|-kos_|-run": {"result": True, "changes": {"stdout": f"{TOKEN}\n"},
                                    "comment": PRIVATE_KEY, "__id__": "kos"},
          # a state's key holds its name
          f"cmd_|-echo_|-echo {CERT_KEY}_|-run": {"result": True, "changes": {},
                                                  "comment": "", "__id__": "echo"}}),
        ("file.read", ["/var/snap/microk8s/current/credentials/client.config"], FIRST,
         KUBECONFIG),
    ):
        jid = mminion.returners[f"{cache}.prep_jid"]()
        mminion.returners[f"{cache}.save_load"](
            jid, {"jid": jid, "fun": fun, "arg": arg, "tgt": minion, "tgt_type": "glob",
                  "user": "root"}, [minion])
        salt.utils.job.store_job(opts, {"jid": jid, "id": minion, "fun": fun, "fun_args": arg,
                                        "return": ret, "retcode": 0, "success": True},
                                 mminion=mminion)
        jids[fun] = jid
    # salt-call on a node: no published job, the master stores the whole load
    salt.utils.job.store_job(opts, {
        "jid": "req", "id": FIRST, "fun": "mine.get", "fun_args": [FIRST, f"kos_join_{FIRST}"],
        "return": {FIRST: {"token": TOKEN, "certificate_key": CERT_KEY}}, "retcode": 0},
        mminion=mminion)
    return mminion, jids


def test_without_the_filter_salts_cache_holds_the_secrets(applied, tmp_path):
    """The control: Salt's local_cache writes every one of them to disk."""
    opts = master_opts(applied, master_job_cache="local_cache", cachedir=str(tmp_path))
    store_returns(opts)
    found = cache_bytes(tmp_path)
    assert all(s.encode() in found for s in SECRETS)


def test_the_job_cache_holds_no_secret_and_every_other_return(applied):
    opts = master_opts(applied)
    mminion, jids = store_returns(opts)
    found = cache_bytes(applied.cachedir)
    assert [s for s in SECRETS if s.encode() in found] == []
    get_jid = mminion.returners["kos_job_cache.get_jid"]
    assert get_jid(jids["test.ping"]) == {WORKER: {"return": True, "retcode": 0,
                                                   "success": True}}
    mine = get_jid(jids["mine.get"])[WORKER]["return"]
    assert "withheld" in mine and "secret" in mine
    # a highstate keeps its results (kos status reads them), its secrets masked
    states = get_jid(jids["state.highstate"])[FIRST]["return"]
    assert sorted(states) == ["cmd_|-echo_|-echo withheld-by-kos_|-run", "cmd_|-kos_|-kos_|-run"]
    state = states["cmd_|-kos_|-kos_|-run"]
    assert state["result"] is True and state["__id__"] == "kos"
    assert "withheld" in state["comment"] and "withheld" in state["changes"]["stdout"]
    kubeconfig = yaml.safe_load(get_jid(jids["file.read"])[FIRST]["return"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://10.0.0.5:16443"
    assert "withheld" in kubeconfig["users"][0]["user"]["client-key-data"]
    # the jobs are all listed, with their functions and targets (jobs.list_jobs)
    loads = {jid: mminion.returners["kos_job_cache.get_load"](jid)
             for jid in mminion.returners["kos_job_cache.get_jids"]()}
    assert sorted(load["fun"] for load in loads.values()) == [
        "cmd.run", "file.read", "mine.get", "mine.get", "state.highstate", "test.ping"]
    assert loads[jids["mine.get"]]["tgt"] == WORKER
    assert loads[jids["mine.get"]]["arg"] == [WORKER, f"kos_join_{WORKER}"]
    assert loads[jids["cmd.run"]]["arg"] == ["kubeadm token delete withheld-by-kos"]
    assert get_jid(jids["cmd.run"])[FIRST]["return"] == "bootstrap token deleted"


def batch_engine():
    return importlib.import_module("saltext.kos.engines.kos_batch_scrub")


def test_a_batchs_state_file_keeps_no_secret(applied):
    """``salt --static`` and ``salt -b`` run as batches: Salt 3008's batch manager writes
    each minion's whole return to the job's .batch.p, past the job cache. The engine
    rewrites it through the job cache's rules; the batch's minions and codes stay."""
    opts = master_opts(applied)
    redact = salt.loader.returners(opts, {})["kos_job_cache.redact_batch"]
    jids = {}
    for fun, arg, ret in (
        ("mine.get", [FIRST, f"kos_join_{WORKER}"],
         {FIRST: {"node": WORKER, "role": "worker", "connection": CONNECTION}}),
        ("state.sls", ["kubeadm.credentials"],
         {"cmd_|-kos_|-kos_|-run": {"result": True, "changes": {"stdout": TOKEN},
                                    "comment": PRIVATE_KEY}}),
    ):
        jid = salt.utils.jid.gen_jid(opts)
        state = salt.utils.batch_state.create_batch_state(
            {"fun": fun, "arg": arg + [f"pillar={{'key': '{CERT_KEY}'}}"], "batch": "100%"},
            [WORKER, FIRST], jid)
        state["done"][WORKER] = {"ret": ret, "retcode": 0, "failed": False}
        state["active"][FIRST] = 0
        salt.utils.batch_state.write_batch_state(jid, state, opts)
        jids[fun] = jid
    before = cache_bytes(applied.cachedir)
    assert all(s.encode() in before for s in (CONNECTION.split("/")[1], TOKEN, CERT_KEY))

    engine = batch_engine()
    assert engine.sweep(str(applied.cachedir / "jobs"), redact) == 2
    found = cache_bytes(applied.cachedir)
    assert [s for s in SECRETS if s.encode() in found] == []
    assert engine.sweep(str(applied.cachedir / "jobs"), redact) == 0  # nothing left to do
    mine = salt.utils.batch_state.read_batch_state(jids["mine.get"], opts)
    assert mine["done"][WORKER] == {"ret": "withheld from the job cache by kos: it carries "
                                           "a secret", "retcode": 0, "failed": False}
    assert mine["all_minions"] == [WORKER, FIRST] and list(mine["active"]) == [FIRST]
    states = salt.utils.batch_state.read_batch_state(jids["state.sls"], opts)
    result = states["done"][WORKER]["ret"]["cmd_|-kos_|-kos_|-run"]
    assert result["result"] is True and "withheld" in result["changes"]["stdout"]
    # a batch's event names the file the engine scrubs
    tag = salt.utils.batch_output.tag_complete(jids["state.sls"])
    assert engine.LIFECYCLE.match(tag).group(1) == jids["state.sls"]


def test_without_the_filter_no_config_names_it(tmp_path_factory):
    root = tmp_path_factory.mktemp("salt-master-plain")
    pillar_dir = root / "pillar"
    pillar_dir.mkdir()
    (pillar_dir / "top.sls").write_text("base:\n  '*':\n    - data\n")
    conf = root / "kos.conf"
    (pillar_dir / "data.sls").write_text(yaml.safe_dump({"salt_master": {
        "config_file": str(conf), "cachedir": str(root / "cache"), "manage_service": False,
        "job_cache_filter": False, "keep_jobs_seconds": 600}}))
    opts = salt.config.minion_config(None)
    opts.update(id=MASTER_ID, file_client="local", root_dir=str(root / "minion"),
                cachedir=str(root / "minion" / "cache"), pki_dir=str(root / "minion" / "pki"),
                extension_modules=str(root / "minion" / "extmods"),
                file_roots={"base": [str(TREE), str(release_root())]}, pillar_roots={"base": [str(pillar_dir)]})
    ret = Loaders(opts).modules.state.sls("salt_master").raw
    assert all(v["result"] is True for v in ret.values()), ret
    written = yaml.safe_load(conf.read_text())
    assert "master_job_cache" not in written and written["keep_jobs_seconds"] == 600
    assert "engines" not in written
    assert stat.S_IMODE((root / "cache").stat().st_mode) == 0o700


def formula(tmp_path, pillar):
    """Salt's loaders for the master's own minion, with ``pillar`` as its whole pillar."""
    pillar_dir = tmp_path / "pillar"
    pillar_dir.mkdir()
    (pillar_dir / "top.sls").write_text("base:\n  '*':\n    - data\n")
    (pillar_dir / "data.sls").write_text(yaml.safe_dump(pillar))
    opts = salt.config.minion_config(None)
    opts.update(id=MASTER_ID, file_client="local", root_dir=str(tmp_path / "minion"),
                cachedir=str(tmp_path / "minion" / "cache"),
                extension_modules=str(tmp_path / "minion" / "extmods"),
                pki_dir=str(tmp_path / "minion" / "pki"),
                file_roots={"base": [str(TREE), str(release_root())]}, pillar_roots={"base": [str(pillar_dir)]})
    return Loaders(opts).modules


def loaded(tmp_path, facts):
    """Salt's loaders for a master with ``kos:salt_master`` = ``facts``, its service managed,
    as on a cloud."""
    return formula(tmp_path, {
        "kos": {"salt_master": facts},
        "salt_master": {"config_file": str(tmp_path / "kos.conf"),
                        "cachedir": str(tmp_path / "cache")}})


def shown(tmp_path, facts):
    """The salt_master states for such a master, compiled (state.show_sls)."""
    return loaded(tmp_path, facts).state.show_sls("salt_master")


def test_a_master_that_joins_a_top_runs_its_syndic_restarted_after_the_master(tmp_path):
    states = shown(tmp_path, {"id": MASTER_ID, "syndic_master": "203.0.113.7"})
    running = states["salt_master-syndic-service-running"]["service"]
    assert {"name": "salt-syndic"} in running and {"enable": True} in running
    restart = states["salt_master-syndic-restart-deferred"]["cmd"]
    (name,) = [arg["name"] for arg in restart if isinstance(arg, dict) and "name" in arg]
    master = states["salt_master-service-restart-deferred"]["cmd"]
    (master_name,) = [arg["name"] for arg in master if isinstance(arg, dict) and "name" in arg]
    # the syndic follows the master's restart, not before it
    delay = int(name.split("--on-active=")[1].split()[0])
    assert delay > int(master_name.split("--on-active=")[1].split()[0])
    assert name.endswith("systemctl restart salt-syndic")


def arg(state, key):
    (value,) = [a[key] for a in state if isinstance(a, dict) and key in a]
    return value


def test_on_tcp_every_start_of_the_master_has_its_minions_sign_in_again(tmp_path):
    # tests/integration/test_master_restart.py: the fault, and the script's cure
    modules = loaded(tmp_path, {"id": MASTER_ID, "transport": "tcp"})
    states = modules.state.show_sls("salt_master")
    unit = states["salt_master-reconnect-unit-managed"]["file"]
    rendered = modules.file.apply_template_on_contents(
        (TREE / "salt_master" / "files" / "kos-salt-master-reconnect.service").read_text(),
        "jinja", arg(unit, "context"), None, "base")
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(rendered)
    # whoever starts the master (a reboot, by hand, the formula), the script follows
    assert parser["Install"]["WantedBy"] == "salt-master.service"
    assert parser["Unit"]["After"] == "salt-master.service"
    script = arg(states["salt_master-reconnect-script-managed"]["file"], "name")
    assert parser["Service"]["ExecStart"] == script
    assert parser["Service"]["Type"] == "oneshot"
    enabled = states["salt_master-reconnect-unit-enabled"]["service"]
    assert "enabled" in enabled and {"name": Path(arg(unit, "name")).stem} in enabled
    # the formula's own restart ends once the minions were told (kos waits for that unit)
    restart = arg(states["salt_master-service-restart-deferred"]["cmd"], "name")
    assert restart.split()[-3:] == ["restart", "salt-master", Path(arg(unit, "name")).stem]


def test_on_zeromq_the_master_starts_without_the_reconnect(tmp_path):
    states = shown(tmp_path, {"id": MASTER_ID})
    assert "salt_master-reconnect-unit-managed" not in states
    assert arg(states["salt_master-service-restart-deferred"]["cmd"], "name").endswith(
        "systemctl restart salt-master")
    gone = arg(states["salt_master-reconnect-absent"]["file"], "names")
    assert "/etc/systemd/system/kos-salt-master-reconnect.service" in gone


def test_a_master_without_a_top_runs_no_syndic(tmp_path):
    states = shown(tmp_path, {"id": MASTER_ID})
    assert "salt_master-syndic-service-running" not in states
    assert "salt_master-syndic-restart-deferred" not in states


def applied_with(tmp_path, facts, written=None, minions=(), **kwargs):
    """The salt_master state applied for ``kos:salt_master`` = ``facts``, on a master whose
    config file holds ``written`` (None: none yet) and whose accepted keys are ``minions``;
    returns the state's result and the config file."""
    conf = tmp_path / "master.d" / "kos.conf"
    if written is not None:
        conf.parent.mkdir(parents=True)
        conf.write_text(written)
    pki = tmp_path / "pki" / "master"
    (pki / "minions").mkdir(parents=True)
    for name in minions:
        (pki / "minions" / name).write_text("-----BEGIN PUBLIC KEY-----\n")
    modules = formula(tmp_path, {
        "kos": {"salt_master": facts},
        "salt_master": {"config_file": str(conf), "cachedir": str(tmp_path / "cache"),
                        "pki_dir": str(pki), "manage_service": False,
                        "job_cache_filter": False}})
    return modules.state.sls("salt_master", **kwargs).raw, conf


def read_master(conf):
    """The master's options as Salt's config loader reads them with ``conf`` included."""
    (conf.parent.parent / "master").write_text(f"default_include: {conf.parent.name}/*.conf\n")
    return salt.config.master_config(str(conf.parent.parent / "master"))


def transport_of(conf):
    return read_master(conf)["transport"]


def test_a_master_of_masters_topology_runs_on_tcp_from_first_boot(tmp_path):
    # First boot: cloud-init wrote the transport only; the minions have their keys accepted.
    ret, conf = applied_with(
        tmp_path, {"id": MASTER_ID, "syndic_master": "203.0.113.7", "transport": "tcp"},
        written="transport: tcp\n", minions=(MASTER_ID, WORKER))
    assert all(v["result"] is True for v in ret.values()), ret
    assert transport_of(conf) == "tcp"
    assert "order_masters" not in conf.read_text()
    assert read_master(conf)["worker_pools_enabled"] is False


def test_a_master_on_its_own_keeps_salts_default_transport(tmp_path):
    ret, conf = applied_with(tmp_path, {"id": MASTER_ID, "transport": "zeromq"},
                             minions=(MASTER_ID, WORKER))
    assert all(v["result"] is True for v in ret.values()), ret
    assert transport_of(conf) == "zeromq"
    assert read_master(conf)["worker_pools_enabled"] is True  # Salt's default


@pytest.mark.parametrize("test_mode", [False, True])
def test_a_master_with_minions_refuses_to_switch_transport(tmp_path, test_mode):
    # A master kos configured before it joined a top: its config names no transport, and
    # its minions run on zeromq.
    before = "auto_accept: false\nkeep_jobs_seconds: 3600\n"
    ret, conf = applied_with(
        tmp_path, {"id": MASTER_ID, "syndic_master": "203.0.113.7", "transport": "tcp"},
        written=before, minions=(MASTER_ID, WORKER, FIRST), test=test_mode)
    (guard,) = [v for k, v in ret.items() if "salt_master-transport-unchanged" in k]
    assert guard["result"] is False
    assert guard["name"].startswith(
        "kos:salt_master:transport: this master and its 2 minions run on zeromq, the pillar "
        "asks for tcp")
    assert all(v["result"] is not True for k, v in ret.items() if "config-file" in k)
    assert conf.read_text() == before  # nothing changed
    assert transport_of(conf) == "zeromq"
