"""Sends one signed delivery over HTTP; shared by the delivery worker and the API (E12, E15).

One :class:`Sender` owns one ``aiohttp.ClientSession`` (one connection pool, reused) whose
connector resolves through :class:`~monitor.webhooks.urls.CheckedResolver`, so it can only
connect to addresses that passed the SSRF check. Redirects are not followed, the proxy
environment is ignored, and every attempt is bounded by ``delivery.timeout_seconds``.
A send never raises for a receiver's fault: it returns an :class:`AttemptResult`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import NamedTuple

import aiohttp
from yarl import URL

from ..config import DeliveryConfig
from ..timefmt import format_ts
from .signing import (
    EVENT_ID_HEADER,
    EVENT_TYPE_HEADER,
    PREVIOUS_SIGNATURE_HEADER,
    SIGNATURE_HEADER,
    delivery_body,
    sign,
)
from .urls import BlockedAddress, CheckedResolver, UnsafeUrl, check_url, origin

USER_AGENT = "depeg-monitor-webhooks/1"
#: Bytes of a receiver's answer we read (so the connection can be reused); the rest is
#: dropped with the connection.
MAX_RESPONSE_BYTES = 64 * 1024
MAX_ERROR_CHARS = 300
#: The headers every delivery carries, built once.
_STATIC_HEADERS = {"User-Agent": USER_AGENT, "Content-Type": "application/json"}


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
    errors are logged and shown in the delivery history."""
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
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                resolver=CheckedResolver(self._config.allow_loopback),
                limit=max(self._config.max_concurrency, 1),
                # One keep-alive pool per endpoint, as large as the dispatcher lets one
                # endpoint's sends be, so a busy endpoint cannot take others' connections.
                limit_per_host=max(self._config.per_endpoint_concurrency, 1),
                ttl_dns_cache=30,
            )
            self._session = aiohttp.ClientSession(
                # No session default headers: aiohttp would merge them into a new
                # multidict on every request; _STATIC_HEADERS go in the request's dict.
                connector=connector, trust_env=False,
                timeout=aiohttp.ClientTimeout(total=self._config.timeout_seconds),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, url: str, event_bytes: bytes, *, event_type: str, event_id: str,
                   secret: str, previous_secret: str | None = None,
                   delivered_at: float | None = None) -> AttemptResult:
        """POST ``{event, signature, delivered_at}``; never raises for network or receiver
        failures."""
        started = time.monotonic()

        def result(status: int | None, error: str | None) -> AttemptResult:
            return AttemptResult(status, (time.monotonic() - started) * 1000.0,
                                 None if error is None else _short(error, url))

        try:
            target = _checked_url(url, self._config.allow_loopback)
        except UnsafeUrl as exc:
            return result(None, f"blocked: {exc}")
        signature = sign(event_bytes, secret)
        when = format_ts(delivered_at if delivered_at is not None else time.time())
        body = delivery_body(event_bytes, signature, when)
        headers = {
            **_STATIC_HEADERS,
            EVENT_TYPE_HEADER: event_type,
            EVENT_ID_HEADER: event_id,
            SIGNATURE_HEADER: signature,
        }
        if previous_secret is not None:
            headers[PREVIOUS_SIGNATURE_HEADER] = sign(event_bytes, previous_secret)
        try:
            async with self._open().post(target, data=body, headers=headers,
                                         allow_redirects=False) as resp:
                await resp.content.read(MAX_RESPONSE_BYTES)
                status = resp.status
        except TimeoutError:
            return result(None, f"timeout after {self._config.timeout_seconds:g}s")
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, BlockedAddress):
                return result(None, f"blocked: {exc.os_error}")
            return result(None, f"connect error: {exc.os_error or exc}")
        except (aiohttp.ClientError, OSError) as exc:
            return result(None, f"{type(exc).__name__}: {exc}")
        except asyncio.CancelledError:
            raise
        return result(status, None if 200 <= status < 300 else f"HTTP {status}")
