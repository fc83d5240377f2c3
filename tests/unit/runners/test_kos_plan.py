"""orch.deploy's planner (saltext.kos.runners.kos_plan): from the deployment, the run's
options and the minions' answers to kos.converge_need, who converges how, in which order,
and what stops the run before anything changes."""

import salt.config
import salt.loader
import salt.utils.templates

from tests.unit.conftest import SALT_TREE, load

kos_plan = load("runners", "kos_plan")

DOMAIN = "example.com"
MASTER, BASTION, CP1, CP2, W1, W2, W3 = (
    f"{h}.{DOMAIN}" for h in ("salt", "bastion", "k8s-cp-1", "k8s-cp-2", "k8s-worker-1",
                              "k8s-worker-2", "k8s-worker-3"))
TREE = "tree-digest"


def deployment(workers=(W1, W2), control_planes=(CP1,), **orchestration):
    nodes = {cp: {"role": "control_plane"} for cp in control_planes}
    nodes.update({w: {"role": "worker"} for w in workers})
    kos = {"nodes": nodes, "first_control_plane": CP1, "salt_master": {"id": MASTER},
           "bastion": {"id": None}}
    if orchestration:
        kos["orchestration"] = orchestration
    return kos


def fresh(minion):
    """What a minion kos never converged answers."""
    k8s = None
    if minion != MASTER:
        first = minion == CP1
        k8s = {"role": "control_plane" if "-cp-" in minion else "worker", "first": first,
               "initialised": False, "joined": False, "fresh": True}
    reasons = ["never converged by kos"] + (
        [] if k8s is None else ["not initialised" if k8s["first"] else "not joined"])
    return {"highstate": reasons, "learn": True, "members": "m1", "sync": True,
            "kubernetes": k8s, "problems": None}


def converged(minion, highstate=(), learn=False, members="m1", problems=()):
    """What a minion converged with this state tree answers."""
    k8s = None
    if minion != MASTER:
        k8s = {"role": "control_plane" if "-cp-" in minion else "worker",
               "first": minion == CP1, "initialised": True, "joined": True, "fresh": False}
    return {"highstate": list(highstate), "learn": learn, "members": members, "sync": False,
            "kubernetes": k8s, "problems": list(problems)}


def plan(kos, answers, cores=1, **options):
    return kos_plan.plan(kos, options, answers, cores=cores, tree=TREE)


def test_a_fresh_cluster_initialises_the_first_control_plane_alone_then_one_wave():
    kos = deployment()
    asked = kos_plan.plan(kos, {})
    assert asked["ask"] == [MASTER, CP1, W1, W2] and asked["stop"] is None
    got = plan(kos, {m: fresh(m) for m in asked["ask"]})
    assert got["stop"] is None
    assert got["first"] == CP1 and got["issuer"] == CP1
    assert got["control_planes"] == [] and got["workers"] == [W1, W2]
    assert got["wave"] == [[MASTER, W1, W2]]
    assert got["revoke"] == [W1, W2] and got["cluster_up"] is True
    # once they joined, the issuer spreads the cluster's DNS over them
    assert got["spread"] == CP1
    # never converged: every one syncs, refreshes and is validated before anything changes
    assert got["sync"] == got["check"] == [MASTER, W1, W2, CP1]
    assert got["learn"] == [] and got["silent"] == [] and got["invalid"] == []
    assert got["run"] == {"tree": TREE, "refresh": []}
    assert got["summary"] == (
        f"highstate: {CP1} (never converged by kos; not initialised), {W1} (never converged "
        f"by kos; not joined), {W2} (never converged by kos; not joined), {MASTER} (never "
        "converged by kos)")


def test_nothing_changed_plans_nothing():
    kos = deployment()
    got = plan(kos, {m: converged(m) for m in (MASTER, CP1, W1, W2)})
    assert got["stop"] is None and got["summary"] == "no highstate"
    assert got["everyone"] == [] and got["wave"] == [] and got["first"] is None
    assert got["cluster_up"] is False and got["revoke"] == [] and got["spread"] is None


def test_a_pillar_change_is_one_wave_judged_in_the_answers():
    kos = deployment()
    answers = {m: converged(m, ["pillar changed: microk8s"]) for m in (MASTER, CP1, W1, W2)}
    got = plan(kos, answers)
    assert got["wave"] == [[MASTER, CP1, W1, W2]] and got["first"] is None
    assert got["sync"] == got["check"] == [] and got["revoke"] == []
    # nothing joins, nothing moves: the replicas stay where they are
    assert got["control_planes"] == got["workers"] == [] and got["spread"] is None
    # no refresh before: each highstate refreshes its in-memory pillar at its end
    assert got["run"] == {"tree": TREE, "refresh": [MASTER, CP1, W1, W2]}


def test_an_added_worker_joins_in_the_wave_and_the_others_learn_it():
    kos = deployment(workers=(W1, W2, W3))
    answers = {m: converged(m, learn=True, members="m2") for m in (MASTER, CP1, W1, W2)}
    answers[W3] = fresh(W3)
    got = plan(kos, answers)
    assert got["wave"] == [[W3]] and got["workers"] == [W3] and got["revoke"] == [W3]
    assert got["learn"] == [{"members": "m2", "minions": [MASTER, CP1, W1, W2]}]
    # the issuer was judged in its answer: only the new node syncs and is validated
    assert got["sync"] == got["check"] == [W3]
    assert got["first"] is None and got["cluster_up"] is False
    assert got["summary"].endswith(
        f"; /etc/hosts learns new members: {CP1}, {W1}, {W2}, {MASTER}")


def test_learners_are_grouped_by_the_members_they_answered():
    kos = deployment(workers=(W1, W2, W3))
    answers = {MASTER: converged(MASTER, learn=True, members="m3"),
               CP1: converged(CP1, learn=True, members="m2"),
               W1: converged(W1, learn=True, members="m2"),
               W2: converged(W2), W3: converged(W3)}
    got = plan(kos, answers)
    assert got["learn"] == [{"members": "m2", "minions": [CP1, W1]},
                            {"members": "m3", "minions": [MASTER]}]


def rebuilt_cluster(first_answer):
    kos = deployment(control_planes=(CP1, CP2))
    answers = {m: converged(m) for m in (MASTER, CP2, W1, W2)}
    answers[CP1] = first_answer
    return kos, answers


def test_a_rebuilt_first_control_plane_rejoins_through_another_control_plane():
    kos, answers = rebuilt_cluster(fresh(CP1))
    got = plan(kos, answers)
    assert got["stop"] is None
    assert got["issuer"] == CP2 and got["first"] is None
    assert got["control_planes"] == [CP1] and got["revoke"] == [CP1] and got["spread"] == CP2
    assert got["rejoining"] is True and got["cluster_up"] is True
    assert got["run"] == {"tree": TREE, "refresh": [], "issuer": CP2}
    assert got["sync"] == [CP1]
    assert got["summary"].endswith(f"; {CP1} (rebuilt) rejoins the cluster through {CP2}")


def test_a_first_control_plane_without_kos_modules_is_planned_as_a_new_server():
    """Its modules were never synced: planned as holding nothing, synced by the run's steps
    (not while rendering)."""
    kos, answers = rebuilt_cluster("'kos.converge_need' is not available.")
    got = plan(kos, answers)
    assert got["stop"] is None and got["issuer"] == CP2 and got["control_planes"] == [CP1]
    assert got["sync"] == got["check"] == [CP1]
    assert f"{CP1} ({kos_plan.NEW_SERVER})" in got["summary"]
    assert ["info", f"kos orch.deploy: {CP1} answered without kos modules while {CP2}, {W1}, "
                    f"{W2} joined: a new server"] in got["log"]
    # nobody joined yet: a fresh cluster's first control plane, not a rebuilt one
    fresh_cluster = plan(deployment(), {MASTER: fresh(MASTER), CP1: "not available",
                                        W1: fresh(W1), W2: fresh(W2)})
    assert fresh_cluster["first"] == CP1 and CP1 in fresh_cluster["sync"]
    assert f"{CP1} ({kos_plan.NOT_SAID})" in fresh_cluster["summary"]


def test_a_rebuilt_first_control_plane_with_no_control_plane_to_rejoin_through_stops():
    kos = deployment()
    answers = {m: converged(m) for m in (MASTER, W1, W2)}
    got = plan(kos, dict(answers, **{CP1: fresh(CP1)}))
    assert got["stop"]["id"] == "kos-orch-deploy-first-control-plane-lost"
    assert got["stop"]["result"] is False
    assert got["stop"]["name"].startswith(
        f"the first control plane {CP1} holds no cluster, but {W1}, {W2} joined the cluster "
        "it initialised: initialising it would start a second cluster, so nothing changed")
    assert got["stop"]["name"].endswith(f"pillar exclude [{CP1}]")
    inferred = plan(kos, dict(answers, **{CP1: "'kos.converge_need' is not available."}))
    assert inferred["stop"]["id"] == "kos-orch-deploy-first-control-plane-lost"
    assert f"{CP1} answered without kos's modules, as a new server does" in \
        inferred["stop"]["name"]
    assert f"salt {CP1} state.apply kos.extension" in inferred["stop"]["name"]


def test_an_excluded_minion_is_neither_asked_nor_converged():
    kos = deployment()
    asked = kos_plan.plan(kos, {"exclude": [W2], "force": True})["ask"]
    assert asked == [MASTER, CP1, W1]
    got = plan(kos, {m: converged(m) for m in asked}, exclude=[W2], force=True)
    assert got["wave"] == [[MASTER, CP1, W1]] and got["silent"] == []


def test_a_silent_minion_stops_the_run():
    kos = deployment()
    got = plan(kos, {m: converged(m) for m in (MASTER, CP1, W1)}, force=True)
    assert got["stop"] is None and got["silent"] == [W2]
    assert W2 in got["sync"]  # it said nothing: it would be synced, were it there


def test_an_excluded_issuer_stops_a_join():
    kos = deployment(workers=(W1, W2, W3))
    answers = {m: converged(m) for m in (MASTER, W1, W2)}
    answers[W3] = fresh(W3)
    got = plan(kos, answers, exclude=[CP1])
    assert got["stop"] == {
        "id": "kos-orch-deploy-options", "result": False,
        "name": f"the first control plane {CP1} is excluded, but {W3} must join with a "
                "credential it issues: do not exclude it"}


def test_limit_asks_the_control_planes_too_and_issues_from_the_first():
    kos = deployment()
    asked = kos_plan.plan(kos, {"limit": [W1]})["ask"]
    assert asked == [W1, CP1]
    answers = {CP1: converged(CP1), W1: converged(W1, ["not joined"])}
    answers[W1]["kubernetes"]["joined"] = False
    got = plan(kos, answers, limit=[W1])
    assert got["wave"] == [[W1]] and got["workers"] == [W1] and got["issuer"] == CP1
    assert got["first"] is None


def test_invalid_pillar_stops_the_run():
    kos = deployment()
    answers = {m: converged(m, ["pillar changed: microk8s"]) for m in (MASTER, CP1, W1, W2)}
    answers[W1]["problems"] = ["pillar key 'microk8s:addons:dnss': unknown addon"]
    got = plan(kos, answers)
    assert got["invalid"] == [f"{W1}: pillar key 'microk8s:addons:dnss': unknown addon"]


def test_the_reactors_started_minion_converges_once_its_cluster_is_up():
    kos = deployment(workers=(W1, W2, W3))
    asked = kos_plan.plan(kos, {"started": W3})["ask"]
    assert asked == [W3, MASTER, CP1, W1, W2]
    answers = {m: converged(m, learn=True, members="m2") for m in (MASTER, CP1, W1, W2)}
    answers[W3] = fresh(W3)
    got = plan(kos, answers, started=W3)
    assert got["wave"] == [[W3]] and got["workers"] == [W3]
    # the node notes that the reactor converged it
    assert got["run"]["by"] == "reactor"
    assert got["learn"] == [{"members": "m2", "minions": [MASTER, CP1, W1, W2]}]
    # before the cluster is up: nothing
    answers[CP1] = fresh(CP1)
    got = plan(kos, answers, started=W3)
    assert got["stop"] == {"id": "kos-orch-deploy-not-yet", "result": True,
                           "name": f"minion {W3} started before its cluster is up: nothing done"}
    # a minion nobody expects: nothing, and nobody is asked
    got = kos_plan.plan(kos, {"started": "stray.example.com"})
    assert got["stop"]["id"] == "kos-orch-deploy-unexpected" and got["stop"]["result"] is True
    assert got["ask"] == [] and got["log"][0][0] == "warning"


def test_bad_options_stop_the_run_before_anyone_is_asked():
    kos = deployment()
    got = kos_plan.plan(kos, {"exclude": W1, "limit": ["k8s-worker-9.nowhere"],
                              "force": "yes", "started": W2})
    assert got["ask"] == [] and got["stop"]["id"] == "kos-orch-deploy-options"
    assert got["stop"]["name"].split("; ")[0] == (
        f"pillar key 'exclude' must be a list of minion ids, got \"{W1}\"")
    assert "pillar key 'limit': \"k8s-worker-9.nowhere\" is not a minion of this " \
           f"deployment; use one of {MASTER}, {CP1}, {W1}, {W2}" in got["stop"]["name"]
    assert "pillar key 'force' must be true or false, got \"yes\"" in got["stop"]["name"]
    assert "pillar key 'started' (set by the reactor) must be one minion id, without " \
           f"limit, got \"{W2}\"" in got["stop"]["name"]


def test_the_wave_comes_in_parts_the_master_can_serve():
    answers = {m: converged(m) for m in (MASTER, CP1, W1, W2)}
    assert plan(deployment(batch=3), answers, force=True)["wave"] == [[MASTER, CP1, W1], [W2]]
    assert plan(deployment(batch="50%"), answers, force=True)["wave"] == [[MASTER, CP1],
                                                                          [W1, W2]]
    # by default five per core of the master, and at least five
    assert len(plan(deployment(), answers, force=True, cores=1)["wave"]) == 1
    assert plan(deployment(timeout=300), answers)["timeout"] == 300


def test_salt_loads_it_as_a_runner_of_the_extension(tmp_path):
    """The master's runner loader finds plan in the installed extension (the entry point,
    no runner_dirs), and what it returns is the plan of the inputs it was given."""
    opts = salt.config.master_config(None)
    opts.update(extension_modules=str(tmp_path), cachedir=str(tmp_path))
    runners = salt.loader.runner(opts)
    assert [name for name in runners if name.startswith("kos_plan.")] == ["kos_plan.plan"]
    inputs = {"kos": deployment(), "options": {}, "answers": {}, "tree": TREE}
    assert runners["kos_plan.plan"](**inputs) == kos_plan.plan(**inputs)


def test_orch_deploy_reads_it_through_the_py_renderer_in_its_own_process():
    """salt://orch/planner.py, as orch.deploy renders it (Salt's py renderer hands it
    ``inputs``), returns the plan of those inputs: no runner job, so no privilege drop to
    the orchestration's user (which hung where that user is an account of the master)."""
    inputs = {"kos": deployment(), "options": {}, "answers": {}, "tree": TREE}
    rendered = salt.utils.templates.py(str(SALT_TREE / "orch" / "planner.py"), True,
                                       inputs=inputs)
    assert rendered == {"result": True, "data": kos_plan.plan(**inputs)}
