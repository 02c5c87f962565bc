"""Request metrics for the HTTP API: count and time every request by route template.

The route label is the matched resource's template (``/rwa/{address}``), never the raw
path, so the label set stays bounded whatever clients send; unmatched paths share one value.
Outermost middleware, so it sees the status the client finally gets.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from .. import metrics

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: Methods outside this set are counted as OTHER (the method label stays bounded too).
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


def route_label(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


@web.middleware
async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        method = request.method if request.method in _METHODS else "OTHER"
        metrics.api_request(route_label(request), method, status, time.perf_counter() - started)
