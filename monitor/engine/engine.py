"""The engine: per-token lateness buffer, windows, scheduled refreshes, tier machine.

Pure: it never reads a clock or does I/O. Refreshes happen at multiples of
``refresh_seconds`` of *event* time, evaluated once a tick past the boundary is applied
(or when the caller advances a quiet token), so a replay and the live daemon fed the same
ticks produce the same ratings and the same event ids.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import msgspec

from ..config import ModelConfig
from ..records import (
    EVENT_TYPE,
    RatingSnapshot,
    SignalValue,
    Tier,
    TierChangeData,
    TierChangeEvent,
    event_id,
)
from ..ticks import Tick
from ..timefmt import format_ts
from .figures import figures_of
from .params import params
from .rating import Held, publish_rating
from .rounding import NATIVE, round_to
from .saved import Saved as _Saved
from .signals import Observations
from .steady import Steady, steady_figures_of
from .tiers import TierState, step_tier, tier_band
from .windows import Windows

Output = TierChangeEvent | RatingSnapshot


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


_OBS_FIELDS = ("peg", "slippage_bps", "slippage_ts", "oracle_price", "oracle_ts", "price",
               "price_ts", "spread", "spread_ts")
#: 2: the tier state lost its de-escalation fields and the held rating was added.
STATE_VERSION = 2
_state_encoder = msgspec.msgpack.Encoder()
_state_decoder = msgspec.msgpack.Decoder(_Saved)
#: ``_Token.last_applied`` and ``max_seen`` before any: earlier than every tick time (a
#: tick's time is finite), so the per-tick compares need no None test; saved as None.
_NO_TIME: Final = -math.inf


def _time_or_none(value: float) -> float | None:
    return None if value == _NO_TIME else value


class _Token:
    """One token's state. A plain class, not a dataclass: the dataclass machinery
    (generated and compiled methods) cost ~1 ms of every process start, for methods the
    engine never calls (repr, ==)."""

    __slots__ = ("_sig", "_sig_of", "chain", "held", "last_applied", "last_eval",
                 "last_tick_ts", "max_seen", "next_refresh", "obs", "peg_text", "pending",
                 "price_text", "sig_tick", "spread_mark", "steady", "symbol", "tags", "tier",
                 "token", "windows")

    def __init__(self, chain: str, token: str, symbol: str, windows: Windows,
                 tier: TierState | None = None, obs: Observations | None = None,
                 price_text: str | None = None, peg_text: str | None = None,
                 next_refresh: float | None = None, last_applied: float | None = None,
                 last_eval: float | None = None, max_seen: float | None = None,
                 last_tick_ts: float | None = None,
                 last_sig: tuple[float | None, ...] | None = None,
                 held: Held | None = None, spread_mark: float | None = None) -> None:
        self.chain = chain
        self.token = token
        self.symbol = symbol
        self.windows = windows
        self.tier = tier if tier is not None else TierState()
        self.obs = obs if obs is not None else Observations()
        self.price_text = price_text
        self.peg_text = peg_text
        self.next_refresh = next_refresh
        #: Event time of the last tick applied (``_NO_TIME``: none yet).
        self.last_applied: float = _NO_TIME if last_applied is None else last_applied
        self.last_eval = last_eval        # event time of the last refresh
        #: Newest event time seen (drives the lateness buffer; ``_NO_TIME``: none yet).
        self.max_seen: float = _NO_TIME if max_seen is None else max_seen
        self.last_tick_ts = last_tick_ts
        #: The last tick applied (None: none since the token was made or restored, then
        #: ``_sig`` is the restored signature). ``last_sig`` derives the signature from it.
        self.sig_tick: Tick | None = None
        self._sig_of: Tick | None = None  # the tick ``_sig`` was built from
        self._sig = last_sig
        #: Ticks held for lateness, in (ts, arrival) order: ticks nearly always come in
        #: time order, so taking one is an append and releasing one a popleft (a heap
        #: cost two tuple-comparing sifts per tick); a late one is inserted in place.
        self.pending: deque[Tick] = deque()
        #: The caller's tag of each held tick, in the same order (``process``'s ``tag``:
        #: the daemon's record offset, what a compact state lists instead of the tick).
        self.tags: deque[int | None] = deque()
        self.held = held if held is not None else Held()
        self.spread_mark = spread_mark
        #: The last refresh's figures, reused while provably unchanged (never saved).
        self.steady: Steady | None = None

    @property
    def last_sig(self) -> tuple[float | None, ...] | None:
        """What the duplicate rule compares of the last tick applied: its price, slippage,
        oracle price, spread and spread chains. Built when asked for (a refresh, a state),
        not per tick; once per tick applied, so while no tick is applied it is the very
        same object."""
        tick = self.sig_tick
        if tick is not None and tick is not self._sig_of:
            self._sig_of = tick
            self._sig = (tick.price, tick.slippage_bps, tick.oracle_price,
                         tick.cross_chain_spread_bps, tick.cross_chain_chains)
        return self._sig


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
    """

    def __init__(self, config: ModelConfig | None = None, *, snapshots: bool = True,
                 spread_gated: frozenset[str] = frozenset()) -> None:
        self.config = config or ModelConfig()
        self.snapshots = snapshots
        self.spread_gated = spread_gated
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
        self._lateness: int = c.lateness_seconds
        self._p = params(c)
        # The last tick's chain and token objects and their key (the same objects again
        # mean the same key; held, so no other string can take their identity).
        self._last_chain = self._last_token = self._last_key = ""
        # The last refresh time stamped and its text: every token refreshes at the same
        # boundaries, so consecutive refreshes nearly always share one (``_evaluate``).
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
            t.tags.append(tag)
        else:  # out of order: after every held tick not later than it (arrival order)
            i = len(pending) - 1
            while i > 0 and pending[i - 1].ts > ts:
                i -= 1
            pending.insert(i, tick)
            t.tags.insert(i, tag)
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
        t = self._tokens[key]
        saved = _Saved(
            version=STATE_VERSION, chain=t.chain, token=t.token, symbol=t.symbol,
            windows=t.windows.export(), tier=t.tier,
            obs=tuple(getattr(t.obs, f) for f in _OBS_FIELDS),
            price_text=t.price_text, peg_text=t.peg_text, next_refresh=t.next_refresh,
            last_applied=_time_or_none(t.last_applied), last_eval=t.last_eval,
            max_seen=_time_or_none(t.max_seen), last_tick_ts=t.last_tick_ts, last_sig=t.last_sig,
            pending=list(t.pending) if pending else [],
            held=t.held,
            spread_mark=t.spread_mark,
        )
        return _state_encoder.encode(saved)

    def restore_state(self, blob: bytes) -> str:
        """Load a token's state saved by :meth:`export_state`; returns its key."""
        s = _state_decoder.decode(blob)
        w = self._new_windows()
        w.load(s.windows)
        t = _Token(chain=s.chain, token=s.token, symbol=s.symbol, windows=w, tier=s.tier,
                   # A state written before a field existed has fewer: defaults fill in.
                   obs=Observations(**dict(zip(_OBS_FIELDS, s.obs, strict=False))),
                   price_text=s.price_text, peg_text=s.peg_text, next_refresh=s.next_refresh,
                   last_applied=s.last_applied, last_eval=s.last_eval, max_seen=s.max_seen,
                   last_tick_ts=s.last_tick_ts, last_sig=s.last_sig, held=s.held,
                   spread_mark=s.spread_mark)
        # Saved in order; sorted again (stably: ties keep their saved order) all the same.
        t.pending.extend(sorted(s.pending, key=_tick_ts))
        t.tags.extend([None] * len(s.pending))  # saved whole: no tag
        key = f"{s.chain}:{s.token}"
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
        return list(t.tags) if t is not None else []

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
            tick = pending.popleft()
            t.tags.popleft()
            ts = tick.ts
            due = t.next_refresh
            if due is not None and due < ts:  # else _refresh_until would do nothing
                self._refresh_until(t, ts, out, inclusive=False)
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
            if self._every <= 0:
                self._evaluate(t, ts, out)

    def _refresh_until(self, t: _Token, ts: float, out: list[Output], *, inclusive: bool) -> None:
        """Evaluate every refresh boundary before ``ts`` (or at it, when ``inclusive``)."""
        every = self._every
        if every <= 0 or t.next_refresh is None:
            return
        while t.next_refresh < ts or (inclusive and t.next_refresh == ts):
            self._evaluate(t, t.next_refresh, out)
            t.next_refresh += every

    def _evaluate(self, t: _Token, now: float, out: list[Output]) -> None:
        c = self._p
        self.stats.refreshes += 1
        # Due before last_eval moves: the first refresh of its snapshot period (the period
        # of the previous refresh is in the saved state, so a restore keeps the cadence).
        # Always with no cadence (0) or no earlier refresh; otherwise only when ``now`` is
        # in a later epoch-aligned period of ``every`` seconds than the previous refresh.
        every = c.snapshot_seconds
        previous = t.last_eval
        snap = self.snapshots and (every <= 0 or previous is None
                                   or now // every != previous // every)
        t.last_eval = now
        if t.windows.last_dev is None:
            # No price with a peg yet: the token is unrated. Rating it from slippage or
            # oracle ticks alone would publish a tier with no price behind it.
            self.stats.unrated += 1
            return
        if snap:
            figures, signals, metrics = figures_of(t.windows, t.obs, c, now, True)
        else:  # a quiet token's refresh may reuse the last one's (monitor/engine/steady.py)
            # The last tick applied stands for the token's inputs: the very same object
            # while no tick is applied (None since a restore, until one is).
            t.steady, figures = steady_figures_of(t.steady, t.windows, t.obs, t.sig_tick, c,
                                                  now)
            signals, metrics = [], {}
        raw, floor, deviation, calm, above = figures
        rating = publish_rating(t.held, raw, floor, calm, now, c)
        old = t.tier.tier
        changed = step_tier(t.tier, rating, deviation, above, now, c)
        if not snap and changed is None:
            return
        if now == self._stamp_at:
            stamp = self._stamp
        else:
            self._stamp = stamp = format_ts(now)
            self._stamp_at = now
        # ``round`` with digits; compiled, mostly without its decimal conversion.
        deviation_pct = round_to(deviation * 100.0, 4, 1e4) if NATIVE \
            else round(deviation * 100.0, 4)
        if snap:
            metrics["rating_raw"] = raw  # keys evaluate placed: no kwargs dict, no update
            metrics["rating_floor"] = floor
            metrics["calm"] = float(calm)
            out.append(self._snapshot(t, now, stamp, rating, signals, metrics,
                                      deviation_pct))
        if changed is not None:
            self.stats.transitions += 1
            out.append(TierChangeEvent(
                event_type=EVENT_TYPE,
                event_id=event_id(t.chain, t.token, stamp, old.value, changed.value),
                timestamp=stamp,
                data=TierChangeData(
                    token_address=t.token, chain=t.chain, symbol=t.symbol,
                    old_tier=old.value, new_tier=changed.value, risk_score=rating,
                    deviation_pct=deviation_pct,
                    price_usd=t.price_text or "", peg_usd=t.peg_text or "",
                ),
            ))

    def _snapshot(self, t: _Token, now: float, stamp: str, rating: float,
                  signals: list[SignalValue], metrics: dict[str, float | None],
                  deviation_pct: float | None) -> RatingSnapshot:
        c = self.config
        staleness = now - t.last_tick_ts if t.last_tick_ts is not None else 0.0
        price_ts = t.obs.price_ts
        price_age = now - price_ts if price_ts is not None else staleness
        metrics["rating"] = rating
        metrics["staleness_seconds"] = staleness
        # Stale: the *price* is older than stale_after_seconds (slippage or oracle ticks
        # alone do not make a rating fresh); the rating is still the model's best estimate
        # from the last price held, and says so.
        metrics["stale"] = 1.0 if price_age >= c.stale_after_seconds else 0.0
        since = t.tier.since
        metrics["seconds_in_tier"] = now - since if since is not None else None
        # ``observed_weight_pct``: figures_of set it. ``_value_``: the enum's value
        # without the ``value`` property's Python-level getter. Positional fields: the
        # struct's order (records.RatingSnapshot). A whole number of seconds (the usual
        # staleness: tick and refresh times are) is its own ``round(x, 3)``.
        return RatingSnapshot(
            t.chain, t.token, t.symbol, stamp, rating, t.tier.tier._value_,
            tier_band(rating, self._p)._value_, t.price_text, t.peg_text, deviation_pct,
            staleness if staleness.is_integer() else round(staleness, 3), signals, metrics,
        )


def _tick_ts(tick: Tick) -> float:
    return tick.ts
