"""
The image Octavia's amphorae boot on the rehearsal cloud: the hosts' image (``rootfs``)
with Debian's amphora agent (``octavia-agent``: the agent, haproxy, keepalived), laid out
as Octavia's own image lays it out (diskimage-builder's elements in
octavia/diskimage-create/elements: ``amphora-agent`` runs the agent as
``amphora-agent.service``, the name the user data Octavia sends restarts it by;
``rsyslog`` gives haproxy its log socket). cloud-init writes the agent's configuration and
certificates from the config drive, as in any amphora. One cached layer.

Debian's agent is Octavia Zed (11.0.0), whose ``InterfaceController.up`` sets the policy
rules from whichever interface it brings up: plugging the members' network (a file without
rules) deletes the VIP's ``from <VIP> lookup 1``, and answers to a client on the members'
network then leave from the VIP's address through the members' port, where port security
drops them. Later Octavia lets only the VIP's interface set rules
(octavia/amphorae/backends/utils/interface.py, ``up``); the image does the same.
"""

import os
from pathlib import Path

from . import image as image_mod
from . import rootfs

RECIPE = 2
PACKAGES = ("octavia-agent",)
# octavia/diskimage-create/elements/amphora-agent/install.d/amphora-agent-source-install/
# amphora-agent.service, with Debian's path to the agent.
AGENT_UNIT = """\
[Unit]
Description=OpenStack Octavia Amphora Agent
After=network.target syslog.service
Wants=syslog.service

[Service]
ExecStart=/usr/bin/amphora-agent --config-file /etc/octavia/amphora-agent.conf
KillMode=mixed
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
"""
# octavia/diskimage-create/elements/rsyslog/.../55-octavia-socket.conf
RSYSLOG_SOCKET = """\
module(load="imuxsock")
input(type="imuxsock"
      Socket="/run/rsyslog/octavia/log"
      CreatePath="on")
"""
# Debian's own units for the agent (a second agent on its port, a ramfs for certificates
# and an ifupdown namespace the agent makes itself), and what the package pulls in that an
# amphora does not run (keepalived: only the ACTIVE_STANDBY topology).
MASKED_UNITS = (
    "octavia-agent.service", "octavia-agent-netns.service",
    "octavia-agent-certs-ramfs.service", "keepalived.service", "haproxy.service",
    "cron.service", "anacron.service", "anacron.timer", "atd.service", "haveged.service",
    "pollinate.service", "apparmor.service", "networking.service",
)
INTERFACE_PY = "usr/lib/python3/dist-packages/octavia/amphorae/backends/utils/interface.py"
RULES_UP = ("            self._routes_up(interface, ipr, idx)\n"
            "            self._rules_up(interface, ipr, idx)\n")
VIP_RULES_ONLY = ("            self._routes_up(interface, ipr, idx)\n"
                  "            # only the VIP's interface file carries rules\n"
                  "            if interface.rules:\n"
                  "                self._rules_up(interface, ipr, idx)\n")


def vip_rules_only(text):
    """``interface.py`` with ``_rules_up`` for the VIP's interface only; None when the
    text is not the release this edit was made for."""
    return image_mod.edited(text, RULES_UP, VIP_RULES_ONLY)


def _vip_rules_only(build):
    image_mod.edit_python(build, "the VIP's policy rules kept",
                          [(INTERFACE_PY, RULES_UP, VIP_RULES_ONLY)], "Octavia release 11.0.0")


def _steps(build):
    with build.stage("the amphora agent"):
        # the hosts' image has no apt sources, and resolves names through the
        # systemd-resolved a booted host runs: this machine's, for the install only
        sources = image_mod.apt_sources()
        resolv = build.root / "etc/resolv.conf"
        stub = os.readlink(resolv) if resolv.is_symlink() else None
        for path, text in sources.items():
            build.write(path, text)
        resolv.unlink(missing_ok=True)
        build.write("/etc/resolv.conf", Path("/etc/resolv.conf").read_text())
        try:
            image_mod.apt_install(build, PACKAGES)
        finally:
            for path in sources:
                (build.root / path.lstrip("/")).unlink(missing_ok=True)
            build.write("/etc/apt/sources.list", rootfs.NO_MIRROR)
            resolv.unlink(missing_ok=True)
            if stub:
                resolv.symlink_to(stub)
        build.write("/etc/systemd/system/amphora-agent.service", AGENT_UNIT)
        build.write("/etc/rsyslog.d/55-octavia-socket.conf", RSYSLOG_SOCKET)
        build.run("systemctl", f"--root={build.root}", "mask", *MASKED_UNITS)
        build.run("systemctl", f"--root={build.root}", "enable", "amphora-agent.service")
    _vip_rules_only(build)


def layer():
    return image_mod.Layer(
        "amphora", "the rehearsal cloud's amphora image", _steps,
        parts=(RECIPE, image_mod.files_digest(Path(__file__))), parent=rootfs.layer(),
    )
