"""
The image the rehearsal cloud's servers boot: a Debian root filesystem as a cloud image
would be — cloud-init reading the config drive, systemd-networkd taking the port's address by
DHCP, sshd — in two cached layers (``image``).

The hosts have no route to the internet, so everything the states install is baked in;
``pkg.installed`` then finds it and changes nothing, and apt has no sources to reach. Salt
itself is not baked: it is the project's virtualenv, which the materialiser binds into
every host read-only and puts on PATH, so the first boot script finds the Salt release it
would otherwise install.
"""

from pathlib import Path

from . import hosts
from . import image as image_mod

BASE_RECIPE = 4
RECIPE = 1
PACKAGES = (
    # a booting systemd host, as a cloud image has it
    "systemd", "systemd-sysv", "systemd-resolved", "dbus", "procps", "kmod", "iproute2", "iputils-ping",
    "netcat-openbsd", "sudo", "less", "openssl", "ca-certificates",
    "cloud-init", "e2fsprogs", "util-linux",
    # core: sshd, packages
    "openssh-server", "openssh-client", "curl", "jq", "rsync",
    # bastion (cloud-init installs nftables for its first-boot NAT; Salt then uses iptables)
    "nftables", "iptables", "iptables-persistent", "fail2ban", "python3-systemd",
    # kubeadm: the local load balancer, and what the formula installs from Debian for a
    # kubelet (the container runtime) and the kubelet package depends on
    "haproxy", "containerd", "runc", "containernetworking-plugins", "conntrack", "ethtool",
    "socat", "ebtables",
    # what the project's CPython (built elsewhere, bound in) links against
    "libssl3", "libffi8", "zlib1g", "libsqlite3-0", "libbz2-1.0", "liblzma5", "libreadline8",
    "libncursesw6", "libgdbm6", "libuuid1",
)
# Installed enabled by Debian, owned by the formula (or pointless in a rehearsal host).
DISABLED_UNITS = (
    "haproxy.service", "containerd.service", "fail2ban.service", "apt-daily.timer", "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer", "e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer",
    "netfilter-persistent.service",
)
# systemd-resolved writes /etc/resolv.conf from what DHCP hands out, as on Debian's cloud
# images (a kubelet will not start a pod without the file).
ENABLED_UNITS = ("systemd-networkd.service", "systemd-resolved.service", "ssh.service")

# What apt's sources say in a host: no mirror reaches these hosts.
NO_MIRROR = "# the rehearsal cloud has no route to a mirror\n"
CLOUD_CFG = """\
# kos rehearsal cloud: the config drive is the datasource (Nova builds it), and cloud-init
# writes systemd-networkd's configuration itself. Not netplan: Debian 12's netplan matches
# interfaces on their permanent MAC address, which the hosts' veth NICs do not have.
datasource_list: [ConfigDrive, None]
system_info:
  network:
    renderers: [networkd]
"""
# cloud-init's units never time out (TimeoutSec=0). Under load, a container's systemd can
# miss the notice that a finished unit's cgroup is empty and wait in "deactivating" for
# ever, holding cloud-final (and the first boot) back: give the stop a bound.
CLOUD_INIT_UNITS = ("cloud-init-local", "cloud-init", "cloud-config", "cloud-final")
CLOUD_INIT_DROPIN = """\
[Service]
TimeoutStopSec=20s
"""
# systemd's bus-activated services that exit when idle (localed, hostnamed: Salt's
# locale.system and network.mod_hostname ask them). In these containers systemd cannot
# kill an idle service's cgroup (EIO on the hybrid hierarchy nspawn gives it), and the
# next activation fails to attach to it (exit 219/CGROUP) while dbus-daemon waits for the
# name until its 25 s service_start_timeout: a highstate stalled 25 s on every host. The
# start right after a failed one attaches; Restart= makes it at once, so the name
# appears before dbus-daemon gives up. (systemd.service(5): Restart=, RestartSec=;
# dbus-daemon(1): service_start_timeout.) A VM's systemd has no such cgroup to trip on.
IDLE_EXIT_UNITS = ("systemd-localed", "systemd-hostnamed")
IDLE_EXIT_DROPIN = """\
[Service]
Restart=on-failure
RestartSec=100ms
"""
# A kubelet host (kos_local.hosts) made ready from inside, once nspawn has set up its
# mounts and before anything that runs containers starts: no race with the boot.
KUBELET_HOST_UNIT = f"""\
[Unit]
Description=kos rehearsal cloud: let this container run a kubelet
DefaultDependencies=no
ConditionPathExists={hosts.KUBELET_FLAG}
Before=sysinit.target containerd.service kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/kos-kubelet-host

[Install]
WantedBy=sysinit.target
"""
KUBELET_HOST_SCRIPT = f"""\
#!/bin/sh
# kos rehearsal cloud: what a kubelet needs of this container (kos_local.hosts).
set -e
for target in $(findmnt -rn -t cgroup,cgroup2 -o TARGET); do
    mount -o remount,bind,rw "$target"
done
mount --make-rshared /
for file in {hosts.SYSCTL_SHADOWS}/*; do
    key=$(basename "$file")
    mount --bind "$file" "/proc/sys/$(echo "$key" | tr . /)"
done
"""
SALT_UNIT = """\
# As salt-bootstrap installs it; the rehearsal cloud's Salt is the project's virtualenv.
[Unit]
Description=The Salt {title}
After=network.target

[Service]
ExecStart=/usr/local/bin/{name}
KillMode={killmode}
Restart=on-failure
LimitNOFILE=100000

[Install]
WantedBy=multi-user.target
"""


def _base_steps(build):
    mirror, suite = image_mod.apt_source()
    with build.stage("debootstrap"):
        image_mod.debootstrap(build, suite, mirror, ("systemd", "systemd-sysv", "dbus"))
    with build.stage("install the hosts' packages"):
        image_mod.apt_install(build, PACKAGES)


def _host_steps(build):
    with build.stage("cloud-init, salt units"):
        build.write("/etc/cloud/cloud.cfg.d/90-kos-rehearsal.cfg", CLOUD_CFG)
        for unit in CLOUD_INIT_UNITS:
            build.write(f"/etc/systemd/system/{unit}.service.d/kos-stop-timeout.conf",
                        CLOUD_INIT_DROPIN)
        for unit in IDLE_EXIT_UNITS:
            build.write(f"/etc/systemd/system/{unit}.service.d/kos-restart.conf",
                        IDLE_EXIT_DROPIN)
        # cloud-init's locale module sets Debian's default, en_US.UTF-8, as a cloud image
        # has it generated; without it the module (and cloud-config.service) fails.
        locale_gen = build.root / "etc/locale.gen"
        locale_gen.write_text(locale_gen.read_text().replace("# en_US.UTF-8 UTF-8",
                                                             "en_US.UTF-8 UTF-8"))
        build.run("chroot", str(build.root), "locale-gen")
        for name, title, kill in (("salt-minion", "Minion", "process"),
                                  ("salt-master", "Master", "control-group"),
                                  ("salt-syndic", "Syndic", "process")):
            build.write(f"/lib/systemd/system/{name}.service",
                        SALT_UNIT.format(name=name, title=title, killmode=kill))
        # No mirror reaches these hosts: apt has nothing to update from.
        for path in [build.root / "etc/apt/sources.list",
                     *(build.root / "etc/apt/sources.list.d").glob("*")]:
            path.unlink(missing_ok=True)
        build.write("/etc/apt/sources.list", NO_MIRROR)
        build.write("/etc/systemd/system/kos-kubelet-host.service", KUBELET_HOST_UNIT)
        build.write("/usr/local/sbin/kos-kubelet-host", KUBELET_HOST_SCRIPT, 0o755)
        build.run("systemctl", f"--root={build.root}", "disable", *DISABLED_UNITS)
        build.run("systemctl", f"--root={build.root}", "enable", *ENABLED_UNITS,
                  "kos-kubelet-host.service")
        (build.root / "etc/hostname").unlink(missing_ok=True)


def base_layer():
    mirror, suite = image_mod.apt_source()
    return image_mod.Layer("host-base", "the rehearsal hosts' Debian packages", _base_steps,
                           parts=(BASE_RECIPE, mirror, suite, PACKAGES))


def layer():
    return image_mod.Layer(
        "host", "the rehearsal hosts' image", _host_steps,
        parts=(RECIPE, image_mod.files_digest(Path(__file__)), KUBELET_HOST_UNIT,
               KUBELET_HOST_SCRIPT), parent=base_layer(),
    )
