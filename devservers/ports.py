"""Free loopback ports for the servers the tests and benchmarks start (never fixed ports)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nothing listens on now: bound to port 0, then released, so the OS
    chose it. A server started on it must still be health-checked (another process may
    take it in between)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
