"""Structured logs: JSON in production, readable on a terminal, secrets never printed.

Every process logs through structlog into the standard library's root logger, so aiokafka
and aiohttp messages come out in the same format. Log with fields, not formatted strings:
``log.info("delivery.succeeded", event_id=..., token=..., subscription_id=...)``.

Secrets are kept out two ways, because one is not enough:

- by field name: any field whose name says secret (``secret``, ``password``, ``api_key``,
  ``authorization``, ...; see :func:`is_secret_field`) is replaced, also inside nested
  dicts and lists (headers, request bodies);
- by value: strings that look like our credentials (API keys ``dpm_...``, webhook secrets
  ``whsec_...``, bearer tokens, ``api_key=...`` in query strings) are masked wherever they
  appear -- in the message, in any field, in a formatted traceback, in aiohttp's and
  aiokafka's own records. A short display prefix (``dpm_`` + 8 characters) stays readable
  so an operator can still tell which key acted.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
from collections.abc import MutableMapping
from typing import IO, Any

from . import logsetup

REDACTED = "[redacted]"

#: Field names whose values are always replaced (compared lower-case, ``-`` as ``_``).
SECRET_FIELDS = frozenset({
    "secret", "secret_key", "api_key", "x_api_key", "password", "token_secret",
    "previous_secret", "authorization", "webhook_secret", "signing_key", "private_key",
    "credentials", "cookie", "set_cookie",
})
#: A field name containing one of these words is secret too (``new_secret_key``, ...).
_SECRET_WORDS = ("secret", "password", "passwd", "api_key", "apikey", "authorization",
                 "private_key", "credential")
#: ... unless it only names or identifies the secret (``api_key_id``, ``secret_prefix``).
_SAFE_SUFFIXES = ("_id", "_prefix", "_name")

#: Credential-shaped values: our API keys and webhook secrets (monitor/webhooks), bearer
#: tokens and secret-named query parameters. The tail lengths leave display prefixes alone.
SECRET_VALUE_PATTERNS = (
    re.compile(r"dpm_[A-Za-z0-9_\-]{16,}"),
    re.compile(r"whsec_[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*"),
    re.compile(r"(?i)((?:api[_-]?key|secret(?:_key)?|password|token_secret)=)[^&\s\"']+"),
)
#: Text no pattern above can match: each match holds one of these (``bearer`` in any case,
#: as the pattern reads it). One search of it spares a clean value the four substitutions:
#: most values (ids, statuses, figures) hold none of them.
_MAYBE_SECRET = re.compile(r"dpm_|whsec_|=|(?i:bearer)")
_MAX_DEPTH = 6


@functools.lru_cache(maxsize=4096)
def is_secret_field(name: str) -> bool:
    # Cached: a log line asks this of every field, and field names are few (the code's).
    key = name.lower().replace("-", "_")
    if key in SECRET_FIELDS:
        return True
    if key.endswith(_SAFE_SUFFIXES):
        return False
    return any(word in key for word in _SECRET_WORDS)


def scrub_text(text: str) -> str:
    """Mask every credential-shaped substring of ``text``."""
    if _MAYBE_SECRET.search(text) is None:
        return text
    for pattern in SECRET_VALUE_PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def _scrub(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return scrub_text(value)
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {k: REDACTED if isinstance(k, str) and is_secret_field(k) else _scrub(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v, depth + 1) for v in value)
    if isinstance(value, bytes | bytearray):
        return scrub_text(bytes(value).decode("utf-8", "replace"))
    return value


def redact_secrets(
    _logger: Any, _name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: secret-named fields replaced, credential-shaped values masked."""
    for key in list(event_dict):
        if key.startswith("_"):  # structlog/stdlib bookkeeping (_record, _from_structlog)
            continue
        if is_secret_field(key):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = _scrub(event_dict[key])
    return event_dict


#: Fields the formatter's own processors add after :func:`redact_secrets` has run.
_FORMATTED_FIELDS = ("exception", "stack")


def redact_tracebacks(
    _logger: Any, _name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor, after ``format_exc_info``: the traceback text it wrote masked.

    Every other field was already redacted, by the logger's chain (structlog's records)
    or the formatter's pre-chain (the standard library's), and the processors between
    only drop bookkeeping keys and turn ``exc_info`` into ``exception``: redacting all
    fields again doubled the cost of a line."""
    for key in _FORMATTED_FIELDS:
        value = event_dict.get(key)
        if value is not None:
            event_dict[key] = _scrub(value)
    return event_dict


class SqlParameterFilter(logging.Filter):
    """At debug level aiosqlite logs every call it runs, as ``functools.partial`` reprs that
    hold the SQL *and its parameters* (API-key hashes, sealed webhook secrets). Keep the
    statement, drop the values: ``execute('SELECT ... WHERE key_hash = ?1', <1 parameter
    redacted>)``. (asyncpg logs no parameters.)"""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("aiosqlite") and record.args:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            record.args = tuple(describe_call(a) if isinstance(a, functools.partial) else a
                                for a in args)
        return True


def describe_call(call: functools.partial[Any]) -> str:
    name = getattr(call.func, "__name__", "call")
    sql = next((a for a in call.args if isinstance(a, str)), None)
    rest = [a for a in call.args if a is not sql]
    count = sum(len(a) if isinstance(a, list | tuple) else 1 for a in rest) + len(call.keywords)
    shown = f"{sql!r}, " if sql is not None else ""
    return f"{name}({shown}<{count} parameter{'s' if count != 1 else ''} redacted>)"


def configure_logging(
    level: str = "info", fmt: str = "auto", stream: IO[str] | None = None
) -> None:
    """Configure structlog and the root logger once per process (``stream``: stderr).

    structlog itself (with rich and asyncio behind it: ~100 ms of CPU) is imported only
    once something logs through it or a record reaches the handler: a command that never
    logs, such as a clean ``replay``, does not pay for it. Already imported, it is
    configured here and now, as it always was."""
    global _pending
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    colors = stream.isatty()
    handler = logging.StreamHandler(stream)
    handler.addFilter(SqlParameterFilter())
    handler.setFormatter(_DeferredFormatter(fmt == "console", colors))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiokafka is chatty at INFO about every (re)join; keep it to warnings.
    logging.getLogger("aiokafka").setLevel(max(root.level, logging.WARNING))
    _pending = True
    if "structlog" in sys.modules:
        _structlog()


#: configure_logging has run and structlog has not been configured for it yet.
_pending = False


def _structlog() -> Any:
    """structlog, imported, and configured if configure_logging asked for it."""
    global _pending
    import structlog

    if _pending:
        _pending = False
        structlog.configure(
            # filter_by_level first: an event below the level costs a level check, not the
            # whole chain (timestamp, secret scrubbing) before the handler drops it.
            processors=[structlog.stdlib.filter_by_level, *_shared(structlog),
                        structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
            logger_factory=structlog.stdlib.LoggerFactory(),
            wrapper_class=structlog.stdlib.BoundLogger,
            cache_logger_on_first_use=True,
        )
    return structlog


def _shared(structlog: Any) -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
    ]


class _DeferredFormatter(logging.Formatter):
    """structlog's ProcessorFormatter, built on the first record (see configure_logging)."""

    def __init__(self, console: bool, colors: bool) -> None:
        super().__init__()
        self._console = console
        self._colors = colors
        self._real: logging.Formatter | None = None

    def format(self, record: logging.LogRecord) -> str:
        if self._real is None:
            structlog = _structlog()
            renderer: Any = (
                structlog.dev.ConsoleRenderer(colors=self._colors)
                if self._console
                else structlog.processors.JSONRenderer()
            )
            self._real = structlog.stdlib.ProcessorFormatter(
                foreign_pre_chain=_shared(structlog),
                processors=[
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    # Again after formatting: a traceback may quote a secret from a local value.
                    redact_tracebacks,
                    renderer,
                ],
            )
        return self._real.format(record)


def get_logger(name: str) -> Any:
    return _structlog().stdlib.get_logger(name)


# The CLI's configuration, when it waited for logging's first import (monitor/logsetup.py):
# applied as this module's import ends, before anything can log.
if (_waiting := logsetup.take_waiting()) is not None:
    configure_logging(*_waiting)
