"""``webhookUrl`` safety (SSRF): public HTTPS only, checked at creation and at delivery.

Three layers, because each one alone can be bypassed:

1. :func:`check_url` — the URL itself: ``https`` only, a host, no credentials, and an IP
   literal must be a public address (an IP literal is connected to without resolving).
2. :func:`resolve_public` — at creation, every address the hostname resolves to must be
   public (one private answer is enough to refuse: an attacker picks the order).
3. at delivery, :class:`~monitor.webhooks.http1.Http1Client` resolves a hostname through
   :func:`resolve_public` and connects to exactly the addresses that were checked. A DNS
   answer that changes between check and connect (DNS rebinding) therefore cannot reach a
   private address.

Redirects are never followed (the delivery client has no redirect handling). The development
setting ``delivery.allow_loopback`` lets ``http://`` and loopback addresses through — and
nothing else private — so tests and local work can use receivers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from yarl import URL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Ranges ``is_global`` lets through but that must never receive a webhook.
_EXTRA_BLOCKED = tuple(ipaddress.ip_network(n) for n in (
    "100.64.0.0/10",   # CGNAT (is_global is already False; listed for clarity)
    "64:ff9b::/96",    # NAT64: embeds an IPv4 address that may be private
    "64:ff9b:1::/48",  # local-use NAT64
    "2002::/16",       # 6to4: embeds an IPv4 address
    "2001::/32",       # Teredo
))

MAX_URL_LENGTH = 2048
#: Appended where a development receiver on this machine is refused: the way out is named.
LOOPBACK_HINT = ("; for a receiver on this machine during development set "
                 "delivery.allow_loopback = true (DEPEG_DELIVERY__ALLOW_LOOPBACK=true), "
                 "never in production")


class UnsafeUrl(ValueError):
    """The URL (or an address it resolves to) is not a public HTTPS endpoint."""


class BlockedAddress(OSError):
    """Raised in the delivery client's connect path when a resolved address is not public.

    An ``OSError``: it is a connection error of the attempt.
    """


def check_ip(ip: IPAddress, allow_loopback: bool = False) -> None:
    """Raise :class:`UnsafeUrl` unless ``ip`` is a public unicast address."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        raise UnsafeUrl(f"IPv4-mapped IPv6 address {ip} is not allowed")
    if allow_loopback and ip.is_loopback:
        return
    if ip.is_loopback:
        raise UnsafeUrl(f"loopback address {ip} is not allowed{LOOPBACK_HINT}")
    if ip.is_link_local:
        raise UnsafeUrl(f"link-local address {ip} is not allowed")
    if ip.is_multicast:
        raise UnsafeUrl(f"multicast address {ip} is not allowed")
    if ip.is_unspecified or ip.is_reserved:
        raise UnsafeUrl(f"reserved address {ip} is not allowed")
    if ip.is_private:
        raise UnsafeUrl(f"private address {ip} is not allowed")
    if any(ip in net for net in _EXTRA_BLOCKED) or not ip.is_global:
        raise UnsafeUrl(f"non-public address {ip} is not allowed")


def _is_local(host: str) -> bool:
    ip = ip_literal(host)
    return host.lower() == "localhost" if ip is None else ip.is_loopback


def ip_literal(host: str) -> IPAddress | None:
    """The address ``host`` spells (brackets allowed), or None for a hostname."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_url(url: str, allow_loopback: bool = False) -> URL:
    """Static checks of a webhook URL; returns the parsed URL or raises :class:`UnsafeUrl`."""
    if not isinstance(url, str) or not url:
        raise UnsafeUrl("webhookUrl must be a non-empty string")
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeUrl(f"webhookUrl is longer than {MAX_URL_LENGTH} characters")
    bad = next((c for c in url if c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        # yarl would quietly strip or encode these, so the URL stored and shown would not
        # be the one requested (CR/LF: header injection tries; a space: a typo).
        raise UnsafeUrl(f"webhookUrl must not contain spaces or control characters "
                        f"(found {bad!r} at position {url.index(bad)})")
    try:
        parsed = URL(url)
    except (ValueError, TypeError) as exc:
        raise UnsafeUrl(f"webhookUrl is not a valid URL: {exc}") from None
    schemes = {"https", "http"} if allow_loopback else {"https"}
    if parsed.scheme not in schemes:
        local = parsed.scheme == "http" and _is_local(parsed.host or "")
        raise UnsafeUrl("webhookUrl must use https" + (LOOPBACK_HINT if local else ""))
    if not parsed.host:
        raise UnsafeUrl("webhookUrl has no host")
    if parsed.user is not None or parsed.password is not None:
        raise UnsafeUrl("webhookUrl must not carry credentials")
    if parsed.fragment:
        raise UnsafeUrl("webhookUrl must not have a fragment")
    ip = ip_literal(parsed.host)
    if ip is not None:
        check_ip(ip, allow_loopback)
        if parsed.scheme == "http" and not ip.is_loopback:
            raise UnsafeUrl("http is allowed only for loopback receivers (development)")
    elif parsed.scheme == "http" and parsed.host.lower() != "localhost":
        raise UnsafeUrl("http is allowed only for loopback receivers (development)")
    return parsed


async def resolve_public(host: str, port: int, allow_loopback: bool = False,
                         resolver: AbstractResolver | None = None) -> list[ResolveResult]:
    """Resolve ``host``; every address must pass :func:`check_ip`, else :class:`UnsafeUrl`."""
    own = resolver is None
    resolver = resolver or ThreadedResolver()
    try:
        results = await resolver.resolve(host, port, socket.AF_UNSPEC)
    except OSError as exc:
        raise UnsafeUrl(f"cannot resolve {host}: {exc.strerror or exc}") from None
    finally:
        if own:
            await resolver.close()
    if not results:
        raise UnsafeUrl(f"{host} has no addresses")
    for result in results:
        ip = ipaddress.ip_address(result["host"])
        try:
            check_ip(ip, allow_loopback)
        except UnsafeUrl as exc:
            raise UnsafeUrl(f"{host} resolves to a blocked address: {exc}") from None
    return results


async def check_url_resolving(url: str, allow_loopback: bool = False,
                              resolve_seconds: float = 5.0) -> URL:
    """:func:`check_url` plus a DNS check of a hostname (used when a subscription is saved)."""
    parsed = check_url(url, allow_loopback)
    if ip_literal(parsed.host or "") is None:
        try:
            async with asyncio.timeout(resolve_seconds):
                await resolve_public(parsed.host or "", parsed.port or 443, allow_loopback)
        except TimeoutError:
            raise UnsafeUrl(f"resolving {parsed.host} timed out") from None
    return parsed


def origin(url: str) -> str:
    """The per-endpoint concurrency key: scheme://host:port."""
    parsed = URL(url)
    return f"{parsed.scheme}://{(parsed.host or '').lower()}:{parsed.port}"
