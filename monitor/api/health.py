"""Routes: /healthz, /readyz and /metrics on the API app (no API key needed).

The handlers live in monitor/health.py so the ops listener of the other processes serves
exactly the same answers.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from .. import health

_ERROR: dict[str, Any] = {
    "type": "object", "required": ["error"], "properties": {"error": {"type": "string"}},
}
_CHECKS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {
        "type": "object", "required": ["ok", "detail"],
        "properties": {"ok": {"type": "boolean"}, "detail": {"type": "string"}},
    },
}

#: OpenAPI 3.1 path items for these routes; merged into /openapi.json by its assembler.
OPENAPI_PATHS: Final[dict[str, Any]] = {
    "/healthz": {"get": {
        "summary": "Liveness: the process is running", "operationId": "healthz",
        "tags": ["operations"], "security": [],
        "responses": {"200": {"description": "Alive", "content": {"application/json": {
            "schema": {"type": "object", "required": ["status"],
                       "properties": {"status": {"const": "ok"}}}}}}},
    }},
    "/readyz": {"get": {
        "summary": "Readiness: broker and store reachable, consumers assigned and not lagging",
        "operationId": "readyz", "tags": ["operations"], "security": [],
        "responses": {
            "200": {"description": "Ready", "content": {"application/json": {"schema": {
                "type": "object", "required": ["status", "checks"],
                "properties": {"status": {"const": "ready"}, "checks": _CHECKS}}}}},
            "503": {"description": "Not ready; every check with its detail",
                    "content": {"application/json": {"schema": {
                        **_ERROR, "properties": {**_ERROR["properties"], "checks": _CHECKS}}}}},
        },
    }},
    "/metrics": {"get": {
        "summary": "Prometheus metrics (text exposition format)", "operationId": "metrics",
        "tags": ["operations"], "security": [],
        "responses": {"200": {"description": "Metrics", "content": {
            "text/plain": {"schema": {"type": "string"}}}}},
    }},
}


def add_routes(app: web.Application) -> None:
    health.add_routes(app)
