"""``depeg-monitor status``: what the service sees, read straight from the store.

No API key and no curl: tokens by tier (with the worst ones named), stale tokens, each
consumer group's lag, and webhook deliveries waiting. Colour on a terminal (not when piped,
or with ``NO_COLOR`` / ``--no-color``). The broker part is best effort: the store alone
answers the rest when no broker is reachable.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

import msgspec

from .commands import Command, add_bootstrap_servers, with_bootstrap_servers
from .runstate import live_state

if TYPE_CHECKING:  # the API's view, the records, the drivers: imported when status runs
    from aiokafka import TopicPartition

    from .config import Config, KafkaConfig
    from .storage import Database

#: Worst first; the tier names of the rating model.
TIERS = ("critical", "warning", "watch", "premium", "ok")
COLOURS = {"critical": "1;31", "warning": "33", "watch": "36", "premium": "35", "ok": "32"}
NAMED_PER_TIER = 6
BROKER_TIMEOUT_SECONDS = 5.0


@dataclass
class Report:
    tiers: dict[str, list[str]] = field(default_factory=dict)
    stale: list[str] = field(default_factory=list)
    ratings_table: bool = True
    deliveries: dict[str, int] = field(default_factory=dict)
    webhooks_table: bool = True
    lag: dict[str, int | None] = field(default_factory=dict)
    broker: str = ""
    broker_error: str | None = None


async def _table_exists(db: Database, table: str) -> bool:
    try:
        await db.fetchval(f"SELECT COUNT(*) FROM {table} WHERE 1 = 0")
    except Exception:
        return False
    return True


async def read_store(db: Database, config: Config, report: Report) -> None:
    """Tokens by tier, stale tokens, deliveries by status: all from the database."""
    from .api.rwa.view import is_stale
    from .records import RatingSnapshot

    stale_after = config.model.stale_after_seconds
    if await _table_exists(db, "rating_latest"):
        rows = await db.fetch(
            "SELECT chain, symbol, tier, snapshot, received_at FROM rating_latest"
            " ORDER BY rating DESC")
        wall = time.time()
        for row in rows:
            name = f"{row['symbol']}({row['chain']})"
            report.tiers.setdefault(row["tier"], []).append(name)
            snap = msgspec.json.decode(row["snapshot"], type=RatingSnapshot)
            if is_stale(row, snap, stale_after, wall):  # the API's own rule
                report.stale.append(name)
    else:
        report.ratings_table = False
    if await _table_exists(db, "webhook_deliveries"):
        for row in await db.fetch(
                "SELECT status, COUNT(*) AS n FROM webhook_deliveries GROUP BY status"):
            report.deliveries[row["status"]] = int(row["n"])
    else:
        report.webhooks_table = False


async def read_lag(config: Config, report: Report) -> None:
    """Records each consumer group has not committed yet, summed over its partitions.

    A consumer carrying the group id reads the committed offsets (OffsetFetch) without
    subscribing, so it never joins the group or disturbs its members."""
    from aiokafka import TopicPartition

    from .kafka.closing import close_bounded
    from .kafka.topics import make_consumer

    k = config.kafka
    report.broker = k.bootstrap_servers
    v = config.vaults
    groups = {"monitor": (k.monitor_group, [k.ticks_topic]),
              "store": (k.store_group, [k.ratings_topic, k.tier_changes_topic,
                                        v.facts_topic, v.ratings_topic]),
              "delivery": (k.delivery_group, [k.tier_changes_topic]),
              "vaults": (v.group, [v.facts_topic])}
    try:
        async with asyncio.timeout(BROKER_TIMEOUT_SECONDS):
            for name, (group, topics) in groups.items():
                consumer = make_consumer(k, group_id=group, request_timeout_ms=3000)
                await consumer.start()
                try:
                    await consumer.topics()  # fetches the metadata partitions_for_topic reads
                    parts = [TopicPartition(topic, p) for topic in topics
                             for p in sorted(consumer.partitions_for_topic(topic) or ())]
                    committed = {tp: await consumer.committed(tp) for tp in parts}
                finally:
                    await close_bounded(consumer.stop(), "consumer_stop", "status.close_failed")
                ends = await _true_ends(k, parts)
                known = {tp: off for tp, off in committed.items() if off is not None}
                # Never committed: the group has not run (or is new).
                report.lag[name] = (sum(max(0, ends[tp] - off) for tp, off in known.items())
                                    if known else None)
    except Exception as exc:  # best effort (timeout included): the store part still answers
        report.broker_error = f"{type(exc).__name__}: {exc}".rstrip(": ")


async def _true_ends(k: KafkaConfig, parts: list[TopicPartition]) -> dict[TopicPartition, int]:
    """End offsets read to the fetch high watermark: ``end_offsets`` stops short on the
    embedded broker (monitor/kafka/readall.py), which made lag read 0 after a restore.
    A group-less reader, so the groups' members are never disturbed."""
    from .kafka.closing import close_bounded
    from .kafka.readall import true_end_offsets
    from .kafka.topics import make_reader

    if not parts:
        return {}
    reader = make_reader(k, k.client_id, request_timeout_ms=3000)
    await reader.start()
    try:
        return await true_end_offsets(reader, parts, stall_seconds=BROKER_TIMEOUT_SECONDS)
    finally:
        await close_bounded(reader.stop(), "reader_stop", "status.close_failed")


def render(report: Report, config: Config, colour: bool) -> str:
    def paint(text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if colour else text

    out: list[str] = []
    running = live_state(config)
    out.append(f"data directory: {config.storage.data_dir}")
    out.append("run: " + (f"running (pid {running.pid}), broker {running.bootstrap_servers}, "
                          f"API {running.api_url}" if running else "not running on this machine"))
    total = sum(len(v) for v in report.tiers.values())
    if not report.ratings_table:
        out.append("tokens: no ratings stored yet (the store writer has not run against "
                   f"{_safe(config.storage.url)})")
    else:
        out.append(f"tokens: {total} rated")
        for tier in TIERS + tuple(t for t in report.tiers if t not in TIERS):
            names = report.tiers.get(tier, [])
            shown = " ".join(names[:NAMED_PER_TIER]) + (
                f" … +{len(names) - NAMED_PER_TIER}" if len(names) > NAMED_PER_TIER else "")
            label = paint(f"{tier:<9}", COLOURS.get(tier, "0"))
            out.append(f"  {label}{len(names):>5}  {shown}".rstrip())
        stale = report.stale
        line = (f"stale tokens: {len(stale)} (no tick for >= "
                f"{config.model.stale_after_seconds} s at their last rating)")
        if stale:
            line += ": " + " ".join(stale[:NAMED_PER_TIER]) + (
                " …" if len(stale) > NAMED_PER_TIER else "")
            line = paint(line, "33")
        out.append(line)
    if report.broker_error is not None or not report.broker:
        why = report.broker_error or "no broker configured and no run found"
        out.append(f"consumer lag: unknown (broker {report.broker or '-'}: {why})")
    else:
        parts = [f"{name} {'-' if lag is None else lag}" for name, lag in report.lag.items()]
        out.append(f"consumer lag (records, broker {report.broker}): " + ", ".join(parts))
        if report.lag.get("monitor"):
            # Not a backlog: the monitor commits only past ticks inside written states.
            out.append(f"  (the monitor's includes ticks processed but not yet in a written "
                       f"state: up to kafka.state_max_age_seconds="
                       f"{config.kafka.state_max_age_seconds:g} s of them, by design)")
    if not report.webhooks_table:
        out.append("deliveries: no webhook tables yet")
    else:
        d = report.deliveries
        line = (f"deliveries: {d.get('pending', 0)} pending, {d.get('failed', 0)} failed "
                f"awaiting a retry, {d.get('max_retries_exceeded', 0)} gave up, "
                f"{d.get('success', 0)} delivered")
        out.append(paint(line, "33") if d.get("failed") or d.get("max_retries_exceeded")
                   else line)
    return "\n".join(out)


def _safe(url: str) -> str:
    from .runstate import _without_password

    return _without_password(url)


def use_colour(stream: TextIO, flag: bool | None) -> bool:
    if flag is not None:
        return flag
    return stream.isatty() and not os.environ.get("NO_COLOR")


async def collect(config: Config) -> Report:
    from .storage import connect

    report = Report()
    db = await connect(config.storage.url)
    try:
        await read_store(db, config, report)
    finally:
        await db.close()
    if config.kafka.bootstrap_servers:
        await read_lag(config, report)
    return report


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_servers(parser, "broker for the consumer lag (default: kafka."
                                  "bootstrap_servers, else a running `run`'s)")
    parser.add_argument("--color", dest="colour", action="store_true", default=None,
                        help="colour even when not on a terminal")
    parser.add_argument("--no-color", dest="colour", action="store_false",
                        help="no colour (also NO_COLOR=1)")


def _run(args: argparse.Namespace, config: Config) -> int:
    config = with_bootstrap_servers(config, args.bootstrap_servers)
    try:
        report = asyncio.run(collect(config))
    except Exception as exc:
        print(f"depeg-monitor status: cannot read the store {_safe(config.storage.url)}: "
              f"{exc}", file=sys.stderr)
        return 1
    print(render(report, config, use_colour(sys.stdout, args.colour)))
    return 0


command = Command(
    name="status",
    help="tokens by tier, stale tokens, consumer lag and pending deliveries (from the store)",
    add_arguments=_add_arguments,
    run=_run,
    description=(
        "Reads storage.url directly (no API key needed): tokens by tier with the worst named, "
        "stale tokens, webhook deliveries by status; and, when a broker is configured or a "
        "`depeg-monitor run` is found on this machine, each consumer group's lag. Colour on "
        "a terminal."
    ),
)
