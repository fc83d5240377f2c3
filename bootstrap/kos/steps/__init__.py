"""
The steps behind the commands, one module per concern, after k0sctl's ``phase/`` package
(https://github.com/k0sproject/k0sctl/tree/main/phase): a step says whether it should run,
runs, and cleans up after a failure; ``runner.run`` runs a list of them and records each
one in the cluster's state directory, so a re-run picks up where a failed run stopped.
The CLI only parses options and calls these.
"""
