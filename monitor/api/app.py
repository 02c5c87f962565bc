"""Builds the aiohttp application: middlewares, then each resource module adds its routes.

Nothing imports this module but the server and tests: shared app state (config, database,
clock, the authenticated key) lives in :mod:`monitor.api.context`, the list of resources in
:mod:`monitor.api.resources`.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from ..config import Config
from ..logs import get_logger
from ..storage import Database
from . import auth, authlimit, context, deprecation, observe, openapi, ratelimit, resources
from .context import Handler
from .errors import ApiError, error_response

log = get_logger(__name__)


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
    app = web.Application(
        middlewares=[observe.metrics_middleware, deprecation.deprecation_middleware,
                     errors_middleware, authlimit.failed_auth_middleware,
                     auth.auth_middleware],
        client_max_size=config.api.max_body_bytes,
    )
    context.install(app, config, db)
    auth.install(app)
    ratelimit.install(app, config.api, db)  # its middleware runs inside auth's
    authlimit.install(app, config.api)  # 401s per client address, outside auth's
    for module in (*resources.ROUTE_MODULES, openapi):
        module.add_routes(app)
    return app
