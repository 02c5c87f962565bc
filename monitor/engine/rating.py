"""Signals and weights to a 0-100 rating, then the published rating (floors and held peak).

The raw rating is the weighted mean of the signals, renormalised over the signals actually
observed. The published rating adds two things on top: hard floors on the price alone
(more data never hides a clear depeg) and a decaying memory of the recent peak (the
anti-flapping). The tier is the band of the published rating; see ``tiers.py``.

A price-only feed has no slippage or oracle data; scoring their absence as zero would cap
it at 70 and a token at 0.88 could never be critical. So the rating is the weighted mean
over observed signals only.
"""

from __future__ import annotations

import math

from ..config import ModelConfig
from .params import Params, params
from .readings import count_beyond
from .windows import Windows


class Held:
    """The published rating of the last refresh, when it was made, and the last event
    time the raw rating came within ``hold_margin`` of the current band. A plain class,
    native in the compiled build, where every refresh reads and writes it (a msgspec
    struct's fields are read there through the generic attribute lookup); saved as
    :class:`~monitor.engine.saved.SavedHeld`."""

    __slots__ = ("at", "rating", "support_at")

    def __init__(self, rating: float = 0.0, at: float | None = None,
                 support_at: float | None = None) -> None:
        self.rating = rating
        self.at = at
        self.support_at = support_at

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Held):
            return NotImplemented
        return (self.rating, self.at, self.support_at) == (other.rating, other.at,
                                                            other.support_at)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the struct it replaced

    def __repr__(self) -> str:
        return f"Held(rating={self.rating!r}, at={self.at!r}, support_at={self.support_at!r})"


def floor_rating(windows: Windows, now: float, cfg: Params) -> float:
    """The lowest rating the price alone guarantees: the band edge of the worst floor met.

    Built on prices only (never slippage or oracle ticks), so adding healthy liquidity or an
    agreeing oracle can soften the weighted rating but never pull a clear depeg below it.
    """
    # No floor can be met while the held price is at or above every floor's line and no
    # bucket of the floor window had time below the low persistence line, when that line
    # lies at or above every floor line: a bucket counts only when its highest price was
    # below a floor line, so all the time it held went into the low column and moved
    # ``low_b`` to it or later (the test ``count_beyond`` makes for its ring part), and
    # the held stretch's buckets hold ``dev``. Then every count is 0 and no call is made
    # (tests/engine/test_floor_shortcut.py).
    dev = windows.last_dev
    top = cfg.floor_top
    if dev is not None and dev >= top and top <= -windows.low \
            and windows.low_b < math.ceil((now - cfg.floor_window_seconds) / windows.bucket):
        return 0.0
    # One pass over the buckets for all floors (the same counts as ``buckets_below``).
    counts = count_beyond(windows, now, cfg.floor_window_seconds, cfg.floor_lines,
                          above=False)
    for (_, minutes, at), count in zip(cfg.floors, counts, strict=True):
        if count >= minutes:
            return at
    return 0.0


def band_edge(rating: float, cfg: Params) -> float:
    """The lower edge of the band ``rating`` is in (0 for ok)."""
    edge = cfg.critical_at
    if rating >= edge:
        return edge
    edge = cfg.warning_at
    if rating >= edge:
        return edge
    edge = cfg.watch_at
    if rating >= edge:
        return edge
    return 0.0


#: ``round(x, 2)`` by ``x``, for :func:`_round2`; dropped whole when it grows past this.
_rounded: dict[float, float] = {}
_ROUNDED_SIZE = 4096


def _round2(x: float) -> float:
    """``round(x, 2)``, remembered by value: ``round`` with digits goes through a decimal
    conversion (~0.3 µs), and a refresh of a quiet token publishes the same few ratings
    again and again. Zero is its own rounding (``round`` keeps the sign of ``-0.0``, which
    a dict would not tell apart from ``0.0``: they are equal keys)."""
    if x == 0.0:
        return x
    rounded = _rounded.get(x)
    if rounded is None:
        rounded = round(x, 2)
        if len(_rounded) >= _ROUNDED_SIZE:
            _rounded.clear()
        _rounded[x] = rounded
    return rounded


def publish(held: Held, raw: float, floor: float, calm: bool, now: float,
            cfg: ModelConfig) -> float:
    """:func:`publish_rating` with the settings of ``cfg``."""
    return publish_rating(held, raw, floor, calm, now, params(cfg))


def publish_rating(held: Held, raw: float, floor: float, calm: bool, now: float,
                   cfg: Params) -> float:
    """The published rating: the highest of the raw rating, the floor and the previous
    published rating decayed linearly since it was made.

    Escalation is therefore immediate (the raw rating or the floor lifts it at once) and
    de-escalation gradual. Under stress the memory decays slowly and stops at its band's
    lower edge while the raw rating came within ``hold_margin`` of that edge in the last
    ``hold_seconds`` (a depeg swinging around a band edge does not flip the tier every
    hour); once calm it decays fast with no stop, so a token back at peg is ok within
    2 hours.

    The ``max``/``min`` of the rule are written out as the comparisons the builtins make
    (the first of equal values wins, so -0.0 and 0.0 come out as they did): compiled,
    a builtin called with several arguments went through a tuple every refresh.
    """
    # Calm, the band edges play no part (no stop, the support dropped): not worked out.
    # The tests of the stop are pure compares, made in another order than before.
    held_rating = held.rating
    edge = 0.0 if calm else band_edge(held_rating, cfg)
    decayed = 0.0
    at = held.at
    if at is not None:
        rate = cfg.calm_decay_per_hour if calm else cfg.hold_decay_per_hour
        elapsed = 0.0  # max(0.0, now - at)
        if now - at > elapsed:
            elapsed = now - at
        decayed = held_rating - rate * elapsed / 3600.0
        if not calm and edge > 0 and edge > decayed:
            support_at = held.support_at
            if raw >= edge - cfg.hold_margin or (
                    support_at is not None and now - support_at <= cfg.hold_seconds):
                decayed = edge  # max(decayed, edge)
    top = raw  # max(raw, floor, decayed, 0.0)
    if floor > top:
        top = floor
    if decayed > top:
        top = decayed
    if 0.0 > top:
        top = 0.0
    capped = 100.0  # min(100.0, top)
    if top < capped:
        capped = top
    rating = _round2(capped)
    if calm:
        held.support_at = None
    else:
        new_edge = band_edge(rating, cfg)
        if raw >= new_edge - cfg.hold_margin:
            held.support_at = now
        elif new_edge != edge:
            held.support_at = None
    held.rating = rating
    held.at = now
    return rating
