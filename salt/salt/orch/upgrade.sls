{#- salt-run state.orchestrate orch.upgrade [pillar='{"version": "1.32/stable"}']

    Moves a cluster to another Kubernetes version, one node at a time: the first control
    plane, the other control planes, then the workers. A node that fails stops the run; the
    nodes after it are left as they were. A re-run continues: nodes already on the target
    are skipped, a node whose upgrade started and did not finish (it notes that) is
    finished, uncordon included. A node the operator had cordoned before the upgrade is
    drained and upgraded like the others and stays cordoned. Before anything changes every
    node answers (the silent ones are named), and the target is checked against what each
    node runs: one minor version at a time, never down.

    microk8s: each node drained from a control plane, its snap refreshed to the new channel
    and running again, seen Ready on the new version, uncordoned (snap revert microk8s is
    the way back).
    kubeadm: orch/upgrade-kubeadm.jinja (kubeadm upgrade apply on the first control plane,
    upgrade node on the others, the packages moved and held, the kubelet restarted).

    version:          microk8s: the channel (1.32/stable) or track (1.32, meaning
                      1.32/stable); default microk8s:channel of the first control plane's
                      pillar. kubeadm: the release (v1.32.1); default kubeadm:version of
                      the first control plane's pillar.
    package_version:  kubeadm only: the Debian package version of that release (default
                      kubeadm:package_version when version is the pillar's, else
                      <version>-1.1).
    drain_timeout:    seconds a node's Pod evictions may take (default 300).
    ready_timeout:    seconds an upgraded node has to be Ready again (default 300). #}
{%- import_yaml "microk8s/defaults.yaml" as microk8s_defaults %}
{%- from "orch/sync.jinja" import sync with context %}
{%- set kos = salt['pillar.get']('kos', {}) %}
{%- from "kos/map.jinja" import kos as deployment, distribution_error with context %}
{%- set distribution = raise(distribution_error) if distribution_error else deployment.distribution %}
{%- set nodes = kos.get('nodes', {}) %}
{%- set first = kos.get('first_control_plane') %}
{%- set others = nodes | dictsort | selectattr('1.role', 'equalto', 'control_plane') | map(attribute='0') | reject('equalto', first) | list %}
{%- set workers = nodes | dictsort | selectattr('1.role', 'equalto', 'worker') | map(attribute='0') | list %}
{%- set control_planes = ([first] if first else []) + others %}
{%- set order = control_planes + workers %}
{%- set version = salt['pillar.get']('version', None) %}
{%- set drain_timeout = salt['pillar.get']('drain_timeout', 300) %}
{%- set ready_timeout = salt['pillar.get']('ready_timeout', 300) %}
{%- set package_version = salt['pillar.get']('package_version', None) %}
{%- set problems = [] %}
{%- if distribution == 'kubeadm' %}
{%- if version is not none and (version is not string or not (version | regex_match('^v?(\\d+)\\.(\\d+)\\.(\\d+)$'))) %}
{%- do problems.append("pillar key 'version' must be a Kubernetes release such as v1.32.1, got " ~ version | tojson) %}
{%- endif %}
{%- if package_version is not none and (package_version is not string or not (package_version | regex_match('^\\d+\\.\\d+\\.\\d+-\\S+$'))) %}
{%- do problems.append("pillar key 'package_version' must be a Debian package version such as 1.32.1-1.1, got " ~ package_version | tojson) %}
{%- endif %}
{%- elif version is not none and (version is not string or not (version | regex_match('^(\\d+\\.\\d+)(/(stable|candidate|beta|edge))?$'))) %}
{%- do problems.append("pillar key 'version' must be a microk8s track such as 1.32 or a channel such as 1.32/stable, got " ~ version | tojson) %}
{%- endif %}
{%- for key, value in [('drain_timeout', drain_timeout), ('ready_timeout', ready_timeout)] %}
{%- if value is not number or value is sameas true or value is sameas false or value < 1 %}
{%- do problems.append("pillar key '" ~ key ~ "' must be a number of seconds, at least 1, got " ~ value | tojson) %}
{%- endif %}
{%- endfor %}
{%- if not order %}
{%- do problems.append("the pillar names no Kubernetes node (kos:nodes): nothing to upgrade") %}
{%- endif %}
{%- if problems %}

kos-orch-upgrade-options:
  test.fail_without_changes:
    - name: {{ problems | join('; ') | tojson }}
{%- elif distribution == 'kubeadm' %}
{%- include "orch/upgrade-kubeadm.jinja" %}
{%- else %}
{%- set answers = salt['saltutil.cmd'](order, 'microk8s.upgrade_facts', tgt_type='list', timeout=30) %}
{%- set facts = {} %}
{%- for node in order %}
{%- set ret = (answers.get(node) or {}).get('ret') %}
{%- if ret is mapping and ret.get('tracking') %}
{%- do facts.update({node: ret}) %}
{%- endif %}
{%- endfor %}
{%- set silent = order | reject('in', facts) | list %}
{%- if silent %}

kos-orch-upgrade-silent:
  test.fail_without_changes:
    - name: {{ ("nothing changed: " ~ silent | join(', ') ~ " did not say what it runs (microk8s.upgrade_facts); "
                ~ "bring them back (salt-key, salt-minion, the snap) and re-run") | tojson }}
{%- else %}
{%- set wanted = version or facts[first].get('channel') or microk8s_defaults.channel %}
{%- set channel = wanted if '/' in wanted else wanted ~ '/stable' %}
{%- set track = channel.split('/')[0] %}
{%- set target = track.split('.') | map('int') | list %}
{%- set refused = [] %}
{%- for node in order %}
{%- set running = facts[node].tracking.split('/')[0] %}
{%- set have = running.split('.') | map('int') | list if running | regex_match('^\\d+\\.\\d+$') else none %}
{%- if have is none %}
{%- do refused.append(node ~ " tracks " ~ facts[node].tracking ~ ", not a numbered track: move it to one by hand "
                       ~ "(snap refresh microk8s --channel=<track>/stable)") %}
{%- elif have[0] != target[0] or have[1] > target[1] %}
{%- do refused.append(node ~ " runs " ~ running ~ " (" ~ facts[node].version ~ "); " ~ channel
                       ~ " is older: kos does not downgrade (snap revert microk8s on each node is the way back)") %}
{%- elif have[1] < target[1] - 1 %}
{%- set between = target[0] ~ "." ~ (have[1] + 1) %}
{%- do refused.append(node ~ " runs " ~ running ~ "; " ~ channel ~ " would skip " ~ between
                       ~ ": microk8s upgrades one minor version at a time, upgrade to " ~ between ~ "/stable first") %}
{%- endif %}
{%- endfor %}
{%- if refused %}

kos-orch-upgrade-version:
  test.fail_without_changes:
    - name: {{ ("nothing changed: " ~ refused | join('; ')) | tojson }}
{%- else %}
{%- set todo = [] %}
{%- for node in order if facts[node].tracking != channel or facts[node].pending %}
{%- do todo.append(node) %}
{%- endfor %}
{#- Nodes the operator cordoned stay cordoned: as the first control plane sees them now,
    or, for a node whose upgrade had started (and drained it), as its note says. #}
{%- set seen = (salt['saltutil.cmd']([first], 'microk8s.nodes', tgt_type='list', timeout=30).get(first) or {}).get('ret') %}
{%- if todo and seen is not mapping %}

kos-orch-upgrade-nodes:
  test.fail_without_changes:
    - name: {{ ("nothing changed: " ~ first ~ " did not list the cluster's nodes (microk8s.nodes): " ~ seen | string) | tojson }}
{%- elif not todo %}

kos-orch-upgrade-nothing:
  test.succeed_without_changes:
    - name: {{ ("every node tracks " ~ channel) | tojson }}
{%- else %}
{%- set last = [] %}
{#- The states this run uses, as this master serves them. #}
{{ sync('kos-orch-upgrade', order, last) }}
{%- for node in todo %}
{#- Another control plane drains and watches the node where there is one: it answers
    while this one refreshes. #}
{%- set observer = ((control_planes | reject('equalto', node) | list) + [first]) | first %}
{#- The Kubernetes node's name is its host name: the minion id's first label. #}
{%- set name = node.split('.')[0] | lower %}
{%- set cordoned = facts[node].pending_cordoned if facts[node].pending else (seen.get(name) or {}).get('unschedulable', False) %}
{%- set upgrade = {'node': name, 'channel': channel, 'track': track, 'drain_timeout': drain_timeout, 'ready_timeout': ready_timeout,
                   'cordoned': cordoned} %}
{%- for step, tgt in [('drain', observer), ('refresh', node), ('uncordon', observer), ('done', node)] %}

kos-orch-upgrade-{{ node }}-{{ step }}:
  salt.state:
    - tgt: {{ tgt }}
    - sls: microk8s.upgrade.{{ step }}
    - queue: True
    - pillar:
        kos_upgrade: {{ upgrade | tojson }}
    - require:
      - salt: {{ last[-1] }}
{%- do last.append('kos-orch-upgrade-' ~ node ~ '-' ~ step) %}
{%- endfor %}
{%- endfor %}
{%- endif %}
{%- endif %}
{%- endif %}
{%- endif %}
