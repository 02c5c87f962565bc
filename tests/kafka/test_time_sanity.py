"""Far-future and late ticks are dead-lettered (``future_ts``, ``late``) and do not disturb
the token: every good tick after a year-2100 tick is still rated, exactly as an engine fed
only the good ticks rates them."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from monitor.config import Config
from monitor.daemon import MonitorDaemon
from monitor.kafka.embedded import EmbeddedBroker
from monitor.records import RatingSnapshot
from monitor.replay import run_replay
from monitor.testing import publish
from monitor.ticks import Tick, make_tick

from .kafkatools import (
    TopicReader,
    engine_outputs,
    fast_kafka,
    group_caught_up,
    tick_records,
    wait_for,
)

pytestmark = pytest.mark.broker

TOKEN = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
YEAR_2100 = 4_102_444_800.0


def tick(ts: float, price: str = "0.9995") -> Tick:
    return make_tick(ts, "eth", TOKEN, "USDC", price, "1")


async def test_future_and_late_ticks_are_dead_lettered(broker: EmbeddedBroker) -> None:
    config = Config(kafka=fast_kafka(broker.bootstrap_servers))
    k = config.kafka
    start = time.time() - 6 * 3600  # a live feed: the last six hours, one tick a minute
    good = [tick(start + 60 * i, "0.9995" if i < 200 else "0.97") for i in range(300)]
    bad = {  # position in the stream -> (tick, reason)
        100: (tick(YEAR_2100), "future_ts"),
        150: (tick(time.time() + 3600), "future_ts"),  # an hour ahead of the wall clock
        250: (tick(start + 60 * 240), "late"),  # 10 minutes behind the newest tick
    }
    stream: list[Tick] = []
    for i, t in enumerate(good):
        stream.append(t)
        if i in bad:
            stream.append(bad[i][0])
    expected_events, expected_ratings = engine_outputs(good, config)
    assert expected_events, "the good ticks alone must change the tier (a real check)"

    stop = asyncio.Event()
    daemon = MonitorDaemon(config)
    task = asyncio.create_task(daemon.run(stop))
    try:
        await asyncio.wait_for(daemon.joined.wait(), 30)
        await publish(broker.bootstrap_servers, k.ticks_topic, tick_records(stream))
        await wait_for(lambda: group_caught_up(broker.bootstrap_servers, k.monitor_group,
                                               k.ticks_topic), 60, "every tick committed")
        async with TopicReader(broker.bootstrap_servers, k.dlq_topic) as dlq:
            await dlq.until(lambda r: len(r) >= len(bad), 30, "dead letters")
            await dlq.poll(300)
            letters = [(dict(r.headers), r.value) for r in dlq.records]
        async with TopicReader(broker.bootstrap_servers, k.ratings_topic) as ratings:
            await ratings.until(lambda r: len(r) >= expected_ratings, 30, "ratings")
            await ratings.poll(300)
            published = [msgspec.json.decode(r.value, type=RatingSnapshot)
                         for r in ratings.records]
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)

    got = sorted((h["x-dlq-reason"].decode(), value) for h, value in letters)
    want = sorted((reason, tick_records([t])[0][1]) for t, reason in bad.values())
    assert got == want  # each bad tick, byte for byte, with its reason
    for headers, _ in letters:
        assert headers["x-dlq-detail"]
    # The year-2100 tick did not switch off the token's reordering window: every good
    # tick was rated as if the bad ones never existed, up to the last one.
    assert len(published) == expected_ratings
    assert published[-1].timestamp == _last_rating_time(good, config)
    # The offline replay refuses the same far-future ticks (the late one it drops, counted).
    _, _, summary = run_replay(stream, config.model)
    assert summary.bad_reasons["future_ts"] == 2
    assert summary.late == 1


def _last_rating_time(ticks: list[Tick], config: Config) -> str:
    from monitor.engine import Engine

    engine = Engine(config.model)
    last = None
    for t in ticks:
        for out in engine.process(t):
            if isinstance(out, RatingSnapshot):
                last = out.timestamp
    assert last is not None
    return last
