"""
``kos drift``: how far a running cluster is from this repository, changing nothing.

* every change ``state.highstate test=True`` would make on the cluster's minions (and every
  state that would fail);
* hand edits on the master: files under the state tree and the pillar that differ from the
  repository's ``salt/salt`` and ``pillar/`` (the layers a cloud writes, ``_*.sls``, are
  not the repository's; ``_from_terraform.sls`` is compared with Terraform's
  ``salt_pillar`` output instead);
* minion keys: an expected minion whose key is not accepted, or an accepted key that is
  not a minion of this cluster.

Nothing is pushed, synced or accepted: the highstate runs in test mode with the modules
and pillar the minions already have.
"""

import hashlib
from pathlib import Path

from .salt import release_files, tree_files

CLOUD_LAYERS = "_*.sls"
TREE_MARK = ".kos-tree"


def _local_files(root, extra=None):
    """``{relative path: sha256}`` of a repository tree (and ``extra``), as kos pushes it."""
    return {rel: hashlib.sha256(data).hexdigest()
            for rel, (data, _) in tree_files(root, extra).items()}


def local_state_tree(settings):
    """``{relative path: sha256}`` of the state tree kos pushes: the formula and the
    extension's release."""
    return _local_files(settings.formula_dir, release_files())


def _remote_files(master, directory):
    """``{relative path: sha256}`` of the files under ``directory`` on the master."""
    res = master.ssh.run(
        ["find", directory, "-type", "f", "-exec", "sha256sum", "{}", "+"], check=False
    )
    found = {}
    prefix = directory.rstrip("/") + "/"
    for line in res.stdout.splitlines():
        digest, _, path = line.partition("  ")
        if path.startswith(prefix):
            found[path[len(prefix) :]] = digest
    return found


def compare_tree(local, remote, keep=None, expected_extra=None):
    """Differences between a repository tree and the master's copy, as report entries."""
    expected_extra = expected_extra or {}
    entries = []
    for rel in sorted(set(local) | set(remote) | set(expected_extra)):
        if rel == TREE_MARK or "__pycache__" in Path(rel).parts or rel.endswith(".pyc"):
            continue
        want = local.get(rel, expected_extra.get(rel))
        have = remote.get(rel)
        if want is None:
            if keep and "/" not in rel and Path(rel).match(keep):
                continue
            entries.append({"path": rel, "change": "not in the repository"})
        elif have is None:
            entries.append({"path": rel, "change": "missing on the master"})
        elif have != want:
            entries.append({"path": rel, "change": "edited on the master"})
    return entries


def highstate_changes(ret, expected):
    """``{minion: [entries]}``: what test=True says would change or fail."""
    found = {}
    for minion in expected:
        result = ret.get(minion)
        if not isinstance(result, dict):
            found[minion] = [
                {
                    "state": "-",
                    "change": "no state run",
                    "comment": str(result)[:300] if result else "no answer",
                }
            ]
            continue
        entries = []
        for key, state in sorted(result.items(), key=lambda kv: _run_num(kv[1])):
            if not isinstance(state, dict):
                continue
            verdict = state.get("result")
            if verdict is True and not state.get("changes"):
                continue
            parts = key.split("_|-")
            function = f"{parts[0]}.{parts[-1]}" if len(parts) == 4 else key
            entries.append(
                {
                    "state": state.get("__id__", key),
                    "function": function,
                    "change": "would fail" if verdict is False else "would change",
                    "changes": sorted(state.get("changes") or {}),
                    "comment": str(state.get("comment", "")).strip()[:300],
                }
            )
        if entries:
            found[minion] = entries
    return found


def _run_num(state):
    return state.get("__run_num__", 0) if isinstance(state, dict) else 0


def drift(dep):
    """The drift report of ``dep``'s cluster (``{"drift": bool, ...}``)."""
    outputs = dep.require_outputs()
    expected = sorted(outputs["minions"])
    settings = dep.settings
    pillar_root = str(Path(settings.pillar_file).parent)
    terraform_layer = {
        Path(settings.pillar_file).name: hashlib.sha256(outputs["salt_pillar"].encode()).hexdigest()
    }
    with dep.master() as master:
        keys = master.keys()
        trees = {
            settings.state_tree: compare_tree(
                local_state_tree(settings), _remote_files(master, settings.state_tree)
            ),
            pillar_root: compare_tree(
                _local_files(settings.pillar_dir),
                _remote_files(master, pillar_root),
                keep=CLOUD_LAYERS,
                expected_extra=terraform_layer,
            ),
        }
        ret = master.salt(expected, "state.highstate", "test=True", timeout=600, wait=3600)
    accepted = set(keys.get("minions", []))
    key_entries = [
        {"minion": m, "change": "key not accepted"} for m in expected if m not in accepted
    ]
    key_entries += [
        {"minion": m, "change": "accepted key of a minion not in this cluster"}
        for m in sorted(accepted - set(expected))
    ]
    states = highstate_changes(ret, expected)
    return {
        "cluster": dep.cluster,
        "drift": bool(states or key_entries or any(trees.values())),
        "states": states,
        "trees": trees,
        "keys": key_entries,
    }


def format_report(doc):
    """The report as a person reads it."""
    lines = [f"cluster {doc['cluster']}: " + ("DRIFT" if doc["drift"] else "no drift")]
    for directory, entries in doc["trees"].items():
        if entries:
            lines.append(f"{directory} on the master differs from the repository:")
            lines += [f"  {e['path']}: {e['change']}" for e in entries]
    for entry in doc["keys"]:
        lines.append(f"key {entry['minion']}: {entry['change']}")
    for minion, entries in doc["states"].items():
        lines.append(f"{minion}: state.highstate test=True: {len(entries)} state(s)")
        for e in entries:
            what = f" ({', '.join(e['changes'])})" if e.get("changes") else ""
            where = f" ({e['function']})" if e.get("function") else ""
            lines.append(f"  {e['state']}{where}: {e['change']}{what}: {e['comment']}".rstrip(": "))
    if doc["drift"]:
        lines.append(
            "to converge: kos converge (pushes the repository's formula and pillar, then "
            "runs orch.deploy); to keep a hand edit, commit it to the repository first"
        )
    return "\n".join(lines)
