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
