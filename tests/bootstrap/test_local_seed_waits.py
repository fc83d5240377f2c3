"""
The rehearsal cloud's waits for its services (kos_local.openstack.seed): an API that
refuses or answers 5xx while its service starts is waited for, and what is still missing
at the timeout is named in one error.
"""

import pytest
from keystoneauth1 import exceptions as ksa_exceptions
from kos.errors import ConvergeError
from kos_local.openstack import seed


class LoadBalancers:
    def __init__(self, answers):
        self.answers = list(answers)

    def providers(self):
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


class Conn:
    def __init__(self, *answers):
        self.load_balancer = LoadBalancers(answers)


def test_octavia_is_waited_for_through_refusals_until_it_lists_its_providers(monkeypatch):
    monkeypatch.setattr(seed.time, "sleep", lambda s: None)
    conn = Conn(ksa_exceptions.ConnectFailure("refused"), [], [{"name": "amphora"}])
    seed.wait_load_balancers(conn, timeout=60)
    assert conn.load_balancer.answers == [[{"name": "amphora"}]]


def test_what_is_still_missing_at_the_timeout_is_named():
    conn = Conn(ksa_exceptions.ServiceUnavailable("503"))
    with pytest.raises(ConvergeError) as err:
        seed.wait_load_balancers(conn, timeout=0)
    assert "did not answer in 0s (API (ServiceUnavailable: 503" in str(err.value)
    assert "/var/log/octavia" in err.value.fix


def test_every_compute_host_is_waited_for_and_a_missing_one_named():
    from types import SimpleNamespace as NS

    up = [NS(binary="nova-compute", host=h, state="up") for h in ("kos-compute-1", "kos-compute-3")]
    conn = NS(
        compute=NS(services=lambda: up + [NS(binary="nova-compute", host="kos-compute-2",
                                             state="down")]),
        placement=NS(resource_providers=lambda: [NS(name="kos-compute-1")]),
        network=NS(agents=lambda: [NS(agent_type=t, is_alive=True) for t in
                                   ("Linux bridge agent", "DHCP agent", "L3 agent")]),
        block_storage=NS(services=lambda: [NS(binary="cinder-volume", state="up")],
                         backend_pools=lambda: [NS(name="kos")]),
    )
    hosts = {"kos-compute-1": "nova", "kos-compute-2": "nova", "kos-compute-3": "kos-az-2"}
    with pytest.raises(ConvergeError) as err:
        seed.wait_services(conn, hosts, timeout=0)
    assert "still waiting for nova-compute on kos-compute-2" in str(err.value)
    # all up, but two not yet in placement
    up.append(NS(binary="nova-compute", host="kos-compute-2", state="up"))
    with pytest.raises(ConvergeError) as err:
        seed.wait_services(conn, hosts, timeout=0)
    assert "still waiting for the compute hosts in placement" in str(err.value)
    # a cloud made before it named its compute hosts: any one will do
    seed.wait_services(conn, {}, timeout=0)
