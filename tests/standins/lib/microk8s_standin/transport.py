"""HTTPS client side of the cluster-agent protocol (join.py uses http.client the same way)."""

import http.client
import json
import os
import socket
import ssl


def source_address():
    # Loopback simulations give every node its own 127.x address; the peer must see it.
    ip = os.environ.get("KOS_STANDIN_IP")
    if not ip:
        return None
    try:
        probe = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET)
        try:
            probe.bind((ip, 0))
        finally:
            probe.close()
    except OSError:
        return None
    return (ip, 0)


def connection(host, port, timeout=30):
    context = ssl._create_unverified_context()
    return http.client.HTTPSConnection(
        host, int(port), context=context, timeout=timeout, source_address=source_address()
    )


def post(host, port, path, payload, timeout=10):
    """POST JSON; returns (status, decoded body or {})."""
    conn = connection(host, port, timeout=timeout)
    try:
        conn.request(
            "POST", path, json.dumps(payload),
            {"Content-type": "application/json", "Accept": "application/json"},
        )
        resp = conn.getresponse()
        body = resp.read()
        try:
            return resp.status, json.loads(body.decode() or "{}")
        except ValueError:
            return resp.status, {}
    finally:
        conn.close()


def split_hostport(hostport):
    host, _, port = hostport.rpartition(":")
    return host.strip("[]"), port
