"""The engine: per-token lateness buffer, windows, scheduled refreshes, tier machine.

Pure: it never reads a clock or does I/O. Refreshes happen at multiples of
``refresh_seconds`` of *event* time, evaluated once a tick past the boundary is applied
(or when the caller advances a quiet token), so a replay and the live daemon fed the same
ticks produce the same ratings and the same event ids.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..config import ModelConfig
from ..records import Tier
from ..ticks import Tick
from .outputs import Output as Output  # re-exported (monitor.engine)
from .params import params
from .refresh import refresh
from .tokenstate import (
    _NO_TIME,
    NO_TAG,
    TRIM_TAGS_OVER,
    _Token,
    export_token,
    restore_token,
)
from .windows import Windows


@dataclass(slots=True)
class EngineStats:
    ticks: int = 0
    applied: int = 0
    late: int = 0
    duplicates: int = 0
    no_peg: int = 0
    refreshes: int = 0
    #: Refreshes skipped because the token had no price with a peg yet.
    unrated: int = 0
    transitions: int = 0


class Engine:
    """Rates every token it is given ticks for.

    ``snapshots=False`` skips building rating snapshots (a replay that only wants the
    transitions); ratings, tiers and events are the same either way.

    ``spread_gated``: token keys whose cross-chain spread observations (monitor.spread)
    arrive in their own stream later than their market ticks. Such a token's ticks are
    applied only up to the newest spread observation received, so every refresh sees the
    spread of its boundary however the two streams interleaved on the way: that is what
    keeps the daemon byte-identical to a replay (docs/cross-chain-spread.md). The live
    clock (``advance``) is not gated: a quiet token is still refreshed.

    ``keep_tags=False``: ``process``'s tags are not kept (a replay has none to give), so
    ``pending_tags`` names none; ratings, tiers and events are the same either way.
    """

    def __init__(self, config: ModelConfig | None = None, *, snapshots: bool = True,
                 spread_gated: frozenset[str] = frozenset(), keep_tags: bool = True) -> None:
        self.config = config or ModelConfig()
        self.snapshots = snapshots
        self.spread_gated = spread_gated
        self.keep_tags = keep_tags
        c = self.config
        longest = max(c.persistence_window_seconds, c.volatility_window_seconds,
                      c.deviation_window_seconds, c.floor_window_seconds, 3600)
        # One bucket more than the longest window: a tick exactly on a refresh boundary
        # opens its bucket, and the window ending there still needs its oldest bucket.
        self._ring = math.ceil(longest / c.bucket_seconds) + 1
        self._tokens: dict[str, _Token] = {}
        self.stats = EngineStats()
        # Read per tick: kept as plain attributes (a compiled engine reads these natively;
        # the config is a msgspec struct, read through the generic attribute lookup).
        self._every: int = c.refresh_seconds
        #: No cadence: a refresh at every tick released (tested per tick as one bool).
        self._each = self._every <= 0
        #: A float: ``max_seen - lateness`` per tick is then a float subtraction (the
        #: interpreter's specialised one), the same value (a whole number of seconds).
        self._lateness: float = float(c.lateness_seconds)
        self._p = params(c)
        # The last tick's chain and token objects and their key (the same objects again
        # mean the same key; held, so no other string can take their identity).
        self._last_chain = self._last_token = self._last_key = ""
        # The last refresh time stamped and its text: every token refreshes at the same
        # boundaries, so consecutive refreshes nearly always share one (``refresh.stamp_of``).
        self._stamp_at = math.nan  # equal to no time
        self._stamp = ""

    # -- public ----------------------------------------------------------------------
    def keys(self) -> Iterable[str]:
        return self._tokens.keys()

    def process(self, tick: Tick, key: str | None = None, tag: int | None = None
                ) -> list[Output]:
        """Take one tick; returns the refreshes and tier changes it made due.

        ``key``: the tick's key (``tick.key``) when the caller holds it already (the daemon
        keeps one string per token: no string built and hashed per tick). ``tag``: kept
        beside the tick while it is held for lateness (``pending_tags``); the daemon's
        record offset, so it need not map every tick to its offset itself."""
        out: list[Output] = []
        self.take(tick, key, tag, out)
        return out

    def take(self, tick: Tick, key: str | None, tag: int | None, out: list[Output]) -> bool:
        """:meth:`process`, appending the outputs to the caller's ``out`` (the daemon's
        batch, the replay's buffer: no list per tick); False when the tick was late
        (``stats.late`` counted it), True when taken."""
        self.stats.ticks += 1
        if key is None:
            chain, token = tick.chain, tick.token
            if chain is self._last_chain and token is self._last_token:
                key = self._last_key  # a run of one token's ticks from one reader
            else:
                key = f"{chain}:{token}"  # Tick.key, without a property call per tick
                self._last_chain, self._last_token, self._last_key = chain, token, key
        try:  # a subscript, not ``.get``: no method call per tick (a miss is rare)
            t = self._tokens[key]
        except KeyError:
            t = self._token(tick, key)  # a new token
        else:
            # A reader hands out its token's symbol object again and again (a str's
            # ``!=`` checks identity first); a decoder a new equal one.
            symbol = tick.symbol
            if symbol != t.symbol and symbol:
                t = self._token(tick, key)  # rare: a new symbol
        ts = tick.ts
        applied = t.last_applied
        evaluated = t.last_eval
        if ts < applied or (evaluated is not None and ts <= evaluated):
            self.stats.late += 1
            return False
        pending = t.pending
        if not pending or pending[-1].ts <= ts:
            pending.append(tick)
            if self.keep_tags:
                t.tags.append(NO_TAG if tag is None else tag)
        else:  # out of order: after every held tick not later than it (arrival order)
            i = len(pending) - 1
            while i > 0 and pending[i - 1].ts > ts:
                i -= 1
            if self.keep_tags:
                tags = t.tags  # the held ticks' tags are its last len(pending)
                tags.insert(len(tags) - len(pending) + i, NO_TAG if tag is None else tag)
            pending.insert(i, tick)
        if tick.cross_chain_chains is not None:
            if t.spread_mark is None or ts > t.spread_mark:
                t.spread_mark = ts
            seen = t.max_seen
            if seen == _NO_TIME:
                return True
        else:
            seen = t.max_seen
            if ts > seen:
                t.max_seen = seen = ts
        horizon = seen - self._lateness
        if self.spread_gated and key in self.spread_gated:
            horizon = min(horizon, t.spread_mark if t.spread_mark is not None else -math.inf)
        self._release(t, horizon, out)
        return True

    def advance(self, key: str, until: float) -> list[Output]:
        """Refresh a token up to event time ``until`` without new ticks (live clock)."""
        t = self._tokens.get(key)
        out: list[Output] = []
        if t is None:
            return out
        horizon = float(until) - self._lateness
        self._release(t, horizon, out)
        self._refresh_until(t, horizon, out, inclusive=True)
        return out

    def spread_lag(self, key: str) -> float:
        """Event seconds a gated token's newest tick is ahead of its newest spread
        observation (inf before the first); 0 for a token that is not gated."""
        t = self._tokens.get(key)
        if t is None or key not in self.spread_gated or t.max_seen == _NO_TIME:
            return 0.0
        return math.inf if t.spread_mark is None else max(0.0, t.max_seen - t.spread_mark)

    def open_gate(self, key: str) -> list[Output]:
        """Apply a gated token's held ticks as if it were not gated (the spread stage is
        down or far behind; the daemon decides when, on the wall clock). Spread
        observations for boundaries already refreshed then arrive late and are dropped."""
        t = self._tokens.get(key)
        out: list[Output] = []
        if t is not None and t.max_seen != _NO_TIME:
            self._release(t, t.max_seen - self._lateness, out)
        return out

    def flush(self) -> list[Output]:
        """Apply every tick still held for lateness (end of a replay)."""
        out: list[Output] = []
        for t in self._tokens.values():
            self._release(t, math.inf, out)
        return out

    def export_state(self, key: str, *, pending: bool = True) -> bytes:
        """The token's state; ``pending=False`` leaves out the ticks held for lateness
        (the caller re-reads them from its input after a restore: the daemon's compact
        checkpoints, monitor/daemon/state.py)."""
        return export_token(self._tokens[key], pending)

    def restore_state(self, blob: bytes) -> str:
        """Load a token's state saved by :meth:`export_state`; returns its key."""
        key, t = restore_token(blob, self._new_windows, self.keep_tags)
        self._tokens[key] = t
        return key

    def pending(self, key: str) -> list[Tick]:
        """The ticks of ``key`` held for lateness (taken, not applied yet), in release order."""
        t = self._tokens.get(key)
        return list(t.pending) if t is not None else []

    def pending_tags(self, key: str) -> list[int | None]:
        """The tags ``process`` was given with the ticks of ``key`` held for lateness,
        in the order of :meth:`pending` (None: given none, or restored with the state)."""
        t = self._tokens.get(key)
        if t is None:
            return []
        return t.held_tags() if self.keep_tags else [None] * len(t.pending)

    def forget(self, key: str) -> None:
        """Drop a token (its partition moved to another instance)."""
        self._tokens.pop(key, None)

    def tier_of(self, key: str) -> Tier | None:
        t = self._tokens.get(key)
        return t.tier.tier if t else None

    def last_tick_ts(self, key: str) -> float | None:
        t = self._tokens.get(key)
        return t.last_tick_ts if t else None

    # -- internals -------------------------------------------------------------------
    def _new_windows(self) -> Windows:
        c = self.config
        return Windows(c.bucket_seconds, self._ring, c.persistence_low, c.persistence_high,
                       c.volatility_baseline_seconds)

    def _token(self, tick: Tick, key: str) -> _Token:
        t = self._tokens.get(key)
        if t is None:
            t = _Token(chain=tick.chain, token=tick.token, symbol=tick.symbol,
                       windows=self._new_windows())
            self._tokens[key] = t
        elif tick.symbol and tick.symbol != t.symbol:
            t.symbol = tick.symbol
        return t

    def _release(self, t: _Token, horizon: float, out: list[Output]) -> None:
        """Apply the held ticks up to ``horizon``, each after the refreshes it makes due.

        Applying a tick is inlined here: it runs once per tick. Nearly every call releases
        one tick or none (a token's ticks come in time order), so what a tick reads is
        read when it is released, not set up per call (docs/performance.md)."""
        pending = t.pending
        while pending and pending[0].ts <= horizon:
            tick = pending.popleft()  # its tag stays in ``t.tags`` until the next trim
            ts = tick.ts
            due = t.next_refresh
            if due is not None and due < ts and self._every > 0:
                # ``_refresh_until(t, ts, out, inclusive=False)`` inline: the boundaries
                # before ``ts`` (one, nearly always), a call fewer per refresh.
                if len(t.tags) > TRIM_TAGS_OVER:  # released ticks' tags, now and then
                    t.trim_tags()
                every = self._every
                while True:
                    refresh(self, t, due, out)
                    due += every
                    t.next_refresh = due
                    if not due < ts:
                        break
            price = tick.price
            slippage = tick.slippage_bps
            oracle = tick.oracle_price
            chains = tick.cross_chain_chains
            # The signature tuple is built only for a tick at the time of the last one
            # (rare); the last one's is built from it when asked for (``last_sig``).
            if ts == t.last_applied and (price, slippage, oracle, tick.cross_chain_spread_bps,
                                         chains) == t.last_sig:
                self.stats.duplicates += 1
            else:
                self.stats.applied += 1
                t.last_applied = ts
                t.sig_tick = tick
                if chains is None:  # the spread stage's ticks are not the token's
                    t.last_tick_ts = ts
                obs = t.obs
                peg = tick.peg
                if peg is not None:
                    obs.peg = peg
                    t.peg_text = tick.peg_text
                else:
                    peg = obs.peg  # the last peg observed
                if price is not None:
                    if peg is None:
                        self.stats.no_peg += 1
                    else:
                        obs.price = price
                        obs.price_ts = ts
                        t.price_text = tick.price_text
                        t.windows.add_price(ts, (price - peg) / peg)
                if slippage is not None:
                    obs.slippage_bps = slippage
                    obs.slippage_ts = ts
                if oracle is not None:
                    obs.oracle_price = oracle
                    obs.oracle_ts = ts
                if chains is not None:
                    spread = tick.cross_chain_spread_bps
                    obs.spread = None if spread is None else spread / 1e4
                    obs.spread_ts = ts
                if due is None and self._every > 0:  # (no refresh ran, so still None)
                    # The first boundary at or after the first tick (a tick exactly on a
                    # boundary is part of that boundary's refresh, as for later ones).
                    every = self._every
                    t.next_refresh = float(math.ceil(ts / every) * every)
            if self._each:
                if len(t.tags) > TRIM_TAGS_OVER:
                    t.trim_tags()
                refresh(self, t, ts, out)

    def _refresh_until(self, t: _Token, ts: float, out: list[Output], *, inclusive: bool) -> None:
        """Evaluate every refresh boundary before ``ts`` (or at it, when ``inclusive``)."""
        every = self._every
        if every <= 0 or t.next_refresh is None:
            return
        while t.next_refresh < ts or (inclusive and t.next_refresh == ts):
            refresh(self, t, t.next_refresh, out)
            t.next_refresh += every
