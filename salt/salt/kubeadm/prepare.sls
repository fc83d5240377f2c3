{#- Node preparation: container runtime and pinned Kubernetes packages, kernel
    modules and sysctls the kubelet and kube-router need, swap off. Each part can be
    switched off (kubeadm:manage) where an image or the test machine owns it. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}

kubeadm-prepare-file-directory-kube_dir:
  file.directory:
    - name: {{ kubeadm.kube_dir }}
    - mode: '0755'
    - makedirs: True
{%- if kubeadm.ccm.enabled and not kubeadm.provider_id %}

# Without its server's UUID the kubelet registers no provider ID, and the cloud controller
# cannot tell this node's server from another cluster's server of the same host name.
kubeadm-prepare-test-fail_without_changes-provider_id:
  test.fail_without_changes:
    - name: >-
        {{ kubeadm.ccm.instance_id_file }} holds no OpenStack instance UUID
        ({{ kubeadm.instance_id or 'missing or empty' }}): the cloud controller could not find
        this node's server. Boot the node with cloud-init on OpenStack, or set
        kubeadm:ccm:enabled to false where no cloud controller runs
{%- endif %}
{%- if kubeadm.manage.kernel_modules %}
{%- for module in kubeadm.kernel_modules %}

kubeadm-prepare-kmod-present-{{ module }}:
  kmod.present:
    - name: {{ module }}
    - persist: True
{%- endfor %}
{%- endif %}
{%- if kubeadm.manage.sysctl %}
{%- for name, value in kubeadm.sysctl | dictsort %}

kubeadm-prepare-sysctl-present-{{ name }}:
  sysctl.present:
    - name: {{ name }}
    - value: {{ value }}
    - config: /etc/sysctl.d/90-kos-kubernetes.conf
{%- if kubeadm.manage.kernel_modules %}
    # net.bridge.* exists only once br_netfilter is loaded
    - require:
{%- for module in kubeadm.kernel_modules %}
      - kmod: kubeadm-prepare-kmod-present-{{ module }}
{%- endfor %}
{%- endif %}
{%- endfor %}
{%- endif %}
{%- if kubeadm.manage.swap %}

# The kubelet refuses to start with swap on (kubeadm preflight: Swap).
kubeadm-prepare-cmd-run-swapoff:
  cmd.run:
    - name: swapoff -a
    - onlyif: test -n "$(swapon --show --noheadings)"

kubeadm-prepare-file-replace-fstab-swap:
  file.replace:
    - name: /etc/fstab
    - pattern: '^([^#\s]\S*\s+\S+\s+swap\s.*)$'
    - repl: '# \1  # kos: swap off for the kubelet'
    - ignore_if_missing: True
{%- endif %}
{%- if kubeadm.manage.packages %}

kubeadm-prepare-pkgrepo-managed-kubernetes:
  pkgrepo.managed:
    - name: deb [signed-by={{ kubeadm.repo.keyring }}] {{ kubeadm.repo.url }} /
    - file: /etc/apt/sources.list.d/kubernetes.list
    - key_url: {{ kubeadm.repo.key_url }}
    - aptkey: False

kubeadm-prepare-pkg-installed-containerd:
  pkg.installed:
    - name: containerd

kubeadm-prepare-file-managed-containerd_config:
  file.managed:
    - name: /etc/containerd/config.toml
    - source: salt://kubeadm/files/containerd-config.toml.jinja
    - template: jinja
    - makedirs: True
    - require:
      - pkg: kubeadm-prepare-pkg-installed-containerd

{#- A node kubeadm set up (kubelet.conf) keeps the version it runs: moving its kubelet here,
    behind the drain and the control plane's upgrade, would break the version skew policy
    (no kubelet newer than the API server). kos upgrade moves it; a new node installs the
    pillar's version, which the operator moved with the cluster. #}
{%- set joined = salt['file.file_exists'](kubeadm.kube_dir ~ '/kubelet.conf') %}
{%- set installed = salt['pkg.version']('kubeadm') if joined and 'pkg.version' in salt else '' %}

kubeadm-prepare-pkg-installed-kubernetes:
  pkg.installed:
{%- if joined %}
    - pkgs:
      - kubelet
      - kubeadm
      - kubectl
{%- else %}
    - pkgs:
      - kubelet: {{ kubeadm.package_version }}
      - kubeadm: {{ kubeadm.package_version }}
      - kubectl: {{ kubeadm.package_version }}
    - update_holds: True
{%- endif %}
    # an unattended upgrade must not move the cluster to another version
    - hold: True
    # the kubeadm execution module loads only once the command exists
    - reload_modules: True
    - require:
      - pkgrepo: kubeadm-prepare-pkgrepo-managed-kubernetes
{%- if installed and installed != kubeadm.package_version | string %}

kubeadm-prepare-test-succeed_without_changes-kubernetes_version:
  test.succeed_without_changes:
    - name: {{ ("kubelet, kubeadm and kubectl stay at " ~ installed ~ " (held): this node has joined the "
                ~ "cluster and moves with kos upgrade (salt-run state.orchestrate orch.upgrade), "
                ~ "not with a highstate; the pillar names " ~ kubeadm.package_version) | tojson }}
    - require:
      - pkg: kubeadm-prepare-pkg-installed-kubernetes
{%- endif %}
{%- endif %}
{%- if kubeadm.manage.services %}

kubeadm-prepare-service-running-containerd:
  service.running:
    - name: containerd
    - enable: True
{%- if kubeadm.manage.packages %}
    - watch:
      - file: kubeadm-prepare-file-managed-containerd_config
{%- endif %}

# kubeadm starts the kubelet itself once init or join wrote its configuration.
kubeadm-prepare-service-enabled-kubelet:
  service.enabled:
    - name: kubelet
{%- endif %}
{%- if kubeadm.images.archive_dir %}

# No registry: kubeadm finds every image it would pull already in containerd.
kubeadm-prepare-kubeadm_node-images_imported:
  kubeadm_node.images_imported:
    - name: {{ kubeadm.images.archive_dir }}
{%- if kubeadm.manage.services %}
    - require:
      - service: kubeadm-prepare-service-running-containerd
{%- endif %}
{%- endif %}
