{#- Roles come from the pillar (kos:roles, derived from the Terraform layer), the
    distribution from kos:distribution (Terraform's kubernetes_distribution).
    Nothing below uses a pillar value the validator has not passed: on an invalid pillar
    only kos.validate runs, and fails naming the key and the fix, where a template would
    otherwise fail with a traceback or "No matching sls found". Before the extension is
    installed (kos.validate installs the master's release first) the validator is not loaded
    yet; the distribution is then checked here, and kos.validate runs first as always. #}
{%- from "kos/map.jinja" import kos with context %}
{%- if 'kos.pillar_errors' in salt %}
{%- set valid = not salt['kos.pillar_errors']() %}
{%- else %}
{%- set valid = kos.distribution in ('microk8s', 'kubeadm') %}
{%- endif %}
base:
  '*':
    - kos.validate
{%- if valid %}
    - core
    - file_transfer
    {#- last: notes what the run was made of, for the orchestration's next wave #}
    - kos.converged
{%- if kos.roles %}
  '{{ grains['id'] }}':
{%- if 'salt_master' in kos.roles %}
    - salt_master
{%- endif %}
{%- if 'bastion' in kos.roles %}
    - bastion
{%- endif %}
{#- A rebuilt first control plane rejoins through the issuer orch.deploy names. #}
{%- if 'first_control_plane' in kos.roles and kos.initialises %}
    - {{ kos.distribution }}.master
{%- elif 'control_plane' in kos.roles or 'worker' in kos.roles %}
    - {{ kos.distribution }}.joined
{%- endif %}
{%- endif %}
{%- endif %}
