# Installed as cinder/volume/drivers/kos_file.py in kos's rehearsal cloud image.
"""
A Cinder volume driver that keeps each volume as a sparse file in a directory of the
cloud. Attaching hands the file's path to Nova (connection type ``local``); kos's
materialiser turns it into a block device of the server's host, where it appears as
``/dev/disk/by-id/virtio-<first 20 characters of the volume id>`` as on a KVM cloud.
The file outlives every attachment, so a volume moved to a new server keeps its data.

A volume made from an image (a server booting from a volume) is a file system: the
materialiser mounts it as the writable layer of the server's root over the image's layers,
whose manifest (the Glance image's data) is kept beside the file as ``<file>.image``. So
what the server writes to its root lives in the volume and goes with it.
"""

import os
import shutil
import subprocess

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import units

from cinder import exception
from cinder import interface
from cinder.volume import configuration
from cinder.volume import driver

LOG = logging.getLogger(__name__)
OPTS = [cfg.StrOpt("kos_volume_dir", default="/var/lib/cinder/kos-volumes")]
# beside a volume made from an image: that image's data (a host image's manifest)
IMAGE_SUFFIX = ".image"
cfg.CONF.register_opts(OPTS, group=configuration.SHARED_CONF_GROUP)


@interface.volumedriver
class KosFileDriver(driver.VolumeDriver):
    VERSION = "1.0.0"
    CI_WIKI_NAME = "kos"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.configuration.append_config_values(OPTS)
        self.backend_name = self.configuration.safe_get("volume_backend_name") or "kos"

    def _dir(self):
        return self.configuration.kos_volume_dir

    def _path(self, volume):
        return os.path.join(self._dir(), f"volume-{volume.id}")

    def do_setup(self, context):
        os.makedirs(self._dir(), exist_ok=True)

    def check_for_setup_error(self):
        if not os.access(self._dir(), os.W_OK):
            raise exception.VolumeBackendAPIException(data=f"{self._dir()} is not writable")

    def create_volume(self, volume):
        with open(self._path(volume), "wb") as fh:
            fh.truncate(volume.size * units.Gi)

    def create_cloned_volume(self, volume, src_vref):
        shutil.copyfile(self._path(src_vref), self._path(volume))
        if os.path.exists(self._path(src_vref) + IMAGE_SUFFIX):
            shutil.copyfile(self._path(src_vref) + IMAGE_SUFFIX, self._path(volume) + IMAGE_SUFFIX)
        self.extend_volume(volume, volume.size)

    def delete_volume(self, volume):
        for path in (self._path(volume), self._path(volume) + IMAGE_SUFFIX):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def copy_image_to_volume(self, context, volume, image_service, image_id, *args, **kwargs):
        manifest = self._path(volume) + IMAGE_SUFFIX
        with open(manifest + ".tmp", "wb") as fh:
            image_service.download(context, image_id, fh)
        os.replace(manifest + ".tmp", manifest)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "kos-root", self._path(volume)],
                       check=True, capture_output=True)

    def extend_volume(self, volume, new_size):
        with open(self._path(volume), "r+b") as fh:
            fh.truncate(new_size * units.Gi)

    def create_snapshot(self, snapshot):
        shutil.copyfile(self._path(snapshot.volume),
                        os.path.join(self._dir(), f"snapshot-{snapshot.id}"))

    def delete_snapshot(self, snapshot):
        try:
            os.unlink(os.path.join(self._dir(), f"snapshot-{snapshot.id}"))
        except FileNotFoundError:
            pass

    def create_volume_from_snapshot(self, volume, snapshot):
        shutil.copyfile(os.path.join(self._dir(), f"snapshot-{snapshot.id}"), self._path(volume))
        self.extend_volume(volume, volume.size)

    def create_export(self, context, volume, connector):
        pass

    def ensure_export(self, context, volume):
        pass

    def remove_export(self, context, volume):
        pass

    def initialize_connection(self, volume, connector):
        return {
            "driver_volume_type": "local",
            "data": {"device_path": self._path(volume), "volume_id": volume.id},
        }

    def terminate_connection(self, volume, connector, **kwargs):
        pass

    def _update_volume_stats(self):
        usage = shutil.disk_usage(self._dir())
        self._stats = {
            "volume_backend_name": self.backend_name,
            "vendor_name": "kos",
            "driver_version": self.VERSION,
            "storage_protocol": "local",
            "total_capacity_gb": usage.total // units.Gi,
            "free_capacity_gb": usage.free // units.Gi,
            "reserved_percentage": 0,
            "thin_provisioning_support": True,
            "max_over_subscription_ratio": 20.0,
        }

    def get_volume_stats(self, refresh=False):
        if refresh or not self._stats:
            self._update_volume_stats()
        return self._stats
