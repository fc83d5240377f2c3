"""
The converge planner of ``orch.deploy``: from the deployment (the master's ``kos`` pillar),
the run's options and what each minion answered to ``kos.converge_need``, the plan of the
run: the issuer of join credentials, the first control plane alone, the control planes that
join one at a time, the parts of the wave, the minions whose /etc/hosts only learns new
members, which minions install the master's release of the extension (kos.extension) and
refresh their pillar, and what stops the run before anything changes. Pure: it reads nothing and changes nothing, so the
orchestration renders from it without touching a minion and its cases are unit tested.

``orch/deploy.sls`` calls it in the orchestration's own process through the formula's
``salt://orch/planner.py`` and Salt's py renderer (the orchestration's ``salt`` loads
execution modules, not runners); ``salt-run kos_plan.plan kos=... answers=...`` is the same
call by hand, and ``kos plan`` imports it.
"""

import json
import math

__virtualname__ = "kos_plan"
# The runner loader loads this name only
# (https://docs.saltproject.io/en/latest/ref/modules/index.html, "__load__").
__load__ = ["plan"]

# Seconds a wave's step waits for its minions (kos:orchestration:timeout).
DEFAULT_TIMEOUT = 120
# Highstates at once per core of the master, and at least this many (kos:orchestration:batch).
PER_CORE = 5
NOT_SAID = "it did not say what it needs (kos.converge_need)"
NEW_SERVER = "it answered without kos's modules: a new server"


def __virtual__():
    return __virtualname__


def _json(value):
    return json.dumps(value)


def _unique(items):
    return list(dict.fromkeys(items))


def _sorted(items):
    """Sorted as Jinja's sort and dictsort sort: case-insensitively."""
    return sorted(items, key=lambda item: item.lower() if isinstance(item, str) else item)


def _parts(minions, batch):
    """``minions`` in parts of ``batch``: a count, or "N%" of them."""
    if isinstance(batch, str):
        size = max(1, math.ceil(len(minions) * float(batch[:-1]) / 100))
    else:
        size = int(batch)
    return [minions[i:i + size] for i in range(0, len(minions), size)]


def _is_list(value):
    return isinstance(value, (list, tuple))


def _option_problems(options, known):
    exclude, limit = options.get("exclude", []), options.get("limit", [])
    force, started = options.get("force", False), options.get("started")
    problems = []
    for key, value in (("exclude", exclude), ("limit", limit)):
        if not _is_list(value):
            problems.append(f"pillar key '{key}' must be a list of minion ids, got {_json(value)}")
            continue
        problems += [f"pillar key '{key}': {_json(minion)} is not a minion of this deployment; "
                     f"use one of {', '.join(known)}" for minion in value if minion not in known]
    if force is not True and force is not False:
        problems.append(f"pillar key 'force' must be true or false, got {_json(force)}")
    if started is not None and (not isinstance(started, str) or limit):
        problems.append("pillar key 'started' (set by the reactor) must be one minion id, "
                        f"without limit, got {_json(started)}")
    return problems


def _new_server():
    """What a first control plane that answered without kos's modules stands for: they were
    never installed there, so its server is new and holds nothing of a cluster."""
    return {"highstate": [NEW_SERVER], "learn": False, "members": None, "sync": True,
            "problems": None, "inferred": True,
            "kubernetes": {"role": "control_plane", "first": True, "initialised": False,
                           "joined": False, "fresh": True}}


def _stop(sid, result, name):
    return {"id": sid, "result": result, "name": name}


def plan(kos, options=None, answers=None, cores=1, tree=None):
    """
    The plan of one ``orch.deploy`` run, as a dict. Without ``answers`` only what comes
    before asking the minions: ``ask`` (who answers ``kos.converge_need``) and ``stop``
    (bad options, an unexpected started minion); with them the whole plan:

    ``stop``
        ``{"id", "result", "name"}``: the one step the run renders instead of a plan
        (bad options, a started minion nobody expects or whose cluster is not up, an
        excluded issuer, a first control plane lost), or None.
    ``summary``
        What this run converges and why (the plan step's name).
    ``silent`` / ``invalid``
        Minions taking part that did not answer; ``"<minion>: <problems>"`` of those
        whose pillar is bad. Either stops the run before anything changes.
    ``sync`` / ``check``
        Minions that install the extension's release; minions that refresh their pillar and
        have it validated (``kos.prepare_converge``) before anything changes.
    ``first``
        The first control plane's id when its highstate runs alone, before any join.
    ``learn``
        ``[{"members", "minions"}]``: minions whose /etc/hosts only learns new members,
        grouped by the members digest they answered.
    ``control_planes`` / ``workers`` / ``issuer``
        Control planes that join one at a time, workers that join in the wave, and the
        control plane that issues (and revokes) every credential of this run.
    ``wave``
        The parts of the parallel wave, one after the other.
    ``revoke``
        Every node this run issues a credential for (revoked when it ends).
    ``spread``
        The control plane that spreads the cluster's DNS over the nodes once every join of
        this run is done (the issuer), or None when nothing joins.
    ``cluster_up``
        True when the first control plane is initialised or rejoins in this run (it tells
        the mine its cluster is up at the end).
    ``rejoining``
        True when the first control plane, rebuilt, rejoins through ``issuer``.
    ``run``
        The ``kos_orchestration`` pillar the highstates get.
    ``timeout``
        Seconds each step waits for its minions.
    ``log``
        ``[[level, message]]`` for the master's log.

    kos
        The master's ``kos`` pillar: ``nodes``, ``first_control_plane``,
        ``salt_master:id``, ``bastion:id``, ``orchestration`` (``batch``, ``timeout``).
    options
        The run's pillar options as given: ``exclude``, ``limit``, ``force``, ``started``.
    answers
        ``{minion: its return of kos.converge_need}``; a minion that did not answer is
        absent.
    cores
        The master's cores: the default size of a wave's parts.
    tree
        Digest of the state tree the master serves (the highstates note it).

    CLI Example:

    .. code-block:: bash

        salt-run kos_plan.plan kos='{"nodes": {}}' answers='{}'
    """
    kos, options = kos or {}, options or {}
    nodes = kos.get("nodes") or {}
    first = kos.get("first_control_plane")
    master_id = (kos.get("salt_master") or {}).get("id")
    bastion_id = (kos.get("bastion") or {}).get("id")
    control_planes = [n for n in _sorted(nodes)
                      if (nodes[n] or {}).get("role") == "control_plane" and n != first]
    workers = [n for n in _sorted(nodes) if (nodes[n] or {}).get("role") == "worker"]
    known = [m for m in [master_id, bastion_id, first] + control_planes + workers if m]
    settings = kos.get("orchestration") or {}
    timeout = settings.get("timeout") or DEFAULT_TIMEOUT
    # A wave never asks more of the master than it can serve: parts sized by its cores.
    batch = settings.get("batch") or max(PER_CORE, (cores or 1) * PER_CORE)
    out = {"ask": [], "stop": None, "log": [], "timeout": timeout}

    problems = _option_problems(options, known)
    if problems:
        out["stop"] = _stop("kos-orch-deploy-options", False, "; ".join(problems))
        return out
    exclude, limit = options.get("exclude") or [], options.get("limit") or []
    force, started = options.get("force", False), options.get("started")
    if started and (started not in known or started in exclude):
        out["log"].append(["warning", f"kos orch.deploy: minion {started} started, but this "
                                      "deployment does not expect it: nothing done"])
        out["stop"] = _stop("kos-orch-deploy-unexpected", True,
                            f"minion {started} is not a minion of this deployment: nothing done")
        return out
    chosen = [started] if started else limit
    selected = [m for m in known if m in chosen] if (started or limit) else known
    targets = [m for m in selected if m not in exclude]
    # The reactor's new minion is news to every other minion: their /etc/hosts learn it.
    others = [m for m in known if m not in exclude and m not in targets] if started else []
    # The control planes always answer too: whether the cluster still lives on them decides
    # how a first control plane that holds nothing comes back.
    cps = [first] + control_planes if first and first not in exclude else []
    asked = [m for m in _unique(targets + others + cps) if m not in exclude]
    out["ask"] = asked
    if answers is None:
        return out

    need = {}
    for minion in asked:
        answer = answers.get(minion)
        need[minion] = answer if isinstance(answer, dict) else None
    others_joined = [m for m in _sorted(need) if m != first and need[m]
                     and ((need[m].get("kubernetes") or {}).get("joined") is True)]
    # A first control plane that answers without kos's modules is a new server: they were
    # never installed there. While other nodes say they joined, it must not be initialised;
    # it is planned as holding nothing (installing it to ask again would change it while
    # rendering), and the extension is installed by the run's first steps.
    if first in answers and need.get(first) is None and others_joined:
        need[first] = _new_server()
        out["log"].append(["info", f"kos orch.deploy: {first} answered without kos modules "
                                   f"while {', '.join(others_joined)} joined: a new server"])
    joined = {m: isinstance((a or {}).get("kubernetes"), dict)
              and a["kubernetes"].get("joined") is True for m, a in need.items()}
    current = [m for m in asked if need[m] and need[m].get("sync") is False]
    first_up = bool(first and joined.get(first, False))
    if started and not first_up:
        out["log"].append(["info", f"kos orch.deploy: minion {started} started before its "
                                   "cluster is up: nothing done (the first converge is kos "
                                   "converge's)"])
        out["stop"] = _stop("kos-orch-deploy-not-yet", True,
                            f"minion {started} started before its cluster is up: nothing done")
        return out

    # Why each target needs its highstate (absent: it needs none).
    why = {}
    for minion in targets:
        answer = need.get(minion)
        if force:
            why[minion] = ["forced"]
        elif answer is None:
            why[minion] = [NOT_SAID]
        elif answer.get("highstate"):
            why[minion] = answer["highstate"]
    is_joined = [m for m in _sorted(joined) if joined[m]]
    # A first control plane that holds nothing of a cluster while other nodes are joined to
    # it: its server was rebuilt. Initialising it would start a second cluster; it rejoins
    # through a joined control plane, the issuer, if there is one.
    first_need = need.get(first) or {}
    first_k8s = first_need.get("kubernetes") or {}
    still_joined = [m for m in is_joined if m != first]
    rebuilt = first in targets and first_k8s.get("fresh") is True and bool(still_joined)
    issuers = [m for m in control_planes if m in still_joined]
    issuer = issuers[0] if rebuilt and issuers else first
    rejoining = [first] if rebuilt and issuers else []
    joining_cps = rejoining + [m for m in control_planes if m in targets and m not in is_joined]
    joining_workers = [m for m in workers if m in targets and m not in is_joined]
    joining = joining_cps + joining_workers
    credentials = bool(issuer and issuer not in exclude and joining)
    issuing = [issuer] if credentials else []
    # The first control plane alone: while it is not initialised, and before joins when it
    # changes (new SANs or addons must not move under a joining node).
    first_alone = (first in targets and not rejoining
                   and (not first_up or (first in why and bool(joining))))
    wave = [m for m in targets if m in why and not (first_alone and m == first)
            and m not in joining_cps]
    highstated = wave + joining_cps + ([first] if first_alone else [])
    learning = [m for m in _sorted(need) if need[m] and need[m].get("learn")]
    learners = [m for m in _unique(targets + others + issuing)
                if m not in highstated and m in learning]
    prepared = _unique(highstated + issuing)
    everyone = _unique(prepared + learners)
    # The extension is installed where it may be stale: a minion that did not answer,
    # or whose last converge was made of another state tree.
    syncing = [m for m in prepared if m not in current]
    # Their pillar was judged on the answer's fresh compile: no refresh, no validation job;
    # the others (to sync, or forced without a reason of their own) are judged after a
    # refresh. Bad pillar anywhere stops the run before anything changes.
    invalid, checking = [], list(syncing)
    for minion in prepared:
        if minion in syncing:
            continue
        found = (need.get(minion) or {}).get("problems")
        if found is None:
            checking.append(minion)
        elif found:
            invalid.append(f"{minion}: {'; '.join(found)}")
    # Whose in-memory pillar no refresh renews before their highstate: it ends with one.
    run = {"tree": tree, "refresh": [m for m in highstated if m not in checking]}
    if started:
        # the node notes who converged it (kos.last_converged, kos status)
        run["by"] = "reactor"
    if issuer != first:
        run["issuer"] = issuer
    reasons = [f"{m} ({'; '.join(why.get(m) or ['not initialised'])})"
               for m in _sorted(highstated)]
    summary = "highstate: " + ", ".join(reasons) if reasons else "no highstate"
    if learners:
        summary += "; /etc/hosts learns new members: " + ", ".join(_sorted(learners))
    if rejoining:
        summary += f"; {first} (rebuilt) rejoins the cluster through {issuer}"
    out["log"].append(["info", f"kos orch.deploy: {summary}"])

    if issuer and issuer in exclude and joining:
        who = "the first control plane " if issuer == first else "the issuer "
        out["stop"] = _stop("kos-orch-deploy-options", False,
                            f"{who}{issuer} is excluded, but {', '.join(joining)} must join "
                            "with a credential it issues: do not exclude it")
        return out
    if rebuilt and not rejoining:
        holds = ("answered without kos's modules, as a new server does, but "
                 if first_need.get("inferred") else "holds no cluster, but ")
        fix = ("initialising it would start a second cluster, so nothing changed; no other "
               "control plane is joined for it to rejoin through: bring back its server with "
               "its disk, and meanwhile converge the others with pillar exclude [" + first + "]")
        if first_need.get("inferred"):
            fix += (f"; if it still holds its cluster, install the extension there "
                    f"(salt {first} state.apply kos.extension) and run again")
        out["stop"] = _stop("kos-orch-deploy-first-control-plane-lost", False,
                            f"the first control plane {first} {holds}"
                            f"{', '.join(still_joined)} joined the cluster it initialised: {fix}")
        return out

    by_members = {}
    for minion in learners:
        by_members.setdefault(need[minion].get("members"), []).append(minion)
    out.update(
        summary=summary,
        # Their answers stand for a ping: one round trip less for every minion.
        silent=[m for m in everyone if m not in answers],
        invalid=invalid,
        everyone=everyone,
        sync=syncing,
        check=checking,
        first=first if first_alone else None,
        learn=[{"members": members, "minions": by_members[members]}
               for members in _sorted(by_members)],
        control_planes=joining_cps,
        workers=joining_workers,
        issuer=issuer,
        wave=_parts(wave, batch) if wave else [],
        revoke=joining if credentials else [],
        spread=issuer if credentials else None,
        cluster_up=bool(first_alone or rejoining),
        rejoining=bool(rejoining),
        run=run,
    )
    return out

