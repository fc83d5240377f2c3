"""``kos kubeconfig``: the admin kubeconfig read from the first control plane, pointed at
the API's address and written 0600; what kos wrote is recorded, so ``kos down`` removes it
with the cluster."""

import hashlib
import json
import os
from pathlib import Path

from .. import distributions, ui
from ..errors import ConvergeError, InputError
from .deployment import first_control_plane
from .hostkeys import pin_node_host_key

KUBECONFIGS = "kubeconfigs.json"


def kubeconfig(dep, output, server=None):
    outputs = dep.require_outputs()
    first = first_control_plane(outputs)
    address = (outputs["minions"].get(first) or {}).get("private_ip")
    if not address:
        raise ConvergeError(
            f"the infrastructure's outputs give no private address for {first}",
            fix="re-run terraform apply (kos up) with this repository's terraform/",
        )
    pin_node_host_key(dep, first, address)
    with dep.master() as master:
        dist = distributions.detect(master, first)
        try:
            ret = dist.kubeconfig(master, first, address, dep.settings.formula_dir)
        except ConvergeError as exc:
            raise ConvergeError(
                f"cannot read the admin kubeconfig on {first}: {exc.problem}",
                fix="run kos converge until the first control plane is up, then retry",
                details=exc.details,
            ) from exc
    if not isinstance(ret, str) or "clusters:" not in ret:
        raise ConvergeError(
            f"{first} has no admin kubeconfig",
            fix="run kos converge until the first control plane is up, then retry",
        )
    if server is None:
        if not outputs.get("api_floating_ip"):
            raise InputError(
                "the cluster has no API floating IP (first_control_plane_access = admin_network)",
                fix=f"pass --server https://<k8s-cp-1 admin address>:{dist.api_port}",
            )
        server = f"https://{outputs['api_floating_ip']}:{dist.api_port}"
    text = distributions.rewrite_server(ret, server)
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Recorded first: an interrupted write still leaves kos down a file to remove.
    _record_kubeconfig(dep, path, text)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(text)
    return path, server


def _digest(text):
    return hashlib.sha256(text.encode()).hexdigest()


def _written_kubeconfigs(dep):
    """``{absolute path: sha256 of what kos wrote there}``."""
    try:
        return json.loads(dep.state.file(KUBECONFIGS).read_text())
    except (OSError, ValueError):
        return {}


def _record_kubeconfig(dep, path, text):
    dep.state.ensure()
    written = _written_kubeconfigs(dep)
    written[str(Path(path).absolute())] = _digest(text)
    dep.state.file(KUBECONFIGS).write_text(json.dumps(written, indent=1))


def remove_kubeconfigs(dep):
    """
    The admin kubeconfigs ``kos kubeconfig`` wrote for this cluster go with it; one that
    changed since (merged into another, say) stays, with a warning. The removed paths.
    """
    removed = []
    for name, digest in _written_kubeconfigs(dep).items():
        path = Path(name)
        try:
            if _digest(path.read_text()) != digest:
                ui.warn(f"{path} changed since kos kubeconfig wrote it: left in place; it "
                        f"holds the admin credential of the destroyed cluster {dep.cluster}")
                continue
            path.unlink()
            removed.append(name)
        except FileNotFoundError:
            pass
        except (OSError, UnicodeDecodeError) as exc:
            ui.warn(f"cannot remove the kubeconfig {path}: {exc}")
    dep.state.file(KUBECONFIGS).unlink(missing_ok=True)
    return removed

