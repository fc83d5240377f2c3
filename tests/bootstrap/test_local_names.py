"""
The rehearsal cloud finds its machines by name: a cloud of the same name that runs from
another directory (another checkout's, or a run that was killed) is refused with one
error before anything is built or mounted, never taken for this one.
"""

import subprocess
import sys
import time

import pytest

from kos.errors import ConvergeError
from kos_local import hosts
from kos_local.openstack.cloud import Cloud


@pytest.fixture
def foreign_cloud(tmp_path):
    """A process that looks like the nspawn of cloud ``kosguard`` booted from elsewhere."""
    elsewhere = tmp_path / "elsewhere" / "merged"
    proc = subprocess.Popen(
        ["systemd-nspawn", "-c", "import time; time.sleep(120)", "--boot",
         f"--directory={elsewhere}", "--machine=kos-kosguard-cloud"],
        executable=sys.executable,
    )
    try:
        for _ in range(100):
            if hosts.nspawns("kos-kosguard-cloud"):
                break
            time.sleep(0.05)
        yield elsewhere
    finally:
        proc.kill()
        proc.wait()


def test_running_from_names_the_directory(foreign_cloud, tmp_path):
    machine = hosts.Machine("kos-kosguard-cloud", tmp_path / "here")
    assert machine.running_from() == foreign_cloud
    assert hosts.Machine("kos-kosguard-nothing", tmp_path / "x").running_from() is None


def test_a_cloud_of_the_same_name_elsewhere_is_refused(foreign_cloud, tmp_path):
    cloud = Cloud("kosguard", tmp_path / "state" / "kosguard-cloud")
    with pytest.raises(ConvergeError) as err:
        cloud.ensure([], host_image=None, amphora_image=None)
    assert str(foreign_cloud) in str(err.value)
    assert "kos cloud down" in err.value.fix
    # refused before anything was made here
    assert not (tmp_path / "state").exists()
