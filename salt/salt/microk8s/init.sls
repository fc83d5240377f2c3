{#- Every microk8s node: the snap from the pinned channel, running and ready. #}
{%- from "microk8s/map.jinja" import microk8s with context %}

microk8s-init-snap-installed:
  snap.installed:
    - name: microk8s
    - channel: {{ microk8s.channel }}
    - classic: True
    # The microk8s module only loads once the command exists.
    - reload_modules: True

microk8s-init-microk8s-running:
  microk8s.running:
    - name: microk8s
    - timeout: {{ microk8s.ready_timeout }}
    - require:
      - snap: microk8s-init-snap-installed
