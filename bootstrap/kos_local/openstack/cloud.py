"""
The rehearsal cloud: one all-in-one OpenStack on this machine that every local cluster
shares, each cluster in a project of its own, as tenants share any cloud. It boots with
systemd-nspawn from the cached image (``image``), in the netns ``kos-<name>-cloud``
(``..net``), on an overlay under ``/var/lib/kos/<name>-cloud``.

``ensure`` takes it from nothing (or from any half-done state) to a cloud tenants can use:
booted, Keystone bootstrapped with this cloud's own admin password, the catalog and
service users in place, every service up, and the offer (flavors, the hosts' image, the
external network) made. ``attach`` then gives a cluster its project, user, quotas and
application credential, an entry in the operator's clouds.yaml (``kos-local-<cluster>``)
through which kos and Terraform work exactly as on any OpenStack, and the profile the
materialiser makes its hosts by. ``detach`` removes a cluster's project; the clusters
attached are the profiles under ``clusters/``, and the cloud goes (``destroy``) when the
last one went. The passwords stay in the cloud's own disk (``/etc/kos/cloud.json``, root
only); ``destroy`` removes all of it.
"""

import contextlib
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
from kos.lock import FileLock
from .. import hosts as hosts_mod
from .. import net
from . import config, image, materialiser, octavia, seed

CLOUD_FILE = "/etc/kos/cloud.json"
NAME = "local"
ROOT = Path("/var/lib/kos")
# A project the cloud keeps for itself: no cluster may be named so.
RESERVED = ("admin", "service")


def cloud_name(cluster):
    """A cluster's entry in clouds.yaml: its own project's credential."""
    return f"kos-local-{cluster}"


def clouds_yaml_path():
    """The operator's clouds.yaml, where openstacksdk and Terraform's provider look."""
    explicit = os.environ.get("OS_CLIENT_CONFIG_FILE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "openstack" / "clouds.yaml"


class Cloud:
    def __init__(self, name=NAME, root=None):
        self.name = name
        self.root = Path(root) if root else ROOT / f"{name}-cloud"
        self.dir = self.root / "cloud"
        # what the materialiser makes each cluster's hosts by (materialiser.PROFILES)
        self.profiles = self.root / materialiser.PROFILES
        self.machine = hosts_mod.Machine(net.cloud_ns(name), self.dir)
        self.spool = self.machine.path(config.SPOOL)

    @contextlib.contextmanager
    def lock(self):
        """One kos at a time sets the cloud up, attaches, detaches or removes it."""
        lock = FileLock(str(self.root.with_name(f".{self.root.name}.lock")))
        while True:
            self.root.parent.mkdir(parents=True, exist_ok=True)
            try:
                lock.acquire({"pid": os.getpid()}, wait=True)
                break
            except FileNotFoundError:
                continue  # the holder removed the directory with the cloud: make it again
        try:
            yield
        finally:
            lock.release()
            if not self.root.exists():
                # the cloud is gone: so is what held it on this machine
                with contextlib.suppress(OSError):
                    self.root.parent.rmdir()

    def running(self):
        return self.machine.nspawn_pid() is not None

    def record(self):
        try:
            return json.loads(self.machine.path(CLOUD_FILE).read_text())
        except (OSError, ValueError):
            return None

    def usable(self):
        """Running and set up far enough for tenants."""
        rec = self.record()
        return self.running() and bool(rec and rec.get("catalog"))

    def clusters(self):
        """The clusters attached to this cloud, by name."""
        return sorted(p.stem for p in self.profiles.glob("*.json"))

    def _profile_path(self, cluster):
        return self.profiles / f"{cluster}.json"

    def profile(self, cluster):
        try:
            return json.loads(self._profile_path(cluster).read_text())
        except (OSError, ValueError):
            return None

    def attached(self, cluster):
        """Whether the cluster has its project here and its clouds.yaml entry."""
        return self.profile(cluster) is not None and _clouds_entry(cluster) is not None

    def plan(self):
        rec = self.record()
        if rec:
            return net.Plan(net.ipaddress.ip_network(rec["block"]))
        return net.existing_plan(self.name)

    def auth_url(self):
        return f"http://{self.plan().mgmt_cloud}:5000/v3"

    # -- bring-up ------------------------------------------------------------------------

    def ensure(self, avoid_cidrs, host_image, amphora_image):
        """Everything up to a cloud tenants can use; whether it booted the cloud now."""
        elsewhere = self.machine.running_from()
        if elsewhere and elsewhere.resolve() != self.machine.merged.resolve():
            # Machines are found by name: this one would be taken for ours and half-used.
            raise ConvergeError(
                f"a rehearsal cloud named {self.machine.name} already runs on this machine, "
                f"from {elsewhere} (another state directory, or a run that was killed)",
                fix="take it down: kos cloud down removes the rehearsal cloud's machines and "
                "links by name; then re-run kos up",
            )
        stack = image.layer().ensure()
        lower = ":".join(str(p) for p in stack)
        self.machine.mount(lower)
        rec = self.record()
        if rec and rec.get("image") != lower:
            self._keep_image(rec["image"])
        plan = self.plan() or net.choose_plan(self.name, avoid=avoid_cidrs)
        net.create_cloud_links(self.name, plan)
        if rec is None:
            rec = self._first_configuration(plan, lower)
        booted = self.machine.start(net.cloud_ns(self.name), extra=["--resolv-conf=delete",
                                                                     f"--hostname={config.HOST}"])
        if booted:
            ui.detail(f"cloud {self.machine.name} booting (console: {self.machine.console})")
        try:
            self._bring_up(rec, plan)
        except BaseException:
            # Nothing half-made stays running; the disk stays for its logs and the re-run.
            self.machine.stop()
            raise
        seed.offer(self.admin(rec), plan, host_image)
        self._octavia(rec, plan, amphora_image)
        return booted

    def _octavia(self, rec, plan, amphora_image):
        """Octavia's network, port, flavor and image, its configuration and certificates,
        the health manager's port in the cloud's namespace; then its services."""
        passwords = rec["passwords"]
        if "octavia_heartbeat" not in passwords:
            return  # a cloud made from an image without Octavia (kept: _keep_image)
        admin = self.admin(rec)
        ids = octavia.offer(admin, plan, amphora_image)
        if not rec.get("octavia_certs"):
            for name, text in octavia.certificates(passwords["octavia_ca"]).items():
                self.machine.write(f"{octavia.CERT_DIR}/{name}", text, 0o600)
                self.machine.chroot("chown", "octavia:octavia", f"{octavia.CERT_DIR}/{name}")
            rec["octavia_certs"] = True
            self._save(rec)
        text = octavia.conf(passwords, ids, plan)
        changed = self.machine.path(octavia.CONF).read_text() != text
        if changed:
            self.machine.write(octavia.CONF, text, 0o640)
            self.machine.chroot("chown", "root:octavia", octavia.CONF)
        net.plug_cloud_port(self.name, octavia.HM_IF, ids["port"], ids["mac"],
                            octavia.hm_address(plan), octavia.mgmt_subnet(plan))
        (self.root / materialiser.SERVICE_PROFILE).write_text(json.dumps(
            {"project_id": ids["project"], "binds": [], "kubelet": False}))
        # a configuration this checkout changed reaches services that run already
        self.machine.run("systemctl", "restart" if changed else "start", "--no-block",
                         *octavia.UNITS)
        seed.wait_load_balancers(admin)

    def attach(self, cluster, profile):
        """The cluster's project, user, quotas and application credential, its clouds.yaml
        entry, and its profile; returns the entry's name. ``profile``: how the
        materialiser makes the cluster's hosts, and the cluster's state directory."""
        theirs = self.profile(cluster)
        if theirs and theirs.get("state") != profile["state"] and Path(theirs["state"]).exists():
            raise ConvergeError(
                f"a cluster named {cluster} from {theirs['state']} is on the rehearsal cloud "
                f"already: one cloud, one project per cluster name",
                fix="give this cluster another cluster_name, or take that one down first",
            )
        admin = self.admin()
        entry = _clouds_entry(cluster)
        if entry is None or not self._credential_works(cluster, entry):
            password = _secrets.token_urlsafe(24)
            seed.tenant(admin, cluster, password)
            cred_id, secret = seed.application_credential(self.auth_url(), cluster, password)
            self._write_clouds_entry(cluster, cred_id, secret)
        project = admin.identity.find_project(cluster, domain_id="default")
        path = self._profile_path(cluster)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**profile, "project_id": project.id}, indent=2,
                                   sort_keys=True))
        return cloud_name(cluster)

    def detach(self, cluster):
        """The cluster's project and user (once nothing of it is left in them), its profile
        and its clouds.yaml entry; returns what it removed. A cloud that is not running
        keeps the project: it goes with the cloud."""
        removed = []
        if self.usable():
            removed += seed.remove_tenant(self.admin(), cluster)
        self._profile_path(cluster).unlink(missing_ok=True)
        if forget_clouds_entry(cluster):
            removed.append(f"clouds.yaml entry {cloud_name(cluster)}")
        return removed

    def _keep_image(self, made_from):
        """A cloud made from an older image than this checkout builds (kos was updated
        since) keeps the one it was made from: its disk and its clusters live on it."""
        if not all(Path(p).is_dir() for p in made_from.split(":")):
            raise ConvergeError(
                f"the rehearsal cloud {self.name} was made from an image no longer in the "
                "cache, and this checkout builds another",
                fix="take its clusters down (kos down --cloud local) or remove it with "
                "kos cloud down, then kos up again",
            )
        if not self.running():
            self.machine.unmount()
            self.machine.mount(made_from)
        ui.warn(f"the rehearsal cloud {self.name} runs the image it was made from, older than "
                "the one this checkout builds; it gets the new one once it is removed (with "
                "its last cluster, or kos cloud down)")

    def admin(self, rec=None):
        """openstacksdk as the cloud's admin (its password is in the cloud's own disk)."""
        rec = rec or self.record()
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
                "--bootstrap-public-url", f"http://{plan.api}:5000/v3",
                "--bootstrap-region-id", config.REGION, timeout=120,
                input=passwords["admin"] + "\n",
            )
            rec["bootstrapped"] = True
            self._save(rec)
        if not rec.get("catalog"):
            seed.catalog(seed.connect(self.auth_url(), passwords["admin"]), plan.api,
                         passwords)
            rec["catalog"] = True
            self._save(rec)
        self.machine.run("systemctl", "enable", image.TARGET, check=False)
        self.machine.run("systemctl", "start", "--no-block", image.TARGET)
        # A connection reads the catalog once: this one must see the whole of it.
        # (a cloud made before it had compute hosts of their own names none)
        compute_zones = rec.get("compute_zones", {})
        seed.wait_services(self.admin(rec), compute_zones)
        if not rec.get("discovered"):
            # The compute hosts mapped to their cell, as an operator does once nova-compute
            # runs (nova-manage cell_v2 discover_hosts): until then the scheduler's
            # choice is not buildable and every server goes to ERROR with no fault.
            self.machine.run("runuser", "-u", "nova", "--", "nova-manage", "cell_v2",
                             "discover_hosts", timeout=120)
            seed.zones(self.admin(rec), compute_zones)
            rec["discovered"] = True
            self._save(rec)

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
        rec = {"block": str(plan.block), "passwords": passwords, "image": lower,
               "compute_zones": config.COMPUTE_ZONES}
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

    def _write_clouds_entry(self, cluster, cred_id, secret):
        path = clouds_yaml_path()
        doc = _clouds_doc()
        doc.setdefault("clouds", {})[cloud_name(cluster)] = {
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

    def _credential_works(self, cluster, entry):
        import openstack

        try:
            conn = openstack.connect(cloud=cloud_name(cluster), load_yaml_config=True,
                                     load_envvars=False)
            conn.authorize()
            return entry["auth"]["auth_url"] == self.auth_url()
        except Exception:  # noqa: BLE001 - any failure means: make a new one
            return False

    # -- teardown ---------------------------------------------------------------------------

    def destroy(self):
        """Every machine, link, mount and disk of the cloud, by name, and the clouds.yaml
        entries of the clusters still attached; returns what it removed."""
        pattern = net.cloud_pattern(self.name)
        removed = [f"materialiser {pid}" for pid in materialiser.stop(self.name)]
        machines = hosts_mod.nspawns(pattern)
        if machines:
            hosts_mod.stop(machines)
            removed += [f"machine {m}" for m in sorted(machines)]
        cgroups = hosts_mod.machine_cgroups(pattern)
        stuck = hosts_mod.remove_cgroups(cgroups)
        removed += [f"cgroup {d}" for d in cgroups if d not in stuck]
        _detach_loops(self.root)
        mounts = hosts_mod.unmount_all(self.root, pattern)
        removed += [f"mount {m}" for m in mounts]
        removed += net.remove(self.name)
        removed += [f"clouds.yaml entry {cloud_name(c)}" for c in self.clusters()
                    if forget_clouds_entry(c)]
        hosts_mod.remove_disks(self.root)
        left = hosts_mod.nspawns(pattern)
        if left:
            raise CleanupError(f"machines still running: {', '.join(left)}")
        if stuck:
            raise CleanupError(f"cgroups still busy: {', '.join(map(str, stuck))}",
                               fix="end the processes listed in their cgroup.procs, then re-run")
        return removed


def _clouds_doc():
    try:
        return yaml.safe_load(clouds_yaml_path().read_text()) or {}
    except FileNotFoundError:
        return {}


def _clouds_entry(cluster):
    return (_clouds_doc().get("clouds") or {}).get(cloud_name(cluster))


def forget_clouds_entry(cluster):
    """Remove the cluster's entry from clouds.yaml; whether there was one."""
    doc = _clouds_doc()
    if cloud_name(cluster) not in (doc.get("clouds") or {}):
        return False
    del doc["clouds"][cloud_name(cluster)]
    _write_private(clouds_yaml_path(), yaml.safe_dump(doc, sort_keys=True))
    return True


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
