"""`produce replay` against a real Tansu broker: order, keys, values, bad rows, pacing, stop."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped, unused-ignore]

from monitor.config import Config, KafkaConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.tickfiles import merge_by_time, read_file
from monitor.ticks import Tick, encode_tick
from producers.command import command
from tests.process_support import reap
from tests.producers.kafka_readback import topic_reader

pytestmark = pytest.mark.broker

USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"

DAI = "0x6b175474e89094c44da98b954eedeac495271d0f"

CSV = f"""ts,chain,token,symbol,price_usd,peg_usd,slippage_bps
2023-03-11T00:00:00Z,eth,{USDC},USDC,0.9990,1,
2023-03-11T00:00:30Z,arb,{DAI},DAI,1.0001,1,4.5
2023-03-11T00:01:00Z,solana,{USDC},USDC,0.98,1,
2023-03-11T00:01:30Z,eth,{USDC},USDC,0.9700,1,
2023-03-11T00:02:00Z,eth,{USDC},USDC,NaN,1,
2023-03-11T00:02:30Z,arb,{DAI},DAI,0.9995,1,
2023-03-11T00:03:00Z,eth,0x123,USDC,0.95,1,
2023-03-11T00:03:30Z,eth,{USDC},USDC,0.9400,1,12
"""

JSONL_ROWS = [
    {"ts": "2023-03-11T00:00:15Z", "chain": "base", "token": DAI.upper().replace("0X", "0x"),
     "symbol": "DAI", "price_usd": "1.0002", "peg_usd": "1"},
    "this is not json",
    {"ts": 1678493000, "chain": "eth", "token": USDC, "symbol": "USDC", "price_usd": 0.96},
    {"ts": "2023-03-11T00:05:00Z", "chain": "eth", "token": USDC, "symbol": "USDC"},
]


def write_inputs(tmp_path: Path) -> list[Path]:
    csv_path = tmp_path / "ticks.csv"
    csv_path.write_text(CSV)
    jsonl_path = tmp_path / "more.jsonl"
    jsonl_path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r)
                                    for r in JSONL_ROWS) + "\n")
    return [csv_path, jsonl_path]


def partition_count(bootstrap: str, topic: str) -> int:
    async def count() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            (described,) = await admin.describe_topics([topic])
            return len(described["partitions"])
        finally:
            await admin.close()

    return asyncio.run(count())


def run_produce(argv: list[str], config: Config | None = None) -> int:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.run(parser.parse_args(argv), config or Config())


def test_replay_publishes_good_rows_in_event_time_order(
        broker: EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = write_inputs(tmp_path)
    expected = [r for r in merge_by_time(read_file(p) for p in paths) if isinstance(r, Tick)]
    assert len(expected) == 7  # 5 good CSV rows, 2 good JSON lines

    code = run_produce(["replay", *map(str, paths), "--bootstrap-servers",
                        broker.bootstrap_servers])
    out, err = capsys.readouterr()
    assert code == 0
    assert "published 7 ticks, 5 bad rows skipped" in out
    # Bad rows are reported with file and line, and are not published.
    for where, reason in [("ticks.csv:4", "unknown_chain"), ("ticks.csv:6", "bad_price"),
                          ("ticks.csv:8", "bad_address"), ("more.jsonl:2", "bad_json"),
                          ("more.jsonl:4", "no_observation")]:
        assert any(where in line and reason in line for line in err.splitlines()), (where, err)

    records = topic_reader(broker.bootstrap_servers, "depeg.ticks", expect=len(expected))
    assert len(records) == len(expected)
    for rec in records:
        tick_key = rec.key.decode()
        chain, _, token = tick_key.partition(":")
        assert token == token.lower() and chain in {"eth", "arb", "base"}
    # Per key (= per partition, the only order Kafka keeps) the ticks arrive in event-time
    # order, with exactly the bytes encode_tick produces.
    by_key: dict[str, list[bytes]] = {}
    for rec in sorted(records, key=lambda r: (r.partition, r.offset)):
        by_key.setdefault(rec.key.decode(), []).append(rec.value)
    want: dict[str, list[bytes]] = {}
    for tick in expected:
        want.setdefault(tick.key, []).append(encode_tick(tick))
    assert by_key == want
    # The record timestamp is the event time (CreateTime), so consumers can see lag.
    assert {r.timestamp for r in records} == {int(t.ts * 1000) for t in expected}
    # The topic was created with the configured partition count, not auto-created with 1.
    assert partition_count(broker.bootstrap_servers, "depeg.ticks") == KafkaConfig().partitions


def test_replay_to_existing_topic_and_custom_topic_name(
        broker: EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = write_inputs(tmp_path)[:1]
    config = Config(kafka=KafkaConfig(ticks_topic="custom.ticks", partitions=2))
    for _ in range(2):  # second run finds the topic already there
        assert run_produce(["replay", str(paths[0]), "--bootstrap-servers",
                            broker.bootstrap_servers], config) == 0
    records = topic_reader(broker.bootstrap_servers, "custom.ticks", expect=10)
    assert len(records) == 10
    assert partition_count(broker.bootstrap_servers, "custom.ticks") == 2


def test_speed_paces_by_event_time(
        broker: EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "slow.csv"
    path.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n" + "".join(
        f"2023-03-11T00:00:{s:02d}Z,eth,{USDC},USDC,1,1,\n" for s in range(0, 31, 10)))
    started = time.monotonic()
    assert run_produce(["replay", str(path), "--speed", "60x", "--bootstrap-servers",
                        broker.bootstrap_servers]) == 0
    # 30 s of event time at 60x is half a second of wall time; max would take no time.
    assert time.monotonic() - started >= 0.45


def test_missing_file_and_missing_broker_are_clear_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_produce(["replay", str(tmp_path / "nope.csv"), "--bootstrap-servers",
                        "127.0.0.1:1"]) == 2
    assert "no such file" in capsys.readouterr().err
    paths = write_inputs(tmp_path)
    assert run_produce(["replay", str(paths[0])]) == 2
    assert "no broker configured" in capsys.readouterr().err


def test_sigterm_stops_cleanly_and_flushes(broker: EmbeddedBroker, tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    rows = [f"{1678492800 + 60 * i},eth,{USDC},USDC,1,1,\n" for i in range(600)]
    path.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n" + "".join(rows))
    env = {**os.environ, "DEPEG_LOGGING__FORMAT": "json"}
    # 600 minutes of event time at 600x: a minute of wall time, far longer than the test.
    proc = subprocess.Popen(
        [sys.executable, "-m", "producers", "replay", str(path), "--speed", "600x",
         "--bootstrap-servers", broker.bootstrap_servers],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        first = topic_reader(broker.bootstrap_servers, "depeg.ticks", expect=3, settle=0.0)
        assert len(first) >= 3
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    finally:
        reap(proc)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "(interrupted)" in out
    published = int(out.split("published ")[1].split(" ")[0])
    assert 3 <= published < 600
    # Everything the summary counts as published is on the topic: nothing lost in buffers.
    records = topic_reader(broker.bootstrap_servers, "depeg.ticks", expect=published)
    assert len(records) == published
    assert [r.offset for r in records] == list(range(published))


def test_second_signal_exits_at_once_when_the_flush_hangs(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    rows = [f"{1678492800 + 60 * i},eth,{USDC},USDC,1,1,\n" for i in range(600)]
    path.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n" + "".join(rows))
    proc = subprocess.Popen(
        [sys.executable, "-m", "producers", "replay", str(path), "--speed", "600x",
         "--bootstrap-servers", broker.bootstrap_servers],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "DEPEG_LOGGING__FORMAT": "json"})
    try:
        assert len(topic_reader(broker.bootstrap_servers, "depeg.ticks", expect=2,
                                settle=0.0)) >= 2
        broker.pause()  # the broker stops answering: a flush now waits for its timeout
        # No event to await here: at 600x the pacer hands over a record every 0.1 s, so
        # within half a second some records are waiting for the paused broker.
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)  # first signal: still trying to flush
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=5)
    finally:
        broker.resume()
        reap(proc)
    assert proc.returncode == -signal.SIGTERM
    assert "exiting without flushing" in err


def test_a_broken_file_reports_a_bounded_number_of_rows(
        broker: EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.csv"
    path.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n"
                    + f"2023-03-11T00:00:00Z,eth,{USDC},USDC,1,1,\n"
                    + "".join(f"2023-03-11T00:01:00Z,eth,{USDC},USDC,x{i},1,\n"
                              for i in range(150)))
    assert run_produce(["replay", str(path), "--bootstrap-servers",
                        broker.bootstrap_servers]) == 0
    out, err = capsys.readouterr()
    assert "published 1 ticks, 150 bad rows skipped" in out
    reported = [line for line in err.splitlines() if "bad_price" in line]
    assert len(reported) == 100
    assert reported[0].endswith("broken.csv:3: bad_price: price is not a number: 'x0'")
    assert "more than 100 bad rows" in err
