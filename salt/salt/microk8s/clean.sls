{#- Undo the microk8s formula in reverse order: leave the cluster, remove the snap (its
    data, SNAP_COMMON and the launch configuration go with it), then what this formula
    wrote outside the snap. #}
{%- from "microk8s/map.jinja" import microk8s with context %}

microk8s-clean-microk8s-cluster_left:
  microk8s.cluster_left:
    - name: microk8s

microk8s-clean-snap-removed:
  snap.removed:
    - name: microk8s
    - require:
      - microk8s: microk8s-clean-microk8s-cluster_left

microk8s-clean-file-absent-launch_config:
  file.absent:
    - name: {{ microk8s.snap_common }}/.microk8s.yaml
    - require:
      - snap: microk8s-clean-snap-removed

microk8s-clean-file-absent-published:
  file.absent:
    - names:
      - {{ microk8s.join_dir }}
      - {{ microk8s.addons_record }}
    - require:
      - snap: microk8s-clean-snap-removed
