"""The interface every cloud implements (see ``kos.backends``)."""

from abc import ABC, abstractmethod


class Backend(ABC):
    name = None
    # The step after which the infrastructure exists (up asks before it, not after).
    create_step = None

    def __init__(self, settings, state):
        self.settings = settings
        self.state = state

    @abstractmethod
    def preflight(self, inputs, check_quota=True):
        """Findings (cloud.Finding) about whether these inputs can be built."""

    @abstractmethod
    def create(self, inputs, steps, leaving=None):
        """Build the infrastructure as recorded steps; return the outputs. ``leaving`` is
        called with the minion ids of the nodes whose servers the change destroys, before
        it does (they leave the cluster first); the create step's detail lists them as
        ``retired``. The nodes of ``--replace`` leave the same way, with ``replace=True``
        (they come back), and the detail lists the rebuilt host names as ``replaced``."""

    @abstractmethod
    def outputs(self):
        """The outputs of the current infrastructure ({} when there is none)."""

    @abstractmethod
    def destroy(self, inputs, steps):
        """Remove everything ``create`` made, and what the cluster left behind."""

    def project(self):
        """An openstacksdk connection to the cluster's OpenStack project, or None for a
        cloud without one (kos creates the cloud-controller-manager's credential there)."""
        return None

    def pillar_layers(self, outputs):
        """What this cloud adds to the pillar of the infrastructure ``outputs`` describe:
        ``{file name: text}`` of layers written beside the Terraform one (``_*.sls``, kept
        by every push of the repository's pillar). Converge pushes them before the
        orchestration, which is when what they point at must be there."""
        return {}
