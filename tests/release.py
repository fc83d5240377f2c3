"""The extension's release as a master serves it (salt://kos/release/,
saltext.kos.utils.kos_release), built once per test process into a file root of its own
that the tests' masters and minions add to their file_roots. The formula's kos.extension
installs it; here it finds the virtualenv's extension at the release's version."""

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from saltext.kos.utils import kos_release


@functools.cache
def release_root():
    root = Path(tempfile.mkdtemp(prefix="kos-release-"))
    atexit.register(shutil.rmtree, root, True)
    kos_release.write(root)
    return root
