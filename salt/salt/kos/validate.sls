{#- Runs first in every highstate, once the minion has the master's release of the extension
    that judges it: bad pillar stops the run before anything changes. #}
include:
  - kos.extension

kos-validate-kos-pillar_valid:
  kos.pillar_valid:
    - name: pillar
    - failhard: True
    - order: 1
    - require:
      - sls: kos.extension
