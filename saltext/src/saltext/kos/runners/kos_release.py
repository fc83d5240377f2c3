"""
Publish the extension this master runs to its minions: ``salt-run kos_release.publish``
writes the release of the installed saltext.kos (its wheel, its dependencies' wheels and
``release.yaml``, saltext.kos.utils.kos_release) under ``kos/release`` of the first
``file_roots`` directory of ``saltenv``, where the formula's ``kos.extension`` state installs
it from. For a master kos does not converge: ``kos converge`` publishes the same release with
the formula it pushes.
"""

from saltext.kos.utils import kos_release

__virtualname__ = "kos_release"


def __virtual__():
    return __virtualname__


def publish(saltenv="base"):
    """
    Write the release of the installed extension to this master's state tree; returns its
    version and wheels.

    CLI Example:

    .. code-block:: bash

        salt-run kos_release.publish
    """
    roots = __opts__.get("file_roots", {}).get(saltenv) or []
    if not roots:
        return {"result": False,
                "comment": f"file_roots has no directory for saltenv {saltenv}: add one to "
                           "the master's configuration"}
    try:
        index = kos_release.write(roots[0])
    except kos_release.ReleaseError as exc:
        return {"result": False, "comment": str(exc)}
    return {"result": True, "path": f"{roots[0]}/{kos_release.RELEASE_DIR}", **index}
