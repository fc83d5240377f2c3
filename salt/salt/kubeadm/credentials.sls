{#- Join credentials in the mine, issued only while some node still has to join:
    a short-lived bootstrap token with the CA hash (kos_join, Kubernetes nodes) and,
    while a control plane has to join, the certificate key (kos_join_control_plane,
    control planes only). The orchestration applies this before every join wave and
    kubeadm.revoke after the last one.
    `order: last`: inside a highstate this runs after kubeadm init, applied on its
    own it needs nothing else. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}

kubeadm-credentials-kubeadm-token_present:
  kubeadm.token_present:
    - name: {{ kubeadm.join_file }}
    - ttl: {{ kubeadm.token.ttl }}
    - min_remaining: {{ kubeadm.token.min_remaining }}
    - description: {{ kubeadm.token_description | tojson }}
    - wanted_nodes: {{ kubeadm.node_names.values() | sort | tojson }}
    - control_planes: {{ kubeadm.control_plane_names | sort | tojson }}
    - stacked_etcd: {{ kubeadm.stacked_etcd }}
    - ca_file: {{ kubeadm.kube_dir }}/pki/ca.crt
    - kube_dir: {{ kubeadm.kube_dir }}
    - order: last

kubeadm-credentials-kubeadm-certificate_key_present:
  kubeadm.certificate_key_present:
    - name: {{ kubeadm.control_plane_join_file }}
    - min_remaining: {{ kubeadm.certificate_key.min_remaining }}
    - wanted_nodes: {{ kubeadm.control_plane_names | sort | tojson }}
    - stacked_etcd: {{ kubeadm.stacked_etcd }}
    - config: {{ kubeadm.config_file }}
    - kube_dir: {{ kubeadm.kube_dir }}
    - order: last

kubeadm-credentials-module-run-mine-update:
  module.run:
    - mine.update: []
    - onchanges:
      - kubeadm: kubeadm-credentials-kubeadm-token_present
      - kubeadm: kubeadm-credentials-kubeadm-certificate_key_present
    - order: last
