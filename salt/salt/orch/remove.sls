{#- salt-run state.orchestrate orch.remove pillar='{"remove": ["k8s-worker-2.prod.example.com"]}'

    Takes Kubernetes nodes out of the cluster for good, one at a time, workers first:
    drained from the first control plane; the node leaves (microk8s leave, or kubeadm
    reset: a control plane leaves dqlite or etcd); the first control plane forgets it
    (microk8s remove-node, or its Node object deleted); while the first control plane
    is itself replaced, the first other control plane that stays does all of this. A
    node that fails stops the run and the nodes after it stay. A re-run goes on where it
    stopped: every step is satisfied on a node that has left.

    The servers stay: kos up runs this for the nodes gone from Terraform's node set before
    Terraform destroys their servers, then deletes their salt keys; the next converge
    takes them out of every /etc/hosts.

    remove:         minion ids of Kubernetes nodes of this cluster (kos:nodes); the
                    first control plane only with replace, and never the only one; the
                    control planes left must stay an odd number (but see replace).
    force:          the nodes are gone and do not answer: skip the drain and their own
                    step (leave or reset) and forget them anyway (microk8s remove-node
                    --force; on kubeadm a control plane's etcd member is removed from the
                    first control plane). With force a node may be one Terraform no
                    longer lists (its server is gone; kos forget): the cluster forgets it
                    by name, and on kubeadm any etcd member of that name goes too.
    replace:        the nodes come back on new servers (kos up --replace): the control
                    planes may be left an even number meanwhile, but only one leaves at a
                    time, so etcd/dqlite keep their quorum. The first control plane may be
                    one of them: orch.deploy has it rejoin through another control plane.
    drain_timeout:  seconds a node's Pod evictions may take (default 300). #}
{%- from "orch/sync.jinja" import sync with context %}
{%- set kos = salt['pillar.get']('kos', {}) %}
{%- from "kos/map.jinja" import kos as deployment, distribution_error with context %}
{%- set distribution = raise(distribution_error) if distribution_error else deployment.distribution %}
{%- set nodes = kos.get('nodes', {}) %}
{%- set first = kos.get('first_control_plane') %}
{%- set remove = salt['pillar.get']('remove', []) %}
{%- set force = salt['pillar.get']('force', False) %}
{%- set replace = salt['pillar.get']('replace', False) %}
{%- set drain_timeout = salt['pillar.get']('drain_timeout', 300) %}
{%- set cps = nodes | dictsort | selectattr('1.role', 'equalto', 'control_plane') | map(attribute='0') | list %}
{#- Who drains and forgets: the first control plane, or while it is itself replaced the
    first control plane that stays. #}
{%- set removing = remove if remove is iterable and remove is not string and remove is not mapping else [] %}
{%- set others = cps | reject('equalto', first) | reject('in', removing) | list %}
{%- set issuer = others[0] if first in removing and replace is sameas true and others else first %}
{%- set problems = [] %}
{%- if remove is string or remove is mapping or remove is not iterable or not remove %}
{%- do problems.append("pillar key 'remove' must list the minion ids of the nodes to take out, got " ~ remove | tojson) %}
{%- else %}
{%- for node in remove %}
{%- if node == first and replace is not sameas true %}
{%- do problems.append(node ~ " is the first control plane: it stays (kos up --replace rebuilds it; a cluster never retires it)") %}
{%- elif node == first and not others %}
{%- do problems.append(node ~ " is the only control plane left: no other one keeps the cluster while it is rebuilt") %}
{%- elif node not in nodes and force is not sameas true %}
{%- do problems.append(node | tojson ~ " is not a Kubernetes node of this cluster (kos:nodes: " ~ nodes | list | sort | join(', ')
                        ~ "); one whose server is gone is forgotten with force: true (kos forget)") %}
{%- endif %}
{%- endfor %}
{#- the first control plane stays in any case (refused above when named, but replaced) #}
{%- set staying = cps | reject('in', remove | reject('equalto', first) | list) | list %}
{%- if replace is sameas true %}
{%- if remove | select('in', cps) | list | length > 1 %}
{%- do problems.append("replace control planes one at a time: " ~ remove | select('in', cps) | sort | join(', ')
                        ~ " would leave etcd/dqlite together and could take its quorum") %}
{%- endif %}
{%- elif staying | length % 2 == 0 %}
{%- do problems.append("the removal would leave " ~ staying | length ~ " control planes: keep an odd number "
                        ~ "so etcd/dqlite keep a quorum (take control planes out two at a time)") %}
{%- endif %}
{%- endif %}
{%- for key, value in [('force', force), ('replace', replace)] %}
{%- if value is not sameas true and value is not sameas false %}
{%- do problems.append("pillar key '" ~ key ~ "' must be true or false, got " ~ value | tojson) %}
{%- endif %}
{%- endfor %}
{%- if drain_timeout is not number or drain_timeout is sameas true or drain_timeout is sameas false or drain_timeout < 1 %}
{%- do problems.append("pillar key 'drain_timeout' must be a number of seconds, at least 1, got " ~ drain_timeout | tojson) %}
{%- endif %}
{%- if problems %}

kos-orch-remove-options:
  test.fail_without_changes:
    - name: {{ ("nothing changed: " ~ problems | join('; ')) | tojson }}
{%- else %}
{#- Workers first: a control plane leaving changes the datastore the others rely on. #}
{%- set order = remove | sort | list %}
{%- set order = (order | reject('in', cps) | list) + (order | select('in', cps) | list) %}
{%- set asked = [issuer] + ([] if force else order) %}
{%- set answers = salt['saltutil.cmd'](asked, 'test.ping', tgt_type='list', timeout=30) %}
{%- set silent = asked | reject('in', answers | list) | list %}
{%- if silent %}

kos-orch-remove-silent:
  test.fail_without_changes:
    - name: {{ ("nothing changed: " ~ silent | join(', ') ~ " did not answer; bring "
                ~ ("it" if silent | length == 1 else "them") ~ " back and re-run"
                ~ ("" if issuer in silent else ", or pass force: true for nodes whose servers are gone")) | tojson }}
{%- else %}
{%- set last = [] %}
{#- The states this run uses, as this master serves them. #}
{{ sync('kos-orch-remove', asked, last) }}
{%- for node in order %}
{%- set name = node.split('.')[0] | lower %}
{%- if distribution == 'kubeadm' %}
{%- set steps = [('drain', issuer, 'kubeadm.drain'), ('leave', node, 'kubeadm.reset')]
               + ([('forget-etcd', issuer, 'kubeadm.etcd_forget')] if force and (node in cps or node not in nodes) else [])
               + [('forget', issuer, 'kubeadm.delete')] %}
{%- else %}
{%- set steps = [('drain', issuer, 'microk8s.remove.drain'), ('leave', node, 'microk8s.remove.leave'), ('forget', issuer, 'microk8s.remove.forget')] %}
{%- endif %}
{#- A node that is gone neither leaves nor drains: its kubelet never confirms an eviction,
    and deleting its Node lets the Pod garbage collector free its Pods. #}
{%- for step, tgt, sls in steps if not (force and step in ('drain', 'leave')) %}

kos-orch-remove-{{ node }}-{{ step }}:
  salt.state:
    - tgt: {{ tgt }}
    - sls: {{ sls }}
    - queue: True
    - pillar:
        kubeadm_node: {{ name }}
        kos_remove: {{ {'node': name, 'force': force, 'drain_timeout': drain_timeout,
                        'peer_url': ('https://' ~ nodes[node].ip ~ ':2380') if node in nodes else None} | tojson }}
    - require:
      - salt: {{ last[-1] }}
{%- do last.append('kos-orch-remove-' ~ node ~ '-' ~ step) %}
{%- endfor %}
{%- endfor %}
{%- endif %}
{%- endif %}
