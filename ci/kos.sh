#!/usr/bin/env bash
# One kos command, as every deployment job runs it: `ci/kos.sh up --yes`, `ci/kos.sh plan`...
# The deployment's Terraform variables come from KOS_TFVARS (a File variable) and/or TF_VAR_*.
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/lib.sh

python=$(kos_python)
cloud_env
start_agent
args=("$@")
if [ -n "${KOS_TFVARS:-}" ]; then
  args+=(--var-file "$KOS_TFVARS")
fi
"$python" -m kos "${args[@]}"
