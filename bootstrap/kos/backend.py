"""The interface every cloud backend implements (see ``kos.backends``)."""

from abc import ABC, abstractmethod


class Backend(ABC):
    name = None
    # The step after which the infrastructure exists (up asks before it, not after).
    create_step = None

    def __init__(self, settings, state):
        self.settings = settings
        self.state = state

    def simulates(self, distribution):
        """Whether ``distribution`` on this cloud is the test stand-ins, not Kubernetes
        (status says so; nothing runs there to drain)."""
        return False

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
        backend without one (kos creates the cloud-controller-manager's credential there)."""
        return None

    def before_orchestration(self, distribution):
        """Make ready what the orchestration's nodes take from this cloud (the rehearsal
        cloud's Kubernetes mirror); the cloud's set-up may have started it."""

    def pillar_layers(self):
        """``{file name: text}`` of pillar layers this cloud writes beside the Terraform one
        (``_*.sls``, kept by every push of the repository's pillar)."""
        return {}
