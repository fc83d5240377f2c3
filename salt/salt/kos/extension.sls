{#- The Salt extension kos's states and modules come from (saltext.kos), the release this
    master serves at salt://kos/release/ (saltext.kos.utils.kos_release): its wheels are
    fetched from the master with their SHA-256 checked and installed with no package index
    into the Python that runs this minion (salt-pip under the onedir). A minion that has the
    release's version already changes nothing; after an install, the modules are reloaded
    for the rest of the run. kos converge publishes the release with the formula; a master
    of your own publishes its installed one with `salt-run kos_release.publish`. #}
{%- set index = salt['cp.get_file_str']('salt://kos/release/release.yaml', saltenv=saltenv or 'base') %}
{%- if not index %}

kos-extension-release-served:
  test.fail_without_changes:
    - name: >-
        the master serves no release of saltext.kos (salt://kos/release/release.yaml):
        run kos converge, or on the master install saltext.kos (salt-pip install
        saltext.kos) and publish it with salt-run kos_release.publish
    - failhard: True
{%- else %}
{%- set release = index | load_yaml %}
{%- set cache = opts['cachedir'] ~ '/kos-release' %}
{#- Asked of the installed package's metadata, not of pip: pip.installed lists every
    package (two Python processes) in every highstate, most of what this file cost on a
    converged node. A minion without the extension, or with a release that cannot say,
    goes through pip. #}
{%- set installed = salt['kos.installed_release']() if 'kos.installed_release' in salt else None %}
{%- if installed == release.version | string %}

kos-extension-installed:
  test.succeed_without_changes:
    - name: {{ release.name }}=={{ release.version }}
    - comment: {{ (release.name ~ ' ' ~ installed ~ ' is installed, the release the master serves') | tojson }}
{%- else %}
{%- for wheel in release.wheels %}

kos-extension-wheel-{{ wheel.file }}:
  file.managed:
    - name: {{ cache }}/{{ wheel.file }}
    - source: salt://kos/release/{{ wheel.file }}
    - source_hash: sha256={{ wheel.sha256 }}
    - makedirs: True
    - mode: '0644'
    - require_in:
      - pip: kos-extension-installed
{%- endfor %}

kos-extension-installed:
  pip.installed:
    - name: {{ release.name }}=={{ release.version }}
    - no_index: True
    - find_links: {{ cache }}
    - reload_modules: True
    - failhard: True
{%- endif %}
{%- endif %}
