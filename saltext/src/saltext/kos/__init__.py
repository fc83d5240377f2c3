"""
saltext.kos: the execution, state, runner, returner and engine modules of kos
(Kubernetes on OpenStack, converged by Salt) as a Salt extension. Salt finds them through
the ``salt.loader`` entry point, which names this package: its ``modules``, ``states``,
``runners``, ``returners``, ``engines`` and ``utils`` directories are loader directories
(https://docs.saltproject.io/salt/extensions/salt-extension-copier/).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("saltext.kos")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
