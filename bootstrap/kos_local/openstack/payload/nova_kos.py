# Installed as nova/virt/kos.py in kos's rehearsal cloud image (compute_driver = kos.KosDriver).
"""
A Nova compute driver whose servers are systemd-nspawn hosts on the machine that runs the
cloud. Nova's fake driver keeps the books (resources, power states); every spawn, reboot,
power change, destroy and volume attachment is handed to kos's materialiser through a
spool directory, and answered when the materialiser has done it:

    <spool>/requests/<seq>-<uuid>-<op>.json   written here (atomically)
    <spool>/replies/<same name>               {"ok": true} or {"ok": false, "error": "..."}
    <spool>/instances/<uuid>.json             what the materialiser knows of a server
    <spool>/consoles/<uuid>.log               the host's console, as it printed it

The config drive is Nova's own (InstanceMetadata, as the libvirt driver builds it): the
host gets exactly what a VM's cloud-init would read from /dev/sr0.

The cloud runs several of these compute services, each with a ``host`` of its own, so that
server groups and availability zones are Nova's real scheduling decisions. Their servers
all live in one network namespace, plugged by one Linux bridge agent: ports are bound to
that agent's host (``network_binding_host_id``, the hook Ironic's driver uses too), and
each service keeps in its books only the servers it spawned.
"""

import base64
import json
import os
import time

from oslo_config import cfg
from oslo_log import log as logging

from nova import exception
from nova.api.metadata import base as instance_metadata
from nova.compute import power_state
from nova.virt import configdrive
from nova.virt import driver
from nova.virt import fake
from nova.virt import hardware

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
CONF.register_opts(
    [
        cfg.StrOpt("spool", default="/var/lib/kos-spool"),
        cfg.IntOpt("timeout", default=600, help="Seconds to wait for the materialiser."),
        cfg.StrOpt("network_host", default="kos-cloud",
                   help="The host of the Linux bridge agent that plugs every server's ports."),
    ],
    group="kos",
)

STATES = {"running": power_state.RUNNING, "shutdown": power_state.SHUTDOWN}
CONSOLE_BYTES = 256 * 1024


class KosDriver(fake.FakeDriver):
    capabilities = dict(
        fake.FakeDriver.capabilities,
        # Octavia plugs an amphora into its load balancer's networks by attaching them
        supports_attach_interface=True,
        supports_tagged_attach_interface=False,
        supports_multiattach=False,
        supports_evacuate=False,
    )

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        self.spool = CONF.kos.spool
        for sub in ("requests", "replies", "instances", "consoles"):
            os.makedirs(os.path.join(self.spool, sub), exist_ok=True)
        self._seq = int(time.time() * 1000)

    # -- the spool --------------------------------------------------------------------

    def _record(self, uuid):
        try:
            with open(os.path.join(self.spool, "instances", f"{uuid}.json")) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None

    def _request(self, op, instance, **data):
        self._seq += 1
        name = f"{self._seq:016d}-{instance.uuid}-{op}.json"
        doc = {"op": op, "uuid": instance.uuid, "name": instance.name, **data}
        tmp = os.path.join(self.spool, "requests", f".{name}.tmp")
        with open(tmp, "w") as fh:
            json.dump(doc, fh)
        os.rename(tmp, os.path.join(self.spool, "requests", name))
        reply = os.path.join(self.spool, "replies", name)
        deadline = time.monotonic() + CONF.kos.timeout
        while time.monotonic() < deadline:
            if os.path.exists(reply):
                with open(reply) as fh:
                    answer = json.load(fh)
                os.unlink(reply)
                if not answer.get("ok"):
                    raise exception.NovaException(
                        f"kos materialiser: {op} of {instance.uuid} failed: {answer.get('error')}"
                    )
                return answer
            time.sleep(0.25)
        raise exception.NovaException(
            f"kos materialiser did not answer {op} of {instance.uuid} within "
            f"{CONF.kos.timeout}s: is `kos up --cloud local` 's materialiser running?"
        )

    # -- lifecycle --------------------------------------------------------------------

    def init_host(self, host):
        super().init_host(host)
        # The books survive a restart of nova-compute: the materialiser's records say
        # which servers exist and whether they run.
        for entry in os.listdir(os.path.join(self.spool, "instances")):
            if entry.endswith(".json"):
                rec = self._record(entry[:-5])
                # another compute service's server is not this one's to keep (it would be
                # reaped here as a deleted server still running once that one deletes it)
                if rec and rec.get("state") in STATES and rec.get("compute_host") == CONF.host:
                    self.instances[rec["uuid"]] = fake.FakeInstance(
                        rec.get("name"), STATES[rec["state"]], rec["uuid"]
                    )

    def spawn(self, context, instance, image_meta, injected_files, admin_password,
              allocations, network_info=None, block_device_info=None, power_on=True,
              accel_info=None):
        drive = {}
        if configdrive.required_by(instance):
            extra_md = {"admin_pass": admin_password} if admin_password else {}
            metadata = instance_metadata.InstanceMetadata(
                instance, content=injected_files, extra_md=extra_md, network_info=network_info,
            )
            for path, data in metadata.metadata_for_config_drive():
                if isinstance(data, str):
                    data = data.encode()
                drive[path] = base64.b64encode(data).decode()
        nics = [_nic(vif) for vif in network_info or []]
        self._request(
            "spawn", instance,
            root_volume=_root_volume(block_device_info),
            hostname=instance.hostname,
            display_name=instance.display_name,
            image_id=image_meta.id if image_meta and "id" in image_meta else None,
            flavor={"vcpus": instance.flavor.vcpus, "memory_mb": instance.flavor.memory_mb},
            nics=nics,
            config_drive=drive,
            power_on=power_on,
            compute_host=CONF.host,
        )
        super().spawn(context, instance, image_meta, injected_files, admin_password,
                      allocations, network_info, block_device_info, power_on, accel_info)

    def network_binding_host_id(self, context, instance):
        return CONF.kos.network_host

    def manages_network_binding_host_id(self):
        # else a restarted compute service binds its servers' ports to its own host again
        return True

    def attach_interface(self, context, instance, image_meta, vif):
        # answered once the NIC is in the running host, as a hot plug on KVM returns once
        # the guest has the device
        self._request("attach_interface", instance, nic=_nic(vif))

    def detach_interface(self, context, instance, vif):
        self._request("detach_interface", instance, port_id=vif["id"])

    def reboot(self, context, instance, network_info, reboot_type, block_device_info=None,
               bad_volumes_callback=None, accel_info=None):
        self._request("reboot", instance, hard=reboot_type.lower() == "hard")
        if instance.uuid in self.instances:
            self.instances[instance.uuid].state = power_state.RUNNING

    def power_off(self, instance, timeout=0, retry_interval=0):
        self._request("power_off", instance)
        super().power_off(instance, timeout, retry_interval)

    def power_on(self, context, instance, network_info, block_device_info=None,
                 accel_info=None):
        self._request("power_on", instance)
        super().power_on(context, instance, network_info, block_device_info, accel_info)

    def destroy(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, destroy_secrets=True):
        self._request("destroy", instance, destroy_disks=destroy_disks)
        super().destroy(context, instance, network_info, block_device_info, destroy_disks,
                        destroy_secrets)

    def attach_volume(self, context, connection_info, instance, mountpoint, disk_bus=None,
                      device_type=None, encryption=None):
        self._request(
            "attach_volume", instance,
            volume_id=_volume_id(connection_info),
            path=(connection_info.get("data") or {}).get("device_path"),
            mountpoint=mountpoint,
        )
        super().attach_volume(context, connection_info, instance, mountpoint, disk_bus,
                              device_type, encryption)

    def detach_volume(self, context, connection_info, instance, mountpoint, encryption=None):
        self._request(
            "detach_volume", instance,
            volume_id=_volume_id(connection_info),
            mountpoint=mountpoint,
        )
        super().detach_volume(context, connection_info, instance, mountpoint, encryption)

    def extend_volume(self, context, connection_info, instance, requested_size):
        # Cinder grew the volume's file (an in-use extend tells Nova through the
        # volume-extended event); the host's disk grows once its loop device re-reads it
        self._request(
            "extend_volume", instance,
            volume_id=_volume_id(connection_info),
            size=requested_size,
        )

    # -- what the hypervisor knows ------------------------------------------------------

    def get_info(self, instance, use_cache=True):
        rec = self._record(instance.uuid)
        if rec is None or rec.get("state") not in STATES:
            raise exception.InstanceNotFound(instance_id=instance.uuid)
        return hardware.InstanceInfo(state=STATES[rec["state"]])

    def get_console_output(self, context, instance):
        path = os.path.join(self.spool, "consoles", f"{instance.uuid}.log")
        try:
            with open(path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - CONSOLE_BYTES))
                # bytes: Nova's compute manager encodes str as latin-1 and would fail on
                # what systemd prints (UTF-8); it turns bytes into ASCII itself.
                return fh.read()
        except OSError:
            raise exception.ConsoleNotAvailable()


def _volume_id(connection_info):
    return (connection_info.get("data") or {}).get("volume_id") or connection_info.get("serial")


def _root_volume(block_device_info):
    """The volume a server boots from (its boot index 0), as Cinder's driver connects it."""
    for bdm in driver.block_device_info_get_mapping(block_device_info):
        if bdm.get("boot_index") == 0:
            data = (bdm.get("connection_info") or {}).get("data") or {}
            return {"volume_id": data.get("volume_id"), "path": data.get("device_path")}
    return None


def _nic(vif):
    return {
        "port_id": vif["id"],
        "mac": vif["address"],
        "devname": vif["devname"],
        "network_id": vif["network"]["id"],
        # the Linux bridge the port's tap joins (os-vif and libvirt's job on KVM)
        "bridge": vif["network"].get("bridge"),
        "mtu": vif["network"]["meta"].get("mtu"),
    }
