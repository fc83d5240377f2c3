"""
The rehearsal cloud's image: OpenStack Zed from Debian's own packages, in two cached layers.

``openstack-base`` is a debootstrap with the services' packages (the slow part, minutes,
rebuilt only when the package list or the mirror changes). ``openstack`` adds what makes
it kos's cloud: the compute driver that hands servers to the materialiser, the file-backed
volume driver, the configuration (with placeholder passwords; every cluster's cloud gets
its own), and databases already migrated, so a cluster's cloud boots straight into
service. Nothing in either layer is secret: MariaDB authenticates services by their Unix
user, and the Keystone admin and service passwords are made per cluster.
"""

import re
import subprocess
import time
from pathlib import Path

from .. import image as image_mod
from . import config, octavia, octavia_zed

HERE = Path(__file__).resolve().parent
BASE_RECIPE = 1
RECIPE = 1

PACKAGES = (
    "mariadb-server", "python3-pymysql", "rabbitmq-server",
    "keystone", "glance-api", "placement-api",
    "nova-api", "nova-conductor", "nova-scheduler", "nova-compute",
    # Satisfies nova-compute's hypervisor dependency without pulling libvirt and QEMU.
    "nova-compute-ironic",
    "neutron-server", "neutron-linuxbridge-agent", "neutron-dhcp-agent", "neutron-l3-agent",
    "cinder-api", "cinder-scheduler", "cinder-volume",
    *octavia.PACKAGES,
    "dnsmasq-base", "ipset", "iptables", "conntrack", "iputils-arping", "iputils-ping",
    "bridge-utils", "sudo", "procps", "iproute2", "curl",
)
BASE_INCLUDE = ("systemd", "systemd-sysv", "dbus", "ca-certificates")

# Started at boot: the database, the message bus and Keystone. Everything else waits for
# kos to put the cluster's catalog in place, then starts with kos-openstack.target.
BOOT_UNITS = ("mariadb.service", "rabbitmq-server.service", "keystone.service")
OPENSTACK_UNITS = (
    "glance-api.service", "placement-api.service",
    "nova-api.service", "nova-conductor.service", "nova-scheduler.service",
    *(f"kos-nova-compute@{host}.service" for host in config.COMPUTE_ZONES),
    "neutron-api.service", "neutron-rpc-server.service", "neutron-linuxbridge-agent.service",
    "neutron-dhcp-agent.service", "neutron-l3-agent.service",
    "cinder-api.service", "cinder-scheduler.service", "cinder-volume.service",
    # what a server reads at 169.254.169.254 (its instance ID, zone): Neutron's DHCP
    # namespace proxies it to Nova's metadata API (config: enable_isolated_metadata)
    "nova-api-metadata.service", "neutron-metadata-agent.service",
)
# neutron-common ships the agent's program; its package (the unit) is not installed
METADATA_AGENT = OPENSTACK_UNITS[-1]
# Installed by dependencies, pointless or harmful in the rehearsal cloud.
MASKED_UNITS = (
    # one compute service per compute host instead (COMPUTE_UNIT)
    "nova-compute.service",
    "neutron-server.service",
    "iscsid.service", "iscsid.socket", "open-iscsi.service", "rtslib-fb-targetctl.service",
    "keepalived.service", "radvd.service", "haproxy.service",
    "apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer", "e2scrub_reap.service",
    "fstrim.timer", "dpkg-db-backup.timer", "logrotate.timer", "man-db.timer",
    "systemd-timesyncd.service", "cron.service",
)
TARGET = "kos-openstack.target"
METADATA_AGENT_UNIT = """\
# kos rehearsal cloud: Neutron's metadata agent, as Debian's neutron-metadata-agent runs it.
[Unit]
Description=OpenStack Neutron Metadata Agent
After=rabbitmq-server.service keystone.service network-online.target

[Service]
User=neutron
Group=neutron
Type=simple
WorkingDirectory=/var/lib/neutron
RuntimeDirectory=neutron lock/neutron
RuntimeDirectoryPreserve=yes
ExecStart=/usr/bin/neutron-metadata-agent --config-file=/etc/neutron/neutron.conf \\
  --config-file=/etc/neutron/metadata_agent.ini --log-file=/var/log/neutron/neutron-metadata-agent.log
LimitNOFILE=65535
TimeoutStopSec=15
"""
# Debian's nova-compute.service, for the compute host the instance names (config.COMPUTE_ZONES)
COMPUTE_UNIT = """\
# kos rehearsal cloud: the compute service of one compute host (config.COMPUTE_ZONES).
[Unit]
Description=OpenStack Nova Compute of compute host %i
After=mariadb.service rabbitmq-server.service keystone.service network-online.target

[Service]
User=nova
Group=nova
Type=notify
NotifyAccess=all
WorkingDirectory=~
RuntimeDirectory=nova lock/nova
# shared by the instances: one that stops leaves it to the others
RuntimeDirectoryPreserve=yes
CacheDirectory=nova
ExecStart=/usr/bin/nova-compute --config-file=/etc/nova/nova.conf \\
  --config-file=/etc/nova/nova-compute.conf --config-file=/etc/nova/nova-compute-%i.conf \\
  --log-file=/var/log/nova/nova-compute-%i.log
LimitNOFILE=65535
TimeoutStopSec=15
"""
EBTABLES_WRAPPER = "/usr/local/sbin/ebtables-kos"
EBTABLES_ALTERNATIVE = (
    "update-alternatives", "--install", "/usr/sbin/ebtables", "ebtables", EBTABLES_WRAPPER, "100",
    "--slave", "/usr/sbin/ebtables-save", "ebtables-save", "/usr/sbin/ebtables-nft-save",
    "--slave", "/usr/sbin/ebtables-restore", "ebtables-restore", "/usr/sbin/ebtables-nft-restore",
)


def _base_steps(build):
    mirror, suite = image_mod.apt_source()
    with build.stage("debootstrap"):
        image_mod.debootstrap(build, suite, mirror, BASE_INCLUDE)
    with build.stage("install the OpenStack packages"):
        image_mod.apt_install(build, PACKAGES)


def base_layer():
    mirror, suite = image_mod.apt_source()
    return image_mod.Layer(
        "openstack-base", "the rehearsal cloud's OpenStack packages", _base_steps,
        parts=(BASE_RECIPE, mirror, suite, BASE_INCLUDE, PACKAGES),
    )


def layer():
    return image_mod.Layer(
        "openstack", "the rehearsal cloud's OpenStack image", _cloud_steps,
        parts=(RECIPE, image_mod.files_digest(HERE / "payload", HERE / "config.py",
                                               HERE / "image.py", HERE / "octavia_zed.py")),
        parent=base_layer(),
    )


def write_config(write, passwords, read=None):
    """Every service's configuration; ``write(path, text, mode)``, ``read(path)``."""
    for path, text in config.files(passwords).items():
        write(path, text, 0o640)
    if read:
        for path, (processes, threads) in config.UWSGI.items():
            write(path, config.uwsgi_tuned(read(path), processes, threads), 0o644)


def _cloud_steps(build):
    root = build.root
    site = "/usr/lib/python3/dist-packages"
    with build.stage("drivers"):
        build.write(f"{site}/nova/virt/kos.py", (HERE / "payload" / "nova_kos.py").read_text())
        build.write(f"{site}/cinder/volume/drivers/kos_file.py",
                    (HERE / "payload" / "cinder_kos.py").read_text())
        build.write(EBTABLES_WRAPPER, (HERE / "payload" / "ebtables_kos.py").read_text(), 0o755)
        build.chroot(*EBTABLES_ALTERNATIVE)
        build.chroot("update-alternatives", "--set", "ebtables", EBTABLES_WRAPPER)
    octavia_zed.apply(build)
    with build.stage("configuration"):
        placeholder = {name: "set-per-cluster" for name in ("admin", *config.SERVICE_USERS)}
        write_config(build.write, placeholder, read=lambda p: (root / p.lstrip("/")).read_text())
        for path in config.files(placeholder):
            owner = path.split("/")[2]
            build.chroot("chown", f"root:{owner}", path)
        # what octavia-db-manage reads below; the cloud's own is written once its
        # management network exists (octavia.conf)
        build.write(octavia.CONF, config._ini(
            {"database": {"connection": config.db_url("octavia", "octavia")}}), 0o640)
        build.chroot("chown", "root:octavia", octavia.CONF)
        build.write("/etc/mysql/mariadb.conf.d/90-kos.cnf", config.MYSQL_TUNING)
        build.write("/etc/rabbitmq/rabbitmq-env.conf", config.RABBIT_ENV)
        build.write("/etc/rabbitmq/rabbitmq.conf", config.RABBIT_CONF)
        build.write("/etc/hostname", f"{config.HOST}\n")
        build.write("/etc/hosts", f"127.0.0.1 localhost {config.HOST}\n")
        for d, owner in ((config.SPOOL, "nova"), (config.VOLUME_DIR, "cinder"),
                         ("/var/lib/nova/tmp", "nova"), ("/var/lib/neutron/tmp", "neutron"),
                         ("/var/lib/cinder/tmp", "cinder"), ("/var/lib/glance/tmp", "glance"),
                         ("/var/lib/octavia/tmp", "octavia"), (octavia.CERT_DIR, "octavia"),
                         ("/var/lib/glance/images", "glance")):
            (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
            build.chroot("chown", f"{owner}:{owner}", d)
        for sub in ("requests", "replies", "instances", "consoles"):
            (root / config.SPOOL.lstrip("/") / sub).mkdir(exist_ok=True)
        build.chroot("chown", "-R", "nova:nova", config.SPOOL)
    with build.stage("systemd units"):
        _units(build)
    with build.stage("databases"):
        _databases(build)


def _units(build):
    build.write("/etc/systemd/system/kos-nova-compute@.service", COMPUTE_UNIT)
    build.write(f"/etc/systemd/system/{METADATA_AGENT}", METADATA_AGENT_UNIT)
    packaged = [u for u in OPENSTACK_UNITS if not u.startswith("kos-nova-compute@")]
    build.run("systemctl", f"--root={build.root}", "disable", *BOOT_UNITS, *packaged,
              *octavia.UNITS)
    build.run("systemctl", f"--root={build.root}", "mask", *MASKED_UNITS)
    build.run("systemctl", f"--root={build.root}", "enable", *BOOT_UNITS)
    wants = "\n".join(f"Wants={u}" for u in OPENSTACK_UNITS)
    build.write(
        f"/etc/systemd/system/{TARGET}",
        "# kos: the services that need the cluster's catalog (started by kos after it).\n"
        "[Unit]\nDescription=kos rehearsal cloud: OpenStack services\n"
        f"{wants}\nAfter={' '.join(BOOT_UNITS)}\n",
    )
    # Keystone sends no notifications here, so it need not wait for RabbitMQ's boot (the
    # longest of the three): the bootstrap and the catalog go on while RabbitMQ starts.
    unit = (build.root / "lib/systemd/system/keystone.service").read_text()
    build.write("/etc/systemd/system/keystone.service",
                re.sub(r"(?m)^(After=.*?) ?rabbitmq-server\.service", r"\1", unit))
    # Debian's units start these before the catalog exists; ordered after the target's
    # start they are not, so let them retry instead of failing for good.
    for unit in OPENSTACK_UNITS:
        build.write(
            f"/etc/systemd/system/{unit}.d/kos.conf",
            "[Unit]\nStartLimitIntervalSec=0\n[Service]\nRestart=on-failure\nRestartSec=3\n",
        )


def _databases(build):
    """Create and migrate every service's database, with MariaDB run in the build root."""
    root = build.root
    with image_mod.mounted_api(root):
        (root / "run" / "mysqld").mkdir(exist_ok=True)
        build.chroot("chown", "mysql:mysql", "/run/mysqld")
        log = open(Path(build.log_path), "a")
        server = subprocess.Popen(
            ["chroot", str(root), "/usr/sbin/mariadbd", "--user=mysql", "--skip-networking",
             "--socket=/run/mysqld/mysqld.sock"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            while not (root / "run" / "mysqld" / "mysqld.sock").exists():
                if server.poll() is not None or time.monotonic() > deadline:
                    build.fail("MariaDB did not start in the build root")
                time.sleep(0.5)
            sql = []
            for user, dbs in config.DATABASES.items():
                sql.append(f"CREATE USER IF NOT EXISTS '{user}'@'localhost' IDENTIFIED VIA unix_socket;")
                for db in dbs:
                    sql.append(f"CREATE DATABASE IF NOT EXISTS {db};")
                    sql.append(f"GRANT ALL PRIVILEGES ON {db}.* TO '{user}'@'localhost';")
            build.chroot("mysql", input="\n".join(sql) + "\n")

            def as_user(user, *argv):
                build.chroot("runuser", "-u", user, "--", *argv, timeout=1800)

            as_user("keystone", "keystone-manage", "db_sync")
            as_user("glance", "glance-manage", "db_sync")
            as_user("placement", "placement-manage", "db", "sync")
            as_user("nova", "nova-manage", "api_db", "sync")
            as_user("nova", "nova-manage", "cell_v2", "map_cell0",
                    f"--database_connection={config.db_url('nova', 'nova_cell0')}")
            as_user("nova", "nova-manage", "cell_v2", "create_cell", "--name=cell1")
            as_user("nova", "nova-manage", "db", "sync")
            as_user("neutron", "neutron-db-manage", "--config-file", "/etc/neutron/neutron.conf",
                    "--config-file", "/etc/neutron/plugins/ml2/ml2_conf.ini", "upgrade", "heads")
            as_user("cinder", "cinder-manage", "db", "sync")
            as_user("octavia", "octavia-db-manage", "--config-file", octavia.CONF,
                    "upgrade", "head")
        finally:
            subprocess.run(["chroot", str(root), "mysqladmin", "--socket=/run/mysqld/mysqld.sock",
                            "shutdown"], capture_output=True)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            log.close()
