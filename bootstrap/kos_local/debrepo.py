"""
The rehearsal cloud's Kubernetes as Debian packages: kubeadm, kubelet and kubectl laid out
as pkgs.k8s.io lays out a minor's repository (flat, signed), so the kubeadm formula installs,
holds and upgrades them exactly as it does from pkgs.k8s.io, pointed at another URL.
``kos_local.kubernetes`` builds the programs and calls ``write_repository``.
"""

import gzip
import hashlib
import os
import shutil
import subprocess
import time

# As the upstream packages install them (kubelet's unit and kubeadm's drop-in).
KUBELET_UNIT = """\
[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
"""
KUBEADM_DROPIN = """\
# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can create to override the kubelet arguments as a last resort. Preferably, the user should use
# the .NodeRegistration.KubeletExtraArgs object in the configuration files instead. KUBELET_EXTRA_ARGS should be sourced from this file.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""
# Package relations as pkgs.k8s.io declares them, with Debian's own CNI plugins in place of
# the kubernetes-cni package and no cri-tools (kubeadm 1.31 talks CRI itself).
DEB_DEPENDS = {
    "kubelet": "iptables (>= 1.4.21), iproute2, socat, util-linux, mount, ebtables, ethtool, "
               "conntrack, containernetworking-plugins",
    "kubeadm": "kubelet (>= 1.19.0), kubectl (>= 1.13.0)",
    "kubectl": "",
}
DESCRIPTIONS = {
    "kubelet": "Node agent for Kubernetes clusters",
    "kubeadm": "Command-line utility for administering a Kubernetes cluster",
    "kubectl": "Command-line utility for interacting with a Kubernetes cluster",
}


def _deb_files(name, bindir):
    """``{path: (bytes, mode)}`` of a package, where the upstream package puts them."""
    files = {f"/usr/bin/{name}": ((bindir / name).read_bytes(), 0o755)}
    if name == "kubelet":
        files["/usr/lib/systemd/system/kubelet.service"] = (KUBELET_UNIT.encode(), 0o644)
    if name == "kubeadm":
        files["/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"] = (
            KUBEADM_DROPIN.encode(), 0o644)
    return files


def write_repository(build, repo, version, bindir, debver, keyring):
    """kubelet, kubeadm and kubectl of ``version`` (package version ``debver``) as a signed
    flat repository in ``repo``, its public key also in the file ``keyring``."""
    repo.mkdir()
    for name in ("kubelet", "kubeadm", "kubectl"):
        stage = repo / f".{name}"
        for path, (data, mode) in _deb_files(name, bindir).items():
            target = stage / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(mode)
        size_kb = sum(p.stat().st_size for p in stage.rglob("*") if p.is_file()) // 1024
        control = [f"Package: {name}", f"Version: {debver}", "Architecture: amd64",
                   "Maintainer: kos rehearsal cloud <kos@localhost>",
                   f"Installed-Size: {size_kb}", "Section: admin", "Priority: optional",
                   "Homepage: https://kubernetes.io"]
        if DEB_DEPENDS[name]:
            control.append(f"Depends: {DEB_DEPENDS[name]}")
        control.append(f"Description: {DESCRIPTIONS[name]}\n Built from source by kos "
                       f"(k8s.io/kubernetes {version}) for its rehearsal cloud.")
        (stage / "DEBIAN").mkdir()
        (stage / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
        build.run("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", stage,
                  repo / f"{name}_{debver}_amd64.deb")
        shutil.rmtree(stage)
    packages = build.output("dpkg-scanpackages", "--multiversion", ".", "/dev/null",
                            cwd=repo).encode()
    (repo / "Packages").write_bytes(packages)
    (repo / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    lines = ["Origin: kos", "Label: kos rehearsal mirror of pkgs.k8s.io",
             f"Version: {version}", "Architectures: amd64",
             "Date: " + time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()), "SHA256:"]
    for fname in ("Packages", "Packages.gz"):
        data = (repo / fname).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {fname}")
    (repo / "Release").write_text("\n".join(lines) + "\n")
    _sign(build, repo, keyring)


def _sign(build, repo, keyring):
    """Sign the repository with a key made for it; only its public half is kept."""
    home = repo / ".gnupg"
    home.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    try:
        build.run("gpg", "--batch", "--passphrase", "", "--quick-gen-key",
                  "kos rehearsal mirror <kos@localhost>", "ed25519", "sign", "never", env=env)
        build.run("gpg", "--batch", "--yes", "--armor", "--output", repo / "Release.key",
                  "--export", env=env)
        # Unarmored under the name of the formula's keyring too: Salt's pkgrepo copies a
        # file: key of that name as it is (an armored one it would dearmor beside the
        # source, in this read-only repository, and with a gpg the hosts do not have).
        build.run("gpg", "--batch", "--yes", "--output", repo / keyring, "--export",
                  env=env)
        build.run("gpg", "--batch", "--yes", "--clearsign", "--output", repo / "InRelease",
                  repo / "Release", env=env)
        build.run("gpg", "--batch", "--yes", "--armor", "--detach-sign", "--output",
                  repo / "Release.gpg", repo / "Release", env=env)
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
