"""
The salt master's job cache (``master_job_cache: kos_job_cache``): Salt's own
``local_cache``, except that what carries a secret never reaches the disk.

Salt keeps every return in the job cache, and gives no switch to keep one function's
returns out of it (``job_cache: False`` drops every return, and with them the highstate
results ``kos status`` reads; a publication's ``nocache`` is the caller's to set, and an
operator's ad-hoc ``salt ... mine.get`` or a node's ``salt-call mine.get`` sets none). So:

- the whole return of a function that exists to hand out a secret (a join credential, a
  token, a certificate key, a kubeconfig) is replaced by a note saying it was withheld;
- in any other return, a string that looks like a secret (a private key or certificate
  key block, a kubeconfig's client key, a kubeadm bootstrap token, a microk8s connection
  string) is replaced, so a state whose output echoed one leaks nothing either; and so in
  a job's arguments (an operator may type one).

The job, its target, its function and every other return stay, so ``jobs.list_jobs``,
``jobs.lookup_jid`` and the highstate results behind ``kos status`` work as before.
"""

import copy
import re

import salt.loader

__virtualname__ = "kos_job_cache"

# Functions whose whole return is a secret, or carries one.
WITHHOLD = frozenset(
    (
        "mine.get",
        # salt-run mine.get: the master's own view of the mine
        "runner.mine.get",
        "kos.join_info",
        "microk8s.add_node",
        "microk8s.config",
        "kubeadm.init",
        "kos_join.join_command",
        "kos_join.token_create",
        "kos_join.token_list",
        "kos_join.upload_certs",
        # their names before kos_join: a minion whose extension is not updated yet
        "kubeadm.join_command",
        "kubeadm.token_create",
        "kubeadm.token_list",
        "kubeadm.upload_certs",
    )
)
WITHHELD = "withheld from the job cache by kos: it carries a secret"
# plain in YAML, JSON strings and shell output alike
MASK = "withheld-by-kos"

SECRETS = re.compile(
    "|".join(
        [
            # PEM private keys of any kind
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
            # the value of a kubeconfig's (YAML or JSON) client key, token or password
            r"(?P<field>\b(?:client-key-data|token|password)\"?[ \t]*:[ \t]*\"?)[^\s\"]{8,}",
            # kubeadm bootstrap tokens (abcdef.0123456789abcdef) and certificate keys (64 hex)
            # (not \b: a state's key runs `_|-` straight after its name)
            r"(?<![a-z0-9])[a-z0-9]{6}\.[a-z0-9]{16}(?![a-z0-9])",
            r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])",
            # microk8s join connection strings (<address>:25000/<token>[/<fingerprint>])
            # (a token given with --token may be any 32 or more characters)
            r"[\w.:\[\]-]+:25000/[^/\s\"']{32,}(?:/[0-9a-f]+)?",
        ]
    ),
    re.S,
)


def _mask(match):
    return (match.group("field") or "") + MASK


def __virtual__():
    return __virtualname__


def _scrub(value):
    """``value`` with every string that looks like a secret replaced."""
    if isinstance(value, str):
        return SECRETS.sub(_mask, value)
    if isinstance(value, dict):
        # A state's key holds its name (`cmd_|-<id>_|-<name>_|-run`): keys are masked too,
        # and kept distinct.
        safe = {}
        for key, item in value.items():
            new = _scrub(key)
            while new in safe:
                new += "'"
            safe[new] = _scrub(item)
        return safe
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub(v) for v in value)
    return value


def _fun(load):
    fun = load.get("fun")
    if not fun and isinstance(load.get("return"), dict):
        fun = load["return"].get("fun")
    return fun


def _return(fun, value, withhold=WITHHOLD):
    """A return as kept: withheld when its function hands out a secret, else masked. (A
    function that runs others, state.sls or saltutil.runner, is masked, not withheld.)"""
    return WITHHELD if fun in withhold else _scrub(value)


def redact(load, withhold=WITHHOLD):
    """
    A copy of a job's or a return's ``load`` that holds no secret: the arguments masked
    (an operator may have typed one), the return withheld or masked. The load itself, which
    Salt goes on to publish or fire, is left alone.
    """
    safe = copy.copy(load)
    for key in ("arg", "fun_args"):
        if key in load:
            safe[key] = _scrub(load[key])
    if "return" in load:
        safe["return"] = _return(_fun(load), load["return"], withhold)
    return safe


def redact_batch(state):
    """
    A copy of a batch's state (Salt 3008's ``.batch.p``, which the master's batch manager
    writes beside a job, past the job cache) that holds no secret: its arguments masked,
    each minion's return withheld or masked as :func:`redact` does a job's. The minions,
    their return codes and the batch's progress stay, for ``salt-run batch.status``.
    """
    fun = state.get("fun")
    safe = dict(state)
    for key in ("arg", "kwargs"):
        if key in state:
            safe[key] = _scrub(state[key])
    # Only finished minions carry a return ("failed" and "active" hold markers and times).
    if isinstance(state.get("done"), dict):
        safe["done"] = {
            minion: {
                k: _return(fun, v) if k in ("ret", "return") else _scrub(v)
                for k, v in data.items()
            }
            if isinstance(data, dict)
            else _return(fun, data)
            for minion, data in state["done"].items()
        }
    return safe


def _local():
    # Salt's own local_cache, loaded (with its __opts__) by Salt's loader.
    if "kos_job_cache.local" not in __context__:
        __context__["kos_job_cache.local"] = salt.loader.returners(
            dict(__opts__), {}, whitelist=["local_cache"]
        )
    return __context__["kos_job_cache.local"]


def _call(name, *args, **kwargs):
    return _local()[f"local_cache.{name}"](*args, **kwargs)


def prep_jid(nocache=False, passed_jid=None, recurse_count=0):
    return _call("prep_jid", nocache=nocache, passed_jid=passed_jid, recurse_count=recurse_count)


def returner(load):
    """Store a minion's return, with no secret in it."""
    return _call("returner", redact(load))


def save_load(jid, clear_load, minions=None, recurse_count=0):
    """
    Store a job's load. Salt skips this for a job local_cache already knows, and for any
    other cache calls it with each return's load: skip it the same way, so a return never
    overwrites the job's own load. A node's ``salt-call`` has no published load: its
    return's load (function, arguments, return) is stored, redacted.
    """
    if "return" in clear_load and _call("get_load", jid):
        return None
    return _call(
        "save_load",
        jid,
        redact(clear_load),
        minions=minions,
        recurse_count=recurse_count,
    )


def save_minions(jid, minions, syndic_id=None):
    return _call("save_minions", jid, minions, syndic_id=syndic_id)


def get_load(jid):
    return _call("get_load", jid)


def get_jid(jid):
    return _call("get_jid", jid)


def get_jids():
    return _call("get_jids")


def get_jids_filter(count, filter_find_job=True):
    return _call("get_jids_filter", count, filter_find_job=filter_find_job)


def clean_old_jobs():
    return _call("clean_old_jobs")


def update_endtime(jid, time):
    return _call("update_endtime", jid, time)


def get_endtime(jid):
    return _call("get_endtime", jid)


def save_reg(data):
    return _call("save_reg", data)


def load_reg():
    return _call("load_reg")
