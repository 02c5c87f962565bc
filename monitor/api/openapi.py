"""The OpenAPI 3.1 document of the whole service, served at ``/openapi.json`` (no key).

Each route module describes its own routes in ``OPENAPI_PATHS`` (path -> operations) and
``OPENAPI_SCHEMAS`` (component schemas); this module adds the shared parts (security
scheme, error shape, common error responses) and merges them. A test checks that every
route of the app is described here and nothing else is.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import msgspec
from aiohttp import web

from .. import __version__
from . import resources

#: The one error schema of every route. The spec fixes error bodies only for E8's pins
#: (``supported_versions``, ``supported_schemes``, ``Invalid chain``); elsewhere the two
#: families keep the details their clients already read (README, "Errors"): the read
#: routes name the query ``parameter``, the webhook routes the ``field`` and a ``reason``.
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Every error: a message in `error`, optional details beside it. A 400 "
                   "of /rwa, /vaults and /v3 names the offending query `parameter` (and "
                   "the `allowed` values, or the `minimum`/`maximum`); a 400 of /webhooks names "
                   "the offending `field` (body or query) and the `reason`. A 429 adds "
                   "`retry_after_seconds`.",
    "required": ["error"],
    "properties": {"error": {"type": "string"}, "parameter": {"type": "string"},
                   "allowed": {"type": "array"}, "minimum": {"type": "number"},
                   "maximum": {"type": "number"}, "field": {"type": "string"},
                   "reason": {"type": "string"}, "retry_after_seconds": {"type": "integer"}},
    "additionalProperties": True,
}


def _error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description, "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    if headers:
        out["headers"] = headers
    return out


RESPONSES: dict[str, Any] = {
    "BadRequest": _error("Invalid parameter or body; names the allowed values"),
    "Unauthorized": _error("Missing or unknown x-api-key"),
    "NotFound": _error("Unknown resource"),
    "MethodNotAllowed": _error("Method not allowed on this path",
                               {"Allow": {"schema": {"type": "string"}}}),
    "PayloadTooLarge": _error("Request body larger than api.max_body_bytes"),
    "TooManyRequests": _error("Rate limited", {
        "Retry-After": {"schema": {"type": "integer", "minimum": 0},
                        "description": "Seconds to wait before retrying"}}),
}

OPENAPI_PATHS: dict[str, Any] = {
    "/openapi.json": {"get": {
        "operationId": "getOpenApi",
        "summary": "This document",
        "security": [],
        "tags": ["meta"],
        "responses": {"200": {"description": "OpenAPI 3.1 document",
                              "content": {"application/json": {"schema": {"type": "object"}}}}},
    }},
}


def route_modules() -> list[ModuleType]:
    """The resource modules whose routes the document describes (``/openapi.json`` itself
    is always added)."""
    return list(resources.ROUTE_MODULES)


def build_document(modules: list[ModuleType] | None = None) -> dict[str, Any]:
    from .ratelimit import document

    return document(_assemble(modules))


def _assemble(modules: list[ModuleType] | None = None) -> dict[str, Any]:
    paths: dict[str, Any] = dict(OPENAPI_PATHS)
    schemas: dict[str, Any] = {"Error": ERROR_SCHEMA}
    for module in modules if modules is not None else route_modules():
        for path, operations in getattr(module, "OPENAPI_PATHS", {}).items():
            paths.setdefault(path, {}).update(operations)
        schemas.update(getattr(module, "OPENAPI_SCHEMAS", {}))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "depeg-monitor",
            "version": __version__,
            "description": "Depeg ratings of pegged tokens (stablecoins, RWAs), risk "
                           "ratings of ERC-4626 vaults, and webhook "
                           "subscriptions for tier changes. Every endpoint but the "
                           "health, metrics and this document takes the `x-api-key` header. "
                           "Every error is JSON: `{\"error\": ..., details}`.",
        },
        "servers": [{"url": "/"}],
        "security": [{"ApiKeyAuth": []}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "securitySchemes": {"ApiKeyAuth": {"type": "apiKey", "in": "header",
                                               "name": "x-api-key"}},
            "schemas": schemas,
            "responses": RESPONSES,
        },
    }


_DOC = web.AppKey("openapi_document", bytes)


async def _build(app: web.Application) -> None:
    app[_DOC] = msgspec.json.encode(build_document())


async def get_openapi(request: web.Request) -> web.Response:
    return web.Response(body=request.app[_DOC], content_type="application/json")


def add_routes(app: web.Application) -> None:
    app.on_startup.append(_build)
    app.router.add_get("/openapi.json", get_openapi, allow_head=False)
