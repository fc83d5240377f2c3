"""
One cluster's rehearsal cloud: an all-in-one OpenStack booted with systemd-nspawn from the
cached image (``image``), in the netns ``kos-<cluster>-cloud`` (``..net``), on an overlay
of its own under ``<state>/local/cloud``.

``ensure`` takes it from nothing (or from any half-done state) to a cloud a deployment can
use: booted, Keystone bootstrapped with this cloud's own admin password, the catalog and
service users in place, every service up, the tenant seeded, and an entry in the
operator's clouds.yaml (``kos-local-<cluster>``, an application credential) through which
kos and Terraform then work exactly as on any OpenStack. The passwords stay in the cloud's
own disk (``/etc/kos/cloud.json``, root only); ``destroy`` removes all of it.
"""

import json
import os
import secrets as _secrets
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from kos import ui
from kos.errors import CleanupError, ConvergeError
from .. import hosts as hosts_mod
from .. import net
from . import config, image, seed

CLOUD_FILE = "/etc/kos/cloud.json"


def cloud_name(cluster):
    return f"kos-local-{cluster}"


def clouds_yaml_path():
    """The operator's clouds.yaml, where openstacksdk and Terraform's provider look."""
    explicit = os.environ.get("OS_CLIENT_CONFIG_FILE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "openstack" / "clouds.yaml"


class Cloud:
    def __init__(self, cluster, local_dir):
        self.cluster = cluster
        self.dir = Path(local_dir) / "cloud"
        self.machine = hosts_mod.Machine(net.cloud_ns(cluster), self.dir)
        self.spool = self.machine.path(config.SPOOL)

    @property
    def name(self):
        return cloud_name(self.cluster)

    def running(self):
        return self.machine.nspawn_pid() is not None

    def record(self):
        try:
            return json.loads(self.machine.path(CLOUD_FILE).read_text())
        except (OSError, ValueError):
            return None

    def usable(self):
        """Set up far enough for a deployment: the cloud's record and its clouds.yaml entry."""
        return self.record() is not None and self._clouds_entry() is not None

    def plan(self):
        rec = self.record()
        if rec:
            return net.Plan(net.ipaddress.ip_network(rec["block"]))
        return net.existing_plan(self.cluster)

    def auth_url(self):
        return f"http://{self.plan().mgmt_cloud}:5000/v3"

    # -- bring-up ------------------------------------------------------------------------

    def ensure(self, avoid_cidrs, host_image, tenant_name=None):
        """Everything up to a usable cloud; returns the clouds.yaml entry's name."""
        elsewhere = self.machine.running_from()
        if elsewhere and elsewhere.resolve() != self.machine.merged.resolve():
            # Machines are found by name: this one would be taken for ours and half-used.
            raise ConvergeError(
                f"a rehearsal cloud named {self.machine.name} already runs on this machine, "
                f"from {elsewhere} (another state directory, or a run that was killed)",
                fix="take it down: kos down --cloud local with this cluster's variables "
                "removes a local cluster's machines and links by name; then re-run kos up",
            )
        stack = image.layer().ensure()
        lower = ":".join(str(p) for p in stack)
        self.machine.mount(lower)
        rec = self.record()
        if rec and rec.get("image") != lower:
            raise ConvergeError(
                f"the rehearsal cloud of {self.cluster} was made from another image than "
                "this checkout builds (kos was updated since)",
                fix="tear it down with kos down --cloud local, then kos up again",
            )
        plan = self.plan() or net.choose_plan(self.cluster, avoid=avoid_cidrs)
        net.create_cloud_links(self.cluster, plan)
        if rec is None:
            rec = self._first_configuration(plan, lower)
        if self.machine.start(net.cloud_ns(self.cluster), extra=["--resolv-conf=delete",
                                                                  f"--hostname={config.HOST}"]):
            ui.detail(f"cloud {self.machine.name} booting (console: {self.machine.console})")
        try:
            self._bring_up(rec, plan)
        except BaseException:
            # Nothing half-made stays running; the disk stays for its logs and the re-run.
            self.machine.stop()
            raise
        seed.offer(self._admin(rec), plan, host_image)
        tenant = tenant_name or self.cluster
        entry = self._clouds_entry()
        if entry is None or not self._credential_works(entry):
            password = _secrets.token_urlsafe(24)
            seed.tenant(self._admin(rec), tenant, password)
            cred_id, secret = seed.application_credential(self.auth_url(), tenant, password)
            self._write_clouds_entry(cred_id, secret)
        return self.name

    def _admin(self, rec):
        return seed.connect(self.auth_url(), rec["passwords"]["admin"])

    def _bring_up(self, rec, plan):
        """Keystone bootstrapped, the catalog in place, every service up."""
        self._wait_http(f"http://{plan.mgmt_cloud}:5000/v3", "Keystone")
        passwords = rec["passwords"]
        if not rec.get("bootstrapped"):
            # The password goes in on stdin, never on a command line.
            self.machine.run(
                "runuser", "-u", "keystone", "--", "sh", "-c",
                'read -r OS_BOOTSTRAP_PASSWORD && export OS_BOOTSTRAP_PASSWORD && '
                'exec keystone-manage bootstrap "$@"', "keystone-manage",
                "--bootstrap-admin-url", config.KEYSTONE_INTERNAL,
                "--bootstrap-internal-url", config.KEYSTONE_INTERNAL,
                "--bootstrap-public-url", f"http://{plan.mgmt_cloud}:5000/v3",
                "--bootstrap-region-id", config.REGION, timeout=120,
                input=passwords["admin"] + "\n",
            )
            rec["bootstrapped"] = True
            self._save(rec)
        if not rec.get("catalog"):
            seed.catalog(seed.connect(self.auth_url(), passwords["admin"]), plan.mgmt_cloud,
                         passwords)
            rec["catalog"] = True
            self._save(rec)
        self.machine.run("systemctl", "enable", image.TARGET, check=False)
        self.machine.run("systemctl", "start", "--no-block", image.TARGET)
        # A connection reads the catalog once: this one must see the whole of it.
        seed.wait_services(self._admin(rec))

    def _first_configuration(self, plan, lower):
        """This cloud's own passwords and addresses, written into its disk before it boots."""
        passwords = config.secrets()

        def write(path, text, mode):
            self.machine.write(path, text, mode)

        image.write_config(write, passwords)
        for path in config.files(passwords):
            owner = path.split("/")[2]
            self.machine.chroot("chown", f"root:{owner}", path)
        for cmd in ("fernet_setup", "credential_setup"):
            self.machine.chroot("keystone-manage", cmd, "--keystone-user", "keystone",
                                "--keystone-group", "keystone")
        rec = {"block": str(plan.block), "passwords": passwords, "image": lower}
        self._save(rec)
        return rec

    def _save(self, rec):
        self.machine.write(CLOUD_FILE, json.dumps(rec, indent=2, sort_keys=True), 0o600)

    def _wait_http(self, url, what, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5):
                    return
            except urllib.error.HTTPError:
                return  # it answers
            except OSError:
                pass
            if not self.running():
                raise ConvergeError(
                    f"the rehearsal cloud {self.machine.name} stopped while booting",
                    fix=f"read its console {self.machine.console} and logs under "
                    f"{self.machine.path('/var/log')}",
                    details=self.machine.console_tail(),
                )
            time.sleep(1)
        raise ConvergeError(
            f"{what} of the rehearsal cloud did not answer at {url} within {timeout}s",
            fix=f"read the logs under {self.machine.path('/var/log')}",
        )

    # -- clouds.yaml ----------------------------------------------------------------------

    def _clouds_doc(self):
        path = clouds_yaml_path()
        try:
            return yaml.safe_load(path.read_text()) or {}
        except FileNotFoundError:
            return {}

    def _clouds_entry(self):
        return (self._clouds_doc().get("clouds") or {}).get(self.name)

    def _write_clouds_entry(self, cred_id, secret):
        path = clouds_yaml_path()
        doc = self._clouds_doc()
        doc.setdefault("clouds", {})[self.name] = {
            "auth_type": "v3applicationcredential",
            "auth": {
                "auth_url": self.auth_url(),
                "application_credential_id": cred_id,
                "application_credential_secret": secret,
            },
            "region_name": config.REGION,
            "interface": "public",
            "identity_api_version": 3,
        }
        _write_private(path, yaml.safe_dump(doc, sort_keys=True))

    def _credential_works(self, entry):
        import openstack

        try:
            conn = openstack.connect(cloud=self.name, load_yaml_config=True, load_envvars=False)
            conn.authorize()
            return entry["auth"]["auth_url"] == self.auth_url()
        except Exception:  # noqa: BLE001 - any failure means: make a new one
            return False

    def forget_clouds_entry(self):
        path = clouds_yaml_path()
        doc = self._clouds_doc()
        if self.name in (doc.get("clouds") or {}):
            del doc["clouds"][self.name]
            _write_private(path, yaml.safe_dump(doc, sort_keys=True))

    # -- teardown ---------------------------------------------------------------------------

    def destroy(self):
        removed = []
        machines = hosts_mod.nspawns(net.cluster_pattern(self.cluster))
        if machines:
            hosts_mod.stop(machines)
            removed += [f"machine {m}" for m in sorted(machines)]
        cgroups = hosts_mod.machine_cgroups(net.cluster_pattern(self.cluster))
        stuck = hosts_mod.remove_cgroups(cgroups)
        removed += [f"cgroup {d}" for d in cgroups if d not in stuck]
        _detach_loops(self.dir.parent)
        mounts = hosts_mod.unmount_all(self.dir.parent, net.cluster_pattern(self.cluster))
        removed += [f"mount {m}" for m in mounts]
        removed += net.remove(self.cluster)
        hosts_mod.remove_disks(self.dir.parent)
        self.forget_clouds_entry()
        left = hosts_mod.nspawns(net.cluster_pattern(self.cluster))
        if left:
            raise CleanupError(f"machines still running: {', '.join(left)}")
        if stuck:
            raise CleanupError(f"cgroups still busy: {', '.join(map(str, stuck))}",
                               fix="end the processes listed in their cgroup.procs, then re-run")
        return removed


def _write_private(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.kos-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _detach_loops(under):
    """Loop devices backing volume files below ``under`` (the cloud's disk)."""
    import subprocess

    under = str(Path(under).resolve())
    out = subprocess.run(["losetup", "-J", "-l"], capture_output=True, text=True).stdout
    try:
        devices = json.loads(out or "{}").get("loopdevices", [])
    except ValueError:
        devices = []
    for dev in devices:
        backing = dev.get("back-file") or ""
        if backing.startswith(under):
            subprocess.run(["losetup", "-d", dev["name"]], capture_output=True)
