"""
The rehearsal cloud's hypervisor side: turns what Nova's compute driver (payload/nova_kos.py)
asks for into systemd-nspawn hosts on this machine, and answers.

For a spawn it mounts an overlay of the image the server boots (named by the Glance image's
manifest), lays Nova's config drive where cloud-init's ConfigDrive datasource reads a seed,
plugs one veth per port (the port's MAC inside, Neutron's tap name in the cloud) and boots
the host; its console goes where the driver reads console output. A server booted from a
volume has its writable layer on that volume's file system instead. A destroy powers the
host off and removes its namespace and disk. An attached volume is a loop device over Cinder's
volume file, visible in the host as ``/dev/vdX`` and ``/dev/disk/by-id/virtio-<serial>``,
attached and detached while the host runs, and grown in place when Cinder extends it.

It runs as a daemon per cloud (``python -m kos_local.openstack.materialiser <config>``),
started by ``kos up --cloud local`` and stopped with the cloud; a request is answered only
when done, and a restart picks up any request still waiting. A host is made as its
cluster needs it (a kubelet's, or the stand-ins on the minion's PATH): the cluster is the
server's project, read from Nova's metadata on the config drive, and what it needs is the
cluster's profile that ``kos up`` wrote beside the cloud (``clusters/<cluster>.json``).
"""

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import hosts as hosts_mod
from .. import net
from . import config

CONFIG_DRIVE_SEED = "/var/lib/cloud/seed/config_drive"
SALT_COMMANDS = ("salt", "salt-call", "salt-key", "salt-run", "salt-master", "salt-minion",
                 "salt-syndic", "salt-cp")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STANDIN_ENV = r"""#!/bin/sh
# kos rehearsal cloud: the stand-ins' node address is the one this minion reaches its master from.
master=$(sed -n 's/^"\{0,1\}master"\{0,1\}: *"\{0,1\}\([0-9.]*\).*/\1/p' /etc/salt/minion.d/kos.conf)
src=$(ip -4 -o route get "$master" | sed -n 's/.* src \([0-9.]*\).*/\1/p')
mkdir -p /run/kos
echo "KOS_STANDIN_IP=$src" > /run/kos/standin.env
"""


ENTRY = "import sys; from kos_local.openstack.materialiser import main; main(sys.argv[1:2])"


METADATA = "openstack/latest/meta_data.json"
# Beside a volume Cinder made from an image: that image's manifest (payload/cinder_kos.py).
VOLUME_IMAGE = ".image"
# Where a host booted from a volume has it mounted, in its directory (shorter than "merged":
# unmount_all takes the longer paths first, and the overlay on it goes first).
BOOT_VOLUME_MOUNT = "disk"
# Beside the cloud: one profile per cluster, written by kos up (cloud.Cloud.attach).
PROFILES = "clusters"
# Beside them, the profile of the cloud's service project (written with Octavia's set-up).
SERVICE_PROFILE = "service.json"


def argv_marker(cloud):
    return f"--kos-materialiser={cloud}"


class Materialiser:
    def __init__(self, cfg):
        self.cloud = cfg["cloud"]
        self.local = Path(cfg["local_dir"])
        self.cloud_root = self.local / "cloud" / "merged"
        self.spool = self.cloud_root / config.SPOOL.lstrip("/")
        self.venv_bin = cfg["venv_bin"]
        self.locks = {}
        self.lock = threading.Lock()
        self.inflight = set()
        self.stopping = False

    # -- plumbing -----------------------------------------------------------------------

    def _uuid_lock(self, uuid):
        with self.lock:
            return self.locks.setdefault(uuid, threading.Lock())

    def machine(self, uuid):
        return hosts_mod.Machine(
            net.host_ns(self.cloud, uuid), self.local / "hosts" / uuid,
            console=self.spool / "consoles" / f"{uuid}.log",
        )

    def record_path(self, uuid):
        return self.spool / "instances" / f"{uuid}.json"

    def record(self, uuid):
        try:
            return json.loads(self.record_path(uuid).read_text())
        except (OSError, ValueError):
            return None

    def save(self, rec):
        path = self.record_path(rec["uuid"])
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(rec, indent=2, sort_keys=True))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)

    def reply(self, name, ok, error=None):
        path = self.spool / "replies" / name
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(json.dumps({"ok": ok, "error": error}))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)

    def log(self, message):
        print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)

    # -- the loop -----------------------------------------------------------------------

    def serve(self):
        self.reconcile()
        with ThreadPoolExecutor(8) as pool:
            while not self.stopping:
                for path in sorted((self.spool / "requests").glob("[0-9]*.json")):
                    if path.name not in self.inflight:
                        self.inflight.add(path.name)
                        pool.submit(self.handle, path)
                time.sleep(0.2)

    def handle(self, path):
        try:
            doc = json.loads(path.read_text())
            op, uuid = doc["op"], doc["uuid"]
            with self._uuid_lock(uuid):
                self.log(f"{op} {uuid} ({doc.get('name')})")
                try:
                    getattr(self, f"op_{op}")(doc)
                except Exception as exc:  # noqa: BLE001 - every failure is Nova's answer
                    self.log(f"{op} {uuid} failed: {exc}\n{traceback.format_exc()}")
                    self.reply(path.name, False, f"{type(exc).__name__}: {exc}")
                else:
                    self.reply(path.name, True)
        finally:
            path.unlink(missing_ok=True)
            self.inflight.discard(path.name)

    def reconcile(self):
        """Hosts Nova thinks run but that are not running (this machine restarted): boot
        them again, as a hypervisor resumes its guests."""
        for path in (self.spool / "instances").glob("*.json"):
            rec = self.record(path.stem)
            if rec and rec.get("state") == "running" and not self.machine(rec["uuid"]).nspawn_pid():
                self.log(f"resuming {rec['uuid']}")
                try:
                    self._boot(rec)
                except Exception as exc:  # noqa: BLE001
                    self.log(f"resume {rec['uuid']} failed: {exc}")

    # -- operations -----------------------------------------------------------------------

    def _host_image(self, image_id, root_volume=None):
        """The layers the server's root is made of: its image's, or those of the image its
        boot volume was made from (the manifest Cinder's driver keeps beside the volume)."""
        if root_volume:
            data = self.cloud_root / f"{root_volume['path'].lstrip('/')}{VOLUME_IMAGE}"
            what = f"boot volume {root_volume['volume_id']}"
        elif image_id:
            data = self.cloud_root / "var/lib/glance/images" / image_id
            what = f"image {image_id}"
        else:
            raise RuntimeError("the server has neither an image nor a boot volume")
        try:
            manifest = json.loads(data.read_text())
            stack = manifest["kos_host_image"]
        except (OSError, ValueError, KeyError) as exc:
            raise RuntimeError(f"{what} is not of a rehearsal host image: {exc}") from exc
        missing = [p for p in stack if not Path(p).is_dir()]
        if missing:
            raise RuntimeError(f"{what}: layers missing on this machine: {missing}")
        return ":".join(stack)

    def _disk(self, m, rec):
        """The server's root mounted: its image's layers under a writable layer that is the
        host's own directory or, booted from a volume, the file system on that volume."""
        if m.mounted() or not rec.get("lower"):
            return
        root = rec.get("root_volume")
        upper = None
        if root:
            upper = m.dir / BOOT_VOLUME_MOUNT
            upper.mkdir(parents=True, exist_ok=True)
            if not os.path.ismount(upper):
                # a loop device mount(8) sets up, and frees when unmounted
                res = subprocess.run(["mount", "-o", "loop",
                                      str(self.cloud_root / root["path"].lstrip("/")), str(upper)],
                                     capture_output=True, text=True)
                if res.returncode != 0:
                    raise RuntimeError(f"cannot mount boot volume {root['volume_id']}: "
                                       f"{res.stderr.strip()}")
        m.mount(rec["lower"], upper_root=upper)

    def profile(self, drive):
        """The profile of the cluster whose project the server is in."""
        try:
            project = json.loads(base64.b64decode(drive[METADATA]))["project_id"]
        except (KeyError, ValueError) as exc:
            raise RuntimeError(f"the server's config drive names no project ({exc})") from exc
        for path in sorted((self.local / PROFILES).glob("*.json")):
            try:
                profile = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if profile.get("project_id") == project:
                return profile
        # the cloud's own servers (Octavia's amphorae), in its service project
        service = self.local / SERVICE_PROFILE
        profile = json.loads(service.read_text()) if service.exists() else {}
        if profile.get("project_id") == project:
            return profile
        raise RuntimeError(f"project {project} is no cluster's on this cloud (kos up makes a "
                           "cluster's project and its profile)")

    def op_spawn(self, doc):
        uuid = doc["uuid"]
        drive = doc.get("config_drive") or {}
        profile = self.profile(drive)
        m = self.machine(uuid)
        root = doc.get("root_volume")
        rec = {
            "uuid": uuid, "name": doc.get("name"), "hostname": doc.get("hostname"),
            "display_name": doc.get("display_name"), "machine": m.name,
            "compute_host": doc.get("compute_host"),
            "lower": self._host_image(doc.get("image_id"), root), "root_volume": root,
            "nics": doc.get("nics") or [], "volumes": {}, "profile": profile,
            "state": "running" if doc.get("power_on", True) else "shutdown",
        }
        self._disk(m, rec)
        for path, data in drive.items():
            m.write(f"{CONFIG_DRIVE_SEED}/{path}", base64.b64decode(data), 0o600)
        self._rehearsal_files(m, profile)
        self.save(rec)
        if rec["state"] == "running":
            self._boot(rec)

    def _boot(self, rec):
        m = self.machine(rec["uuid"])
        # after this machine restarted, the root is mounted again before the host boots
        self._disk(m, rec)
        profile = rec["profile"]
        netns = net.plug_host(self.cloud, rec["uuid"], rec["nics"])
        # /etc/resolv.conf is the image's own (systemd-resolved's), never this machine's.
        m.start(netns, binds=profile["binds"], extra=["--resolv-conf=off"],
                kubelet=profile["kubelet"])
        for vol_id, vol in rec.get("volumes", {}).items():
            self._hot_add(m, vol_id, vol)

    def op_destroy(self, doc):
        uuid = doc["uuid"]
        m = self.machine(uuid)
        m.stop()
        rec = self.record(uuid) or {}
        for vol in (rec.get("volumes") or {}).values():
            _losetup_detach(vol.get("loop"))
        net.unplug_host(self.cloud, uuid)
        m.unmount()
        if os.path.ismount(m.dir / BOOT_VOLUME_MOUNT):
            # the rest of the directory goes; the boot volume is Cinder's to keep or delete
            raise RuntimeError(f"the boot volume of {uuid} is still mounted on {m.dir}")
        if doc.get("destroy_disks", True):
            hosts_mod.remove_disks(m.dir)
            (self.spool / "consoles" / f"{uuid}.log").unlink(missing_ok=True)
        self.record_path(uuid).unlink(missing_ok=True)

    def op_power_off(self, doc):
        rec = self._require(doc["uuid"])
        self.machine(rec["uuid"]).stop()
        rec["state"] = "shutdown"
        self.save(rec)

    def op_power_on(self, doc):
        rec = self._require(doc["uuid"])
        rec["state"] = "running"
        self.save(rec)
        self._boot(rec)

    def op_reboot(self, doc):
        rec = self._require(doc["uuid"])
        self.machine(rec["uuid"]).stop()
        rec["state"] = "running"
        self.save(rec)
        self._boot(rec)

    def op_attach_interface(self, doc):
        rec = self._require(doc["uuid"])
        nic = doc["nic"]
        rec["nics"] = [n for n in rec["nics"] if n["port_id"] != nic["port_id"]] + [nic]
        self.save(rec)
        if self.machine(rec["uuid"]).pid1():
            net.hot_plug(self.cloud, rec["uuid"], nic)

    def op_detach_interface(self, doc):
        rec = self.record(doc["uuid"])
        # (a server destroyed already has no NIC left to take out)
        if rec is not None:
            rec["nics"] = [n for n in rec["nics"] if n["port_id"] != doc["port_id"]]
            self.save(rec)
        # the veth goes with its tap end, wherever the host moved the other one
        net.ip("-n", net.cloud_ns(self.cloud), "link", "del", net.tap_name(doc["port_id"]),
               check=False)

    def op_attach_volume(self, doc):
        rec = self._require(doc["uuid"])
        path = doc.get("path")
        if not path:
            raise RuntimeError("the volume's connection has no device path")
        backing = self.cloud_root / path.lstrip("/")
        loop = subprocess.run(["losetup", "--find", "--show", str(backing)],
                              capture_output=True, text=True, check=True).stdout.strip()
        vol = {"loop": loop, "device": doc.get("mountpoint") or "/dev/vdb"}
        rec["volumes"][doc["volume_id"]] = vol
        self.save(rec)
        m = self.machine(rec["uuid"])
        if m.pid1():
            self._hot_add(m, doc["volume_id"], vol)

    def op_detach_volume(self, doc):
        rec = self._require(doc["uuid"])
        vol = rec["volumes"].pop(doc["volume_id"], None)
        if vol:
            m = self.machine(rec["uuid"])
            if m.pid1():
                serial = doc["volume_id"][:20]
                m.run("rm", "-f", vol["device"], f"/dev/{Path(vol['loop']).name}",
                      f"/dev/disk/by-id/virtio-{serial}", check=False)
            _losetup_detach(vol.get("loop"))
        self.save(rec)

    def op_extend_volume(self, doc):
        """What a disk of a KVM host does when its volume grows: the loop device over
        Cinder's file takes the file's new size (the host's node shares its number)."""
        vol = self._require(doc["uuid"])["volumes"].get(doc["volume_id"])
        if not vol:
            raise RuntimeError(f"volume {doc['volume_id']} is not attached to {doc['uuid']}")
        subprocess.run(["losetup", "--set-capacity", vol["loop"]], capture_output=True,
                       text=True, check=True)

    def _require(self, uuid):
        rec = self.record(uuid)
        if rec is None:
            raise RuntimeError(f"no host for server {uuid}")
        return rec

    def _hot_add(self, m, volume_id, vol):
        """What udev would do on a KVM host: the disk's node and its by-id link."""
        major, minor = _devnum(vol["loop"])
        dev, loopname = vol["device"], Path(vol["loop"]).name
        serial = volume_id[:20]
        script = (
            f"rm -f {dev} /dev/{loopname}; mknod -m 660 {dev} b {major} {minor}; "
            # libblkid finds filesystems by UUID by scanning the names in /proc/partitions.
            f"mknod -m 660 /dev/{loopname} b {major} {minor}; "
            f"mkdir -p /dev/disk/by-id; ln -sfn ../../{Path(dev).name} /dev/disk/by-id/virtio-{serial}"
        )
        m.run("sh", "-c", script)

    # -- what only the rehearsal cloud needs -----------------------------------------------

    def _rehearsal_files(self, m, profile):
        """Salt "preinstalled" from the project's virtualenv (bound read-only), and the
        Kubernetes stand-ins on the minion's PATH where they stand in: this checkout's
        paths, so per host."""
        for cmd in SALT_COMMANDS:
            link = m.path(f"/usr/local/bin/{cmd}")
            link.parent.mkdir(parents=True, exist_ok=True)
            link.unlink(missing_ok=True)
            link.symlink_to(Path(self.venv_bin) / cmd)
        standins = profile.get("standins")
        if not standins:
            return
        env = {
            "PATH": f"{standins}/bin:/snap/bin:{SYSTEM_PATH}",
            "KOS_STANDIN_ROOT": "/",
            **profile.get("standin_env", {}),
        }
        m.write("/usr/local/sbin/kos-standin-env", STANDIN_ENV, 0o755)
        lines = ["# kos rehearsal cloud: the Kubernetes distributions are the test stand-ins.",
                 "[Service]", *[f"Environment={k}={v}" for k, v in env.items()],
                 "ExecStartPre=/usr/local/sbin/kos-standin-env",
                 "EnvironmentFile=-/run/kos/standin.env", ""]
        m.write("/etc/systemd/system/salt-minion.service.d/kos-rehearsal.conf", "\n".join(lines))


def _devnum(path):
    st = os.stat(path)
    return os.major(st.st_rdev), os.minor(st.st_rdev)


def _losetup_detach(loop):
    if loop:
        subprocess.run(["losetup", "-d", loop], capture_output=True)


# -- the daemon ------------------------------------------------------------------------------


def running(cloud):
    """PIDs of this cloud's materialiser."""
    marker = argv_marker(cloud).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker in argv:
                found.append(int(entry.name))
    return found


def start(cfg, log_path, fingerprint):
    """Start the daemon unless one of this code runs already; returns its PID."""
    cloud = cfg["cloud"]
    cfg_path = Path(cfg["local_dir"]) / "materialiser.json"
    current = json.loads(cfg_path.read_text()) if cfg_path.exists() else None
    pids = running(cloud)
    if pids and current == {**cfg, "fingerprint": fingerprint}:
        return pids[0]
    stop(cloud)
    cfg_path.write_text(json.dumps({**cfg, "fingerprint": fingerprint}, indent=2, sort_keys=True))
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", ENTRY, str(cfg_path), argv_marker(cloud)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc.pid


def stop(cloud, timeout=30):
    pids = running(cloud)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while running(cloud) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in running(cloud):
        os.kill(pid, signal.SIGKILL)
    return pids


def main(argv=None):
    argv = argv or sys.argv[1:]
    cfg = json.loads(Path(argv[0]).read_text())
    mat = Materialiser(cfg)

    def on_term(signum, frame):
        mat.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    mat.log(f"materialiser for cloud {cfg['cloud']} serving {mat.spool}")
    mat.serve()
    mat.log("materialiser stopped")


if __name__ == "__main__":
    main()
