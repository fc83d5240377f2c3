# Shared by the pipeline's scripts (sourced, not run). Nothing here prints a credential.

repo_root() {
  cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd
}

cache_dir() {
  echo "${XDG_CACHE_HOME:-$HOME/.cache}/kos"
}

# The project's Python: an existing virtualenv (KOS_VENV), else the one `make venv` builds.
kos_python() {
  if [ -z "${KOS_VENV:-}" ]; then
    make --no-print-directory venv >&2
    KOS_VENV=.venv
  fi
  # Importable from the checkout whether or not the package is installed in that venv.
  export PYTHONPATH="$PWD/bootstrap${PYTHONPATH:+:$PYTHONPATH}"
  echo "$KOS_VENV/bin/python"
}

# The linters in their own virtualenv, cached by the hash of their pinned versions.
lint_venv() {
  local hash venv python
  hash=$(sha256sum ci/lint-requirements.txt | cut -c1-12)
  venv="$(cache_dir)/venvs/lint-$hash"
  if [ ! -f "$venv/.kos-installed" ]; then
    python="${KOS_BASE_PYTHON:-$(command -v python3.11 || command -v python3)}"
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2
    "$venv/bin/pip" install -q -r ci/lint-requirements.txt >&2
    touch "$venv/.kos-installed"
  fi
  echo "$venv"
}

# OpenStack credentials come only from masked CI variables: a clouds.yaml as a File variable
# (KOS_CLOUDS_YAML, with OS_CLOUD naming the entry) or OS_* variables (application
# credentials recommended). Terraform's GitLab state: kos derives it from KOS_ENV and the job
# token.
cloud_env() {
  if [ -n "${KOS_CLOUDS_YAML:-}" ]; then
    export OS_CLIENT_CONFIG_FILE="$KOS_CLOUDS_YAML"
  fi
}

# gitlab-ci-local, pinned and installed once under the user cache dir (npm registry).
# 4.65.0 is the newest release that runs on Node.js 20 (later ones use Node 22 APIs).
GITLAB_CI_LOCAL_VERSION=4.65.0
gitlab_ci_local() {
  local prefix exe
  prefix="$(cache_dir)/npm/gitlab-ci-local-$GITLAB_CI_LOCAL_VERSION"
  exe="$prefix/node_modules/.bin/gitlab-ci-local"
  if [ ! -x "$exe" ]; then
    command -v npm >/dev/null || { echo "npm is needed to install gitlab-ci-local" >&2; return 1; }
    mkdir -p "$(dirname "$prefix")"
    (
      flock 9
      [ -x "$exe" ] || npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
        "gitlab-ci-local@$GITLAB_CI_LOCAL_VERSION" >&2
    ) 9>"$prefix.lock"
  fi
  echo "$exe"
}

# The deploy key lives in the agent for this job only (SSH_PRIVATE_KEY: a masked File
# variable); kos reads keys from the agent alone.
start_agent() {
  if [ -n "${SSH_PRIVATE_KEY:-}" ] && [ -z "${SSH_AUTH_SOCK:-}" ]; then
    eval "$(ssh-agent -s)" >/dev/null
    trap 'ssh-agent -k >/dev/null 2>&1' EXIT
    ssh-add -q "$SSH_PRIVATE_KEY" </dev/null
  fi
}
