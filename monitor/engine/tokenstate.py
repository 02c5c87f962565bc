"""One token's state in the engine, and its save and restore (the state topic's bytes).

Apart from the engine's per-tick and refresh code (``engine.py``, ``refresh.py``) because it is a
different idea: what a token carries between ticks, and how that becomes bytes and back.
The saved structs themselves live in ``saved.py`` (msgspec structs are never compiled).
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Callable
from typing import Final

import msgspec

from ..records import Tier
from ..tick import FIELDS as TICK_FIELDS
from ..ticks import Tick, TickStruct
from .rating import Held
from .saved import Saved as _Saved
from .saved import SavedHeld, SavedTier
from .signals import Observations
from .steady import Steady
from .tiers import TierState
from .windows import Windows

_OBS_FIELDS = ("peg", "slippage_bps", "slippage_ts", "oracle_price", "oracle_ts", "price",
               "price_ts", "spread", "spread_ts")
#: 2: the tier state lost its de-escalation fields and the held rating was added.
STATE_VERSION = 2
_state_encoder = msgspec.msgpack.Encoder()
_state_decoder = msgspec.msgpack.Decoder(_Saved)
#: ``_Token.last_applied`` and ``max_seen`` before any: earlier than every tick time (a
#: tick's time is finite), so the per-tick compares need no None test; saved as None.
_NO_TIME: Final = -math.inf
#: ``_Token.tags``' entry for a held tick given no tag (record offsets are never negative).
NO_TAG: Final = -1
#: ``_Token.tags`` is trimmed at a refresh boundary once it holds more than this many (the
#: array shrinks, and grows again, at each trim: not at every boundary of a sparse feed).
TRIM_TAGS_OVER: Final = 64


#: See ``_Token.quiet``: (steady memo, tier, elapsed, rating).
Quiet = tuple[Steady, Tier, float, float]


def _time_or_none(value: float) -> float | None:
    return None if value == _NO_TIME else value


class _Token:
    """One token's state. A plain class, not a dataclass: the dataclass machinery
    (generated and compiled methods) cost ~1 ms of every process start, for methods the
    engine never calls (repr, ==)."""

    __slots__ = ("_sig", "_sig_of", "chain", "held", "last_applied", "last_eval",
                 "last_tick_ts", "max_seen", "next_refresh", "obs", "peg_text", "pending",
                 "price_text", "quiet", "sig_tick", "spread_mark", "steady", "symbol", "tags",
                 "tier",
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
        #: The caller's tag of each held tick (``process``'s ``tag``: the daemon's record
        #: offset, what a compact state lists instead of the tick; ``NO_TAG`` for none),
        #: in the order of ``pending`` and after the tags of ticks released since the
        #: last trim: the last ``len(pending)`` are the held ticks' (``held_tags``).
        #: Releasing a tick leaves its tag where it is, and the engine trims them at a
        #: refresh boundary (``trim_tags``; empty in an engine that keeps no tags).
        #: Machine integers, not a deque of int objects: popping an offset made when its
        #: record was fetched, a lateness window earlier, freed an object long out of the
        #: cache, ~2-3 % of the daemon's CPU per tick at one tick a second
        #: (docs/performance.md, thirty-fourth pass).
        self.tags: array[int] = array("q")
        self.held = held if held is not None else Held()
        self.spread_mark = spread_mark
        #: The last refresh's figures, reused while provably unchanged (never saved).
        self.steady: Steady | None = None
        #: A calm quiet refresh that published the rating it found and changed no tier:
        #: (its steady memo, the tier, ``now - held.at`` then, the rating), so that the next
        #: one with the very same inputs skips both steps (refresh.py; never saved).
        self.quiet: Quiet | None = None

    def held_tags(self) -> list[int | None]:
        """The held ticks' tags, in the order of ``pending`` (None: given none)."""
        tags = self.tags
        return [None if tag == NO_TAG else tag for tag in tags[len(tags) - len(self.pending):]]

    def trim_tags(self) -> None:
        """Forget the tags of the ticks released since the last trim."""
        tags = self.tags
        del tags[:len(tags) - len(self.pending)]

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


def export_token(t: _Token, pending: bool) -> bytes:
    """The token's state (``Engine.export_state``); ``pending=False`` leaves out the ticks
    held for lateness."""
    saved = _Saved(
        version=STATE_VERSION, chain=t.chain, token=t.token, symbol=t.symbol,
        windows=t.windows.export(), tier=SavedTier(t.tier.tier, t.tier.since),
        obs=tuple(getattr(t.obs, f) for f in _OBS_FIELDS),
        price_text=t.price_text, peg_text=t.peg_text, next_refresh=t.next_refresh,
        last_applied=_time_or_none(t.last_applied), last_eval=t.last_eval,
        max_seen=_time_or_none(t.max_seen), last_tick_ts=t.last_tick_ts, last_sig=t.last_sig,
        pending=[_saved_tick(tick) for tick in t.pending] if pending else [],
        held=SavedHeld(t.held.rating, t.held.at, t.held.support_at),
        spread_mark=t.spread_mark,
    )
    return _state_encoder.encode(saved)


def restore_token(blob: bytes, new_windows: Callable[[], Windows],
                  keep_tags: bool) -> tuple[str, _Token]:
    """A token's key and state from :func:`export_token`'s bytes (``Engine.restore_state``);
    ``new_windows`` makes the engine's empty ring, which the saved one is loaded into;
    ``keep_tags``: the engine keeps tags (the held ticks restored then have none)."""
    s = _state_decoder.decode(blob)
    w = new_windows()
    w.load(s.windows)
    t = _Token(chain=s.chain, token=s.token, symbol=s.symbol, windows=w,
               tier=TierState(s.tier.tier, s.tier.since),
               # A state written before a field existed has fewer: defaults fill in.
               obs=Observations(**dict(zip(_OBS_FIELDS, s.obs, strict=False))),
               price_text=s.price_text, peg_text=s.peg_text, next_refresh=s.next_refresh,
               last_applied=s.last_applied, last_eval=s.last_eval, max_seen=s.max_seen,
               last_tick_ts=s.last_tick_ts, last_sig=s.last_sig,
               held=Held(s.held.rating, s.held.at, s.held.support_at),
               spread_mark=s.spread_mark)
    # Saved in order; sorted again (stably: ties keep their saved order) all the same.
    t.pending.extend(sorted([_held_tick(tick) for tick in s.pending], key=_tick_ts))
    if keep_tags:
        t.tags.extend([NO_TAG] * len(s.pending))  # saved whole: no tag
    return f"{s.chain}:{s.token}", t


def _tick_ts(tick: Tick) -> float:
    return tick.ts


def _saved_tick(tick: Tick) -> TickStruct:
    """A held tick as a saved state carries it: the struct, in either build (the
    compiled one holds native ticks, monitor/tick.py)."""
    return TickStruct(*[getattr(tick, name) for name in TICK_FIELDS])


def _held_tick(s: TickStruct) -> Tick:
    """A saved held tick as this build's engine holds it (:data:`monitor.ticks.Tick`)."""
    return Tick(*msgspec.structs.astuple(s))
