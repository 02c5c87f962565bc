"""v2 deprecation headers (RFC 9745 ``Deprecation``, RFC 8594 ``Sunset``, ``Link``).

Once the configured V3 general-availability time (``v3.ga_date``) has passed on the app's
clock, every v2 response (``/vaults*``, ``/rwa*``; errors included) carries:

* ``Deprecation: @<GA epoch seconds>`` (RFC 9745 structured date),
* ``Sunset: <GA + v3.sunset_months calendar months, HTTP-date>`` (RFC 8594),
* ``Link: <v3.migration_guide_url>; rel="deprecation"``.

Before GA (or with no GA configured) none of them is sent. Months are calendar months; a
day that does not exist in the target month becomes that month's last day (31 May + 9
months = 29 Feb in a leap year).
"""

from __future__ import annotations

import calendar
from datetime import UTC, datetime
from email.utils import format_datetime

from aiohttp import web

from ..config import V3Config
from .context import CLOCK, CONFIG, Handler

#: Path prefixes of the unversioned (v2) resources.
V2_PREFIXES = ("/vaults", "/rwa")


def is_v2(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in V2_PREFIXES)


def add_months(moment: datetime, months: int) -> datetime:
    index = moment.month - 1 + months
    year, month = moment.year + index // 12, index % 12 + 1
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


def headers(config: V3Config, now: float) -> dict[str, str]:
    """The deprecation headers due at ``now`` (epoch seconds); empty before GA."""
    ga = config.ga_date
    if ga is None or now < ga.timestamp():
        return {}
    ga_utc = ga.astimezone(UTC)
    sunset = add_months(ga_utc, config.sunset_months)
    return {
        "Deprecation": f"@{int(ga_utc.timestamp())}",
        "Sunset": format_datetime(sunset, usegmt=True),
        "Link": f'<{config.migration_guide_url}>; rel="deprecation"',
    }


@web.middleware
async def deprecation_middleware(request: web.Request,
                                 handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    if is_v2(request.path):
        response.headers.update(headers(request.app[CONFIG].v3, request.app[CLOCK]()))
    return response
