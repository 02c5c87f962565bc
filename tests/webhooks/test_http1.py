"""The delivery client (monitor/webhooks/http1.py) against real servers on loopback.

The ordinary case runs against an aiohttp server; the edge cases of the protocol (chunked
and read-until-close answers, interim 1xx answers, a receiver that drops a kept
connection, garbage) against a plain TCP server that writes exact bytes, so each case is
the bytes a receiver really can send. TLS runs against a server with a certificate from a
throwaway CA (trustme).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
import trustme
from aiohttp import web
from yarl import URL

from monitor.config import DeliveryConfig
from monitor.webhooks.http1 import ConnectFailed, Http1Client, ProtocolFailure, header_lines
from monitor.webhooks.sender import Sender
from monitor.webhooks.signing import EVENT_ID_HEADER
from tests.webhook_support import receiver

BODY = b'{"event":{},"signature":"s","delivered_at":"t"}'

#: Answers a scripted server can give, by name.
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Scripted:
    """A plain TCP server: reads one request at a time (headers and Content-Length body)
    and answers with ``answer(n)`` for the n-th request overall (None: close without
    answering; bytes ending the connection are closed after writing if ``close``)."""

    def __init__(self, answer: Callable[[int], tuple[bytes | None, bool]]) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.connections = 0
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                data, close = self.answer(len(self.requests))
                if data is None:
                    break
                writer.write(data)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def scripted(answer: Callable[[int], tuple[bytes | None, bool]]
                   ) -> AsyncIterator[Scripted]:
    server = Scripted(answer)
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = srv.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        srv.close()


@asynccontextmanager
async def client(**kw: object) -> AsyncIterator[Http1Client]:
    c = Http1Client(allow_loopback=True, max_idle_per_origin=4, **kw)  # type: ignore[arg-type]
    try:
        yield c
    finally:
        await c.close()


async def post(c: Http1Client, url: str, headers: bytes = b"") -> int:
    async with asyncio.timeout(5):
        return await c.post(URL(url), headers, BODY)


async def test_sequential_posts_reuse_one_connection_and_send_exact_bytes() -> None:
    async with receiver() as rec:
        peers: list[object] = []

        async def note(request: web.Request, body: bytes) -> web.StreamResponse | None:
            peers.append(request.transport.get_extra_info("peername")
                         if request.transport else None)
            return None

        rec.on_request = note
        async with client() as c:
            url = rec.url + "?token=a%20b&x=1"
            statuses = [await post(c, url, header_lines([("X-Test", "1")])) for _ in range(5)]
    assert statuses == [200] * 5
    assert len(set(map(str, peers))) == 1  # kept alive: one connection for five POSTs
    assert [r.body for r in rec.received] == [BODY] * 5
    first = rec.received[0]
    assert first.headers["X-Test"] == "1"
    assert first.headers["Content-Length"] == str(len(BODY))
    assert first.headers["Host"] == URL(rec.url).host_port_subcomponent


async def test_request_line_keeps_path_and_query() -> None:
    async with scripted(lambda n: (OK, False)) as srv:
        async with client() as c:
            await post(c, f"http://127.0.0.1:{srv.port}/a/b%2Fc?token=x%26y&z=1")
    assert srv.requests[0].startswith(b"POST /a/b%2Fc?token=x%26y&z=1 HTTP/1.1\r\n")
    assert f"\r\nHost: 127.0.0.1:{srv.port}\r\n".encode() in srv.requests[0]


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello",
])
async def test_answers_read_whole_keep_the_connection(answer: bytes) -> None:
    async with scripted(lambda n: (answer, False)) as srv:
        async with client() as c:
            statuses = [await post(c, f"http://127.0.0.1:{srv.port}/") for _ in range(3)]
    assert statuses == [201] * 3
    assert srv.connections == 1


async def test_answer_ended_by_close_and_connection_close_header() -> None:
    # An answer without a length ends with the connection; an answer that says
    # "Connection: close" is not reused even while the receiver keeps the socket open.
    until_close = b"HTTP/1.0 202 Accepted\r\n\r\nbody until the end"
    closing = b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
    for answer, status, receiver_closes in ((until_close, 202, True), (closing, 204, False)):
        async with scripted(lambda n, a=answer, e=receiver_closes: (a, e)) as srv:  # type: ignore[misc]
            async with client() as c:
                statuses = [await post(c, f"http://127.0.0.1:{srv.port}/") for _ in range(3)]
        assert statuses == [status] * 3
        assert srv.connections == 3  # never reused after the receiver said close


async def test_a_kept_connection_the_receiver_dropped_is_replaced_once() -> None:
    # The receiver keeps the first connection, then drops it when the second POST arrives
    # on it, without answering (its idle timeout racing our reuse): the POST goes out
    # once more on a new connection. The receiver saw it twice: deliveries are
    # at-least-once and carry their event id.
    script = {1: (OK, False), 2: (None, True)}
    async with scripted(lambda n: script.get(n, (OK, False))) as srv:
        async with client() as c:
            first = await post(c, f"http://127.0.0.1:{srv.port}/")
            second = await post(c, f"http://127.0.0.1:{srv.port}/")
    assert (first, second) == (200, 200)
    assert srv.connections == 2 and len(srv.requests) == 3


async def test_receiver_closing_without_answer_is_an_error_not_a_retry_loop() -> None:
    async with scripted(lambda n: (None, True)) as srv:
        async with client() as c:
            with pytest.raises(ProtocolFailure, match="closed the connection"):
                await post(c, f"http://127.0.0.1:{srv.port}/")
    assert len(srv.requests) == 1  # a fresh connection is never retried


async def test_garbage_and_oversized_answers() -> None:
    async with scripted(lambda n: (b"SMTP ready\r\n\r\n", False)) as srv:
        async with client() as c:
            with pytest.raises(ProtocolFailure, match="invalid HTTP answer"):
                await post(c, f"http://127.0.0.1:{srv.port}/")
    big = b"x" * 100_000
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(big) + big
    async with scripted(lambda n: (answer, False)) as srv:
        async with client(max_body_bytes=1024) as c:
            statuses = [await post(c, f"http://127.0.0.1:{srv.port}/") for _ in range(2)]
    assert statuses == [200, 200]
    assert srv.connections == 2  # not drained: the connection is dropped instead


def test_header_values_with_line_breaks_are_refused() -> None:
    with pytest.raises(ValueError):
        header_lines([("X-Event-Id", "e\r\nX-Injected: 1")])
    assert header_lines([("A", "1"), ("B", "2")]) == b"A: 1\r\nB: 2\r\n"


async def test_refused_connection_is_a_connect_failure() -> None:
    from tests.webhook_support import free_tcp_port

    async with client() as c:
        with pytest.raises(ConnectFailed):
            await post(c, f"http://127.0.0.1:{free_tcp_port()}/")


@asynccontextmanager
async def tls_server(ca: trustme.CA, host: str
                     ) -> AsyncIterator[tuple[int, list[bytes], list[str | None]]]:
    """A TLS server with a certificate for ``host``: (port, requests, SNI names seen)."""
    seen: list[bytes] = []
    names: list[str | None] = []
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(host).configure_cert(ctx)
    ctx.sni_callback = lambda _sock, name, _ctx: names.append(name)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            seen.append(head)
            writer.write(OK)
            await writer.drain()
            await reader.read()  # keep it open until the client closes
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    try:
        yield srv.sockets[0].getsockname()[1], seen, names
    finally:
        srv.close()


async def test_https_verifies_the_certificate_and_sends_sni() -> None:
    ca = trustme.CA()
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    async with tls_server(ca, "localhost") as (port, seen, names):
        # the system's trust store does not know the throwaway CA
        async with client(ssl_context=trusting) as good, client() as default:
            assert await post(good, f"https://localhost:{port}/hook") == 200
            with pytest.raises(ConnectFailed):
                await post(default, f"https://localhost:{port}/hook")
    assert len(seen) == 1  # the untrusted connection never sent its request
    assert names == ["localhost", "localhost"]  # the hostname went out as SNI both times


async def test_https_certificate_for_another_name_is_refused() -> None:
    ca = trustme.CA()
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    async with tls_server(ca, "hooks.example.com") as (port, seen, _):
        async with client(ssl_context=trusting) as c:
            with pytest.raises(ConnectFailed):
                await post(c, f"https://localhost:{port}/hook")
    assert seen == []


async def test_sender_times_out_a_hanging_receiver_and_drops_its_connection() -> None:
    async with receiver(["hang", 200]) as rec:
        sender = Sender(DeliveryConfig(allow_loopback=True, timeout_seconds=0.5))
        try:
            hung = await sender.send(rec.url, b"{}", event_type="DEPEG_TIER_CHANGE",
                                     event_id="e1", secret="s")
            ok = await sender.send(rec.url, b"{}", event_type="DEPEG_TIER_CHANGE",
                                   event_id="e2", secret="s")
        finally:
            await sender.close()
    assert hung.status_code is None and hung.error == "timeout after 0.5s"
    assert ok.status_code == 200 and ok.error is None
    assert [r.headers[EVENT_ID_HEADER] for r in rec.received] == ["e1", "e2"]
