"""Long-running services and how ``depeg-monitor run`` finds them.

A :class:`Service` runs until its ``stop`` event is set and then returns after finishing
in-flight work (clean shutdown). Services register through the ``depeg_monitor.services``
entry-point group (the monitor, the delivery worker, the store writer, the HTTP API), so
``run`` can start them all in one process without ``monitor`` importing ``consumers``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import entry_points

from .config import Config

GROUP = "depeg_monitor.services"


class StartupError(RuntimeError):
    """A service cannot start for a reason the operator fixes (a taken port, say); its
    message names the setting. Logged without a traceback; the process exits 2."""


@dataclass(frozen=True)
class Service:
    name: str
    run: Callable[[Config, asyncio.Event], Awaitable[None]]
    #: Lower starts first (the monitor before the consumers of its topics).
    order: int = 50


def discover_services() -> list[Service]:
    found = [ep.load() for ep in entry_points(group=GROUP)]
    return sorted((s for s in found if isinstance(s, Service)), key=lambda s: (s.order, s.name))


#: What a Kafka service started alone says when no broker is configured.
NO_BROKER_HINT = ("set kafka.bootstrap_servers / --bootstrap-servers, or use "
                  "`depeg-monitor run` to start an embedded broker")


def run_broker_service(component: str,
                       run: Callable[[Config, asyncio.Event], Awaitable[None]],
                       config: Config) -> int:
    """The command of a Kafka service started alone: without a broker (none configured,
    no ``run`` found) log ``<component>.no_broker`` naming the setting and exit 2 (README,
    "Exit codes"), else :func:`run_until_signalled`."""
    if not config.kafka.bootstrap_servers:
        from .logs import get_logger

        get_logger(__name__).error(f"{component}.no_broker", hint=NO_BROKER_HINT)
        return 2
    return run_until_signalled(run, config)


def run_until_signalled(run: Callable[[Config, asyncio.Event], Awaitable[None]],
                        config: Config, *, ops: bool = True) -> int:
    """Run one service as a process: SIGTERM or Ctrl-C sets its stop event, and the
    process exits once the service has finished its in-flight work.

    With ``ops`` the process also serves ``/metrics``, ``/healthz`` and ``/readyz`` on
    ``metrics.host:metrics.port`` (the HTTP API serves them on its own port instead).
    """

    from aiokafka.errors import KafkaConnectionError

    from .earlystop import hand_over
    from .logs import get_logger
    from .ops_server import OpsServer

    log = get_logger(__name__)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        asked = hand_over(loop, stop.set)
        if asked is not None:  # a stop while it was starting (earlystop.py)
            log.info("service.stopped_before_start", signal=asked)
            return 0
        server = OpsServer(config.metrics.host, config.metrics.port) if ops else None
        if server is not None:
            try:
                await server.start()
            except OSError as exc:
                log.error("ops.listen_failed", host=config.metrics.host,
                          port=config.metrics.port, error=str(exc),
                          hint="set metrics.port (DEPEG_METRICS__PORT; 0 = any free port)")
                return 2
            log.info("ops.listening", url=f"http://{server.host}:{server.port}",
                     paths=["/metrics", "/healthz", "/readyz"])
        try:
            await run(config, stop)
        except StartupError as exc:
            log.error("service.start_failed", error=str(exc))
            return 2
        except KafkaConnectionError as exc:
            # A broker is configured but does not answer, and the service gave up: a
            # runtime failure (exit 1), one line naming the setting, no traceback.
            log.error("service.broker_unreachable",
                      bootstrap_servers=config.kafka.bootstrap_servers, error=str(exc),
                      hint="check kafka.bootstrap_servers (DEPEG_KAFKA__BOOTSTRAP_SERVERS)")
            return 1
        finally:
            if server is not None:
                await server.stop()
        return 0

    return asyncio.run(main())
