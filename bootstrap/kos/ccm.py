"""
The OpenStack cloud-controller-manager's credential: one Keystone application credential
per cluster (``kos-<cluster>-ccm-<time>``), created by kos with openstacksdk, never written
to git or to this machine's disk. Its secret exists in Keystone (hashed) and in one pillar layer
per control plane on the salt master (``_ccm_<hostname>.sls``, 0600, a layer the cloud
writes, not the repository's), which the pillar top file serves to that minion only.

It carries the roles of kos's own credential but ``admin`` and is restricted (it cannot
create credentials or trusts of its own). ``kos rotate-ccm-credential`` replaces it: the
new one reaches the control planes first, the old one is deleted after. ``kos down``
deletes it with the cluster.
"""

import datetime
import re
from pathlib import Path

import yaml

from . import distributions
from .errors import ConvergeError, InputError

ROLES_NOT_GIVEN = {"admin"}
# where the CCM records the ID of a Service's load balancer
# (cloud-provider-openstack pkg/openstack/loadbalancer.go)
SERVICE_LB_ANNOTATION = "loadbalancer.openstack.org/load-balancer-id"
LAYER_MODE = "0600"
CREDENTIALS_FIX = (
    "kos creates the cloud-controller-manager's application credential with your own "
    "credential: use a password, or an application credential created with --unrestricted "
    "(openstack application credential create --unrestricted <name>)"
)


def name(cluster, created=None):
    """
    The credential's name: ``kos-<cluster>-ccm-<UTC time of creation>``. Keystone keeps a
    name unique per user, and a rotation holds the old credential and the new one at once.
    Without ``created``: the prefix every one of the cluster's credentials has.
    """
    prefix = f"kos-{cluster}-ccm"
    return f"{prefix}-{created:%Y%m%dT%H%M%SZ}" if created else prefix


def is_ours(cred_name, cluster):
    return bool(re.fullmatch(re.escape(name(cluster)) + r"-\d{8}T\d{6}Z", cred_name))


def layer_name(hostname):
    """The pillar layer of one control plane (pillar/top.sls lists ``_ccm_<hostname>``)."""
    return f"_ccm_{hostname}.sls"


def control_planes(outputs):
    """The hostnames of the cluster's control planes, from Terraform's outputs."""
    return sorted(
        info["hostname"]
        for mid, info in outputs["minions"].items()
        if mid in outputs.get("kubernetes_nodes", {}) and info.get("role") == "control_plane"
    )


def wanted(outputs):
    """Only the kubeadm distribution runs the OpenStack cloud-controller-manager."""
    return distributions.planned(outputs) == "kubeadm"


def existing(conn, cluster):
    """The ids of this cluster's CCM credentials in Keystone (normally one)."""
    return sorted(
        c.id
        for c in conn.identity.application_credentials(user=conn.current_user_id)
        if is_ours(c.name, cluster)
    )


def create(conn, cluster):
    """A new credential: ``{"id", "secret", "auth_url", "region"}``."""
    import openstack

    access = conn.session.auth.get_access(conn.session)
    roles = [{"name": r} for r in sorted(set(access.role_names) - ROLES_NOT_GIVEN)]
    if not roles:
        raise ConvergeError(
            "the OpenStack credential kos uses has no role the cloud-controller-manager "
            "could be given (only admin)",
            fix="give kos a credential with the member role in the project",
        )
    try:
        cred = conn.identity.create_application_credential(
            conn.current_user_id,
            name=name(cluster, datetime.datetime.now(datetime.timezone.utc)),
            description=f"kos: the cloud-controller-manager of cluster {cluster}",
            roles=roles,
            unrestricted=False,
        )
    except openstack.exceptions.HttpException as exc:
        if exc.status_code == 403:
            raise ConvergeError(
                f"Keystone refused to create the cloud-controller-manager's application "
                f"credential (HTTP 403: {exc.details or exc.message})",
                fix=CREDENTIALS_FIX,
            ) from exc
        raise
    return {
        "id": cred.id,
        "secret": cred.secret,
        # Keystone as the catalog publishes it (what the control planes reach, where kos
        # may have been given another address)
        "auth_url": conn.session.get_endpoint(service_type="identity", interface="public"),
        "region": conn.config.get_region_name("identity") or "RegionOne",
    }


def delete(conn, cluster, keep=None):
    """Delete this cluster's CCM credentials but ``keep``; the ids deleted."""
    gone = [c for c in existing(conn, cluster) if c != keep]
    for cred_id in gone:
        conn.identity.delete_application_credential(conn.current_user_id, cred_id)
    return gone


def layer(cred):
    """The pillar layer's text (a secret: it goes to the master over SSH's stdin only)."""
    doc = {
        "kubeadm": {
            "ccm": {
                "auth_url": cred["auth_url"],
                "region": cred["region"],
                "credentials": {
                    "application_credential_id": cred["id"],
                    "application_credential_secret": cred["secret"],
                },
            }
        }
    }
    return (
        "# Written by kos: the cloud-controller-manager's application credential, for "
        "this control plane only. Not in git; kos rotates and deletes it.\n"
        + yaml.safe_dump(doc, sort_keys=True)
    )


def repository_credentials(pillar_dir):
    """``[file]`` of the repository's pillar files that set ``kubeadm:ccm:credentials``
    (files Jinja renders are read as far as YAML can: their literal keys only)."""
    found = []
    for path in sorted(Path(pillar_dir).rglob("*.sls")):
        text = "\n".join(
            line for line in path.read_text().splitlines() if "{%" not in line and "{#" not in line
        )
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        ccm = ((doc or {}).get("kubeadm") or {}).get("ccm") if isinstance(doc, dict) else None
        if isinstance(ccm, dict) and ccm.get("credentials"):
            found.append(str(path.relative_to(pillar_dir)))
    return found


def refuse_repository_credentials(pillar_dir):
    """InputError naming the files when the repository's pillar holds a cloud credential."""
    found = repository_credentials(pillar_dir)
    if found:
        raise InputError(
            f"kubeadm:ccm:credentials is set in the repository's pillar ({', '.join(found)}): "
            "cloud credentials never go in git",
            fix="remove it; kos creates the cloud-controller-manager's application credential "
            "and keeps it on the salt master only (kos rotate-ccm-credential replaces it)",
        )
