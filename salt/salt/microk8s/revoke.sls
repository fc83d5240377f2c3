{#- On the issuer (the first control plane, or the joined control plane orch.deploy
    names while a rebuilt first control plane rejoins): revoke the join credentials of
    the nodes the orchestration names (kos_orchestration:join_nodes), once they joined
    or their wave ended; with no list, every credential issued here. #}
{%- from "microk8s/map.jinja" import microk8s with context %}

microk8s-revoke-microk8s-join_credentials_absent:
  microk8s.join_credentials_absent:
    - name: join credentials
    - nodes: {{ salt['pillar.get']('kos_orchestration:join_nodes', None) | tojson }}
    - snap_data: {{ microk8s.snap_data }}
