"""Records taken off the real topics match the documented schemas: simulated ticks published
by the producer, rated by the monitor daemon, read back from depeg.ratings and
depeg.tier-changes."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import jsonschema
import pytest

from monitor.config import Config, KafkaConfig
from monitor.daemon import MonitorDaemon
from monitor.engine import Engine
from monitor.kafka.embedded import EmbeddedBroker
from monitor.records import TierChangeEvent
from producers.kafka_out import open_sender
from producers.publish import publish_rows
from producers.synthetic import generate, make_tokens
from tests.producers.kafka_readback import read_topic

pytestmark = pytest.mark.broker

SCHEMAS = Path(__file__).resolve().parents[2] / "monitor" / "schemas"
KEY = re.compile(r"^(eth|arb|pol|opt|base|bsc|linea):0x[0-9a-f]{40}$")


def validator(name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((SCHEMAS / name).read_text()))


async def test_topic_records_match_the_schemas(broker: EmbeddedBroker) -> None:
    ticks = list(generate(make_tokens(6, 2), seed=2, start=1_700_000_000.0, interval=60.0,
                          duration=3 * 3600))
    engine = Engine(Config().model)
    expected = [o for t in ticks for o in engine.process(t) if isinstance(o, TierChangeEvent)]
    assert expected, "the scenarios must change some tier in three hours"

    config = Config(kafka=KafkaConfig(bootstrap_servers=broker.bootstrap_servers, partitions=2,
                                      batch_timeout_ms=100))
    sender = await open_sender(broker.bootstrap_servers, config.kafka)
    try:
        await publish_rows(ticks, sender, speed=None, stop=asyncio.Event())
    finally:
        await sender.close()

    stop = asyncio.Event()
    task = asyncio.create_task(MonitorDaemon(config).run(stop))
    try:
        events = await read_topic(broker.bootstrap_servers, config.kafka.tier_changes_topic,
                                  expect=len(expected), wait=60)
        ratings = await read_topic(broker.bootstrap_servers, config.kafka.ratings_topic,
                                   expect=100, wait=30, settle=0.0)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)

    # The daemon published what the engine says (same deterministic ids, nothing else).
    got = [json.loads(r.value)["event_id"] for r in events]
    assert len(got) == len(expected) and set(got) == {e.event_id for e in expected}
    event_schema, rating_schema = validator("tier-change.json"), validator("rating-snapshot.json")
    for records, schema in ((events, event_schema), (ratings, rating_schema)):
        for r in records:
            assert KEY.match(r.key.decode())
            errors = [e.message for e in schema.iter_errors(json.loads(r.value))]
            assert not errors, (r.value[:200], errors)
