"""One partition's fetched ticks through its engine: the monitor daemon's per-tick loop.

Apart from the coroutine (``ingest.MonitorDaemon._process``) for two reasons: nothing in
it needs to wait (a bad record is handed back, and the daemon sends its dead letter after
the loop, in the same order), and a plain function is one the compiled build
(monitor/compiled.py ``MODULES``) can run natively, where an interpreted loop cost about
as much per tick as the compiled engine behind it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..engine import Output
from ..kafka.fetched import Record
from ..ticks import BadTick, Tick, decode_tick
from ..timesanity import check_not_future
from .clock import LiveClock
from .partitions import PartitionState

#: Older than any tick (event times are finite): ``newest``'s default in the loop.
_NEVER = float("-inf")


def _checked_key(token_keys: dict[str, tuple[str, str, bytes]], tick: Tick,
                rkey: bytes | None) -> str:
    """The tick's key when ``rkey`` (the record's key) is it, else :class:`BadTick`; kept
    in ``token_keys`` by the tick's token for the next record (the first chain seen keeps
    an address found on two chains: the other chain's ticks come here every time)."""
    key = tick.key
    if rkey != key.encode():
        raise BadTick("bad_key", f"record key {rkey!r:.80} is not {key!r}: a token's "
                      "ticks must share one partition")
    token_keys.setdefault(tick.token, (key, tick.chain, rkey))
    return key


class Feed:
    """What feeding one fetched batch needs besides the partition: the live clock, the
    wall clock's bounds on event time, and how a late tick is described. Made once per
    batch (``wall`` is read once per batch)."""

    def __init__(self, clock: LiveClock, wall: float, tolerance: float, started: float,
                 late_detail: Callable[[str, Tick], str]) -> None:
        self.clock = clock
        self.wall = wall
        self.tolerance = tolerance
        #: The batch's start on the monotonic clock: when a token's first tick since its
        #: written state was taken (coverage.Uncovered.since).
        self.started = started
        self.late_detail = late_detail
        #: Ticks a restored state already covered, skipped (the daemon's stats count them).
        self.skipped = 0

    def run(self, part: PartitionState, recs: list[Record], partition: int,
            produced: list[Output], refused: list[tuple[Record, BadTick]]) -> None:
        """Decode each of ``recs`` (one partition's, in offset order), check its key and
        time, and hand it to the partition's engine, its outputs appended to
        ``produced``; a record that cannot be used is appended to ``refused`` with the
        reason (the caller dead-letters it), in order. The live clock learns each token's
        newest tick of the batch once, at the end (``LiveClock.ticked``)."""
        clock = self.clock
        wall = self.wall
        tolerance = self.tolerance
        take = part.engine.take
        # Restore marks: nothing in the loop adds any, so a partition without them at the
        # batch's start has none in it (one local test per tick). Below the restore
        # position only ticks a compact state left out are processed; each record's own
        # offset decides, so sifting them first is the per-record test.
        restoring = bool(part.refeed or part.skip_below)
        todo = recs
        if recs[0].offset < part.resume_at:
            todo = [rec for rec in recs if not part.inside_restored(rec.offset)]
        # The token's ticks since its last written state (Uncovered.took, inlined).
        uncovered = part.uncovered
        counts = uncovered.count
        token_keys = part.token_keys
        # No tick can be past its future bound below this (the bound is max(wall,
        # newest) + tolerance, never lower): most ticks skip the exact check.
        future_from = wall + tolerance
        # Each token's newest event time in this batch, handed to the live clock once per
        # partition batch (LiveClock.ticked), not per tick: the wall stamp it takes is the
        # same to within the batch.
        newest: dict[str, float] = {}
        for rec in todo:
            offset: int = rec.offset
            try:
                tick = decode_tick(rec.value)
                # The record key must be the tick's key. The tick's token string (the
                # decoder's cached object, its hash kept) maps to its key string, chain and
                # record key once seen: an identity compare and a compare of bytes, instead
                # of formatting and encoding the key (or hashing the record key's new bytes
                # per tick); the one key string per token keeps its hash for the dict
                # lookups below. Subscripts, not ``.get``: no method call interpreted.
                try:
                    known = token_keys[tick.token]
                except KeyError:
                    key = _checked_key(token_keys, tick, rec.key)
                else:
                    if known[1] == tick.chain and known[2] == rec.key:
                        key = known[0]
                    else:
                        key = _checked_key(token_keys, tick, rec.key)
            except BadTick as exc:
                refused.append((rec, exc))
                continue
            if restoring and part.should_skip(key, offset):
                self.skipped += 1
                continue
            ts = tick.ts
            if ts > future_from:
                if key in newest:  # the clock must know this batch's ticks first
                    clock.tick(key, newest.pop(key), partition)
                try:
                    check_not_future(tick, clock.last_event_ts(key), wall, tolerance)
                except BadTick as exc:
                    refused.append((rec, exc))
                    continue
            # Its key string, checked above; its offset, kept beside the tick while the
            # engine holds it for lateness (what a compact state lists instead of it); its
            # outputs appended to the batch's (False: late, nothing appended).
            if not take(tick, key, offset, produced):
                # A late spread observation is a copy the restarted spread stage sent
                # again (or one for a boundary rated without it): expected, not news.
                if tick.cross_chain_chains is None:
                    if key in newest:  # the detail names the token's newest tick
                        clock.tick(key, newest.pop(key), partition)
                    refused.append((rec, BadTick("late", self.late_detail(key, tick))))
                continue
            # A spread observation is no liveness.
            if tick.cross_chain_chains is None and ts > newest.get(key, _NEVER):
                newest[key] = ts
            try:  # the token's first tick since its written state is the rare case
                counts[key] += 1
            except KeyError:
                uncovered.took(key, offset, self.started)
        clock.ticked(newest, partition)
