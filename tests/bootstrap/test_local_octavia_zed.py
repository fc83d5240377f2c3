"""
The cloud image's edits of Debian's Octavia Zed worker (kos_local.openstack.octavia_zed):
a load balancer created with its listeners builds its flow with them, and that flow
computes the amphorae's network configuration before the task that needs it
(tests/bootstrap/test_local_image_edits.py: how a release whose code differs stops the
build).
"""

from kos_local.image import Build, edited
from kos_local.openstack import image as cloud_image
from kos_local.openstack import octavia_zed

# The shape of ControllerWorker.run_flow in Octavia 11.0.0
# (octavia/controller/worker/v2/controller_worker.py), the jobboard branch left out.
ZED_RUN_FLOW = """\
class ControllerWorker:
    def run_flow(self, func, *args, **kwargs):
        if True:
            tf = self.tf_engine.taskflow_load(
                func(*args), **kwargs)
            tf.run()
"""

# The shape of LoadBalancerFlows._create_listeners_flow in Octavia 11.0.0
# (octavia/controller/worker/v2/flows/load_balancer_flows.py), the listeners' own subflow
# left out.
ZED_LISTENERS_FLOW = """\
def _create_listeners_flow():
        flows = []
        flows.append(
            network_tasks.HandleNetworkDeltas(
                requires=constants.DELTAS, provides=constants.UPDATED_PORTS
            )
        )
        flows.append(
            amphora_driver_tasks.AmphoraePostNetworkPlug(
                requires=(constants.LOADBALANCER, constants.UPDATED_PORTS)
            )
        )
        return flows
"""


class Engine:
    def __init__(self):
        self.loads = []

    def taskflow_load(self, flow, **kwargs):
        self.loads.append((flow, kwargs))
        return type("Loaded", (), {"run": lambda self: None})()


def run_flow(text):
    scope = {}
    exec(compile(text, "controller_worker.py", "exec"), scope)
    worker = scope["ControllerWorker"]()
    worker.tf_engine = Engine()

    def create_lb_flow(topology, listeners=None):
        return ("flow", topology, listeners)

    worker.run_flow(create_lb_flow, "SINGLE", listeners=[{"protocol_port": 80}],
                    store={"loadbalancer_id": "lb-1"})
    return worker.tf_engine.loads


def test_the_load_balancers_flow_is_built_with_its_listeners():
    # as Debian ships it: the factory never sees the listeners, the engine gets them
    [(flow, kwargs)] = run_flow(ZED_RUN_FLOW)
    assert flow == ("flow", "SINGLE", None) and "listeners" in kwargs

    [(flow, kwargs)] = run_flow(edited(ZED_RUN_FLOW, octavia_zed.RUN_FLOW,
                                                   octavia_zed.RUN_FLOW_FIXED))
    assert flow == ("flow", "SINGLE", [{"protocol_port": 80}])
    assert kwargs == {"store": {"loadbalancer_id": "lb-1"}}


class Task:
    """A taskflow task as the flow's validation sees it: what its ``execute`` takes and
    ``requires`` name, what it ``provides`` (taskflow/atom.py)."""

    def __init__(self, execute, requires=(), provides=None):
        requires = (requires,) if isinstance(requires, str) else tuple(requires)
        self.requires = set(execute) | set(requires)
        self.provides = {provides} if provides else set()


class Tasks:
    # the execute signatures of Octavia 11.0.0's tasks (controller/worker/v2/tasks/)
    EXECUTE = {
        "HandleNetworkDeltas": ("deltas", "loadbalancer"),
        "GetAmphoraeNetworkConfigs": ("loadbalancer_id",),
        "AmphoraePostNetworkPlug": ("loadbalancer", "updated_ports",
                                    "amphorae_network_config"),
    }

    def __getattr__(self, name):
        return lambda **kwargs: Task(self.EXECUTE[name], **kwargs)


def missing_inputs(text):
    """What a task of the listeners' flow needs and nothing before it provides."""
    constants = type("constants", (), {
        "DELTAS": "deltas", "UPDATED_PORTS": "updated_ports", "LOADBALANCER": "loadbalancer",
        "LOADBALANCER_ID": "loadbalancer_id",
        "AMPHORAE_NETWORK_CONFIG": "amphorae_network_config"})
    scope = {"network_tasks": Tasks(), "amphora_driver_tasks": Tasks(),
             "constants": constants}
    exec(compile(text, "load_balancer_flows.py", "exec"), scope)
    known, missing = {"deltas", "loadbalancer", "loadbalancer_id"}, set()
    for task in scope["_create_listeners_flow"]():
        missing |= task.requires - known
        known |= task.provides
    return missing


def test_the_listeners_flow_has_the_amphorae_network_configuration():
    assert missing_inputs(ZED_LISTENERS_FLOW) == {"amphorae_network_config"}
    assert missing_inputs(edited(ZED_LISTENERS_FLOW, octavia_zed.POST_PLUG,
                                             octavia_zed.POST_PLUG_FIXED)) == set()


def test_the_image_build_makes_both_edits_in_the_workers_files(tmp_path):
    worker = tmp_path / octavia_zed.WORKER_PY
    flows = tmp_path / octavia_zed.FLOWS_PY
    flows.parent.mkdir(parents=True)
    worker.write_text(ZED_RUN_FLOW)
    flows.write_text(ZED_LISTENERS_FLOW)
    log = tmp_path / "build.log"
    log.write_text("")
    octavia_zed.apply(Build(cloud_image.layer(), tmp_path, log))
    assert octavia_zed.RUN_FLOW_FIXED in worker.read_text()
    assert octavia_zed.POST_PLUG_FIXED in flows.read_text()
