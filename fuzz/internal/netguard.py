"""Refuse, and record, every connection attempt to a non-loopback address.

Installed in the parent before a framework is imported and inherited by every forked worker.
Frameworks phone home (telemetry, tracing, version checks); the adapters switch that off, and this
guard is how a campaign proves it: any attempt raises ``ConnectionRefusedError`` and appends one
JSON line to the log file named by ``RESUMEFUZZ_NETGUARD_LOG``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket

_installed = False


def _is_local(host) -> bool:
    if host in (None, "", "localhost") or isinstance(host, bytes) and host == b"localhost":
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    try:
        address = ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:
        return str(host).endswith(".localhost")
    return address.is_loopback or address.is_unspecified


def _record(kind: str, target) -> None:
    path = os.environ.get("RESUMEFUZZ_NETGUARD_LOG")
    if path:
        with open(path, "a") as log:
            log.write(json.dumps({"pid": os.getpid(), "call": kind, "target": repr(target)}) + "\n")


def _check(kind: str, address) -> None:
    if isinstance(address, tuple) and address and not _is_local(address[0]):
        _record(kind, address)
        raise ConnectionRefusedError(f"resumefuzz netguard: refused {kind} to {address!r}")


def install() -> None:
    """Patch the socket layer (idempotent).  Unix sockets and loopback pass untouched."""
    global _installed
    if _installed:
        return
    _installed = True
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex
    getaddrinfo = socket.getaddrinfo

    def guarded_connect(self, address):
        _check("connect", address)
        return connect(self, address)

    def guarded_connect_ex(self, address):
        _check("connect_ex", address)
        return connect_ex(self, address)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if not _is_local(host):
            resolved = getaddrinfo(host, *args, **kwargs) if _is_ip(host) else None
            if resolved is None:
                _record("getaddrinfo", host)
                raise socket.gaierror(f"resumefuzz netguard: refused to resolve {host!r}")
            return resolved
        return getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = guarded_connect
    socket.socket.connect_ex = guarded_connect_ex
    socket.getaddrinfo = guarded_getaddrinfo


def _is_ip(host) -> bool:
    try:
        ipaddress.ip_address(host.decode() if isinstance(host, bytes) else str(host))
        return True
    except ValueError:
        return False
