{#- salt/minion/<id>/start, on the master (salt_master:reactor). The runner kos_reactor
    (saltext.kos.runners.kos_reactor, installed with the extension) decides from
    the master's caches whether the minion needs converging (a Kubernetes node of this
    deployment that has not joined, once its cluster is up) and runs orch.deploy for it;
    anything else is logged. Rendered on every minion start, and every minion starts
    again when the master restarts: nothing here asks more of the master than the event. #}

kos-reactor-start:
  runner.kos_reactor.started:
    - args:
      - minion: {{ data.get('id', '') | tojson }}
