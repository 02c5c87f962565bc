"""A token whose ticks stop is still refreshed: event time is extrapolated from its last
tick by the wall time since, the snapshot shows the staleness, logs and metrics say so."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from monitor import metrics
from monitor.config import Config, ModelConfig
from monitor.daemon import MonitorDaemon
from monitor.kafka.embedded import EmbeddedBroker
from monitor.records import decode_snapshot
from monitor.testing import publish
from monitor.ticks import make_tick

from .kafkatools import TopicReader, fast_kafka, tick_records, wait_for

pytestmark = pytest.mark.broker

TOKEN = "0xdac17f958d2ee523a2206206994597c13d831ec7"
#: Historical event time (a replay of 2023): the wall clock must not be used as event time.
BOUNDARY = 1_678_000_020 - 1_678_000_020 % 60 + 600


async def test_quiet_token_is_refreshed_in_extrapolated_event_time(broker: EmbeddedBroker) -> None:
    # One refresh a minute of event time, no lateness hold, stale after 1 s of wall time.
    model = ModelConfig(refresh_seconds=60, lateness_seconds=0, stale_after_seconds=1)
    config = Config(model=model, kafka=fast_kafka(broker.bootstrap_servers,
                                                  live_clock_interval_seconds=0.3))
    k = config.kafka
    # Ticks every minute up to 2 s before a refresh boundary, then silence.
    last = BOUNDARY - 2
    ticks = [make_tick(last - 60 * i, "eth", TOKEN, "USDT", "0.97", "1")
             for i in reversed(range(30))]
    stop = asyncio.Event()
    daemon = MonitorDaemon(config)
    task = asyncio.create_task(daemon.run(stop))
    try:
        await daemon.joined.wait()
        await publish(broker.bootstrap_servers, k.ticks_topic, tick_records(ticks))
        async with TopicReader(broker.bootstrap_servers, k.ratings_topic) as ratings:
            def refreshed(recs: list[Any]) -> bool:
                return any(decode_snapshot(r.value).timestamp.startswith(_iso(BOUNDARY))
                           for r in recs)

            await ratings.until(refreshed, 30, "the wall-clock refresh at the boundary")
            snaps = [decode_snapshot(r.value) for r in ratings.records]
        boundary_snap = next(s for s in snaps if s.timestamp.startswith(_iso(BOUNDARY)))
        assert boundary_snap.staleness_seconds == pytest.approx(2.0)
        # Event time stayed in 2023: nothing was stamped with today's wall clock.
        assert all(s.timestamp.startswith("2023-03-") for s in snaps)

        async def stale_reported() -> bool:
            return bool(metrics.TOKENS_STALE._value.get() >= 1)

        await wait_for(stale_reported, 10, "the stale-token gauge")
        ok, detail = await daemon.check()
        assert ok, detail  # a quiet feed is not an unready monitor
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def _iso(ts: int) -> str:
    from monitor.timefmt import format_ts

    return format_ts(ts)
