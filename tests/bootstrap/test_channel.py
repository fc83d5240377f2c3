"""
kos's channel to Salt (``kos/onmaster*.py`` and ``kos.channel.Channel``) against a real
salt-master and salt-minion on loopback, without SSH: the session's transport is a local
process started exactly as the SSH session starts it (the same prelude, loader and program).
The SSH path, the CLI and the locks across runs are in test_converge.py.

Also here, without daemons: the prelude's interpreter search for each way Salt is installed,
the run lock across processes, and the Salt bug behind issue 16's bare-number failure.
"""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from kos import errors
from kos.channel import PRELUDE, Channel
from kos.lock import FileLock, LockHeld
from kos.onmaster_summary import step_summary
from kos.salt import SaltMaster, orchestration_failures
from kos.steps.master import ANSWER_GRACE, check_answering

from tests.saltjobs import running_job

BIN = Path(sys.executable).parent
MINION = "kosch-minion"
SECRET = "kos-test-secret-4f1c"


class LocalSession:
    """The master's side of an SSH session, run here: what ``Ssh.popen`` gives Channel."""

    def __init__(self, env):
        self.env = env

    def popen(self, args, sudo=True, binary=False, stderr=False):
        return subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
        )


# -- the prelude: which Python runs Salt -----------------------------------------------------


def run_prelude(path, loader="import sys; print(sys.executable)"):
    return subprocess.run(
        ["sh", "-c", PRELUDE, "kos-salt-channel", loader],
        env={"PATH": f"{path}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_prelude_finds_the_python_of_a_virtualenv_or_package_shebang(tmp_path):
    # this project's virtualenv: salt-run starts with "#!<venv>/bin/python3.x"
    res = run_prelude(BIN)
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()).parent == BIN


def test_prelude_follows_env_shebangs(tmp_path):
    (tmp_path / "python3").symlink_to(sys.executable)
    script = tmp_path / "salt-run"
    script.write_text("#!/usr/bin/env python3\nimport salt.scripts\n")
    script.chmod(0o755)
    res = run_prelude(tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(tmp_path / "python3")


def test_prelude_finds_the_python_of_a_relenv_onedir(tmp_path):
    # salt-bootstrap's onedir: /usr/bin/salt-run -> /opt/saltstack/salt/salt-run, a
    # sh/python polyglot (relenv's SHEBANG_TPL_LINUX) that execs bin/python3.10 beside it
    onedir = tmp_path / "opt" / "saltstack" / "salt"
    (onedir / "bin").mkdir(parents=True)
    (onedir / "bin" / "python3.10").symlink_to(sys.executable)
    launcher = onedir / "salt-run"
    launcher.write_text(
        "#!/bin/sh\n"
        "\"true\" ''''\n"
        '"exec" "$(dirname "$(readlink -f "$0")")/bin/python3.10" "$0" "$@"\n'
        "'''\n"
        "import salt.scripts\n"
    )
    launcher.chmod(0o755)
    usr_bin = tmp_path / "usr" / "bin"
    usr_bin.mkdir(parents=True)
    (usr_bin / "salt-run").symlink_to(launcher)
    res = run_prelude(usr_bin)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(onedir / "bin" / "python3.10")


def test_prelude_without_salt_says_so(tmp_path):
    res = run_prelude(tmp_path)
    assert res.returncode == 127
    assert "no salt-run with a Python interpreter here" in res.stderr


# -- the run lock ----------------------------------------------------------------------------

HOLD = textwrap.dedent(
    """
    import sys, time
    from kos.lock import FileLock
    FileLock(sys.argv[1]).acquire({"pid": 4242, "command": "kos converge"})
    print("locked", flush=True)
    time.sleep(60)
    """
)


def test_lock_names_its_holder_and_a_dead_holders_lock_is_taken_over(tmp_path):
    path = str(tmp_path / "lock")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "bootstrap")}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, path], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(LockHeld) as held:
            FileLock(path).acquire({"pid": os.getpid()})
        assert held.value.holder == {"pid": 4242, "command": "kos converge"}
    finally:
        proc.kill()
        proc.wait()
    # killed without releasing: the file still names it, but nobody holds the lock
    lock = FileLock(path)
    assert lock.acquire({"pid": os.getpid()}) == {"pid": 4242, "command": "kos converge"}
    assert json.loads(Path(path).read_text()) == {"pid": os.getpid()}
    lock.release()
    assert not Path(path).exists()


# -- issue 16: "orchestration: -: 140641998609280" ------------------------------------------

RACE = textwrap.dedent(
    """
    import gc, sys, weakref
    if sys.argv[1] == "mended":
        from kos.onmaster import mend_safe_opts_copy
        assert mend_safe_opts_copy()
    import salt.utils.optsdict as optsdict

    found = weakref.WeakValueDictionary.__contains__.__code__

    def collect_between_the_lookups(frame, event, arg):
        # The collector runs in whichever thread allocates; here it runs exactly between
        # safe_opts_copy's `id(opts) in _dict_to_root` and `_dict_to_root[id(opts)]`.
        if event == "return" and frame.f_code is found and arg is True:
            gc.collect()

    opts = {"id": "kos"}
    # an earlier loader's opts copy, now garbage in a reference cycle: only the cyclic
    # collector frees it, and with it the root that safe_opts_copy finds for opts
    cycle = {"copy": optsdict.safe_opts_copy(opts, name="kos")}
    cycle["self"] = cycle
    del cycle
    sys.setprofile(collect_between_the_lookups)
    try:
        optsdict.safe_opts_copy(opts, name="kos")
    except KeyError as exc:
        print(f"KeyError: {exc}")
    else:
        print("no error")
    finally:
        sys.setprofile(None)
    """
)


@pytest.mark.parametrize("process", ["plain", "mended"])
def test_the_salt_race_behind_the_bare_number(process):
    """
    Issue 16's "orch.deploy failed at kos-orch-deploy-sync / orchestration: -:
    140641998609280": Salt 3008's safe_opts_copy raises KeyError(<object id>) when the
    garbage collector frees an opts root between its two lookups, and salt.function turns
    the exception into its str, a bare number, as the step's comment. Reproduced here
    deterministically; the channel's process (which runs the orchestration) is mended.
    """
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "bootstrap")}
    res = subprocess.run(
        [sys.executable, "-c", RACE, process], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    if process == "plain":
        # Salt as installed: if this starts failing, Salt fixed it and the mend can go
        assert re.fullmatch(r"KeyError: [0-9]+", res.stdout.strip()), res.stdout
    else:
        assert res.stdout.strip() == "no error"


@pytest.mark.parametrize("release", ["3007.1", "3009.0", "3010.1"])
def test_the_mend_refuses_a_salt_it_was_not_tested_with(release):
    """The mend replaces a private function of Salt 3008; on another release it says so."""
    from kos.onmaster import unmended_salt
    from salt.version import SaltStackVersion

    assert unmended_salt(SaltStackVersion.parse("3008.3")) is None
    refused = unmended_salt(SaltStackVersion.parse(release))
    assert f"was not tested with Salt {release}: run Salt 3008 on the master" in refused
    assert "widen MENDED_SALT in bootstrap/kos/onmaster.py" in refused


def test_a_bare_number_from_salt_is_reported_as_what_it_is():
    # what salt.function returns when saltutil.cmd raised KeyError(140641998609280)
    step = {
        "__id__": "kos-orch-deploy-sync",
        "name": "saltutil.sync_all",
        "result": False,
        "comment": "140641998609280",
        "changes": {},
        "__run_num__": 0,
    }
    summary = step_summary("salt_|-kos-orch-deploy-sync_|-saltutil.sync_all_|-function", step)
    failures, _ = orchestration_failures([summary])
    assert failures == [
        (
            "kos-orch-deploy-sync",
            "kos-orch-deploy-sync (saltutil.sync_all): Salt raised an exception whose message "
            "is only '140641998609280' inside the orchestration (no minion was asked)",
        )
    ]


# -- against a real master and minion --------------------------------------------------------


@pytest.fixture(scope="module")
def state_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("kosch-states")
    target = tmp_path_factory.mktemp("kosch-files")
    files = {
        "kostest/steps.sls": f"""
            kostest-first:
              salt.function:
                - name: test.sleep
                - tgt: {MINION}
                - arg: [4]
            kostest-second:
              salt.function:
                - name: test.true
                - tgt: {MINION}
            kostest-third:
              salt.function:
                - name: test.true
                - tgt: {MINION}
            """,
        "kostest/fails.sls": f"""
            kostest-highstate:
              salt.state:
                - tgt: {MINION}
                - sls: kostest.broken
            kostest-false:
              salt.function:
                - name: test.false
                - tgt: {MINION}
            kostest-after:
              salt.function:
                - name: test.true
                - tgt: {MINION}
                - require:
                  - salt: kostest-highstate
            """,
        "kostest/broken.sls": f"""
            kostest-good:
              test.succeed_without_changes: []
            kostest-broken:
              file.managed:
                - name: {target}/no-such-dir/file
                - contents: x
                - makedirs: False
            kostest-needs-broken:
              test.succeed_without_changes:
                - require:
                  - file: kostest-broken
            """,
        "kostest/secret.sls": f"""
            kostest-secret:
              salt.state:
                - tgt: {MINION}
                - sls: kostest.echo
            """,
        "top.sls": """
            base:
              '*':
                - kostest.fine
            """,
        "kostest/fine.sls": """
            kostest-fine:
              test.succeed_without_changes: []
            kostest-changed:
              test.succeed_with_changes: []
            """,
        "kostest/restart.sls": f"""
            kostest-slow:
              salt.state:
                - tgt: {MINION}
                - sls: kostest.slow
                - timeout: 20
            kostest-then:
              salt.function:
                - name: test.true
                - tgt: {MINION}
                - require:
                  - salt: kostest-slow
            """,
        "kostest/slow.sls": f"""
            kostest-wait:
              cmd.run:
                - name: touch {root}/slow-started && sleep 30
            """,
        "kostest/echo.sls": f"""
            kostest-echo:
              cmd.run:
                - name: echo {SECRET}
            """,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def master(salt_factories, state_tree):
    factory = salt_factories.salt_master_daemon(
        "kosch-master", overrides={"file_roots": {"base": [str(state_tree)]}, "timeout": 30}
    )
    with factory.started(start_timeout=120):
        yield factory
    shutil.rmtree(factory.config["root_dir"], ignore_errors=True)


@pytest.fixture(scope="module")
def minion(master):
    # a return sent while the master restarts is retried until it is back (the
    # restart test below); Salt's default gives up after 3 tries
    factory = master.salt_minion_daemon(MINION, overrides={"return_retry_tries": 12})
    with factory.started(start_timeout=120):
        yield factory
    shutil.rmtree(factory.config["root_dir"], ignore_errors=True)


@pytest.fixture
def session(master, minion):
    return LocalSession(
        {"PATH": f"{BIN}:/usr/sbin:/usr/bin:/sbin:/bin", "SALT_MASTER_CONFIG": master.config_file}
    )


@pytest.fixture
def channel(session):
    ch = Channel(session).open()
    yield ch
    ch.close()


def test_ready_names_salt_and_the_master(channel):
    assert channel.info["salt"].startswith("3")
    assert channel.info["master"]
    assert channel.info["mended"] is True


def test_cmd_streams_the_job_and_each_return(channel):
    events = []
    result = channel.request(
        "cmd",
        on_event=events.append,
        tgt=[MINION, "kosch-nobody"],
        fun="test.arg",
        arg=["a", "kos=1"],
        timeout=10,
    )
    job = [e for e in events if e["event"] == "job"]
    returns = [e for e in events if e["event"] == "return"]
    assert [j["jid"] for j in job] == [result["jid"]]
    assert [(r["minion"], r["success"]) for r in returns] == [(MINION, True)]
    # "key=value" is a keyword argument, as on the salt command line
    assert returns[0]["return"]["args"] == ["a"] and returns[0]["return"]["kwargs"]["kos"] == 1
    assert result["silent"] == ["kosch-nobody"]


def test_answering_names_the_silent(channel):
    res = channel.request("answering", minions=[MINION, "kosch-nobody"], timeout=3)
    assert res == {"answering": [MINION], "silent": ["kosch-nobody"], "master_error": None}


def test_the_silent_are_pinged_less_and_less_often(channel, master):
    """Each round waits twice as long as the one before (5, 10, 20 s...): a minion that is
    connected but slow runs every ping it was sent, in a process of its own."""
    # accepted but never connected: every round is published to it (a key nobody holds is
    # not targeted at all)
    keys = Path(master.config["pki_dir"]) / "minions"
    (keys / "kosch-slow").write_bytes((keys / MINION).read_bytes())
    try:
        began = time.monotonic()
        res = channel.request("answering", minions=[MINION, "kosch-slow"], timeout=60)
        assert res["silent"] == ["kosch-slow"]
        # named silent only once its whole timeout ran out
        assert time.monotonic() - began >= 60
    finally:
        (keys / "kosch-slow").unlink()
    jobs = master.salt_run_cli(timeout=60).run("jobs.list_jobs", "search_function=test.ping")
    pings = [j for j in (jobs.data or {}).values()
             if j.get("Target") in (["kosch-slow"], "kosch-slow")]
    # after the first round (both): rounds waiting 10, 20 and the 5 s left, each with half
    # as long again for Salt's find_job; at 5 s a round, as before, made more
    assert 1 <= len(pings) <= 3, pings


def test_keys_are_listed_through_the_wheel(channel):
    keys = channel.request("keys")
    assert keys["minions"] == [MINION]


def test_last_highstates_are_summarized_from_the_job_cache(channel):
    ran = channel.request("cmd", tgt=[MINION], fun="state.highstate", timeout=60)
    last = channel.request("last_highstates", minions=[MINION, "kosch-nobody"])
    assert list(last) == [MINION]
    assert last[MINION]["jid"] == ran["jid"]
    assert (last[MINION]["result"], last[MINION]["states"], last[MINION]["failed"]) == ("ok", 2, 0)


def test_orchestration_failures_carry_state_ids_and_comments(channel):
    events = []
    summary = channel.request("orchestrate", on_event=events.append, sls="kostest.fails", pillar={})
    steps = {s["id"]: s for s in summary["steps"]}
    assert steps["kostest-highstate"]["result"] is False
    failed = steps["kostest-highstate"]["minions"][MINION]["failed"]
    assert [(f["id"], f["requisite"]) for f in failed] == [
        ("kostest-broken", False),
        ("kostest-needs-broken", True),
    ]
    assert "Parent directory not present" in failed[0]["comment"]
    failures, not_run = orchestration_failures(summary["steps"])
    lines = [line for _, line in failures]
    assert lines[0].startswith(f"{MINION}: kostest-broken (kostest.broken): ")
    assert f"{MINION}: test.false returned False (the minion gave no reason)" in lines
    assert not_run == ["kostest-after"]
    assert not any(line.endswith(": False") or "-: " in line for line in lines)
    # each job the steps published was streamed, and the state run's result as it came
    assert [e["fun"] for e in events if e["event"] == "job"] == [
        "state.orchestrate",
        "state.sls",
        "test.false",
    ]
    streamed = [e for e in events if e["event"] == "return" and e["fun"] == "state.sls"]
    assert [e["summary"] for e in streamed] == [steps["kostest-highstate"]["minions"][MINION]]


def test_returns_that_may_carry_secrets_stay_on_the_master(session):
    lines = []
    ch = Channel(session).open()
    read = ch._next

    def keep(what):
        event = read(what)
        lines.append(json.dumps(event))
        return event

    ch._next = keep
    try:
        summary = ch.request("orchestrate", sls="kostest.secret", pillar={})
    finally:
        ch.close()
    assert [s["result"] for s in summary["steps"]] == [True]
    assert any('"event": "return"' in line for line in lines)
    assert not any(SECRET in line for line in lines)


def test_a_cancelled_orchestration_stops_after_its_running_step(channel):
    events, cancelled = [], []

    def cancel_when_the_first_step_runs(event):
        events.append(event)
        if event["event"] == "job" and event["fun"] == "test.sleep" and not cancelled:
            channel._send({"op": "cancel", "id": event["id"]})
            cancelled.append(time.monotonic())

    summary = channel.request(
        "orchestrate", on_event=cancel_when_the_first_step_runs, sls="kostest.steps", pillar={}
    )
    assert cancelled
    assert summary["stopped"] is True and summary["cancelled"] is True
    assert [s["id"] for s in summary["steps"]] == ["kostest-first"]
    assert summary["steps"][0]["result"] is True  # waited for, not cut short
    assert summary["total"] == 3
    assert summary["not_run"] == ["kostest-second", "kostest-third"]
    # and the channel serves the next request
    assert channel.request("keys")["minions"] == [MINION]


# What Salt prints on stderr while an orchestration runs (a client's event bus collected
# without destroy()), as ``salt-run state.orch`` printed it: log noise, not a failure.
NOISE = [
    "[WARNING ] unclosed MasterEvent <salt.utils.event.MasterEvent object at 0x7f3c2c1d0>; "
    "call ``destroy()`` or use as a context manager",
    "unclosed RunnerClient <salt.runner.RunnerClient object at 0x7f3c2c1d1>; call "
    "``destroy()`` or use as a context manager",
    "/opt/saltstack/salt/lib/python3.10/site-packages/salt/utils/event.py:309: "
    "ResourceWarning: unclosed MasterEvent",
    "  warnings.warn(",
]


class NoisySession(LocalSession):
    """A master whose session prints Salt's log noise on stderr (and once on stdout)."""

    def popen(self, args, sudo=True, binary=False, stderr=False):
        noise = "; ".join(f"echo {shlex.quote(line)} >&2" for line in NOISE)
        wrapper = f'{noise}; echo {shlex.quote(NOISE[0])}; exec "$@"'
        return super().popen(["sh", "-c", wrapper, "noisy", *args], sudo, binary, stderr)


def test_salt_log_noise_on_stderr_is_noise_not_a_failure(session):
    noisy = NoisySession(session.env)
    ch = Channel(noisy).open()
    try:
        summary = ch.request("orchestrate", sls="kostest.secret", pillar={})
        assert [s["result"] for s in summary["steps"]] == [True]
        assert ch.request("cmd", tgt=[MINION], fun="test.ping", timeout=10)["silent"] == []
        # the master's side dies: kos says its channel ended, not that SSH failed, and the
        # noise does not stand in for a reason
        os.kill(ch.info["pid"], signal.SIGKILL)
        with pytest.raises(errors.ConvergeError) as ended:
            ch.request("keys")
    finally:
        ch.close()
    assert "kos's channel on the salt master ended while keys" in ended.value.problem
    assert "SSH" not in str(ended.value)
    assert not any("unclosed" in line or "warn" in line for line in ended.value.details), (
        ended.value.details
    )


def test_one_orchestration_and_one_lock_holder_at_a_time(session):
    first, second = Channel(session).open(), Channel(session).open()
    try:
        assert first.request("lock", cluster="kosch", holder={"pid": 1, "command": "kos up"})
        with pytest.raises(errors.Locked) as locked:
            second.request("lock", cluster="kosch", holder={"pid": 2})
        assert "`kos up` (PID 1" in locked.value.problem

        started = threading.Event()
        done = {}

        def run():
            done["summary"] = first.request(
                "orchestrate",
                on_event=lambda e: e.get("fun") == "test.sleep" and started.set(),
                sls="kostest.steps",
                pillar={},
            )

        thread = threading.Thread(target=run)
        thread.start()
        assert started.wait(60)
        with pytest.raises(errors.Locked) as busy:
            second.request("orchestrate", sls="kostest.steps", pillar={})
        assert "already running an orchestration" in busy.value.problem
        assert "kostest.steps" in "\n".join(busy.value.details)
        thread.join(120)
        assert [s["id"] for s in done["summary"]["steps"]] == [
            "kostest-first",
            "kostest-second",
            "kostest-third",
        ]
    finally:
        first.close()
        second.close()
    # the first session ended: its lock went with it
    third = Channel(session).open()
    try:
        assert third.request("lock", cluster="kosch", holder={"pid": 3})["stale"] is None
    finally:
        third.close()


def test_the_lock_waits_for_the_reactors_converge_and_refuses_the_others(master, session):
    """A minion that started is being converged by the master's reactor: kos waits for
    that (it ends) instead of failing; an orchestration of anyone else is refused at once."""
    # the reactor's converge of a minion that started
    reaction = running_job(master.config["cachedir"], "runner.kos_reactor.started",
                           "20261201220000000001", 6, user="Reactor", fun_args=["kosch-late"])
    ch = Channel(session).open()
    try:
        said = []
        res = ch.request("lock", cluster="kosch", holder={"pid": 4},
                         on_event=lambda e: said.append(e.get("message")))
        assert reaction.poll() is not None, "the lock was taken while the reactor ran"
        assert res["orchestrations"] == []
        assert said == ["waiting for the orchestration the master's reactor started: "
                        "20261201220000000001"]
    finally:
        ch.close()
        reaction.kill()
        reaction.wait()
    salt_master = SaltMaster(session)
    by_hand = running_job(master.config["cachedir"], "runner.state.orchestrate",
                          "20261201220000000002", 60, fun_args=["orch.deploy"])
    try:
        with pytest.raises(errors.Locked) as busy:
            salt_master.lock("kosch", {"pid": 5})
        assert by_hand.poll() is None, "refused only once the orchestration had ended"
    finally:
        salt_master.close()
        by_hand.kill()
        by_hand.wait()
    assert "already running an orchestration" in busy.value.problem
    assert busy.value.details == [
        "orchestration jid 20261201220000000002 (state.orchestrate orch.deploy), PID "
        f"{by_hand.pid} on the master, user root"]


# last in this module: it restarts the master
def test_the_channel_rides_through_a_master_restart_and_keeps_its_lock(master, minion, session):
    salt_master = SaltMaster(session)
    try:
        salt_master.lock("koschr", {"pid": 5, "command": "kos converge"})
        assert salt_master.salt([MINION], "test.ping", timeout=10) == {MINION: True}
        # what the salt_master formula's deferred restart does under kos's feet; kos asks
        # while the master is still down and starting, longer than the minions are given:
        # the time the master cannot publish does not count (at 50 workers its restart
        # kept it from publishing for minutes)
        master.terminate()
        starting = threading.Thread(target=lambda: (time.sleep(75), master.start()))
        starting.start()
        began = time.monotonic()
        try:
            # the minion takes a while to find the new master: configure_master waits for it
            salt_master.wait_responding([MINION], timeout=60, master_timeout=300)
        finally:
            starting.join(300)
        assert time.monotonic() - began > 75
        assert salt_master.salt([MINION], "test.ping", timeout=30) == {MINION: True}
        # a converge that starts while the master cannot publish yet (just rebuilt) waits
        # for it beyond the grace its minions get
        master.terminate()
        starting = threading.Thread(
            target=lambda: (time.sleep(ANSWER_GRACE + 15), master.start()))
        starting.start()
        began = time.monotonic()
        try:
            assert check_answering(salt_master, [MINION], None, 300) == [MINION]
        finally:
            starting.join(300)
        assert time.monotonic() - began > ANSWER_GRACE + 15
        # the run lock is this session's: it held across the restart
        other = Channel(session).open()
        try:
            with pytest.raises(errors.Locked):
                other.request("lock", cluster="koschr", holder={"pid": 6})
        finally:
            other.close()
    finally:
        salt_master.close()


def test_a_master_restart_during_an_orchestration_is_named_with_what_each_minion_returned(
        master, minion, session, state_tree):
    """The master restarts while a step's state run is on the minion: the step loses the
    return, the minion's work does not. kos says the master restarted and what the minion
    returned, from the job cache, not a failure the minion never had."""
    salt_master = SaltMaster(session)
    restarted = []
    started = state_tree / "slow-started"

    def restart_once_the_state_runs():
        # once the minion runs the job (its state sleeps 30 s): a master that stops before
        # the publication reached the minion leaves it nothing to return
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        master.terminate()
        master.start()

    def restart_when_the_state_is_published(event):
        if event.get("event") == "job" and event.get("fun") == "state.sls" and not restarted:
            restarted.append(threading.Thread(target=restart_once_the_state_runs))
            restarted[0].start()

    try:
        with pytest.raises(errors.ConvergeError) as caught:
            salt_master.orchestrate("kostest.restart", progress=restart_when_the_state_is_published)
    finally:
        if restarted:
            restarted[0].join(300)
        salt_master.close()
    err = caught.value
    assert "the salt master restarted while it ran" in str(err), (str(err), err.details)
    assert any(re.fullmatch(rf"{MINION}: state\.sls \(job \d+\) ok \(1 states, 1 changed\)", line)
               for line in err.details), err.details
    assert "re-run kos converge" in err.fix



def _worker_line(master, pid):
    """The line salt/master.py's MWorker logs when its modules failed to load, in the
    master's own log format."""
    import logging

    record = logging.LogRecord("salt.master", logging.ERROR, "master.py", 1985,
                               "%s failed to load modules, worker will be non-functional",
                               ("MWorker-default-3",), None)
    record.process, record.processName = pid, "MWorker-default-3"
    return logging.Formatter(master.config["log_fmt_logfile"]).format(record) + "\n"


def test_salt_still_logs_what_names_a_broken_worker():
    import inspect

    import salt.master
    from kos.onmaster_minions import WORKER_BROKEN

    # if this fails, Salt reworded it (or fixed saltstack/salt#61734): follow it
    assert f'"%s {WORKER_BROKEN}"' in inspect.getsource(salt.master.MWorker)


def test_a_broken_worker_is_restarted_away_and_one_of_a_former_run_is_not(master, minion,
                                                                          session):
    """A request worker of the running master that failed to load its modules (Salt's
    race, saltstack/salt#61734) makes kos restart the master, once: the new workers are
    checked again. A line of a worker that is gone (an earlier run) is history."""
    import psutil

    workers = [p for p in psutil.Process(master.pid).children(recursive=True)
               if "MWorker" in " ".join(p.cmdline())]
    assert workers, "the master runs no request worker"
    log = Path(master.config["log_file"])
    ended = subprocess.Popen(["true"])
    ended.wait()

    class Systemd(LocalSession):
        restarts = []

        def run(self, args, timeout=None, check=True):
            self.restarts.append(args)
            master.terminate()
            master.start()
            return subprocess.CompletedProcess(args, 0)

    systemd = Systemd(session.env)
    salt_master = SaltMaster(systemd)
    try:
        with log.open("a") as fh:
            fh.write(_worker_line(master, ended.pid))
        assert salt_master.request("broken_workers")["workers"] == []
        with log.open("a") as fh:
            fh.write(_worker_line(master, workers[0].pid))
        found = salt_master.request("broken_workers")["workers"]
        assert [w["pid"] for w in found] == [workers[0].pid]
        assert "MWorker-default-3 failed to load modules" in found[0]["line"]
        assert salt_master.mend_broken_workers([MINION]) == 1
        assert len(systemd.restarts) == 1
        assert "systemctl restart $units" in systemd.restarts[0][-1]
        assert not workers[0].is_running()
        assert salt_master.salt([MINION], "test.ping", timeout=30) == {MINION: True}
    finally:
        salt_master.close()
