# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.kos-installed

# Debian packages the tests and the demo use (network namespaces, certificates,
# the iptables the bastion's states drive, the haproxy in front of kubeadm control
# planes, sshd for the bastion hop of `kos converge`, rsync for gitlab-ci-local,
# systemd-nspawn and debootstrap for the local rehearsal cloud, xfsprogs for the
# rehearsal's Cinder CSI image).
SYSTEM_PACKAGES := iproute2 openssl iptables haproxy openssh-server openssh-client rsync \
	systemd-container debootstrap xfsprogs

.PHONY: all venv sysdeps test demo demo-down pipeline clean

all: venv

venv: $(STAMP)

# What make installs on this machine, a line each ("<epoch> <what>"), for `make demo` to say.
INSTALLED_LOG := .kos/installed.log

$(STAMP): pyproject.toml saltext/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ./saltext -e '.[test]'
	touch $@
	@mkdir -p $(dir $(INSTALLED_LOG)) && echo "$$(date +%s) $(VENV)/: kos and its Python dependencies (pip)" >> $(INSTALLED_LOG)

# Installs only what is missing; needs root (the tests need it anyway).
sysdeps:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing && \
		mkdir -p $(dir $(INSTALLED_LOG)) && echo "$$(date +%s) Debian packages: "$$missing" (apt-get)" >> $(INSTALLED_LOG); \
	fi

# Three processes, one directory of tests at a time each (tests/conftest.py groups and
# orders them): the end-to-end cluster, which mostly waits on boots and Salt, in one while
# the other two share out the rest.
# PYTEST_PARALLEL= runs everything in one process.
PYTEST_PARALLEL ?= -n 3 --dist loadgroup
test: $(STAMP) sysdeps
	$(BIN)/pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# When make started, for the demo's time per phase (set before any recipe runs).
demo: export KOS_MAKE_STARTED := $(shell date +%s)
demo: $(STAMP) sysdeps
	$(BIN)/python -m kos.demo

demo-down: $(STAMP)
	$(BIN)/python -m kos.demo down

# The pipeline's jobs for one environment, run here by gitlab-ci-local (docs/environments.md, "Run the
# pipeline locally"): make pipeline KOS_ENV=dev [PIPELINE_JOBS="validate plan:dev"]
KOS_ENV ?= dev
PIPELINE_JOBS ?= validate plan:$(KOS_ENV)
pipeline: $(STAMP)
	ci/local-pipeline.sh $(PIPELINE_ARGS) $(PIPELINE_JOBS)

clean:
	rm -rf $(VENV) .pytest_cache
