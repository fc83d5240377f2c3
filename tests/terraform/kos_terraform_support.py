"""Constants and helpers shared by the Terraform fixtures and tests."""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TERRAFORM_DIR = REPO / "terraform"
PROVIDER_BUILD_DIR = Path(__file__).resolve().parent / "provider"
# The lock for the provider built from source (terraform/.terraform.lock.hcl holds the
# registry's hashes, which a source build cannot match). kos reads it from
# KOS_PROVIDER_LOCK_FILE.
MIRROR_LOCK_FILE = PROVIDER_BUILD_DIR / "mirror.terraform.lock.hcl"

# Keep in step with terraform/versions.tf, tests/terraform/provider/go.mod and the lock file.
PROVIDER_VERSION = "3.4.0"
PROVIDER_SOURCE = "registry.terraform.io/terraform-provider-openstack/openstack"
PROVIDER_PACKAGE = "github.com/terraform-provider-openstack/terraform-provider-openstack/v3"
# The provider binary, hence the h1: hash in .terraform.lock.hcl, depends on the Go release:
# pin it (the go command fetches it through the module proxy when the local one differs).
GO_TOOLCHAIN = "go1.26.8"
CHECKOV_VERSION = "3.3.30"

PROVIDER_BUILD_TIMEOUT = 45 * 60
CHECKOV_INSTALL_TIMEOUT = 20 * 60


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kos"


def terraform_platform() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    if arch is None:
        pytest.fail(f"no Terraform platform name for machine {machine!r}")
    return f"{platform.system().lower()}_{arch}"


@contextlib.contextmanager
def locked(path: Path):
    """Serialise builds between concurrent sessions sharing the cache."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_provider(target: Path) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.fail("Go is needed once to build terraform-provider-openstack for the tests")
    with tempfile.TemporaryDirectory(prefix="kos-provider-build-") as tmp:
        work = Path(tmp)
        for name in ("go.mod", "go.sum"):
            shutil.copy(PROVIDER_BUILD_DIR / name, work / name)
        env = dict(os.environ)
        env.update(
            GOBIN=str(work / "bin"),
            GOTOOLCHAIN=GO_TOOLCHAIN,
            CGO_ENABLED="0",
            # Same flags on every machine: the lock file records the binary's hash.
            GOFLAGS="-trimpath -buildvcs=false -mod=readonly",
        )
        result = subprocess.run(
            [go, "install", "-ldflags=-s -w", PROVIDER_PACKAGE],
            check=False,
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=PROVIDER_BUILD_TIMEOUT,
        )
        if result.returncode != 0:
            pytest.fail(f"building terraform-provider-openstack failed:\n{result.stderr}")
        built = work / "bin" / "terraform-provider-openstack"
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        shutil.copy2(built, partial)
        os.replace(partial, target)


def copy_terraform(destination: Path) -> Path:
    """A throw-away copy of terraform/, locked to the source build, so runs leave nothing in
    the work tree."""
    shutil.copytree(
        TERRAFORM_DIR,
        destination,
        ignore=shutil.ignore_patterns(".terraform", "*.tfstate", "*.tfstate.*", "backend.tf"),
    )
    shutil.copy(MIRROR_LOCK_FILE, destination / ".terraform.lock.hcl")
    return destination
