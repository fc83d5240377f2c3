"""
terraform-provider-openstack for the rehearsal cloud: built from source with Go once per
version and Go release, kept in a filesystem mirror under ``~/.cache/kos``, and offered to
Terraform by a CLI configuration that installs it from that mirror only. The binary's
``h1:`` hash is the one ``terraform/.terraform.lock.hcl`` records for it, so ``terraform
init -lockfile=readonly`` accepts it exactly as it accepts the registry's package.
"""

import fcntl
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from kos.errors import PreflightError

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = REPO / "tests" / "terraform" / "provider"
# The lock of this source build (terraform/.terraform.lock.hcl holds the registry's hashes,
# which a source build cannot match); kos reads it from KOS_PROVIDER_LOCK_FILE.
MIRROR_LOCK_FILE = BUILD_DIR / "mirror.terraform.lock.hcl"

# Keep in step with terraform/versions.tf, tests/terraform/provider/go.mod and the lock file.
VERSION = "3.4.0"
SOURCE = "registry.terraform.io/terraform-provider-openstack/openstack"
PACKAGE = "github.com/terraform-provider-openstack/terraform-provider-openstack/v3"
# The binary, hence its h1: hash, depends on the Go release: pin it (the go command fetches
# it through the module proxy when the local one differs).
GO_TOOLCHAIN = "go1.26.8"
BUILD_TIMEOUT = 45 * 60


def cache_root():
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kos"


def go_root():
    """Go's module, build and toolchain caches for every build kos makes (the provider,
    Kubernetes): under kos's own cache, so a fresh machine's builds share them and removing
    ``~/.cache/kos`` removes them too."""
    return cache_root() / "go"


def go_env(toolchain, goflags):
    env = dict(os.environ)
    env.update(
        GOTOOLCHAIN=toolchain,
        GOMODCACHE=str(go_root() / "mod"),
        GOCACHE=str(go_root() / "build"),
        GOPATH=str(go_root() / "path"),
        CGO_ENABLED="0",
        GOFLAGS=goflags,
    )
    return env


def platform_name():
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[machine]
    return f"{platform.system().lower()}_{arch}"


def mirror_root():
    return cache_root() / "terraform-providers" / f"openstack-{VERSION}-{GO_TOOLCHAIN}-{platform_name()}"


def mirror():
    return mirror_root() / "mirror"


def binary():
    return (mirror() / SOURCE / VERSION / platform_name()
            / f"terraform-provider-openstack_v{VERSION}")


def build(target):
    go = shutil.which("go")
    if go is None:
        raise PreflightError("Go is needed once to build terraform-provider-openstack",
                             fix="apt-get install golang (or put go on PATH)")
    with tempfile.TemporaryDirectory(prefix="kos-provider-build-") as tmp:
        work = Path(tmp)
        for name in ("go.mod", "go.sum"):
            shutil.copy(BUILD_DIR / name, work / name)
        # Same flags on every machine: the lock file records the binary's hash.
        env = go_env(GO_TOOLCHAIN, "-trimpath -buildvcs=false -mod=readonly")
        env["GOBIN"] = str(work / "bin")
        res = subprocess.run([go, "install", "-ldflags=-s -w", PACKAGE], cwd=work, env=env,
                             capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        if res.returncode != 0:
            raise PreflightError("building terraform-provider-openstack failed",
                                 fix="check Go and the module proxy (GOPROXY)",
                                 details=res.stderr.strip().splitlines()[-15:])
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        shutil.copy2(work / "bin" / "terraform-provider-openstack", partial)
        os.replace(partial, target)


def ensure():
    """The mirror's Terraform CLI configuration file (the provider built if missing)."""
    target = binary()
    if not target.exists():
        root = mirror_root()
        root.mkdir(parents=True, exist_ok=True)
        with open(root / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():
                build(target)
    rc = mirror_root() / "terraform.tfrc"
    text = (
        "# Written by kos: terraform-provider-openstack from the local mirror only.\n"
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f'    path    = "{mirror()}"\n'
        f'    include = ["{SOURCE}"]\n'
        "  }\n"
        "  direct {\n"
        f'    exclude = ["{SOURCE}"]\n'
        "  }\n"
        "}\n"
    )
    if not rc.exists() or rc.read_text() != text:
        rc.write_text(text)
    return rc
