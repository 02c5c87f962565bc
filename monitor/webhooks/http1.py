"""A small HTTP/1.1 client for webhook POSTs: keep-alive connections per origin, nothing else.

Why not ``aiohttp.ClientSession``: a delivery is one POST with headers we build ourselves, and
all we need back is the status. aiohttp's general request path (URL and header multidicts,
request and response objects, streams, tracing hooks, cookie handling) cost ~55 µs of CPU
per POST on the benchmark machine against ~14 µs for a plain protocol, and that was most of
the gap between the delivery worker and a bare POST loop (docs/performance.md, "Delivery,
sixth round"). What this client does, and only this:

* connects only to addresses that passed the SSRF check: a hostname is resolved with
  :func:`~monitor.webhooks.urls.resolve_public` (every answer must be public) and the
  connection goes to exactly those addresses, so a DNS answer that changes between check and
  connect cannot reach a private address; answers are kept 30 s, as aiohttp's DNS cache did;
* TLS with a verifying context and SNI for ``https``;
* parses the answer with httptools (llhttp, the parser Node.js uses): Content-Length,
  chunked and read-until-close bodies, 1xx interim answers; at most ``max_body_bytes`` of a
  body is read, a longer answer's connection is closed instead of drained;
* keeps a connection for the next POST to the same origin only when the answer allows it
  (``should_keep_alive``) and was read completely; idle connections close after
  ``keepalive_seconds``; a kept connection the receiver closed while idle is retried once
  on a new connection (deliveries are at-least-once and carry their event id);
* no redirects (a 3xx is the attempt's answer), no proxies, no cookies, no compression.

Errors are exceptions the sender turns into attempt results: ``TimeoutError`` is the
caller's (it bounds the whole POST), :class:`~monitor.webhooks.urls.BlockedAddress` for an
address refused at connect time, :class:`ConnectFailed` for a refused or unreachable
connection, :class:`ProtocolFailure` for a receiver that closed early or answered garbage.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterable, Sequence

import httptools
from aiohttp.resolver import ThreadedResolver
from yarl import URL

from .urls import BlockedAddress, UnsafeUrl, ip_literal, resolve_public

#: How long a resolved (and checked) address list is reused for new connections.
DNS_TTL_SECONDS = 30.0


class ConnectFailed(OSError):
    """No connection could be opened to any address of the receiver."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.os_error = error


class ProtocolFailure(OSError):
    """The receiver closed the connection before a whole answer, or sent one we cannot parse."""


class _Connection(asyncio.Protocol):
    """One kept-alive connection; one request on it at a time.

    The result future gets the status once the answer is complete (or once ``max_body``
    bytes of its body are read, after which the connection is not reusable).
    """

    def __init__(self, max_body: int) -> None:
        self._max_body = max_body
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.reusable = False
        self.idle_since = 0.0
        self._waiter: asyncio.Future[int] | None = None
        self._status = 0
        self._body_bytes = 0
        self._received = False
        self._headers_done = False

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._received = True
        if self._waiter is None:  # bytes nobody asked for: the connection is not clean
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._finish(error=ProtocolFailure("receiver switched protocols"))
        except httptools.HttpParserError as exc:
            self._finish(error=ProtocolFailure(f"invalid HTTP answer: {exc}"))

    def eof_received(self) -> bool | None:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        if self._waiter is not None and not self._waiter.done():
            if self._headers_done and self._status >= 200:
                # An answer delimited by the connection's end (no length, not chunked).
                self._waiter.set_result(self._status)
            else:
                reason = f": {exc}" if exc is not None else ""
                self._waiter.set_exception(ProtocolFailure(
                    "receiver closed the connection before answering" + reason))
        self._waiter = None

    # -- httptools callbacks ---------------------------------------------------------------
    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self._max_body:
            self._finish(status=self._status, keep=False)

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:  # an interim answer; the real one follows
            self._headers_done = False
            return
        self._finish(status=self._status, keep=self._parser.should_keep_alive())

    # -- client side -----------------------------------------------------------------------
    def _finish(self, *, status: int = 0, keep: bool = False,
                error: Exception | None = None) -> None:
        waiter, self._waiter = self._waiter, None
        self.reusable = keep and error is None
        if waiter is not None and not waiter.done():
            if error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(status)
        if not self.reusable:
            self.close()

    def request(self, data: bytes) -> asyncio.Future[int]:
        assert self.transport is not None and self._waiter is None
        self._waiter = asyncio.get_running_loop().create_future()
        self._status = self._body_bytes = 0
        self._received = self._headers_done = self.reusable = False
        self.transport.write(data)
        return self._waiter

    @property
    def received_anything(self) -> bool:
        return self._received

    @property
    def closed(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.close()


class Http1Client:
    """Keep-alive POSTs to many origins; one instance per delivery worker (or API process)."""

    def __init__(self, *, allow_loopback: bool, max_idle_per_origin: int,
                 keepalive_seconds: float = 15.0, max_body_bytes: int = 64 * 1024,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self._allow_loopback = allow_loopback
        self._max_idle = max(max_idle_per_origin, 1)
        self._keepalive = keepalive_seconds
        self._max_body = max_body_bytes
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._addresses: dict[tuple[str, int], tuple[float, list[str]]] = {}
        self._resolver: ThreadedResolver | None = None
        self._last_sweep = time.monotonic()

    async def post(self, url: URL, headers: bytes, body: bytes) -> int:
        """POST ``body`` to ``url`` (already checked by ``check_url``); returns the status.

        ``headers`` are complete ``Name: value\\r\\n`` lines without Host and
        Content-Length, which are added here.
        """
        scheme, host, port = url.scheme, url.raw_host or "", url.port or 443
        key = (scheme, host, port)
        request = b"".join((
            b"POST ", url.raw_path_qs.encode("ascii"), b" HTTP/1.1\r\nHost: ",
            (url.host_port_subcomponent or host).encode("ascii"),
            b"\r\nContent-Length: ", str(len(body)).encode(), b"\r\n", headers, b"\r\n", body))
        now = time.monotonic()
        if now - self._last_sweep > 1.0:
            self._sweep(now)
        conn = self._take_idle(key, now)
        if conn is not None:
            try:
                return await self._exchange(key, conn, request)
            except ProtocolFailure:
                if conn.received_anything:
                    raise
                # The receiver closed the idle connection as we reused it: once more, new.
        conn = await self._connect(scheme, host, port)
        return await self._exchange(key, conn, request)

    async def _exchange(self, key: tuple[str, str, int], conn: _Connection,
                        request: bytes) -> int:
        try:
            status = await conn.request(request)
        except BaseException:
            conn.close()  # cancelled or timed out mid-answer: never reuse this connection
            raise
        if conn.reusable and not conn.closed:
            pool = self._idle.setdefault(key, [])
            if len(pool) < self._max_idle:
                conn.idle_since = time.monotonic()
                pool.append(conn)
            else:
                conn.close()
        return status

    def _take_idle(self, key: tuple[str, str, int], now: float) -> _Connection | None:
        pool = self._idle.get(key)
        while pool:
            conn = pool.pop()  # the most recently used: the least likely to be closed
            if not conn.closed and now - conn.idle_since < self._keepalive:
                return conn
            conn.close()
        return None

    def _sweep(self, now: float) -> None:
        """Close connections idle for longer than ``keepalive_seconds`` (receivers come and
        go; their idle connections must not pile up)."""
        self._last_sweep = now
        for key, pool in list(self._idle.items()):
            keep = []
            for conn in pool:
                if not conn.closed and now - conn.idle_since < self._keepalive:
                    keep.append(conn)
                else:
                    conn.close()
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]

    async def _connect(self, scheme: str, host: str, port: int) -> _Connection:
        loop = asyncio.get_running_loop()
        tls: ssl.SSLContext | None = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            tls = self._ssl
        last: OSError | None = None
        for address in await self._resolve(host, port):
            try:
                _, conn = await loop.create_connection(
                    lambda: _Connection(self._max_body), address, port, ssl=tls,
                    server_hostname=host if tls is not None else None)
                return conn
            except ssl.SSLError as exc:
                raise ConnectFailed(exc) from None  # another address has the same certificate
            except OSError as exc:
                last = exc
        assert last is not None
        raise ConnectFailed(last)

    async def _resolve(self, host: str, port: int) -> Sequence[str]:
        """The addresses to connect to: an IP literal as it is (``check_url`` checked it),
        a hostname's checked answers."""
        if ip_literal(host) is not None:
            return [host]
        now = time.monotonic()
        cached = self._addresses.get((host, port))
        if cached is not None and now - cached[0] < DNS_TTL_SECONDS:
            return cached[1]
        if self._resolver is None:
            self._resolver = ThreadedResolver()
        try:
            answers = await resolve_public(host, port, self._allow_loopback, self._resolver)
        except UnsafeUrl as exc:
            raise BlockedAddress(str(exc)) from None
        addresses = list(dict.fromkeys(str(a["host"]) for a in answers))
        self._addresses[(host, port)] = (now, addresses)
        return addresses

    async def close(self) -> None:
        for pool in self._idle.values():
            for conn in pool:
                conn.close()
        self._idle.clear()
        if self._resolver is not None:
            await self._resolver.close()
            self._resolver = None


def header_lines(pairs: Iterable[tuple[str, str]]) -> bytes:
    """``Name: value\\r\\n`` lines; a value with CR or LF is refused (header injection)."""
    out = []
    for name, value in pairs:
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise ValueError(f"header {name} has a line break")
        out.append(f"{name}: {value}\r\n")
    return "".join(out).encode("latin-1")
