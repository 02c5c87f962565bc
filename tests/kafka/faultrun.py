"""Set-up shared by the tests that fault real ``depeg-monitor monitor`` processes and
compare what they published with replay (``test_fault_matrix``, ``test_cadence``): the
input files, waiting for a share of the output, the last instance's finish, and reading
back what was published."""

from __future__ import annotations

from pathlib import Path

from monitor.config import KafkaConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.tickfiles import BadRow, read_file
from producers.csvout import write_ticks_file
from producers.synthetic import generate, make_tokens
from tests.conftest import data_file

from .kafkatools import MonitorProcess, TopicReader, group_caught_up, wait_for

#: 2023-03-10 12:00 to 2023-03-12 00:00 UTC: USDC's fall to 0.88 after SVB.
SVB_DAYS = (1678449600.0, 1678579200.0)


def matrix_files(out: Path) -> list[Path]:
    """The SVB weekend of USDC plus 12 simulated tokens, as tick files in ``out``."""
    usdc = out / "usdc-svb-weekend.csv"
    source = data_file("ticks/usdc_2023-03_binanceus_1m.csv")
    week = [t for t in read_file(source)
            if not isinstance(t, BadRow) and SVB_DAYS[0] <= t.ts < SVB_DAYS[1]]
    write_ticks_file(week, usdc)
    simulated = out / "simulated.csv"
    write_ticks_file(generate(make_tokens(12, seed=11), seed=11, start=SVB_DAYS[0],
                              interval=600.0, duration=SVB_DAYS[1] - SVB_DAYS[0]), simulated)
    return [usdc, simulated]


class Progress:
    """Waits until a fraction of the owed rating snapshots were published."""

    def __init__(self, broker: EmbeddedBroker, kafka: KafkaConfig, owed_ratings: int) -> None:
        self.bootstrap = broker.bootstrap_servers
        self.topic = kafka.ratings_topic
        self.total = owed_ratings

    async def reached(self, fraction: float, beyond: int = 0) -> None:
        """Until ``fraction`` of them are on the topic, and more than ``beyond`` records
        (what was there before the running instance started: so it published some)."""
        async with TopicReader(self.bootstrap, self.topic) as ratings:
            await ratings.until(
                lambda r: len(r) >= fraction * self.total and len(r) > beyond, 120,
                f"{fraction:.0%} of the ratings" + (f", past {beyond}" if beyond else ""))

    async def on_topic(self) -> int:
        """How many rating records are on the topic now (duplicates included)."""
        async with TopicReader(self.bootstrap, self.topic) as ratings:
            return len(await ratings.to_end(60))


async def finish(broker: EmbeddedBroker, kafka: KafkaConfig, last: MonitorProcess) -> None:
    """Lets the last instance commit every tick, then stops it cleanly (exit 0)."""
    try:
        await wait_for(lambda: group_caught_up(broker.bootstrap_servers, kafka.monitor_group,
                                               kafka.ticks_topic), 180,
                       "the group to commit every tick")
    finally:
        assert last.stop() == 0, last.log_path.read_text()[-3000:]


async def published(broker: EmbeddedBroker, kafka: KafkaConfig) -> list[tuple[str, bytes]]:
    """Every rating and tier change on the output topics, as ``replaytruth.judge`` takes
    them."""
    out: list[tuple[str, bytes]] = []
    for kind, topic in (("rating", kafka.ratings_topic),
                        ("tier_change", kafka.tier_changes_topic)):
        async with TopicReader(broker.bootstrap_servers, topic) as reader:
            while await reader.poll(1000):
                pass
            out += [(kind, rec.value) for rec in reader.records]
    return out
