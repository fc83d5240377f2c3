"""
Errors the CLI turns into one message and a documented exit code.

Exit codes (also in docs/troubleshooting.md):

==  ==========================================================================
0   success (``kos status``: every node reachable and its last highstate good)
1   unexpected error (a bug: please report it with the traceback)
2   usage error (unknown option, bad option value; printed by click)
3   bad input: a Terraform variable or option is invalid; nothing was changed
4   preflight failed: credentials, image, flavor, network, quota or ssh-agent
5   Terraform failed (init, plan, apply, destroy)
6   converge failed: master unreachable, minion missing, orchestration failed
7   cleanup before/after destroy left cloud resources behind
8   aborted: a confirmation was declined (use --yes in CI)
9   ``kos status``: the cluster is reachable but degraded
10  ``kos drift``: the cluster differs from the repository (report on stdout)
11  another kos run holds the cluster's lock (locally or on the salt master), or the
    master runs an orchestration kos did not start; nothing was changed
130 interrupted (Ctrl-C, SIGTERM): what kos started on the master was stopped or
    waited for, and the step is recorded as interrupted; re-run to resume
==  ==========================================================================
"""

EXIT_OK = 0
EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_PREFLIGHT = 4
EXIT_TERRAFORM = 5
EXIT_CONVERGE = 6
EXIT_CLEANUP = 7
EXIT_ABORTED = 8
EXIT_DEGRADED = 9
EXIT_DRIFT = 10
EXIT_LOCKED = 11
EXIT_INTERRUPTED = 130


class KosError(Exception):
    """A failure the operator can act on: what went wrong, and how to fix it."""

    exit_code = EXIT_BUG

    def __init__(self, problem, fix=None, details=()):
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.details = list(details)

    def __str__(self):
        return self.problem


class InputError(KosError):
    exit_code = EXIT_INPUT


class PreflightError(KosError):
    exit_code = EXIT_PREFLIGHT


class TerraformError(KosError):
    exit_code = EXIT_TERRAFORM


class ConvergeError(KosError):
    exit_code = EXIT_CONVERGE


class CleanupError(KosError):
    exit_code = EXIT_CLEANUP


class Aborted(KosError):
    exit_code = EXIT_ABORTED


class Locked(KosError):
    exit_code = EXIT_LOCKED


class Interrupted(KosError):
    exit_code = EXIT_INTERRUPTED
