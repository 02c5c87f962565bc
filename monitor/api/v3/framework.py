"""E9 ``GET /v3/framework``: the taxonomy, public (no key, no billing), cacheable 5 minutes.

The body is built once per framework version at start-up (the framework is immutable data),
with a strong ETag over its bytes; ``If-None-Match`` with that tag (or ``*``) answers 304
without a body. ``Cache-Control: public, max-age=300`` is the spec's 5-minute cache.
"""

from __future__ import annotations

import hashlib

import msgspec
from aiohttp import web

from ...framework.grading import SUPPORTED_SCHEMES
from ...framework.model import SUPPORTED_VERSIONS, load_framework
from .. import params
from .body import framework_json
from .pins import parse_pins

CACHE_CONTROL = "public, max-age=300"
_DOCS = web.AppKey("v3_framework_documents", dict[str, tuple[bytes, str]])


def document(version: str) -> bytes:
    body = framework_json(load_framework(version, "vault"), list(SUPPORTED_VERSIONS),
                          list(SUPPORTED_SCHEMES))
    body["rwa_framework"] = framework_json(load_framework(version, "rwa"),
                                           list(SUPPORTED_VERSIONS), list(SUPPORTED_SCHEMES))
    return msgspec.json.encode(body)


async def _build(app: web.Application) -> None:
    docs: dict[str, tuple[bytes, str]] = {}
    for version in SUPPORTED_VERSIONS:
        raw = document(version)
        docs[version] = (raw, '"' + hashlib.sha256(raw).hexdigest()[:32] + '"')
    app[_DOCS] = docs


def matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 weak comparison over a comma-separated ``If-None-Match`` list."""
    tags = [t.strip() for t in if_none_match.split(",")]
    return "*" in tags or any(t.removeprefix("W/") == etag for t in tags)


async def get_framework(request: web.Request) -> web.Response:
    query = request.rel_url.query
    params.known(query, ("framework_version",))
    pins = parse_pins(query, schemes=False)
    raw, etag = request.app[_DOCS][pins.framework_version]
    headers = {"Cache-Control": CACHE_CONTROL, "ETag": etag, "Vary": "Accept-Encoding",
               "Service-Api-Version": pins.headers()["Service-Api-Version"],
               "Service-Framework-Version": pins.framework_version}
    if matches(request.headers.get("If-None-Match", ""), etag):
        return web.Response(status=304, headers=headers)
    return web.Response(body=raw, content_type="application/json", headers=headers)


def add_routes(app: web.Application) -> None:
    app.on_startup.append(_build)
    app.router.add_get("/v3/framework", get_framework, allow_head=False)
