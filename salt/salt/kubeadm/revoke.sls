{#- On the issuer (the first control plane, or the joined control plane orch.deploy
    names while a rebuilt first control plane rejoins): revoke the join credentials of
    the nodes the orchestration names (kos_orchestration:join_nodes), once they joined
    or their wave ended: their tokens, a control plane's kubeadm-certs Secret, the files
    and the mine entries. With no list, every credential issued here and every token
    marked as kos's. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}

kubeadm-revoke-kubeadm_join-credentials_absent:
  kubeadm_join.credentials_absent:
    - name: join credentials
    - nodes: {{ salt['pillar.get']('kos_orchestration:join_nodes', None) | tojson }}
    - description: {{ kubeadm.token_description | tojson }}
    - kube_dir: {{ kubeadm.kube_dir }}
