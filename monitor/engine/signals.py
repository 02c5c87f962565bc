"""From windows to the six signals of the rating, each scored 0-1, plus the metric snapshot."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from ..records import SignalValue
from .params import Params
from .readings import read_fields
from .readplan import read_plan
from .rounding import NATIVE, round_to
from .windows import Windows


def _ramp(value: float, start: float, full: float) -> float:
    """0 at ``start``, 1 at ``full``, linear between, clamped."""
    if full <= start:
        return 1.0 if value >= full else 0.0
    # ``min(1.0, max(0.0, x))`` as the comparisons the builtins make (the first of equal
    # values wins: -0.0 and NaN give 0.0): a builtin called with two arguments iterates
    # over a tuple of them, and a snapshot ramps four signals.
    x = (value - start) / (full - start)
    if not x > 0.0:
        return 0.0
    return x if x < 1.0 else 1.0


@dataclass(slots=True)
class Observations:
    """The latest non-window observations of a token (liquidity, oracle, peg)."""

    peg: float | None = None
    slippage_bps: float | None = None
    slippage_ts: float | None = None
    oracle_price: float | None = None
    oracle_ts: float | None = None
    price: float | None = None
    price_ts: float | None = None
    #: Latest cross-chain spread of the token's asset (fraction of peg; None when the
    #: stage's last boundary had fewer than two chains) and the boundary it was taken at.
    spread: float | None = None
    spread_ts: float | None = None


#: One scored signal: ``(name, value, score, observed)``. A tuple: six are made per
#: refresh, and building a tuple is a fraction of calling a class (compiled, it is a
#: native tuple of unboxed fields).
Signal = tuple[str, float | None, float, bool]


#: What ``evaluate`` works out: the raw rating (``combine`` of the signals); with detail
#: the per-signal breakdown of the snapshot (else empty); the weight of the observed
#: signals (0, an int, when none is); the time-weighted mean deviation over the deviation
#: window (fraction, signed); the metrics (with detail); the lowest deviation held over
#: the calm window (inf when no price is known there). A plain tuple: a named one is
#: built by a Python-level ``__new__``, once per refresh.
Evaluation = tuple[float, list[SignalValue], int | float, float | None,
                   dict[str, float | None], float]


def _pct(x: float | None) -> float | None:
    return None if x is None else x * 100.0


def evaluate(w: Windows, obs: Observations, cfg: Params, now: float,
             detail: bool = True) -> Evaluation:
    """Score the signals at ``now``; ``detail`` adds the metric snapshot (a replay that
    only wants transitions skips it: it is most of the cost of a refresh)."""
    last_dev = w.last_dev
    has_price = last_dev is not None
    # Only the fields the rating (with detail, the snapshot) reads, the same floats as
    # ``window``'s: compiled by ``read_fields``' native loops, interpreted through a plan
    # of them made once (readplan.py: fewer branches per field).
    if detail:
        if NATIVE:
            spec, picks = cfg.detail_reads  # _detail_reads(cfg.config), kept on the Params
            got = picks(read_fields(w, now, spec))
        else:
            got = read_plan(w, now, cfg.detail_plan)
        (dev_1, cov_1, dev_5, cov_5, dev_15, cov_15, dev_60, cov_60, dev_dt, covered,
         cov_p, low_s, high_s, ticks_p, mn, mx, r2, ticks_v, calm_min,
         ) = got
    else:
        dev_dt, covered, low_s, high_s, r2, calm_min = read_fields(w, now, cfg.reads) \
            if NATIVE else read_plan(w, now, cfg.reads_plan)
    deviation = dev_dt / covered if covered > 0 else last_dev

    recent_rate = r2 / cfg.volatility_window_seconds
    recent_vol = math.sqrt(recent_rate * 60.0)
    # ``w.baseline_rate(now)`` inline (the same operations; a method call per refresh).
    base_ts = w.base_ts
    if base_ts is None:
        base_rate = 0.0
    else:
        elapsed = now - base_ts
        if not elapsed > 0.0:  # max(0.0, now - base_ts), as the builtin compares
            elapsed = 0.0
        base_tau = w.base_tau
        base_rate = w.base_s * math.exp(-elapsed / base_tau) / base_tau
    base_vol = math.sqrt(base_rate * 60.0)
    vol_floor = cfg.volatility_floor
    vol_ratio = recent_vol / (vol_floor if vol_floor > base_vol else base_vol)  # max()

    down = 0.0  # max(0.0, -deviation)
    if deviation is not None and -deviation > 0.0:
        down = -deviation
    minutes_low = low_s / 60.0
    minutes_high = high_s / 60.0
    window_minutes = cfg.persistence_window_minutes
    share_low = minutes_low / window_minutes
    share_high = minutes_high / window_minutes

    slippage_ts = obs.slippage_ts
    slip_obs = slippage_ts is not None and now - slippage_ts <= cfg.slippage_max_age_seconds
    oracle_ts = obs.oracle_ts
    peg = obs.peg
    oracle_obs = (
        oracle_ts is not None and has_price and peg is not None
        and now - oracle_ts <= cfg.oracle_max_age_seconds
    )
    divergence = (
        abs((obs.price or 0.0) - (obs.oracle_price or 0.0)) / peg
        if oracle_obs and peg else None
    )

    # A price-only feed (no oracle, no spread ever): neither observed, no call.
    headroom = _headroom(obs, cfg, now, divergence if oracle_obs else None) \
        if oracle_obs or obs.spread is not None else _NO_HEADROOM
    slippage = obs.slippage_bps
    score_dev = _ramp(down, 0.0, cfg.deviation_full)
    score_slip = _ramp(slippage or 0.0, cfg.slippage_floor_bps, cfg.slippage_full_bps) \
        if slip_obs else 0.0
    score_low = share_low if share_low < 1.0 else 1.0  # min(1.0, share_low)
    score_high = share_high if share_high < 1.0 else 1.0
    score_vol = _ramp(vol_ratio, cfg.burst_start, cfg.burst_full)
    if not detail:
        # ``combine`` without the breakdown, written out for the six signals: the same
        # additions and products in the same order, no signal tuples, no loops.
        w0, w1, w2, w3, w4, w5 = cfg.signal_weights
        head_obs = headroom[3]
        observed_weight: int | float = 0
        if has_price:
            observed_weight += w0
        if slip_obs:
            observed_weight += w1
        if has_price:
            observed_weight += w2
            observed_weight += w3
            observed_weight += w4
        if head_obs:
            observed_weight += w5
        some = observed_weight > 0
        total = 0.0
        total += 100.0 * (w0 / observed_weight if has_price and some else 0.0) * score_dev
        total += 100.0 * (w1 / observed_weight if slip_obs and some else 0.0) * score_slip
        total += 100.0 * (w2 / observed_weight if has_price and some else 0.0) * score_low
        total += 100.0 * (w3 / observed_weight if has_price and some else 0.0) * score_high
        total += 100.0 * (w4 / observed_weight if has_price and some else 0.0) * score_vol
        total += 100.0 * (w5 / observed_weight if head_obs and some else 0.0) * headroom[2]
        return _clamped(total), [], observed_weight, deviation, {}, calm_min
    # In ``params.SIGNAL_NAMES`` order (``combine`` pairs them with ``signal_weights``).
    signals = (
        ("price_deviation", None if deviation is None else deviation * 100.0, score_dev,
         has_price),
        ("slippage", slippage if slip_obs else None, score_slip, slip_obs),
        ("persistence_50bp", minutes_low, score_low, has_price),
        ("persistence_100bp", minutes_high, score_high, has_price),
        ("volatility_burst", vol_ratio, score_vol, has_price),
        headroom,
    )
    raw, values, observed_weight = combine(signals, cfg.signal_weights, detail)
    # The snapshot's metrics, in its key order (its JSON order): a copy of
    # ``_METRICS`` (every key, the engine's eight as None, assigned later in place) with
    # each value stored. A dict display of 36 pairs compiles to a growing dict (resized
    # three times) merged with a second one; a copy of a dict of this size is one memcpy
    # of its table, and a store to a present key neither grows nor moves it.
    # ``x * 100.0`` is ``_pct``.
    spread, spread_ts, price_ts = obs.spread, obs.spread_ts, obs.price_ts
    metrics = _METRICS.copy()
    metrics["deviation_twap_1m_pct"] = dev_1 / cov_1 * 100.0 if cov_1 > 0 else None
    metrics["coverage_1m_seconds"] = cov_1
    metrics["deviation_twap_5m_pct"] = dev_5 / cov_5 * 100.0 if cov_5 > 0 else None
    metrics["coverage_5m_seconds"] = cov_5
    metrics["deviation_twap_15m_pct"] = dev_15 / cov_15 * 100.0 if cov_15 > 0 else None
    metrics["coverage_15m_seconds"] = cov_15
    metrics["deviation_twap_60m_pct"] = dev_60 / cov_60 * 100.0 if cov_60 > 0 else None
    metrics["coverage_60m_seconds"] = cov_p  # the persistence window's (the same read)
    metrics["price_usd"] = obs.price
    metrics["peg_usd"] = peg
    metrics["deviation_latest_pct"] = None if last_dev is None else last_dev * 100.0
    metrics["deviation_min_60m_pct"] = mn * 100.0 if math.isfinite(mn) else None
    metrics["deviation_max_60m_pct"] = mx * 100.0 if math.isfinite(mx) else None
    metrics["minutes_below_50bp_60m"] = minutes_low
    metrics["minutes_below_100bp_60m"] = minutes_high
    metrics["volatility_recent_per_min"] = recent_vol
    metrics["volatility_baseline_per_min"] = base_vol
    metrics["volatility_ratio"] = vol_ratio
    metrics["ticks_60m"] = ticks_p
    metrics["ticks_15m"] = ticks_v
    metrics["slippage_bps"] = slippage
    metrics["slippage_age_seconds"] = None if slippage_ts is None else now - slippage_ts
    metrics["oracle_price_usd"] = obs.oracle_price
    metrics["oracle_divergence_pct"] = None if divergence is None else divergence * 100.0
    metrics["oracle_age_seconds"] = None if oracle_ts is None else now - oracle_ts
    metrics["cross_chain_spread_pct"] = None if spread is None else spread * 100.0
    metrics["cross_chain_spread_age_seconds"] = \
        None if spread_ts is None else now - spread_ts
    metrics["price_age_seconds"] = None if price_ts is None else now - price_ts
    return raw, values, observed_weight, deviation, metrics, calm_min


#: Every key of a snapshot's metrics in its order, each None: ``evaluate`` copies it and
#: stores the values; the last eight are filled by ``figures_of``, the refresh and
#: ``outputs.rating_snapshot`` (assigning keeps a key's place).
_METRICS: Final[dict[str, float | None]] = dict.fromkeys((
    "deviation_twap_1m_pct", "coverage_1m_seconds", "deviation_twap_5m_pct",
    "coverage_5m_seconds", "deviation_twap_15m_pct", "coverage_15m_seconds",
    "deviation_twap_60m_pct", "coverage_60m_seconds", "price_usd", "peg_usd",
    "deviation_latest_pct", "deviation_min_60m_pct", "deviation_max_60m_pct",
    "minutes_below_50bp_60m", "minutes_below_100bp_60m", "volatility_recent_per_min",
    "volatility_baseline_per_min", "volatility_ratio", "ticks_60m", "ticks_15m",
    "slippage_bps", "slippage_age_seconds", "oracle_price_usd", "oracle_divergence_pct",
    "oracle_age_seconds", "cross_chain_spread_pct", "cross_chain_spread_age_seconds",
    "price_age_seconds", "rating_raw", "rating_floor", "calm", "rating",
    "staleness_seconds", "stale", "seconds_in_tier", "observed_weight_pct"))


def _headroom(obs: Observations, cfg: Params, now: float,
              divergence: float | None) -> Signal:
    """Headroom: the worse of oracle divergence and cross-chain spread, each scored against
    its own full-signal level; observed when either is. Its value is the larger of the two
    (both are fractions of peg), in percent."""
    spread = obs.spread if (
        obs.spread is not None and obs.spread_ts is not None
        and now - obs.spread_ts <= cfg.cross_chain_spread_max_age_seconds) else None
    if divergence is None and spread is None:  # a price-only feed: neither observed
        return _NO_HEADROOM
    scores = [_ramp(divergence, 0.0, cfg.oracle_divergence_full)] if divergence is not None \
        else []
    if spread is not None:
        scores.append(_ramp(spread, 0.0, cfg.cross_chain_spread_full))
    values = [v for v in (divergence, spread) if v is not None]
    return ("headroom", _pct(max(values)) if values else None,
            max(scores) if scores else 0.0, bool(scores))


_NO_HEADROOM: Final[Signal] = ("headroom", None, 0.0, False)


def combine(signals: tuple[Signal, ...], weights: tuple[float, ...], detail: bool = True,
            ) -> tuple[float, list[SignalValue], int | float]:
    """The raw rating, with ``detail`` the per-signal breakdown of the snapshot (a
    replay that only wants transitions skips building it; the rating is the same), and
    the weight of the observed signals (0, an int, when none is).
    ``weights``: each signal's weight, in the signals' order (``Params.signal_weights``).

    The raw rating is the weighted mean over the observed signals: each observed one's
    share of the observed weight times its score, in percent, summed in signal order."""
    # ``sum(w for s, w in zip(signals, weights) if s.observed)`` without the generator:
    # the same additions in the same order, from the same int 0 (0 when none is observed).
    observed_weight: int | float = 0
    n = 0
    for s in signals:
        if s[3]:
            observed_weight += weights[n]
        n += 1
    values: list[SignalValue] = []
    total = 0.0
    n = 0
    for name, value, score, observed in signals:
        w = weights[n]
        n += 1
        share = (w / observed_weight) if (observed and observed_weight > 0) else 0.0
        points = 100.0 * share * score
        total += points
        if detail:
            # 0.0 and 1.0 (unobserved, clamped, quiet signals: most of them) are their
            # own roundings, sign included; ``round`` with digits costs a decimal
            # conversion (compiled, ``round_to`` mostly does without: rounding.py).
            # Positional fields: the struct's order (records.SignalValue).
            values.append(SignalValue(
                name, value, score if score == 0.0 or score == 1.0
                else round_to(score, 6, 1e6) if NATIVE else round(score, 6),
                w, points if points == 0.0
                else round_to(points, 4, 1e4) if NATIVE else round(points, 4), observed))
    return _clamped(total), values, observed_weight


def _clamped(total: float) -> float:
    """The raw rating of a weighted ``total``: ``round(min(100.0, max(0.0, total)), 2)``,
    the ``min``/``max`` as the builtins compare (the first of equal values wins: -0.0 and
    NaN give 0.0); the bounds (+0.0 and 100.0: a quiet token's rating, a clamped one) are
    their own ``round(x, 2)``, which costs a decimal conversion."""
    if not total > 0.0:
        return 0.0
    if not total < 100.0:
        return 100.0
    return round_to(total, 2, 100.0) if NATIVE else round(total, 2)
