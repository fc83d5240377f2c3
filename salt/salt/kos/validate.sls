{#- Runs first in every highstate: bad pillar stops the run before anything changes. #}
kos-validate-kos-pillar_valid:
  kos.pillar_valid:
    - name: pillar
    - failhard: True
    - order: 1
