"""SSRF: webhookUrl must be public HTTPS — at creation and again at delivery."""

from __future__ import annotations

import pytest
from aiohttp import web

from monitor.config import DeliveryConfig
from monitor.webhooks.sender import Sender
from monitor.webhooks.urls import UnsafeUrl, check_url, check_url_resolving
from tests.webhook_support import receiver

REFUSED = [
    "http://example.com/hook",
    "https://127.0.0.1/hook",
    "https://[::1]/hook",
    "https://10.0.0.1/hook",
    "https://169.254.169.254/latest/meta-data",
    "https://[::ffff:10.0.0.1]/hook",
    "https://[::ffff:8.8.8.8]/hook",       # IPv4-mapped, even when public
    "https://100.64.0.1/hook",              # CGNAT
    "https://192.168.1.1/hook",
    "https://172.16.0.1/hook",
    "https://224.0.0.1/hook",               # multicast
    "https://240.0.0.1/hook",               # reserved
    "https://0.0.0.0/hook",
    "https://[fe80::1]/hook",
    "https://[fc00::1]/hook",
    "https://localhost/hook",               # a hostname resolving to loopback
    "https://2130706433/hook",              # 127.0.0.1 written as a number
    "https://0x7f.1/hook",                  # and in hex
    "https://[fe80::1%25eth0]/hook",        # link-local with a zone id
    "https://user:pw@example.com/hook",
    "ftp://example.com/hook",
    "not a url",
]


@pytest.mark.parametrize("url", REFUSED)
async def test_refused_at_creation(url: str) -> None:
    with pytest.raises(UnsafeUrl):
        await check_url_resolving(url, allow_loopback=False)


def test_public_https_literal_passes_static_check() -> None:
    assert check_url("https://8.8.8.8/hook").host == "8.8.8.8"
    assert check_url("https://[2606:4700:4700::1111]/x").scheme == "https"


def test_allow_loopback_allows_only_loopback() -> None:
    check_url("http://127.0.0.1:8080/hook", allow_loopback=True)
    check_url("http://localhost:8080/hook", allow_loopback=True)
    for url in ("http://10.0.0.1/hook", "https://169.254.169.254/", "http://example.com/"):
        with pytest.raises(UnsafeUrl):
            check_url(url, allow_loopback=True)


async def test_refused_at_delivery_when_name_resolves_private() -> None:
    """DNS rebinding: the resolver used for the connection refuses private answers."""
    async with receiver() as rec:
        port = rec.url.split(":")[2].split("/")[0]
        sender = Sender(DeliveryConfig(allow_loopback=False, timeout_seconds=2))
        try:
            result = await sender.send(f"https://localhost:{port}/hook", b"{}",
                                       event_type="DEPEG_TIER_CHANGE", event_id="e", secret="s")
            literal = await sender.send(f"https://127.0.0.1:{port}/hook", b"{}",
                                        event_type="DEPEG_TIER_CHANGE", event_id="e",
                                        secret="s")
        finally:
            await sender.close()
        assert not result.ok and result.error and result.error.startswith("blocked")
        assert not literal.ok and literal.error and literal.error.startswith("blocked")
        assert rec.received == []


async def test_redirect_to_private_address_is_not_followed() -> None:
    async with receiver() as target, receiver() as rec:
        async def redirect(request: web.Request, body: bytes) -> web.StreamResponse:
            return web.Response(status=302, headers={"Location": target.url})

        rec.on_request = redirect
        sender = Sender(DeliveryConfig(allow_loopback=True, timeout_seconds=2))
        try:
            result = await sender.send(rec.url, b"{}", event_type="DEPEG_TIER_CHANGE",
                                       event_id="e", secret="s")
            rec.on_request = None

            async def to_metadata(request: web.Request, body: bytes) -> web.StreamResponse:
                return web.Response(status=307,
                                    headers={"Location": "http://169.254.169.254/latest"})

            rec.on_request = to_metadata
            metadata = await sender.send(rec.url, b"{}", event_type="DEPEG_TIER_CHANGE",
                                         event_id="e", secret="s")
        finally:
            await sender.close()
        assert result.status_code == 302 and not result.ok
        assert metadata.status_code == 307 and not metadata.ok
        assert target.received == []  # the redirect target was never contacted


async def test_errors_do_not_carry_the_url_path_or_query() -> None:
    """A receiver URL may hold a token; attempt errors (logged, listed) must not."""
    from monitor.webhooks.sender import _short

    url = "https://hooks.example.com/hook?token=s3cr3t-in-query"
    text = _short(f"ClientResponseError: 400, message='Bad', url='{url}'", url)
    assert "s3cr3t" not in text and "https://hooks.example.com:443/…" in text
    # A NUL (which PostgreSQL's text refuses, failing the whole cycle) is replaced.
    assert _short("bad\x00byte", url) == "bad\ufffdbyte"
    sender = Sender(DeliveryConfig(allow_loopback=True, timeout_seconds=2))
    try:
        from tests.webhook_support import free_tcp_port

        url = f"http://127.0.0.1:{free_tcp_port()}/hook?token=s3cr3t-in-query"
        result = await sender.send(url, b"{}", event_type="DEPEG_TIER_CHANGE", event_id="e",
                                   secret="s")
    finally:
        await sender.close()
    assert result.error and "connect error" in result.error
    assert "s3cr3t" not in result.error
