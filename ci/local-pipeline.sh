#!/usr/bin/env bash
# The pipeline's jobs on this machine, with gitlab-ci-local in shell mode (`make pipeline`):
#   ci/local-pipeline.sh [gitlab-ci-local options] JOB...
# e.g. `ci/local-pipeline.sh validate plan:dev`. Each job runs in a copy of the working tree
# under .gitlab-ci-local/; artifacts pass between jobs as in GitLab.
#
# CI/CD variables: .gitlab-ci-local-variables.yml in the checkout (gitlab-ci-local's own
# file; keep it out of git), KOS_PIPELINE_VARIABLES (another such file) and --variable K=V.
# Outside GitLab there is no CI_JOB_TOKEN, so Terraform state is local: it is kept in this
# checkout's .kos/ (KOS_STATE_DIR), shared by the jobs and by `kos --env ENV` run by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/lib.sh

exe=$(gitlab_ci_local)
args=(--shell-isolation --force-shell-executor --no-color --timestamps)
if [ -n "${KOS_PIPELINE_VARIABLES:-}" ]; then
  args+=(--variables-file "$KOS_PIPELINE_VARIABLES")
fi
# The checkout's virtualenv and caches, not a fresh install per job.
args+=(--variable "KOS_VENV=${KOS_VENV:-$PWD/.venv}")
args+=(--variable "XDG_CACHE_HOME=${XDG_CACHE_HOME:-$HOME/.cache}")
args+=(--variable "KOS_STATE_DIR=${KOS_STATE_DIR:-$PWD/.kos}")
exec "$exe" "${args[@]}" "$@"
