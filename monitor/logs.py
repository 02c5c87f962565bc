"""Structured logs: JSON in production, readable on a terminal, secrets never printed.

Every process logs through structlog into the standard library's root logger, so aiokafka
and aiohttp messages come out in the same format.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

#: Field names whose values are replaced before anything is written.
SECRET_FIELDS = frozenset({
    "secret", "secret_key", "api_key", "x-api-key", "password", "token_secret",
    "previous_secret", "authorization",
})


def redact_secrets(
    _logger: Any, _name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key in list(event_dict):
        if key.lower() in SECRET_FIELDS:
            event_dict[key] = "[redacted]"
    return event_dict


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
    ]
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if fmt == "console"
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiokafka is chatty at INFO about every (re)join; keep it to warnings.
    logging.getLogger("aiokafka").setLevel(max(root.level, logging.WARNING))


def get_logger(name: str) -> Any:
    return structlog.stdlib.get_logger(name)
