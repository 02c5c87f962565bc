"""Sends one signed delivery over HTTP; shared by the delivery worker and the API (E12, E15).

One :class:`Sender` owns one :class:`~monitor.webhooks.http1.Http1Client` (keep-alive
connections per endpoint, reused), which connects only to addresses that passed the SSRF
check. Redirects are not followed, the proxy environment is ignored, and every attempt is
bounded by ``delivery.timeout_seconds``. A send never raises for a receiver's fault: it
returns an :class:`AttemptResult`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, NamedTuple

from yarl import URL

from ..config import DeliveryConfig
from ..timefmt import SecondStamps
from .deadlines import SharedTimeout
from .http1 import ConnectFailed, Http1Client, header_lines
from .signing import (
    EVENT_ID_HEADER,
    EVENT_TYPE_HEADER,
    PREVIOUS_SIGNATURE_HEADER,
    SIGNATURE_HEADER,
    KeyedSigner,
    delivery_body,
)
from .urls import BlockedAddress, UnsafeUrl, check_url, origin

USER_AGENT = "depeg-monitor-webhooks/1"
#: Bytes of a receiver's answer we read (so the connection can be reused); the rest is
#: dropped with the connection.
MAX_RESPONSE_BYTES = 64 * 1024
MAX_ERROR_CHARS = 300
#: The headers every delivery carries, built once.
_STATIC_HEADERS = header_lines([("User-Agent", USER_AGENT),
                                ("Content-Type", "application/json")])
_SIGNATURE_LINE = f"{SIGNATURE_HEADER}: ".encode("ascii")
_PREVIOUS_SIGNATURE_LINE = f"{PREVIOUS_SIGNATURE_HEADER}: ".encode("ascii")


#: The static URL checks are pure: a URL that passed once passes again (a failing one
#: raises and is not cached). The resolver still checks every address it connects to.
_checked_url = functools.lru_cache(maxsize=4096)(check_url)


class AttemptResult(NamedTuple):
    """One POST's answer. A named tuple: built once or twice per send, and a frozen
    dataclass's ``__init__`` cost several times as much."""

    status_code: int | None
    latency_ms: float
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def _short(text: str, url: str) -> str:
    """Bounded error text without the URL's path or query (receivers put tokens there);
    errors are logged and shown in the delivery history. A NUL character becomes U+FFFD:
    PostgreSQL's text cannot hold one, and the cycle that records the outcome would be
    refused, again at every retry of it."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        safe = origin(url) + "/…"
        for form in {url, str(URL(url))}:
            text = text.replace(form, safe)
    except (ValueError, TypeError):
        pass
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "…"


class Sender:
    def __init__(self, config: DeliveryConfig) -> None:
        self._config = config
        self._client: Http1Client | None = None
        self._signer = KeyedSigner()
        #: Every send's bound: one timer for all sends in flight (deadlines.py says why).
        self._timeout = SharedTimeout(config.timeout_seconds)
        self._stamps = SecondStamps()  # delivered_at: many deliveries a second

    def _open(self) -> Http1Client:
        if self._client is None:
            self._client = Http1Client(
                allow_loopback=self._config.allow_loopback,
                # As many kept connections per endpoint as the dispatcher lets one
                # endpoint's sends be in flight, so a busy endpoint reuses them all.
                max_idle_per_origin=max(self._config.per_endpoint_concurrency, 1),
                max_body_bytes=MAX_RESPONSE_BYTES)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def send(self, url: str, event_bytes: bytes, *, event_type: str, event_id: str,
                   secret: str, previous_secret: str | None = None,
                   delivered_at: float | None = None,
                   task: asyncio.Task[Any] | None = None) -> AttemptResult:
        """POST ``{event, signature, delivered_at}``; never raises for network or receiver
        failures. ``task``: the current task, when the caller knows it (the timeout's
        guard then need not look it up)."""
        started = time.monotonic()
        try:
            target = _checked_url(url, self._config.allow_loopback)
        except UnsafeUrl as exc:
            return self._failed(started, f"blocked: {exc}", url)
        sign = self._signer.sign
        signature = sign(event_bytes, secret)
        when = self._stamps.format(delivered_at if delivered_at is not None else time.time())
        body = delivery_body(event_bytes, signature, when)
        try:
            # The same lines, in the same order, as header_lines() of (type, id,
            # signature[, previous signature]); the signatures are hex, nothing to refuse.
            lines = (_STATIC_HEADERS
                     + header_lines(((EVENT_TYPE_HEADER, event_type),
                                     (EVENT_ID_HEADER, event_id)))
                     + _SIGNATURE_LINE + signature.encode("ascii") + b"\r\n")
        except (ValueError, UnicodeEncodeError) as exc:
            return self._failed(started, f"invalid header: {exc}", url)
        if previous_secret is not None:
            lines += (_PREVIOUS_SIGNATURE_LINE + sign(event_bytes, previous_secret).encode("ascii")
                      + b"\r\n")
        try:
            async with self._timeout.guard(task):
                status = await self._open().post(target, lines, body)
        except TimeoutError:
            return self._failed(started, f"timeout after {self._config.timeout_seconds:g}s",
                                url)
        except BlockedAddress as exc:
            return self._failed(started, f"blocked: {exc}", url)
        except ConnectFailed as exc:
            return self._failed(started, f"connect error: {exc.os_error}", url)
        except OSError as exc:
            return self._failed(started, f"{type(exc).__name__}: {exc}", url)
        latency = (time.monotonic() - started) * 1000.0
        if 200 <= status < 300:
            return AttemptResult(status, latency, None)
        return AttemptResult(status, latency, _short(f"HTTP {status}", url))

    @staticmethod
    def _failed(started: float, error: str, url: str) -> AttemptResult:
        return AttemptResult(None, (time.monotonic() - started) * 1000.0, _short(error, url))
