{#- Leave the cluster, then remove the snap and the published join file. #}
{%- from "microk8s/map.jinja" import microk8s with context %}

microk8s-clean-cmd-leave:
  cmd.run:
    - name: microk8s leave
    - onlyif: test -e {{ microk8s.snap_data }}/var/lock/no-cert-reissue

microk8s-clean-file-absent-join_file:
  file.absent:
    - name: {{ microk8s.join_file }}

microk8s-clean-snap-removed:
  snap.removed:
    - name: microk8s
    - require:
      - cmd: microk8s-clean-cmd-leave
