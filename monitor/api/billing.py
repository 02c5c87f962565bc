"""Compute units for API calls: ``@billed("E8")`` charges 1 CU per call to the caller's key.

Which calls are charged (docs/v3.md, "Billing"): every call that reaches a billed endpoint
with a valid key, whatever its 2xx or 4xx answer (a 404 or 400 still did the lookup and the
validation; charging it also makes probing other tenants' ids cost the prober). Not charged:
calls the server failed (5xx: our fault, not the customer's), and requests refused before
they reach the endpoint (401 without a valid key, 413, a rate limiter's 429). The charge is
written after the handler has answered, so a crash is never billed. Webhook deliveries are
charged by the delivery store when a delivery is created (once, however many attempts).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Final

from aiohttp import web

from .. import metrics
from ..storage.usage import UsageStore
from .context import DB, Handler, api_key_id, now
from .errors import ApiError

#: Ledger kind (the endpoint) -> the ``kind`` label of ``depeg_cu_consumed_total``.
METRIC_KIND: Final = {"E3": "query", "E8": "query", "E10": "management", "E11": "management",
                      "E12": "management", "E13": "management", "E14": "management",
                      "E15": "management", "delivery": "delivery"}


async def charge(request: web.Request, endpoint: str) -> None:
    await UsageStore(request.app[DB]).charge(api_key_id(request), endpoint, uuid.uuid4().hex,
                                             now(request))
    metrics.CU_CONSUMED.labels(METRIC_KIND[endpoint]).inc()


def billed(endpoint: str) -> Callable[[Handler], Handler]:
    """1 CU per call to ``endpoint`` (a key of :data:`METRIC_KIND`), 2xx and 4xx alike."""
    if endpoint not in METRIC_KIND:
        raise ValueError(f"no metric kind for endpoint {endpoint!r}")

    def wrap(handler: Handler) -> Handler:
        async def billed_handler(request: web.Request) -> web.StreamResponse:
            try:
                response = await handler(request)
            except web.HTTPException as exc:
                if exc.status < 500:
                    await charge(request, endpoint)
                raise
            except ApiError as exc:
                if exc.status < 500:
                    await charge(request, endpoint)
                raise
            if response.status < 500:
                await charge(request, endpoint)
            return response
        return billed_handler
    return wrap
