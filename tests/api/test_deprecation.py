"""v2 deprecation headers: absent before the V3 GA date, present (right Sunset) after it,
on every v2 response and on no V3 one. The app's clock is injected."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

import msgspec
import pytest

from monitor.api.deprecation import add_months, headers
from monitor.config import Config, V3Config
from monitor.storage.ratings import RatingsStore
from tests.readapi_support import story
from tests.webhook_support import api_client, make_config, new_key

USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
GA = datetime(2027, 1, 31, 12, 0, tzinfo=UTC)
GUIDE = "https://docs.example/migration-v2-to-v3"
HEADERS = ("Deprecation", "Sunset", "Link")


async def test_headers_follow_the_injected_clock(tmp_path: Path) -> None:
    base = make_config(f"sqlite:///{tmp_path / 'dep.db'}")
    config: Config = msgspec.structs.replace(
        base, v3=V3Config(ga_date=GA, migration_guide_url=GUIDE))
    now = [GA.timestamp() - 1]
    async with api_client(config, clock=lambda: now[0]) as (client, db):
        store = RatingsStore(db)
        await store.migrate()
        snaps, events = story("eth", USDC, [("ok", 10, 1.0)])
        await store.write_batch(snaps, events)
        key, _ = await new_key(db)
        v2 = [("/rwa", key, 200), (f"/rwa/{USDC}?chain=eth", key, 200), ("/vaults", key, 200),
              ("/vaults/0x" + "ab" * 20 + "?chain=eth", key, 404),
              ("/rwa/0x" + "ab" * 20, key, 404), ("/rwa?tier=nope", key, 400),
              ("/rwa", None, 401)]
        v3 = [("/v3/framework", None, 200), (f"/v3/rwa/{USDC}", key, 200),
              ("/v3/vaults/0x" + "ab" * 20 + "?chain=eth", key, 404),
              ("/usage", key, 200), ("/webhooks/subscriptions", key, 200), ("/healthz", None,
                                                                             200)]

        async def seen(path: str, k: str | None, status: int) -> dict[str, str]:
            resp = await client.get(path, headers={"x-api-key": k} if k else {})
            assert resp.status == status, path
            return {h: resp.headers[h] for h in HEADERS if h in resp.headers}

        for path, k, status in v2 + v3:  # one second before GA: nothing anywhere
            assert await seen(path, k, status) == {}, path
        now[0] = GA.timestamp()  # from GA on, on every v2 response, errors included
        for path, k, status in v2:
            got = await seen(path, k, status)
            assert got["Deprecation"] == "@1801396800", path  # 2027-01-31T12:00:00Z
            assert got["Sunset"] == "Sun, 31 Oct 2027 12:00:00 GMT"
            assert got["Link"] == f'<{GUIDE}>; rel="deprecation"'
            assert parsedate_to_datetime(got["Sunset"]) > GA
        for path, k, status in v3:
            assert await seen(path, k, status) == {}, path


def test_no_ga_date_means_no_headers() -> None:
    assert headers(V3Config(), 4e9) == {}


@pytest.mark.parametrize(("start", "months", "end"), [
    (datetime(2027, 1, 31, 12, 0, tzinfo=UTC), 9, datetime(2027, 10, 31, 12, 0, tzinfo=UTC)),
    (datetime(2026, 5, 31, tzinfo=UTC), 9, datetime(2027, 2, 28, tzinfo=UTC)),
    (datetime(2027, 5, 31, tzinfo=UTC), 9, datetime(2028, 2, 29, tzinfo=UTC)),  # leap year
    (datetime(2026, 4, 15, 8, 30, tzinfo=UTC), 9, datetime(2027, 1, 15, 8, 30, tzinfo=UTC)),
    (datetime(2026, 12, 1, tzinfo=UTC), 12, datetime(2027, 12, 1, tzinfo=UTC)),
])
def test_calendar_months(start: datetime, months: int, end: datetime) -> None:
    assert add_months(start, months) == end
