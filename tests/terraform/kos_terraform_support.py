"""Constants and helpers shared by the Terraform fixtures and tests."""

from __future__ import annotations

import contextlib
import fcntl
import shutil
from pathlib import Path

from kos_local import provider as _provider

REPO = Path(__file__).resolve().parents[2]
TERRAFORM_DIR = REPO / "terraform"
# The provider's version, build and mirror are the rehearsal cloud's (kos_local.provider):
# one definition for kos and the tests.
PROVIDER_BUILD_DIR = _provider.BUILD_DIR
MIRROR_LOCK_FILE = _provider.MIRROR_LOCK_FILE
PROVIDER_VERSION = _provider.VERSION
PROVIDER_SOURCE = _provider.SOURCE
PROVIDER_PACKAGE = _provider.PACKAGE
GO_TOOLCHAIN = _provider.GO_TOOLCHAIN
CHECKOV_VERSION = "3.3.30"
CHECKOV_INSTALL_TIMEOUT = 20 * 60


def cache_root() -> Path:
    return _provider.cache_root()


def terraform_platform() -> str:
    return _provider.platform_name()


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
    _provider.build(target)


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
