"""
What of a Salt return crosses the wire from the salt master: state runs and orchestration
steps as counts, failed states and comments, never a state's ``changes`` (file diffs, command
output), so secrets in returns stay on the master.

Runs on the salt master as part of ``kos.onmaster``'s program (standard library only) and in
kos, which reads the same summaries.
"""

import re

COMMENT_LIMIT = 2000


def comment_text(comment):
    if isinstance(comment, (list, tuple)):
        comment = "\n".join(str(c) for c in comment)
    text = str(comment if comment is not None else "").strip()
    return text if len(text) <= COMMENT_LIMIT else text[:COMMENT_LIMIT] + " [...]"


def _is_state_return(ret):
    return (
        isinstance(ret, dict)
        and bool(ret)
        and all(isinstance(v, dict) and "result" in v for v in ret.values())
    )


def _state_id(key, state):
    if state.get("__id__"):
        return state["__id__"]
    parts = str(key).split("_|-")
    return parts[1] if len(parts) == 4 else str(key)


def state_summary(ret):
    """One minion's state run: counts and the failed states (ID, sls, comment)."""
    if _is_state_return(ret):
        states = sorted(ret.items(), key=lambda kv: kv[1].get("__run_num__", 0))
        failed = []
        for key, state in states:
            if state.get("result") is False:
                comment = comment_text(state.get("comment"))
                failed.append(
                    {
                        "id": _state_id(key, state),
                        "sls": state.get("__sls__"),
                        "comment": comment,
                        "requisite": comment.startswith("One or more requisite failed"),
                    }
                )
        return {
            "states": len(states),
            "changed": sum(1 for _, s in states if s.get("changes")),
            "failed": failed,
        }
    if isinstance(ret, (list, tuple)):
        # A state run that did not render returns its errors as a list.
        return {"errors": [comment_text(e) for e in ret][:20] or ["no states returned"]}
    if isinstance(ret, dict) and not ret:
        return {"errors": ["no states matched this minion (empty state run)"]}
    return {"errors": [comment_text(ret) or repr(ret)]}


def function_error(name, ret, answered):
    """Why a ``salt.function`` step failed on one minion, or None if it did not."""
    if ret is False:
        if answered is False:
            return f"did not answer {name}"
        return f"{name} returned False (the minion gave no reason)"
    if isinstance(ret, str) and ret.strip():
        return comment_text(ret)
    return None


def bare_number(comment):
    """Salt's ``salt.function`` turns an exception into its ``str``: a KeyError of an
    object id reads as a bare number. Say what it is."""
    if re.fullmatch(r"-?[0-9]+", comment or ""):
        return (
            f"Salt raised an exception whose message is only {comment!r} inside the "
            "orchestration (no minion was asked)"
        )
    return comment


def step_summary(key, step, answered=None):
    """
    One orchestration step (``key`` is its ``mod_|-id_|-name_|-fun`` tag, or None for the
    step of a progress event). ``answered(jid, minion)`` says whether the channel saw that
    minion's return for the step's job (None: unknown).
    """
    parts = str(key).split("_|-") if key else []
    tagged = len(parts) == 4
    changes = step.get("changes") if isinstance(step.get("changes"), dict) else {}
    # salt.state marks its changes as highstate output; salt.function does not.
    is_state = changes.get("out") == "highstate" or (tagged and parts[3] == "state")
    name = step.get("name") or (parts[2] if tagged else "")
    summary = {
        "id": step.get("__id__") or (parts[1] if tagged else str(key)),
        "state": f"{parts[0]}.{parts[3]}" if tagged else ("salt.state" if is_state else ""),
        "name": name,
        "result": step.get("result"),
        "comment": bare_number(comment_text(step.get("comment"))),
        "run_num": step.get("__run_num__"),
        "duration": step.get("duration"),
        "minions": {},
    }
    ret = changes.get("ret")
    if not isinstance(ret, dict):
        return summary
    jid = step.get("__jid__")
    for minion, mret in sorted(ret.items()):
        if is_state:
            summary["minions"][minion] = state_summary(mret)
        elif step.get("result") is False:
            known = answered(jid, minion) if (answered and jid) else None
            error = function_error(name, mret, known)
            if error:
                summary["minions"][minion] = {"errors": [error]}
    return summary


def orchestration_summary(data, answered=None):
    """The runner's return of ``state.orchestrate`` as ``{"steps": [...]}`` or ``{"errors"}``."""
    ret = data.get("return") if isinstance(data, dict) else data
    if isinstance(ret, str):
        return {"errors": [ret.strip().splitlines()[-1] if ret.strip() else "no return"]}
    inner = ret.get("data") if isinstance(ret, dict) else None
    if not isinstance(inner, dict) or len(inner) != 1:
        return {"errors": [f"unexpected return from state.orchestrate: {comment_text(ret)[:300]}"]}
    steps = next(iter(inner.values()))
    if isinstance(steps, (list, tuple)):
        return {"errors": [comment_text(e) for e in steps]}
    if not isinstance(steps, dict):
        return {"errors": [comment_text(steps)]}
    summaries = [step_summary(k, v, answered) for k, v in steps.items() if isinstance(v, dict)]
    summaries.sort(key=lambda s: s["run_num"] if s["run_num"] is not None else 0)
    return {"steps": summaries, "retcode": ret.get("retcode")}
