"""Builds the aiohttp application: middlewares, then each route module adds its routes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from ..config import Config
from ..logs import get_logger
from ..storage import Database
from .errors import ApiError, error_response

CONFIG = web.AppKey("config", Config)
DB = web.AppKey("db", Database)

log = get_logger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure leaves as the one JSON error shape; nothing leaks a traceback."""
    try:
        return await handler(request)
    except ApiError as exc:
        return exc.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() in {"allow", "retry-after"}}
        return error_response(exc.status, exc.reason or "error", headers=headers or None)
    except asyncio.CancelledError:
        raise
    except Exception:
        # Logged with the traceback here; the client gets the error shape, no internals.
        log.exception("api.unhandled_error", method=request.method, path=request.path)
        return error_response(500, "internal server error")


def create_app(config: Config, db: Database) -> web.Application:
    from . import auth, health, observe, openapi, ratelimit, rwa, webhooks

    app = web.Application(
        middlewares=[observe.metrics_middleware, errors_middleware, auth.auth_middleware],
        client_max_size=config.api.max_body_bytes,
    )
    app[CONFIG] = config
    app[DB] = db
    ratelimit.install(app, config.api, db)  # its middleware runs inside auth's
    for module in (health, webhooks, rwa, openapi):
        module.add_routes(app)
    return app
