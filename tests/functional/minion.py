"""A minion's options for Salt's real loaders in one process (saltfactories' Loaders): its
own file server (file_client local) and every path under ``root``, never this machine's
/etc/salt, /var/cache/salt or /etc/kos."""

import salt.config
from saltfactories.utils.functional import Loaders


def local_loaders(root, minion_id, **opts):
    """Loaders of a local minion ``minion_id`` rooted at ``root``; ``opts`` on top
    (file_roots, pillar_roots, kos, ...)."""
    config = salt.config.minion_config(None)
    config.update(
        id=minion_id,
        file_client="local",
        root_dir=str(root),
        cachedir=str(root / "cache"),
        # Salt derives it from the default cachedir: this machine's /var/cache/salt
        extension_modules=str(root / "cache" / "extmods"),
        pki_dir=str(root / "pki"),
        **opts,
    )
    return Loaders(config)
