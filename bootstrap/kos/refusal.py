"""
A pillar the validator refused before anything changed, as one input error (exit code 3):
each bad key once, with the minions it applies to and its own fix. The validator's messages
read ``pillar key 'a:b': <problem>; <fix>`` (saltext.kos.utils.kos_schema); orch.deploy
reports them in its validation step, per minion: in the plan's step name when the minions'
answers were judged (``invalid pillar on m1: ...; ... | m2: ...``), or in each minion's
error from ``kos.prepare_converge`` (``invalid pillar:`` and one message a line).
"""

import re
from pathlib import Path

import yaml

from .errors import InputError

# orch.deploy's step that judges the pillar before any node changes
VALIDATION_STEPS = ("kos-orch-deploy-validate",)
MESSAGE = "pillar key '"
# Where a minion's messages start: its id, then the messages or "invalid pillar:".
MINION = re.compile(
    r"(?:^|\| |\bon |\n|: )(?P<minion>[A-Za-z0-9][A-Za-z0-9.-]*): (?:invalid pillar:\s*)?"
    + re.escape(MESSAGE))
KEY = re.compile(r"pillar key '(?P<key>[^']+)': (?P<text>.*)", re.S)


def _messages(text):
    """The ``pillar key ...`` messages in ``text``, one per key (joined with "; " or lines)."""
    parts = re.split(r"(?:; |\n)(?=pillar key ')", text)
    return [p.strip() for p in parts if p.strip().startswith(MESSAGE)]


def _unwrapped(step, line):
    """A failure line without what orchestration_failures put around a step's name
    (``<step> (<name>): <comment>``): the name holds the minions' messages."""
    prefix = f"{step} ("
    if line.startswith(prefix) and "): " in line:
        return line[len(prefix):line.rindex("): ")]
    return line


def refused_keys(lines):
    """``{(key, problem, fix): [minions]}`` from the minions' messages in ``lines``."""
    found = {}
    for line in lines:
        starts = list(MINION.finditer(line))
        for i, start in enumerate(starts):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(line)
            chunk = line[start.end() - len(MESSAGE):end].rstrip(" |")
            for message in _messages(chunk):
                match = KEY.match(message)
                problem, _, fix = match["text"].strip().partition("; ")
                minions = found.setdefault((match["key"], problem, fix), [])
                if start["minion"] not in minions:
                    minions.append(start["minion"])
    return found


def pillar_refusal(failures, rerun):
    """The InputError for ``failures`` (``[(step id, line)]``) when every one is the
    validation step refusing pillar keys; None otherwise."""
    if not failures or any(step not in VALIDATION_STEPS for step, _ in failures):
        return None
    found = refused_keys([_unwrapped(step, line) for step, line in failures])
    if not found:
        return None
    said = [f"pillar key '{key}' on {', '.join(sorted(minions))}: {problem}"
            for (key, problem, _), minions in sorted(found.items())]
    fixes = [fix for (_, _, fix) in sorted(found)]
    if len(found) == 1:
        return InputError(f"invalid pillar, nothing changed: {said[0]}",
                          fix=(fixes[0] or "correct it") + f", then re-run {rerun}")
    details = []
    for line, fix in zip(said, fixes, strict=True):
        details += [line] + ([f"  fix: {fix}"] if fix else [])
    return InputError(f"invalid pillar, nothing changed: {len(found)} keys are refused",
                      fix=f"correct each key as its fix says, then re-run {rerun}",
                      details=details)


# A pillar file with Jinja in it is rendered by the master before YAML reads it.
JINJA = ("{%", "{{", "{#")


def yaml_problems(pillar_dir):
    """``["<file>, line L, column C: <problem>"]`` for every plain-YAML pillar file under
    ``pillar_dir`` that YAML cannot read: the master would say only that the SLS did not
    render ("see master log"), so kos reads them before it pushes them."""
    root = Path(pillar_dir)
    found = []
    for path in sorted(root.rglob("*.sls")):
        text = path.read_text(errors="replace")
        if any(mark in text for mark in JINJA):
            continue
        try:
            yaml.safe_load(text)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            found.append(f"{path.relative_to(root.parent)}{where}: {exc.problem or exc}")
        except yaml.YAMLError as exc:
            found.append(f"{path.relative_to(root.parent)}: {exc}")
    return found


def check_pillar_yaml(pillar_dir):
    """Raise an InputError naming each pillar file YAML cannot read, before any push."""
    found = yaml_problems(pillar_dir)
    if found:
        raise InputError(
            f"the pillar does not read as YAML, nothing changed: {found[0]}",
            fix="correct the YAML at that line and column, then re-run",
            details=found[1:],
        )
