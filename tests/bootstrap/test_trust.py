"""
Minion keys against a real salt-master (pytest-salt-factories, on loopback, no network
namespace): kos accepts a pending key only when its fingerprint is the one the minion's
console printed; a different key is refused with its fingerprints named and stays pending.
The channel is started exactly as over SSH (test_channel.py's LocalSession); each pending
key is a real RSA key, presented the way a minion's first authentication leaves it, in the
master's ``minions_pre``.

Run: ``.venv/bin/pytest tests/bootstrap/test_trust.py`` (no root, no shared lock).
"""

import shutil
import threading
import time
from pathlib import Path

import pytest
import salt.crypt
from kos import trust
from kos.channel import Channel
from kos.errors import ConvergeError
from kos.onmaster_keys import key_finger
from kos.salt import SaltMaster

from tests.bootstrap.test_channel import BIN, LocalSession

OTHER = ":".join(["0f"] * 32)


@pytest.fixture(scope="module")
def master(salt_factories):
    factory = salt_factories.salt_master_daemon("kostr-master", overrides={"timeout": 30})
    with factory.started(start_timeout=120):
        yield factory
    shutil.rmtree(factory.config["root_dir"], ignore_errors=True)


@pytest.fixture
def session(master):
    return LocalSession(
        {"PATH": f"{BIN}:/usr/sbin:/usr/bin:/sbin:/bin", "SALT_MASTER_CONFIG": master.config_file}
    )


@pytest.fixture
def salt_master(session):
    sm = SaltMaster(session)
    yield sm
    sm.close()


def present(master, mid):
    """A pending key for ``mid``, as the master keeps one; its fingerprint on the minion."""
    _, pub = salt.crypt.gen_keys(2048)
    pre = master.config["pki_dir"]
    path = f"{pre}/minions_pre/{mid}"
    with open(path, "w") as fh:
        fh.write(pub)
    return key_finger(pub)


def keys_of(salt_master, mid):
    lists = salt_master.keys()
    return sorted(state for state, ids in lists.items() if mid in ids)


def test_a_key_that_differs_from_its_console_is_refused_and_stays_pending(master, salt_master):
    mid = "kostr-impostor.kos.internal"
    presented = present(master, mid)
    consoles = {mid: {"server": "kostr-impostor", "minion_keys": [OTHER]}}
    for unverified in (False, True):  # the operator's flag never overrides a mismatch
        with pytest.raises(ConvergeError) as refused:
            salt_master.wait_and_accept(
                [mid], timeout=10, consoles=consoles, trust_unverified=unverified
            )
        problem = refused.value.problem
        assert mid in problem and presented in problem and OTHER in problem
        assert "left unaccepted" in problem
        assert f"salt-key -d {mid}" in refused.value.fix
        assert keys_of(salt_master, mid) == ["minions_pre"]


def test_a_key_matching_its_console_is_accepted(master, salt_master):
    mid = "kostr-good.kos.internal"
    presented = present(master, mid)
    done = salt_master.wait_and_accept(
        [mid], timeout=10, consoles={mid: {"minion_keys": [presented]}}
    )
    assert done["accepted"] == [mid] and done["unverified"] == []
    assert keys_of(salt_master, mid) == ["minions"]


def test_the_good_keys_are_accepted_beside_a_refused_one(master, salt_master):
    good, bad = "kostr-good2.kos.internal", "kostr-bad2.kos.internal"
    consoles = {good: {"minion_keys": [present(master, good)]}, bad: {"minion_keys": [OTHER]}}
    present(master, bad)
    with pytest.raises(ConvergeError) as refused:
        salt_master.wait_and_accept([good, bad], timeout=10, consoles=consoles)
    assert bad in refused.value.problem and good not in refused.value.problem
    assert keys_of(salt_master, good) == ["minions"]
    assert keys_of(salt_master, bad) == ["minions_pre"]


def test_a_key_no_console_vouches_for_needs_the_operators_word(master, salt_master):
    mid = "kostr-blind.kos.internal"
    presented = present(master, mid)
    with pytest.raises(ConvergeError) as refused:
        salt_master.wait_and_accept([mid], timeout=10, consoles={})
    assert presented in refused.value.problem and "--trust-unverified" in refused.value.fix
    assert keys_of(salt_master, mid) == ["minions_pre"]
    done = salt_master.wait_and_accept([mid], timeout=10, consoles={}, trust_unverified=True)
    assert done["unverified"] == [mid]
    assert keys_of(salt_master, mid) == ["minions"]


def test_a_top_master_accepts_the_syndics_its_environments_consoles_vouch_for(
        master, salt_master):
    # a syndic presents its host's minion key: the environment's master's, whose console
    # printed it; an environment not up yet waits, an impostor's key stays pending
    dev, prod = "salt.kostr-dev.internal", "salt.kostr-prod.internal"
    finger = present(master, dev)
    present(master, prod)
    masters = {
        "kos-dev": (dev, {"server": "kos-dev-salt", "minion_keys": [finger]}),
        "kos-stage": None,
    }
    done = salt_master.accept_syndics(masters)
    assert done["accepted"] == [dev] and done["joined"] == ["kos-dev"]
    assert done["waiting"] == ["kos-stage"] and done["ids"] == [dev]
    assert keys_of(salt_master, dev) == ["minions"]
    # a second converge: joined already, nothing to accept
    again = salt_master.accept_syndics(masters)
    assert again["accepted"] == [] and again["joined"] == ["kos-dev"]
    with pytest.raises(ConvergeError) as refused:
        salt_master.accept_syndics({"kos-prod": (prod, {"minion_keys": [OTHER]})})
    assert prod in refused.value.problem and OTHER in refused.value.problem
    assert keys_of(salt_master, prod) == ["minions_pre"]
    # the syndics' keys are no "unexpected" keys for the top's own minions
    mine = "kostr-top-node.kos.internal"
    done = salt_master.wait_and_accept(
        [mine], timeout=10, consoles={mine: {"minion_keys": [present(master, mine)]}},
        syndics=[dev, prod])
    assert done["accepted"] == [mine] and prod not in done["unexpected_pending"]
    assert dev not in done["unexpected_accepted"]


def test_the_master_checks_the_fingerprint_again_as_it_accepts(master, session):
    # what kos judged is what the master accepts: another key under the id stays pending
    mid = "kostr-swapped.kos.internal"
    presented = present(master, mid)
    channel = Channel(session).open()
    try:
        res = channel.request("accept", fingers={mid: OTHER})
        assert res["accepted"] == [] and res["refused"] == {mid: presented}
        assert mid in channel.request("keys")["minions_pre"]
        assert channel.request("fingers", minions=[mid])["pending"] == {mid: presented}
        res = channel.request("accept", fingers={mid: presented})
        assert res["accepted"] == [mid]
    finally:
        channel.close()
    assert trust.FINGER.match(presented)


def test_a_rebuilt_nodes_key_presented_again_is_no_key_left_behind(master, session):
    # the rebuilt server's minion asks again every acceptance_wait_time: its new key lands
    # in minions_pre at once after the delete, and is judged against its console later
    mid = "kostr-rebuilt.kos.internal"
    present(master, mid)
    channel = Channel(session).open()
    stop = threading.Event()

    def minion_retrying():
        # at once, as a minion whose retry falls just after the delete
        pending = Path(master.config["pki_dir"]) / "minions_pre" / mid
        while not stop.is_set():
            if not pending.exists():
                present(master, mid)
            time.sleep(0.001)

    try:
        assert channel.request("accept", fingers={mid: present(master, mid)})["accepted"]
        retrying = threading.Thread(target=minion_retrying)
        retrying.start()
        try:
            res = channel.request("delete_keys", minions=[mid])
        finally:
            stop.set()
            retrying.join()
        assert res["deleted"] == [mid]
        keys = channel.request("keys")
        assert mid not in keys["minions"] and mid in keys["minions_pre"]
    finally:
        channel.close()
