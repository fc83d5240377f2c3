"""
What the kos execution modules share: loading only when the command exists, one way
to run a command and turn its failure into the CLI's own words, optional flags and
the ``__context__`` cache. Imported as plain Python (``from saltext.kos.utils import
kos_cli``); it has no loader dunders of its own, so the callers hand in their ``__salt__``.
"""

import salt.utils.path
import salt.version
from salt.exceptions import CommandExecutionError

# The Salt releases kos is tested with, as (first, first not): saltext/pyproject.toml
# requires the same range, and this refuses a Salt the extension reached some other way (a
# copy on a module path). kos is tested with 3008.3 (pyproject.toml, Terraform's salt_version).
TESTED_SALT = ((3008, 0), (3009, 0))


def untested_salt(version=None):
    """Why ``version`` (the running Salt by default) is not a Salt kos can run on, or None."""
    if version is None:
        version = salt.version.__saltstack_version__
    first, beyond = TESTED_SALT
    if first <= tuple(version.info[:2]) < beyond:
        return None
    return (
        f"kos's modules were not tested with Salt "
        f"{version}: run Salt {first[0]} on this minion (terraform variable salt_version), or "
        "test kos with this release and widen TESTED_SALT in saltext.kos.utils.kos_cli"
    )


def virtual(name, binary, hint):
    """``__virtual__`` of a module that wraps ``binary``: its name, or why it cannot load."""
    untested = untested_salt()
    if untested:
        return (False, f"{name}: {untested}")
    if salt.utils.path.which(binary):
        return name
    return (False, f"{name}: the '{binary}' command is not on PATH ({hint})")


def message(res):
    """The CLI's own words: stderr, then stdout (microk8s and snap print failures on both)."""
    parts = [(res.get("stderr") or "").strip(), (res.get("stdout") or "").strip()]
    return "\n".join(p for p in parts if p) or f"exit code {res.get('retcode')}"


def run(salt, cmd, secret=False, ok_retcodes=(0,), stdin=None, describe=message):
    """
    Run ``cmd`` (an argument list, never a shell string) through ``salt["cmd.run_all"]``
    and raise CommandExecutionError with ``describe(result)`` on an unexpected exit code.

    ``secret`` keeps the output out of the minion log (join tokens, certificate keys,
    kubeconfigs).
    """
    res = salt["cmd.run_all"](
        list(cmd),
        python_shell=False,
        output_loglevel="quiet" if secret else "debug",
        ignore_retcode=True,
        stdin=stdin,
    )
    if res["retcode"] not in ok_retcodes:
        raise CommandExecutionError(describe(res), info={"retcode": res["retcode"]})
    return res


def flags(table, joined=False):
    """
    Optional flags from ``(flag, value)`` pairs: ``None`` and ``False`` are left out,
    ``True`` is the bare flag, anything else (``0`` included) is its value, as
    ``--flag value`` or, with ``joined``, ``--flag=value`` with lists comma-joined.
    """
    args = []
    for flag, value in table:
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif joined:
            if isinstance(value, (list, tuple)):
                value = ",".join(str(v) for v in value)
            args.append(f"{flag}={value}")
        else:
            args += [flag, str(value)]
    return args


def forget(context, prefix):
    """Drop every ``__context__`` entry of a module after something changed the node.
    ``context`` is the caller's own ``__context__``: called as plain Python, this runs in
    the caller's loader, whose dict that name resolves to."""
    for key in [k for k in context if str(k).startswith(f"{prefix}.")]:
        context.pop(key, None)
