"""
Images without a registry: what containerd holds, what an image archive names, and
importing one (``ctr images list|import``,
https://github.com/containerd/containerd/blob/v1.7.0/cmd/ctr/commands/images/import.go).

:depends: ``ctr`` (containerd) on PATH
"""

import json
import tarfile

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_cli

__virtualname__ = "kos_images"


def __virtual__():
    return kos_cli.virtual(__virtualname__, "ctr", "is containerd installed?")


def _ctr(namespace, args):
    return kos_cli.run(__salt__, ["ctr", "-n", namespace, *args])


def images(namespace="k8s.io"):
    """
    Return the references of the images containerd holds in ``namespace`` (``ctr images
    list``), without the bare digests.

    CLI Example:

    .. code-block:: bash

        salt '*' kos_images.images
    """
    res = _ctr(namespace, ["images", "list", "-q"])
    return sorted(ref for ref in res["stdout"].split() if not ref.startswith("sha256:"))


def archive_images(path):
    """
    Return the image references an archive names: ``RepoTags`` of a ``docker save``
    archive, the ``io.containerd.image.name`` / ``org.opencontainers.image.ref.name``
    annotations of an OCI layout.

    CLI Example:

    .. code-block:: bash

        salt '*' kos_images.archive_images /srv/images/pause.tar
    """
    refs = []
    try:
        with tarfile.open(path) as tar:
            names = set(tar.getnames())
            if "manifest.json" in names:
                for entry in json.load(tar.extractfile("manifest.json")):
                    refs += entry.get("RepoTags") or []
            elif "index.json" in names:
                for desc in json.load(tar.extractfile("index.json")).get("manifests", []):
                    notes = desc.get("annotations") or {}
                    ref = notes.get("io.containerd.image.name") or notes.get(
                        "org.opencontainers.image.ref.name")
                    if ref:
                        refs.append(ref)
    except (OSError, tarfile.TarError, ValueError) as exc:
        raise CommandExecutionError(f"{path} is not an image archive: {exc}") from exc
    return refs


def import_images(path, namespace="k8s.io"):
    """
    Import an image archive into containerd's ``namespace`` (``ctr images import``).

    CLI Example:

    .. code-block:: bash

        salt '*' kos_images.import_images /srv/images/pause.tar
    """
    _ctr(namespace, ["images", "import", path])
    return archive_images(path)
