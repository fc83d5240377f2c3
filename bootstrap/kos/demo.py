"""
`make demo`: converge a cluster with the real Salt formula and print it.

Until the local rehearsal cloud lands, this runs the multi-minion scenario of the
test suite: a real salt-master and four real salt-minions (salt master, one
control plane, two workers), each minion in its own network namespace, converged
with `salt-run state.orchestrate orch.deploy`. Kubernetes itself is simulated by
the stand-ins in tests/standins.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCENARIO = "tests/integration/test_deploy.py"
STEPS = "every_step or workers_joined or hosts_come or second_run"


def main():
    if os.geteuid() != 0:
        print("kos demo: needs root (it creates network namespaces)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kos-demo-") as tmp:
        report = Path(tmp) / "report.json"
        env = dict(os.environ, KOS_DEMO_REPORT=str(report))
        print("kos demo: converging 1 control plane + 2 workers (microk8s, simulated) with orch.deploy ...",
              file=sys.stderr)
        rc = subprocess.call(
            [sys.executable, "-m", "pytest", SCENARIO, "-q", "-p", "no:logging", "-k", STEPS],
            cwd=REPO, env=env,
        )
        if rc != 0 or not report.exists():
            print("kos demo: the scenario failed (see above)", file=sys.stderr)
            return rc or 1
        data = json.loads(report.read_text())
    print()
    print("Converged cluster (microk8s, simulated: stand-ins, not a real Kubernetes)")
    print(f"{'NODE':<16}{'ROLE':<16}{'IP':<16}READY")
    for name, node in sorted(data["nodes"].items()):
        print(f"{name:<16}{node['role']:<16}{node['ip']:<16}{node['ready']}")
    print()
    print(f"orch.deploy took {data['orchestration_seconds']}s; second run changed "
          f"{data.get('second_run_changes', '?')} states.")
    print("Everything the demo created (namespaces, bridge, daemons) is already removed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
