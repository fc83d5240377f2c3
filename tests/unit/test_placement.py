"""Where Nova may put the nodes (kos.placement): preflight counts the compute hosts a hard
anti-affinity group needs, by zone, when the credential may list them."""

from types import SimpleNamespace

from kos import placement
from openstack import exceptions


def service(zone, state="up", status="enabled", binary="nova-compute"):
    return SimpleNamespace(availability_zone=zone, state=state, status=status, binary=binary)


def conn(*services):
    def listed():
        if services == ("forbidden",):
            raise exceptions.ForbiddenException("Policy doesn't allow os_compute_api:os-services:list")
        return list(services)
    return SimpleNamespace(compute=SimpleNamespace(services=listed))


def nodes(*spec):
    return {name: {"role": role, "az": az} for name, role, az in spec}


HARD = {"server_group_policies": {"control_plane": "anti-affinity", "worker": "soft-anti-affinity"}}
THREE = nodes(("k8s-cp-1", "control_plane", None), ("k8s-cp-2", "control_plane", None),
              ("k8s-cp-3", "control_plane", None), ("k8s-worker-1", "worker", None))


def test_three_control_planes_apart_need_three_hosts_up_and_enabled():
    (found,) = placement.findings(
        conn(service("nova"), service("nova"), service("nova", state="down"),
             service("nova", status="disabled"), service("nova", binary="nova-conductor")),
        HARD, THREE)
    assert not found.ok
    assert found.message == ("server_group_policies.control_plane = anti-affinity puts each of "
                             "the control planes on its own compute host, and the cloud has too "
                             "few: 3 in all with 2 hosts")
    assert found.fix == ('add compute hosts, or set server_group_policies = '
                         '{ control_plane = "soft-anti-affinity" }')
    (found,) = placement.findings(conn(*[service("nova")] * 3), HARD, THREE)
    assert found.ok and found.message == "3 control planes to keep apart, compute hosts up: 3"


def test_a_zone_needs_a_host_for_each_of_its_members():
    zoned = nodes(("k8s-cp-1", "control_plane", "az-a"), ("k8s-cp-2", "control_plane", "az-a"),
                  ("k8s-cp-3", "control_plane", "az-b"))
    (found,) = placement.findings(
        conn(service("az-a"), service("az-b"), service("az-b")), HARD, zoned)
    assert not found.ok
    assert found.message.endswith("too few: 2 in zone az-a with 1 host")


def test_soft_policies_need_nothing_and_an_unlisted_cloud_is_not_counted():
    soft = {"server_group_policies": {"control_plane": "soft-anti-affinity", "worker": "none"}}
    assert placement.findings(conn(service("nova")), soft, THREE) == []
    (found,) = placement.findings(conn("forbidden"), HARD, THREE)
    assert found.ok and "not counted" in found.message
