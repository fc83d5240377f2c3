"""
Two edits of Debian's Octavia Zed (11.0.0) worker, without which a load balancer created
fully populated (listeners, pools and members in one request, as the OpenStack
cloud-controller-manager creates one for a Service) stays with its listeners in
PENDING_CREATE:

- ``ControllerWorker.run_flow`` without a jobboard hands every keyword, ``listeners=``
  included, to ``taskflow_load`` instead of to the flow's factory, so the load balancer's
  flow is built without its listeners (octavia/controller/worker/v2/controller_worker.py).
  Later Octavia passes the factory its arguments and the engine only the ``store``.
- The listeners' part of that flow then plugs the members' networks with
  ``AmphoraePostNetworkPlug`` but never computes the amphorae's network configuration the
  task requires (octavia/controller/worker/v2/flows/load_balancer_flows.py,
  ``_create_listeners_flow``). The member flows of the same release compute it with
  ``GetAmphoraeNetworkConfigs`` first, as later Octavia does here too.

Each edit is made only on the text it was written for; any other text stops the image's
build at the step, named.
"""

from ..image import edit_python

SITE = "usr/lib/python3/dist-packages/octavia/controller/worker/v2"
WORKER_PY = f"{SITE}/controller_worker.py"
FLOWS_PY = f"{SITE}/flows/load_balancer_flows.py"

RUN_FLOW = ("            tf = self.tf_engine.taskflow_load(\n"
            "                func(*args), **kwargs)\n")
RUN_FLOW_FIXED = ("            # the flow's factory takes the arguments, the engine the store\n"
                  "            store = kwargs.pop('store', None)\n"
                  "            tf = self.tf_engine.taskflow_load(\n"
                  "                func(*args, **kwargs), store=store)\n")

POST_PLUG = ("        flows.append(\n"
             "            amphora_driver_tasks.AmphoraePostNetworkPlug(\n"
             "                requires=(constants.LOADBALANCER, constants.UPDATED_PORTS)\n"
             "            )\n"
             "        )\n")
POST_PLUG_FIXED = ("        flows.append(\n"
                   "            network_tasks.GetAmphoraeNetworkConfigs(\n"
                   "                requires=constants.LOADBALANCER_ID,\n"
                   "                provides=constants.AMPHORAE_NETWORK_CONFIG\n"
                   "            )\n"
                   "        )\n"
                   "        flows.append(\n"
                   "            amphora_driver_tasks.AmphoraePostNetworkPlug(\n"
                   "                requires=(constants.LOADBALANCER, constants.UPDATED_PORTS,\n"
                   "                          constants.AMPHORAE_NETWORK_CONFIG)\n"
                   "            )\n"
                   "        )\n")

# (file, the text Zed ships, the text kos puts in its place)
EDITS = ((WORKER_PY, RUN_FLOW, RUN_FLOW_FIXED), (FLOWS_PY, POST_PLUG, POST_PLUG_FIXED))


def apply(build):
    """The edits, in the image ``build`` makes."""
    edit_python(build, "Octavia's fully populated load balancers", EDITS,
                "Octavia release 11.0.0")
