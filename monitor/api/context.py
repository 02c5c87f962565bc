"""What every API module shares, in one leaf module: the app keys and per-request state.

``app.py`` builds the application and imports the resource modules; the resource modules
(rwa, webhooks, ...) and the middlewares import only this module for the configuration,
the database, the clock and the authenticated key, so nothing imports back from ``app.py``
and there is no import circle. It imports nothing from ``monitor.api`` but ``errors``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web

from ..config import Config
from ..storage import Database
from .errors import ApiError

#: The effective configuration and the open database, set once by ``create_app``.
CONFIG = web.AppKey("config", Config)
DB = web.AppKey("db", Database)
#: Injectable wall clock (epoch seconds). ``create_app`` sets ``time.time``; tests replace
#: it to simulate the 24 h secret-rotation window, the 5-minute retry rule, and so on.
CLOCK: web.AppKey[Callable[[], float]] = web.AppKey("clock")
#: Injectable monotonic clock (seconds) for the in-memory caches' bounds (how long a
#: verified key or a ratings version read is trusted); tests replace it before startup.
TICKS: web.AppKey[Callable[[], float]] = web.AppKey("ticks")

#: The x-api-key header and the request key holding the authenticated API key's id.
API_KEY_HEADER = "x-api-key"
API_KEY_ID = web.RequestKey("api_key_id", str)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def install(app: web.Application, config: Config, db: Database) -> None:
    app[CONFIG] = config
    app[DB] = db
    app[CLOCK] = time.time
    app[TICKS] = time.monotonic


def now(request: web.Request) -> float:
    """The app's clock (injectable), not ``time.time`` directly."""
    return request.app[CLOCK]()


def api_key_id(request: web.Request) -> str:
    """The authenticated key's id (only on routes behind the auth middleware)."""
    if API_KEY_ID not in request:
        raise ApiError(401, "missing API key", header=API_KEY_HEADER)
    return request[API_KEY_ID]


def json_response(body: Any, status: int = 200,
                  headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=msgspec.json.encode(body), status=status, headers=headers,
                        content_type="application/json")
