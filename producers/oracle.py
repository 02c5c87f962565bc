"""Chainlink-style price feeds (AggregatorV3Interface) read over JSON-RPC.

A feed answers ``latestRoundData()`` with ``(roundId, answer, startedAt, updatedAt,
answeredInRound)`` and scales ``answer`` by ``decimals()``. Every answer change emits
``AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt)``, which
:func:`backfill` reads with ``eth_getLogs`` to rebuild the feed's history.

Staleness: a feed that stops updating keeps answering its last price forever, so a reading
carries its age (block time minus ``updatedAt``) and is *stale* past the feed's heartbeat;
the adapters then publish no oracle price for it (an old price is no observation) and the
stale feed is counted and logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from .evmcalls import BadReply, call_data, decode_result, event_topic
from .rpc import RpcClient, RpcError

ANSWER_UPDATED = event_topic("AnswerUpdated(int256,uint256,uint256)")
LATEST_ROUND = call_data("latestRoundData()")
DECIMALS = call_data("decimals()")


@dataclass(frozen=True)
class FeedReading:
    feed: str
    answer: Decimal  # scaled by decimals
    updated_at: int  # unix seconds
    round_id: int
    age_seconds: int  # block time - updated_at
    stale: bool

    @property
    def price(self) -> str:
        """The answer as a decimal string (the tick format keeps prices as text)."""
        return format(self.answer.normalize(), "f")


def scale(answer: int, decimals: int) -> Decimal:
    return Decimal(answer).scaleb(-decimals)


def read_calls(client: RpcClient, feed: str) -> list[tuple[str, list[object]]]:
    """The two calls a reading needs, for the caller to batch with others."""
    return [client.eth_call(feed, LATEST_ROUND), client.eth_call(feed, DECIMALS)]


def parse_reading(feed: str, latest: object, decimals: object, *, block_time: int,
                  heartbeat_seconds: float) -> FeedReading:
    round_id, answer, _, updated_at, _ = decode_result(
        ["uint80", "int256", "uint256", "uint256", "uint80"], latest, f"{feed} latestRoundData")
    (dec,) = decode_result(["uint8"], decimals, f"{feed} decimals")
    if answer <= 0:
        raise BadReply(f"{feed}: non-positive answer {answer}")
    age = max(0, block_time - int(updated_at))
    return FeedReading(feed, scale(int(answer), int(dec)), int(updated_at), int(round_id), age,
                       age > heartbeat_seconds)


async def read_feed(client: RpcClient, feed: str, *, block_time: int,
                    heartbeat_seconds: float) -> FeedReading:
    latest, decimals = await client.batch(read_calls(client, feed))
    return parse_reading(feed, latest, decimals, block_time=block_time,
                         heartbeat_seconds=heartbeat_seconds)


@dataclass(frozen=True)
class FeedUpdate:
    round_id: int
    answer: Decimal
    updated_at: int
    block: int


async def backfill(client: RpcClient, feed: str, from_block: int, to_block: int, *,
                   decimals: int | None = None, chunk_blocks: int = 5_000) -> list[FeedUpdate]:
    """Every ``AnswerUpdated`` of ``feed`` in the block range, oldest first.

    Ranges are split into ``chunk_blocks`` pieces: providers cap the span of ``eth_getLogs``.
    """
    if decimals is None:
        (decimals,) = decode_result(["uint8"], await client.call("eth_call", {
            "to": feed, "data": DECIMALS}, hex(to_block)), f"{feed} decimals")
    updates: list[FeedUpdate] = []
    start = from_block
    while start <= to_block:
        end = min(to_block, start + chunk_blocks - 1)
        logs = await client.call("eth_getLogs", {"address": feed, "topics": [ANSWER_UPDATED],
                                                 "fromBlock": hex(start), "toBlock": hex(end)})
        if isinstance(logs, RpcError) or not isinstance(logs, list):
            raise BadReply(f"{feed}: eth_getLogs answered {str(logs)[:200]}")
        for entry in logs:
            topics = entry["topics"]
            current = int.from_bytes(bytes.fromhex(topics[1][2:]), "big", signed=True)
            updates.append(FeedUpdate(int(topics[2], 16), scale(current, int(decimals)),
                                      int(entry["data"], 16), int(entry["blockNumber"], 16)))
        start = end + 1
    updates.sort(key=lambda u: (u.block, u.round_id))
    return updates
