"""Unit tests of the microk8s_certs states: extra SANs in the API server certificate and
the certificates renewed before they expire; test mode off and on."""

import pytest
from salt.exceptions import CommandExecutionError

from tests.unit.states import microk8s_states as loader
from tests.unit.states.microk8s_states import STATES, expect_applied

# the fixtures: the microk8s state modules on one loader
m, test_mode, state_dir = loader.m, loader.test_mode, loader.state_dir
configure_loader_modules = loader.configure_loader_modules

states = STATES["microk8s_certs"]


TEMPLATE = """[ alt_names ]
DNS.1 = kubernetes
IP.1 = 127.0.0.1
IP.2 = 10.152.183.1
#MOREIPS

[ v3_ext ]
"""


def cert_with(sans):
    """What microk8s_certs.server_sans reads from a server.crt carrying ``sans``."""
    ips = [x for x in sans if states._san_kind(x) == "IP"]
    return {"ip": ips, "dns": [x for x in sans if x not in ips]}


def test_extra_sans_writes_above_the_marker_and_refreshes(m, test_mode, tmp_path):
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "csr.conf.template").write_text(TEMPLATE)
    wanted = ["203.0.113.10", "api.example.com"]
    m["microk8s_certs.server_sans"].side_effect = [cert_with([]), cert_with(wanted)]
    ret = states.extra_sans("csr", sans=wanted, snap_data=str(tmp_path))
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"sans": {"old": [], "new": wanted},
                              "certificate": {"old": {"lacks": wanted}, "new": {"lacks": []}}}
    text = (certs / "csr.conf.template").read_text()
    if test_mode:
        assert text == TEMPLATE
        m["microk8s_certs.refresh_certs"].assert_not_called()
    else:
        assert "IP.100 = 203.0.113.10\nDNS.100 = api.example.com\n#MOREIPS" in text
        m["microk8s_certs.refresh_certs"].assert_called_once_with("server.crt")
        # second run: nothing to do
        m["microk8s_certs.refresh_certs"].reset_mock()
        m["microk8s_certs.server_sans"].side_effect = None
        m["microk8s_certs.server_sans"].return_value = cert_with(wanted)
        again = states.extra_sans("csr", sans=wanted, snap_data=str(tmp_path))
        assert again["changes"] == {} and again["result"] is True
        m["microk8s_certs.refresh_certs"].assert_not_called()
        # a SAN dropped from pillar is removed, operator lines stay
        states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path))
        text = (certs / "csr.conf.template").read_text()
        assert "api.example.com" not in text and "IP.2 = 10.152.183.1" in text


@pytest.mark.parametrize("name", ["cafe", "add", "deadbeef", "k8s-api.example.com"])
def test_hex_only_names_are_dns_sans(name):
    """`[0-9a-fA-F:]+` took "cafe" for an IP and openssl refused `IP.100 = cafe`."""
    assert "DNS.100 = " + name in states._render_sans(TEMPLATE, [name])
    assert "IP.100 = 2001:db8::1" in states._render_sans(TEMPLATE, ["2001:db8::1"])


def test_the_certificate_decides_not_the_template(m, test_mode, tmp_path):
    """The template already lists the SAN (a refresh that failed): the certificate lacks it."""
    certs = tmp_path / "certs"
    certs.mkdir()
    written = TEMPLATE.replace("#MOREIPS", "IP.100 = 203.0.113.10\n#MOREIPS")
    (certs / "csr.conf.template").write_text(written)
    m["microk8s_certs.server_sans"].side_effect = [cert_with(["127.0.0.1"]), cert_with(["203.0.113.10"])]
    ret = states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path))
    expect_applied(ret, test_mode)
    assert ret["changes"]["certificate"] == {"old": {"lacks": ["203.0.113.10"]},
                                             "new": {"lacks": []}}
    assert m["microk8s_certs.refresh_certs"].called is (not test_mode)


def test_a_failed_refresh_fails_and_puts_the_template_back(m, tmp_path):
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "csr.conf.template").write_text(TEMPLATE)
    m["microk8s_certs.refresh_certs"].side_effect = CommandExecutionError(
        "Taking a backup of the current certificates under /var/snap/microk8s/8148/certs-backup/\n"
        "Creating new certificates\nbad ip address in SAN value=not-an-ip")
    ret = states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path))
    assert ret["result"] is False and "bad ip address" in ret["comment"] and ret["changes"] == {}
    # unchanged template and a certificate without the SAN: the next run tries again
    assert (certs / "csr.conf.template").read_text() == TEMPLATE


def test_extra_sans_without_marker_fails(m, tmp_path):
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "csr.conf.template").write_text("[ alt_names ]\n")
    ret = states.extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path))
    assert ret["result"] is False and "#MOREIPS" in ret["comment"]


def test_certificates_renewed_leaves_certificates_with_time_left(m):
    m["microk8s_certs.certificates"].return_value = {
        "ca.crt": 3000, "server.crt": 100, "front-proxy-client.crt": 100}
    ret = states.certificates_renewed("control-plane certificates", within_days=30)
    assert ret["result"] is True and ret["changes"] == {}
    m["microk8s_certs.refresh_certs"].assert_not_called()


def test_certificates_renewed_refreshes_only_what_is_due_never_the_ca(m, test_mode):
    m["microk8s_certs.certificates"].side_effect = [
        {"ca.crt": 10, "server.crt": 5, "front-proxy-client.crt": 100},
        {"ca.crt": 10, "server.crt": 365, "front-proxy-client.crt": 100}]
    ret = states.certificates_renewed("control-plane certificates", within_days=30)
    expect_applied(ret, test_mode)
    assert "the CA has 10 days left: renew it by hand" in ret["comment"]
    if test_mode:
        assert ret["changes"] == {"certificates": {"old": {"server.crt": 5}, "new": "renewed"}}
        m["microk8s_certs.refresh_certs"].assert_not_called()
    else:
        assert ret["changes"] == {"certificates": {"old": {"server.crt": 5},
                                                   "new": {"server.crt": 365}}}
        m["microk8s_certs.refresh_certs"].assert_called_once_with("server.crt")


def test_certificates_renewed_on_a_worker_does_nothing(m):
    m["microk8s_certs.certificates"].return_value = {}
    ret = states.certificates_renewed("c", force=True)
    assert ret["result"] is True and ret["changes"] == {} and "a worker" in ret["comment"]
