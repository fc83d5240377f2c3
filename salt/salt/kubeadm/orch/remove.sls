{#- salt-run state.orchestrate kubeadm.orch.remove pillar='{"kubeadm_remove": ["k8s-worker-2.prod.example.com"]}'
    Takes nodes out of the cluster one at a time, as kubeadm documents it: drain
    (on the first control plane), kubeadm reset (on the node: its kubelet stops, a
    control plane leaves etcd), delete the Node object (on the first control plane;
    before the reset the kubelet would register it again). Remove the node from
    the Terraform layer afterwards, or the next deploy joins it again. #}
{%- set kos = salt['pillar.get']('kos', {}) %}
{%- set first = kos.get('first_control_plane') %}
{%- set targets = salt['pillar.get']('kubeadm_remove', []) %}
{%- set last = [] %}
{%- for target in targets if target != first %}
{%- set node = target.split('.')[0] | lower %}
{%- for step, tgt, sls in [('drain', first, 'kubeadm.drain'), ('reset', target, 'kubeadm.reset'), ('delete', first, 'kubeadm.delete')] %}

kubeadm-orch-remove-{{ step }}-{{ node }}:
  salt.state:
    - tgt: {{ tgt }}
    - sls: {{ sls }}
    - pillar:
        kubeadm_node: {{ node }}
{%- if last %}
    - require:
      - salt: {{ last[-1] }}
{%- endif %}
{%- do last.append('kubeadm-orch-remove-' ~ step ~ '-' ~ node) %}
{%- endfor %}
{%- endfor %}
{%- if first in targets %}

kubeadm-orch-remove-refused-{{ first.split('.')[0] }}:
  test.fail_without_changes:
    - name: the first control plane holds the join credentials and cannot be removed this way
{%- endif %}
