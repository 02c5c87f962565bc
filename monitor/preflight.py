"""Checks ``run`` makes before it starts anything, so a taken port is one clear line.

Without them a taken API port ends in an ``OSError`` traceback after the broker and the
monitor are already up, and a taken broker port is worse: the embedded broker exits, but
the port answers (someone else holds it), so the services would talk to a stranger.
"""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass, field
from typing import Any

from .config import Config
from .runstate import live_state


@dataclass(frozen=True)
class Problem:
    event: str
    fields: dict[str, Any] = field(default_factory=dict)


def port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now (port 0 always can)."""
    if port == 0:
        return True
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # As the servers bind: SO_REUSEADDR, so a port in TIME_WAIT is not "taken".
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def api_port_hint(port: int) -> str:
    return (f"port {port} (api.port) is in use: stop what holds it, or choose another with "
            "`depeg-monitor run --port P` (`api --port P`) or DEPEG_API__PORT=P")


def check(config: Config, *, embedded: bool, api: bool) -> Problem | None:
    if embedded:
        running = live_state(config)
        if running is not None:
            return Problem("run.already_running", {
                "pid": running.pid, "bootstrap_servers": running.bootstrap_servers,
                "api_url": running.api_url,
                "hint": "a depeg-monitor run is already running with this data directory; "
                        "stop it first, or give this one its own --data-dir"})
        port = config.kafka.embedded_port
        if not port_free("127.0.0.1", port):
            return Problem("run.embedded_broker_port_taken", {
                "port": port,
                "hint": f"port {port} (kafka.embedded_port) is in use: stop what holds it, "
                        "or set DEPEG_KAFKA__EMBEDDED_PORT (0 = any free port), or point "
                        "--bootstrap-servers at a running broker"})
    if api:
        with contextlib.suppress(OSError):
            if not port_free(config.api.host, config.api.port):
                return Problem("run.api_port_taken", {
                    "host": config.api.host, "port": config.api.port,
                    "hint": api_port_hint(config.api.port)})
    return None
