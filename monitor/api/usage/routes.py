"""Route: ``GET /usage?from=&to=&groupBy=day|endpoint``: the caller's own compute units.

Scoped by the authenticated key and nothing else (there is no key parameter to pass): a key
never sees another key's usage. The call itself is free. ``from`` is inclusive and ``to``
exclusive; a bare date means the whole UTC day (``to=2026-11-23`` includes the 23rd).
Without them: the last 30 days up to now. At most 366 days per call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

from aiohttp import web

from ...storage.usage import DAY, UsageStore
from ...timefmt import format_ts, parse_ts
from .. import params
from ..context import DB, api_key_id, json_response, now

DEFAULT_DAYS = 30
MAX_DAYS = 366
GROUPS = ("day", "endpoint")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _instant(query: Mapping[str, str], name: str, end_of_day: bool) -> float | None:
    value = query.get(name)
    if value is None:
        return None
    message = f"{name} must be a date (YYYY-MM-DD) or an ISO 8601 UTC timestamp"
    if len(value) > 40:
        raise params.bad(name, message)
    try:
        if _DATE.match(value):
            day = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
            return day + DAY if end_of_day else day
        if "T" not in value:
            raise ValueError(value)
        return parse_ts(value)
    except (ValueError, OverflowError, OSError):
        raise params.bad(name, message) from None


def period(query: Mapping[str, str], current: float) -> tuple[float, float]:
    start = _instant(query, "from", end_of_day=False)
    end = _instant(query, "to", end_of_day=True)
    end = current if end is None else end
    start = end - DEFAULT_DAYS * DAY if start is None else start
    if start >= end:
        raise params.bad("from", "from must be before to")
    if end - start > MAX_DAYS * DAY:
        raise params.bad("to", f"at most {MAX_DAYS} days per request", maxDays=MAX_DAYS)
    return start, end


async def get_usage(request: web.Request) -> web.Response:
    query = request.rel_url.query
    params.known(query, ("from", "to", "groupBy"))
    group_by = params.enum(query, "groupBy", GROUPS)
    start, end = period(query, now(request))
    totals = await UsageStore(request.app[DB]).totals(api_key_id(request), start, end,
                                                       group_by)
    body: dict[str, object] = {"from": format_ts(start), "to": format_ts(end),
                               "total_cu": totals.total}
    if group_by == "day":
        body["groupBy"] = "day"
        body["items"] = [{"day": format_ts(int(g) * DAY)[:10], "cu": units}
                         for g, units in totals.groups]
    elif group_by == "endpoint":
        body["groupBy"] = "endpoint"
        body["items"] = [{"endpoint": str(g), "cu": units} for g, units in totals.groups]
    return json_response(body)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/usage", get_usage, allow_head=False)
