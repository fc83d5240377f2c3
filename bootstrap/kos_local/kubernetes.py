"""
Real Kubernetes for the rehearsal cloud, built from source once per version and kept under
``~/.cache/kos/kubernetes/<version>-r<recipe>``:

- ``bin/``: kubeadm, kubelet, kubectl, the control-plane components and kube-proxy from
  ``k8s.io/kubernetes`` through the Go module proxy, built with the Go release the version's
  own ``.go-version`` names; etcd, etcdctl and etcdutl at the version kubeadm deploys; CoreDNS;
  a pause program.
- ``images/``: one archive per image, under exactly the names ``kubeadm config images list``
  prints, for ``ctr -n k8s.io images import`` (the hosts reach no registry).
- ``deb/``: kubeadm, kubelet and kubectl as Debian packages laid out as pkgs.k8s.io lays out
  a minor's repository (flat, signed), so the kubeadm formula installs, holds and upgrades
  them exactly as it does from pkgs.k8s.io, pointed at another URL (``kos_local.debrepo``).

``python -m kos_local.kubernetes [VERSION | --next]`` builds it (the formula's pinned version
when none is given; ``--next`` the release of the next minor version the rehearsal of an
upgrade moves to, which make test does not build); a build writes every command's output to ``<dir>.log`` and a failure names
the step and that log. Go's module and build caches live under ``~/.cache/kos/go`` so a
second version reuses most of the first's work.
"""

import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import yaml

from kos import ui
from kos.errors import EXIT_INTERRUPTED, KosError, PreflightError
from kos.ssh import take_interrupts
from . import cloud_provider, csi, debrepo, provider
from .image import Build

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = REPO / "salt" / "salt" / "kubeadm" / "defaults.yaml"
RECIPE = 3
# The release of the next minor version a rehearsed upgrade moves the pinned one to (a
# release the module proxy serves; its build is kept like the pinned one's).
UPGRADE_TARGET = "v1.32.9"
MARKER = ".kos-built"
MODULE = "k8s.io/kubernetes"
# The programs kubeadm's nodes and images need (kubeadm's own release builds more).
COMMANDS = ("kubeadm", "kubelet", "kubectl", "kube-apiserver", "kube-controller-manager",
            "kube-scheduler", "kube-proxy")
# Which binaries each image of ``kubeadm config images list`` carries, and how it starts:
# kubeadm's manifests name the command (in PATH) for the control plane and etcd; CoreDNS
# and pause run their image's entrypoint.
IMAGES = {
    "kube-apiserver": {"bin": ["kube-apiserver"]},
    "kube-controller-manager": {"bin": ["kube-controller-manager"]},
    "kube-scheduler": {"bin": ["kube-scheduler"]},
    "kube-proxy": {"bin": ["kube-proxy"], "iptables": True},
    "etcd": {"bin": ["etcd", "etcdctl", "etcdutl"]},
    "coredns": {"bin": ["coredns"], "entrypoint": ["/usr/local/bin/coredns"]},
    "pause": {"bin": ["pause"], "entrypoint": ["/usr/local/bin/pause"]},
}
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# kube-proxy (iptables mode) runs the iptables programs inside its container: Debian's,
# with the libraries they load, from this machine.
IPTABLES_PROGRAMS = ("xtables-nft-multi", "xtables-legacy-multi", "conntrack")
IPTABLES_NAMES = ("iptables", "iptables-save", "iptables-restore", "ip6tables",
                  "ip6tables-save", "ip6tables-restore")
# As kubernetes/build/pause/linux/pause.c behaves: "-v" prints the version and exits 0
# (kubeadm upgrade's preflight runs the pause image so, as a Job that must complete), the
# process waits for SIGINT or SIGTERM and reaps the sandbox's orphans meanwhile.
PAUSE_GO = """\
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const version = "%s"

func main() {
	for _, arg := range os.Args[1:] {
		if strings.EqualFold(arg, "-v") {
			fmt.Printf("pause.c %%s\\n", version)
			return
		}
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range c {
		if sig != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %%s\\n", strings.Title(sig.String()))
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
"""
ETCD_GO = """\
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""
BUILD_TIMEOUT = 90 * 60


def formula_defaults():
    return yaml.safe_load(DEFAULTS.read_text())


def pinned_version():
    return formula_defaults()["version"]


def package_version(version):
    """The Debian version pkgs.k8s.io gives a release: ``1.31.4-1.1`` for v1.31.4 (the
    formula's package revision)."""
    revision = str(formula_defaults()["package_version"]).split("-", 1)[1]
    return f"{version.lstrip('v')}-{revision}"


def keyring_name():
    return Path(formula_defaults()["repo"]["keyring"]).name


def root(version):
    return provider.cache_root() / "kubernetes" / f"{version}-r{RECIPE}"


def log_path(version, kind="log"):
    """Beside the build: ``<dir>.log`` (the build's commands) and ``<dir>.start.log`` (what
    the background build that ``start`` launched printed)."""
    return root(version).with_name(f"{root(version).name}.{kind}")


def built(version):
    """Whether ``version`` is built on this machine already, its cloud controller and
    Cinder CSI too."""
    path = root(version)
    return (path / MARKER).exists() and (
        cloud_provider.release(version) is None or cloud_provider.built(path)) and (
        csi.built(path, formula_defaults()["csi"]["images"], version))


def minor_dir(version):
    """pkgs.k8s.io's path of a release's minor version (``core:/stable:/v1.31``), kept in the
    mirror as a link to the build of that minor: the formula's repository URL carries it, and
    orch.upgrade moves a node to another minor by rewriting it, on either cloud."""
    major, minor = version.lstrip("v").split(".")[:2]
    return Path("core:") / "stable:" / f"v{major}.{minor}"


def _link_minor(path, version):
    """The minor's path points at this build (the last one built of that minor)."""
    link = path.parent / minor_dir(version)
    link.parent.mkdir(parents=True, exist_ok=True)
    target = os.path.relpath(path, link.parent)
    if link.is_symlink() and os.readlink(link) == target:
        return
    # A name of this process's own: kos up, its background build and the test suite's
    # prebuild all link once the build they waited for is there, at the same moment.
    tmp = link.with_name(f"{link.name}.{os.getpid()}.new")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)


go_root = provider.go_root


def ensure(version=None):
    """The build directory of ``version`` (built now when missing)."""
    version = version or pinned_version()
    if not re.fullmatch(r"v1\.\d+\.\d+", version):
        raise PreflightError(f"Kubernetes version {version!r} is not a release such as v1.31.4",
                             fix="give a version as kubeadm:version has it (v1.MINOR.PATCH)")
    path = root(version)
    if not built(version):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(_lock_path(version), "w") as lock:
            # A second build of the same version waits and uses the first one's result.
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (path / MARKER).exists():
                _build(version, path)
            _build_cloud_images(version, path)
    _link_minor(path, version)
    return path


def _lock_path(version):
    return root(version).parent / f".{version}.lock"


def _building(version):
    """Whether a build of ``version`` holds its lock now."""
    if not _lock_path(version).exists():
        return False
    with open(_lock_path(version)) as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def start(version=None):
    """Start building ``version`` in a process of its own, unless it is built or being
    built: the process (a ``Popen``), or None. ``kos up`` boots the cloud and applies
    Terraform meanwhile (the nodes need the mirror only when the orchestration installs
    Kubernetes, and take it from ``ensure``, which waits on the build's lock). The build
    outlives an interrupted ``kos up``: the re-run waits for it, as for any second build of
    a version."""
    version = version or pinned_version()
    # A build under way (the test suite's prebuild, when kos up starts one) is waited
    # for through its lock.
    if built(version) or _building(version):
        return None
    log = log_path(version, "start.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    # Appended to, never truncated: a build that took the lock just after the check above
    # keeps writing where it is, and truncating under it left a run of NUL bytes.
    with open(log, "a") as out:
        out.write(f"kos: building Kubernetes {version} ({time.strftime('%Y-%m-%d %H:%M:%S')})\n")
        out.flush()
        # (runpy warns that kos_local imported this module before it ran it as __main__)
        proc = subprocess.Popen([sys.executable, "-W", "ignore::RuntimeWarning:runpy", "-m",
                                 __name__, version],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return proc


class _Title:
    causes = "Go module proxy, disk space"

    def __init__(self, version):
        self.title = f"Kubernetes {version} from source"


def _go():
    go = shutil.which("go")
    if go is None:
        raise PreflightError("Go is needed once to build Kubernetes for the rehearsal cloud",
                             fix="apt-get install golang (or put go on PATH)")
    return go


def _build(version, path):
    go = _go()
    tmp = path.with_name(path.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log = log_path(version)
    log.write_text(f"kos: building Kubernetes {version} ({path.name})\n")
    ui.info(f"building Kubernetes {version} from source (once; log: {log})")
    started = time.monotonic()
    build = Build(_Title(version), tmp, log)
    try:
        _steps(build, go, version, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (tmp / MARKER).write_text(json.dumps({"version": version, "recipe": RECIPE,
                                          "seconds": round(time.monotonic() - started)}) + "\n")
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    ui.ok(f"Kubernetes {version} built in {time.monotonic() - started:.0f}s: {path}")


def _build_cloud_images(version, path):
    """The cloud controller's and the Cinder CSI's images into a finished build of
    ``version`` (stages of their own: a build made before they existed gets them without a
    rebuild), with the Go release Kubernetes ``version`` was built with."""
    csi_images = formula_defaults()["csi"]["images"]
    if cloud_provider.release(version) is None or (
            cloud_provider.built(path) and csi.built(path, csi_images, version)):
        return
    go = _go()
    build = Build(_Title(version), path, log_path(version))
    info = _download(build, go, _go_env("local"), f"{MODULE}@{version}")
    toolchain = "go" + (Path(info["Dir"]) / ".go-version").read_text().strip()
    cloud_provider.ensure(build, go, _go_env(toolchain), path, version,
                          formula_defaults()["ccm"]["image"])
    csi.ensure(build, go, _go_env(toolchain), _go_env("local"), path, version, csi_images)


def _go_env(toolchain):
    return provider.go_env(toolchain, "-mod=mod -trimpath -buildvcs=false")


def _steps(build, go, version, out):
    work = out / "src"
    bindir = out / "bin"
    bindir.mkdir()
    with build.stage("download the source"):
        info = _download(build, go, _go_env("local"), f"{MODULE}@{version}")
        toolchain = "go" + (Path(info["Dir"]) / ".go-version").read_text().strip()
        shutil.copytree(info["Dir"], work / "kubernetes", symlinks=True)
        _as_module_build(work / "kubernetes", version)
    env = _go_env(toolchain)
    meta = json.loads(Path(info["Info"]).read_text())
    # the proxy names the commit of some releases only (v1.31.4 yes, v1.32.13 no)
    ldflags = _ldflags(version, (info.get("Origin") or {}).get("Hash", ""), meta["Time"])
    # One go build for all: each binary links while the others still compile (kubeadm
    # alone first, then the rest, took 342 s + 588 s on a fresh machine, the cores idle
    # through each link).
    with build.stage(f"{', '.join(COMMANDS)} with {toolchain}"):
        build.run(go, "build", "-tags", "providerless", "-ldflags", ldflags, "-o", bindir,
                  *[f"./cmd/{c}" for c in COMMANDS],
                  env=env, timeout=BUILD_TIMEOUT, cwd=work / "kubernetes")
    # kubeadm names the images, and so the etcd and CoreDNS versions.
    refs = _image_list(build, bindir / "kubeadm", version)
    etcd = refs["etcd"].rsplit(":", 1)[1].split("-")[0]
    with build.stage(f"etcd {etcd} (etcd, etcdctl, etcdutl) and pause"):
        mod = work / "extra"
        (mod / "etcd").mkdir(parents=True)
        (mod / "pause").mkdir()
        (mod / "etcd" / "main.go").write_text(ETCD_GO)
        (mod / "pause" / "main.go").write_text(PAUSE_GO % refs["pause"].rsplit(":", 1)[1])
        (mod / "go.mod").write_text(f"module kos.invalid/extra\n\ngo {_go_line(toolchain)}\n")
        build.run(go, "get", *[f"go.etcd.io/etcd/{d}/v3@v{etcd}"
                               for d in ("server", "etcdctl", "etcdutl")], env=env, cwd=mod)
        build.run(go, "build", "-ldflags=-s -w", "-o", bindir, "./etcd", "./pause",
                  "go.etcd.io/etcd/etcdctl/v3", "go.etcd.io/etcd/etcdutl/v3",
                  env=env, timeout=BUILD_TIMEOUT, cwd=mod)
    coredns = refs["coredns"].rsplit(":", 1)[1]
    with build.stage(f"CoreDNS {coredns}"):
        build.run(go, "install", "-ldflags=-s -w", f"github.com/coredns/coredns@{coredns}",
                  env={**env, "GOBIN": str(bindir), "GOFLAGS": "-trimpath -buildvcs=false"},
                  timeout=BUILD_TIMEOUT, cwd=out)
    missing = [b for spec in IMAGES.values() for b in spec["bin"] if not (bindir / b).exists()]
    missing += [c for c in COMMANDS if not (bindir / c).exists()]
    if missing:
        build.fail(f"the builds wrote no {', '.join(missing)}")
    shutil.rmtree(work, ignore_errors=True)
    with build.stage("images"):
        (out / "images").mkdir()
        for name, ref in refs.items():
            write_image(out / "images" / f"{name}.tar", ref, IMAGES[name], bindir)
    with build.stage("Debian packages and their repository"):
        debrepo.write_repository(build, out / "deb", version, bindir,
                                 package_version(version), keyring_name())


def _go_line(toolchain):
    """``1.22`` for go1.22.9: the go directive of a helper module."""
    return ".".join(toolchain[2:].split(".")[:2])


def _download(build, go, env, spec):
    return json.loads(build.output(go, "mod", "download", "-json", spec, env=env,
                                   timeout=BUILD_TIMEOUT, cwd="/"))


def _as_module(src):
    """A copy of a module's source made writable and built as a module: without the
    workspace and ``vendor/`` (a module's zip leaves the vendored sources out; its
    dependencies come through the proxy)."""
    for p in (src / "go.work", src / "go.work.sum"):
        p.unlink(missing_ok=True)
    shutil.rmtree(src / "vendor", ignore_errors=True)
    for p in src.rglob("*"):
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o200)


def build_command(build, go, env, module, version, command, work, ldflags=()):
    """``go build`` of ``./cmd/<command>`` of ``module@version`` into ``work/bin`` (``work``:
    a scratch directory the caller removes), as one stage of ``build``."""
    bindir = Path(work) / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    with build.stage(f"{command} {version}"):
        src = Path(work) / f"src-{command}"
        # a go.mod's replace directives rule out ``go install module@version``
        info = _download(build, go, env, f"{module}@{version}")
        shutil.copytree(info["Dir"], src, symlinks=True)
        _as_module(src)
        build.run(go, "build", "-ldflags", " ".join(["-s", "-w", *ldflags]),
                  "-o", bindir, f"./cmd/{command}", env=env, timeout=BUILD_TIMEOUT, cwd=src)
    return bindir / command


def _as_module_build(src, version):
    """The module zip is the repository without ``staging/``: build against the published
    staging modules (``k8s.io/api v0.31.4`` for v1.31.4) instead of the workspace."""
    _as_module(src)
    staging = "v0." + version.split(".", 1)[1]
    gomod = src / "go.mod"
    # The sample-* modules are examples no command imports, and the proxy does not serve
    # every release of them (v0.32.13: 403): out of the module graph.
    text = re.sub(r"(?m)^\s*k8s\.io/sample-[\w.-]+ (v0\.0\.0|=> \./staging/\S+)\n", "",
                  gomod.read_text())
    text = re.sub(r"(?m)^(\s*)(k8s\.io/[\w.-]+) => \./staging/src/k8s\.io/[\w.-]+$",
                  rf"\1\2 => \2 {staging}", text)
    gomod.write_text(text)


def _ldflags(version, commit, when):
    major, minor = version.lstrip("v").split(".")[:2]
    fields = {"gitVersion": version, "gitMajor": major, "gitMinor": minor,
              "gitCommit": commit, "gitTreeState": "clean", "buildDate": when[:19] + "Z"}
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.{k}={v}" for k, v in fields.items()]
    return " ".join(flags)


def _image_list(build, kubeadm, version):
    """``{short name: full reference}`` as kubeadm pulls them."""
    listed = build.output(kubeadm, "config", "images", "list", "--kubernetes-version", version,
                          timeout=60)
    refs = {}
    for ref in listed.split():
        name = ref.rsplit("/", 1)[1].split(":")[0]
        if name not in IMAGES:
            build.fail(f"kubeadm lists an image kos does not build: {ref}")
        refs[name] = ref
    return refs


# -- images ----------------------------------------------------------------------------------


def _tar_add(tar, name, data=None, mode=0o755, link=None, kind=None):
    info = tarfile.TarInfo(name.lstrip("/"))
    info.mtime = 0
    info.uid = info.gid = 0
    if kind == "dir":
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
    elif link is not None:
        info.type, info.linkname = tarfile.SYMTYPE, link
        tar.addfile(info)
    else:
        info.size, info.mode = len(data), mode
        tar.addfile(info, io.BytesIO(data))


def _libraries(program):
    """The shared libraries ``program`` loads (ldd), with the loader."""
    res = subprocess.run(["ldd", program], capture_output=True, text=True)
    libs = []
    for line in res.stdout.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


def _add_libraries(files, program):
    """``program``'s libraries into ``files``: each real file, and a link where ldd names it
    by another path."""
    for lib in _libraries(program):
        real = os.path.realpath(lib)
        files.setdefault(real, (Path(real).read_bytes(), 0o755))
        if lib != real:
            files.setdefault(lib, "->" + real)


def host_programs(names, search="/usr/sbin:/sbin:/usr/bin"):
    """``{/usr/sbin/<name>: (bytes, mode) | "->target"}``: this machine's programs of
    ``names`` found on ``search``, with the libraries they load, for an image's layer."""
    files = {}
    for name in names:
        path = shutil.which(name, path=search)
        if not path:
            continue
        files[f"/usr/sbin/{name}"] = (Path(path).read_bytes(), 0o755)
        _add_libraries(files, path)
    return files


def _iptables_files():
    """``{path in image: (bytes, mode) | "->target"}``: Debian's iptables (nft and legacy
    backends, as kube-proxy's own image ships both) and conntrack, with their libraries."""
    files = host_programs(IPTABLES_PROGRAMS)
    for name in IPTABLES_NAMES:
        files[f"/usr/sbin/{name}"] = "->xtables-nft-multi"
    for name in ("iptables", "iptables-save", "iptables-restore"):
        files[f"/usr/sbin/{name}-legacy"] = "->xtables-legacy-multi"
        files[f"/usr/sbin/{name}-nft"] = "->xtables-nft-multi"
    # the xtables extensions iptables loads at run time, with what they load (libm: the
    # statistic match kube-proxy balances services with)
    for ext in Path("/usr/lib/x86_64-linux-gnu/xtables").glob("*.so"):
        files[str(ext)] = (ext.read_bytes(), 0o644)
        _add_libraries(files, str(ext))
    return files


def _layer(spec, bindir):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = set()
        where = spec.get("bin_dir", "/usr/local/bin").rstrip("/")
        entries = {f"{where}/{b}": ((bindir / b).read_bytes(), 0o755) for b in spec["bin"]}
        if spec.get("iptables"):
            entries.update(_iptables_files())
        entries.update(spec.get("files", {}))
        entries["/etc/passwd"] = (b"root:x:0:0:root:/root:/sbin/nologin\n", 0o644)
        entries["/etc/group"] = (b"root:x:0:\n", 0o644)
        entries["/tmp/.keep"] = (b"", 0o644)
        for path in sorted(entries):
            parts = Path(path).parent.parts[1:]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    _tar_add(tar, d, kind="dir")
            value = entries[path]
            if isinstance(value, str):
                _tar_add(tar, path, link=value[2:])
            else:
                _tar_add(tar, path, value[0], mode=value[1])
    return buf.getvalue()


def write_image(target, ref, spec, bindir):
    """A docker-archive (``docker save`` format, which ``ctr images import`` reads) with one
    layer, named by the full reference kubeadm expects."""
    layer = _layer(spec, bindir)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": {"Env": [f"PATH={IMAGE_PATH}"], "WorkingDir": "/",
                   **({"Entrypoint": spec["entrypoint"]} if "entrypoint" in spec else {})},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "kos_local.kubernetes"}],
    }
    config_blob = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_blob).hexdigest() + ".json"
    layer_dir = diff_id.split(":")[1]
    manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": [f"{layer_dir}/layer.tar"]}]
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w") as tar:
        _tar_add(tar, layer_dir, kind="dir")
        _tar_add(tar, f"{layer_dir}/layer.tar", layer, mode=0o644)
        _tar_add(tar, config_name, config_blob, mode=0o644)
        _tar_add(tar, "manifest.json", json.dumps(manifest).encode(), mode=0o644)
    os.replace(partial, target)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # Started from a shell's background job, this process inherits SIGINT ignored: the
    # prebuild's and kos's interrupt would not stop it, nor run its cleanup.
    take_interrupts()
    try:
        path = ensure(UPGRADE_TARGET if argv[:1] == ["--next"] else (argv[0] if argv else None))
    except KosError as exc:
        ui.error(exc.problem, exc.fix, exc.details)
        return exc.exit_code
    except KeyboardInterrupt:
        ui.warn("interrupted: the half-made build is removed; a re-run starts it again")
        return EXIT_INTERRUPTED
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
