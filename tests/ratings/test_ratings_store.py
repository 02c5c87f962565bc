"""The ratings store on SQLite and PostgreSQL: episodes, idempotent replays, retention."""

from __future__ import annotations

import pytest

from monitor.registry import parse_registry
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from monitor.storage.ratings_read import ListFilter, PageRequest, list_tokens
from tests.readapi_support import T0, snapshot, story

TOKEN = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
PATH = [("ok", 10, 1.0), ("watch", 45, 0.99), ("critical", 85, 0.88), ("critical", 90, 0.87),
        ("warning", 65, 0.95), ("ok", 20, 0.999), ("ok", 10, 1.0)]


async def dump(store: RatingsStore) -> dict[str, list[dict[str, object]]]:
    out = {}
    for table, order in (("rating_history", "chain, token_address, ts"),
                         ("rating_latest", "chain, token_address"),
                         ("tier_changes", "event_id"),
                         ("depeg_episodes", "chain, token_address, started_at")):
        rows = await store.db.fetch(f"SELECT * FROM {table} ORDER BY {order}")
        # When a row arrived (wall clock) differs between writes by design; the rest may not.
        out[table] = [{k: v for k, v in dict(r).items() if k != "received_at"} for r in rows]
    return out


@pytest.fixture
async def store(storage_url: str):  # type: ignore[no-untyped-def]
    db = await connect(storage_url)
    s = RatingsStore(db)
    await s.migrate()
    try:
        yield s
    finally:
        await db.close()


async def test_episode_from_snapshots_and_events(store: RatingsStore) -> None:
    snaps, events = story("eth", TOKEN, PATH)
    await store.write_batch(snaps, events)
    [ep] = await store.db.fetch("SELECT * FROM depeg_episodes")
    assert ep["started_at"] == T0 + 300 and ep["started_tier"] == "watch"
    assert ep["worst_tier"] == "critical"
    assert ep["peak_deviation_pct"] == pytest.approx(-13.0)
    assert ep["peak_at"] == T0 + 900 and ep["peak_rating"] == 90
    assert ep["recovered_at"] == T0 + 1500
    latest = await store.db.fetchrow("SELECT * FROM rating_latest")
    assert latest is not None and latest["tier"] == "ok" and latest["tier_since"] == T0 + 1500


async def test_replay_and_split_batches_give_the_same_rows(store: RatingsStore) -> None:
    snaps, events = story("eth", TOKEN, PATH)
    await store.write_batch(snaps, events)
    first = await dump(store)
    await store.write_batch(snaps, events)  # replay of the same records
    assert await dump(store) == first
    # Events ahead of their snapshots and one record per batch, in another store: same rows.
    await store.db.execute("DELETE FROM rating_history")
    await store.db.execute("DELETE FROM rating_latest")
    await store.db.execute("DELETE FROM tier_changes")
    await store.db.execute("DELETE FROM depeg_episodes")
    for e in events:
        await store.write_batch([], [e])
    for s in snaps:
        await store.write_batch([s], [])
    assert await dump(store) == first


async def test_open_episode_and_collapse(store: RatingsStore) -> None:
    path = [("ok", 10, 1.0), ("critical", 95, 0.3)] + [("critical", 95, 0.6)] * 3
    snaps, events = story("eth", TOKEN, path, step=3 * 86400)
    await store.write_batch(snaps[:2], events)
    [ep] = await store.db.fetch("SELECT * FROM depeg_episodes")
    assert ep["recovered_at"] is None and ep["worst_tier"] == "critical"
    row = await store.db.fetchrow("SELECT collapsed FROM rating_latest")
    assert row == {"collapsed": 1}  # below half the peg
    await store.write_batch(snaps[2:3], [])
    assert await store.db.fetchval("SELECT collapsed FROM rating_latest") == 0  # 3 days, 0.6
    await store.write_batch(snaps[3:], [])
    assert await store.db.fetchval("SELECT collapsed FROM rating_latest") == 1  # 9 days


async def test_retention_keeps_latest_and_open_episodes(store: RatingsStore) -> None:
    old, old_events = story("eth", TOKEN, PATH)
    other = "0x" + "11" * 20
    open_snaps, open_events = story("arb", other, [("ok", 1, 1.0), ("critical", 90, 0.8)])
    recent = [snapshot("eth", TOKEN, T0 + 40 * 86400, 5, "ok")]
    await store.write_batch(old + open_snaps + recent, old_events + open_events)
    deleted = await store.apply_retention(30, now=T0 + 40 * 86400)
    assert deleted > 0
    assert await store.db.fetchval("SELECT COUNT(*) FROM rating_history") == 1
    assert await store.db.fetchval("SELECT COUNT(*) FROM rating_latest") == 2
    [ep] = await store.db.fetch("SELECT chain, recovered_at FROM depeg_episodes")
    assert ep == {"chain": "arb", "recovered_at": None}
    assert await store.db.fetchval("SELECT COUNT(*) FROM tier_changes") == 1
    # A later recovery still closes the kept episode.
    _, recovery = story("arb", other, [("critical", 90, 0.8), ("ok", 5, 1.0)],
                        start=T0 + 41 * 86400)
    await store.write_batch([], recovery)
    recovered = await store.db.fetchval("SELECT recovered_at FROM depeg_episodes")
    assert recovered == T0 + 41 * 86400 + 300


async def test_registry_join_filters(store: RatingsStore) -> None:
    await store.sync_registry(parse_registry(f"""
[[token]]
chain = "eth"
address = "{TOKEN.upper().replace('0X', '0x')}"
symbol = "USDC"
name = "USD Coin"
market_cap_usd = 3e10
"""))
    snaps = [snapshot("eth", TOKEN, T0, 5, "ok"), snapshot("bsc", "0x" + "22" * 20, T0, 50,
                                                             "watch", 0.99, symbol="ODD_1")]
    await store.write_batch(snaps, [])
    got = await list_tokens(store.db, ListFilter(tags=("standard",)), PageRequest())
    assert [r["reg_symbol"] for r in got.rows] == ["USDC"]
    got = await list_tokens(store.db, ListFilter(tags=("unregistered",)), PageRequest())
    assert [r["snap_symbol"] for r in got.rows] == ["ODD_1"]
    got = await list_tokens(store.db, ListFilter(q="d_1"), PageRequest())
    assert got.total == 1
    got = await list_tokens(store.db, ListFilter(q="%"), PageRequest())
    assert got.total == 0  # wildcards are matched literally
    got = await list_tokens(store.db, ListFilter(q="coin"), PageRequest())
    assert got.total == 1 and got.by_chain == {"eth": 1}
    got = await list_tokens(store.db, ListFilter(), PageRequest(sort="market_cap_usd"))
    assert [r["chain"] for r in got.rows] == ["eth", "bsc"]  # no market cap sorts last
