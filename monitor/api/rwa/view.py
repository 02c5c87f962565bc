"""How a stored rating becomes JSON: list items, the ``risk`` envelope, the detail blocks.

Field names follow the spec's event object (snake_case: ``token_address``-style data,
``market_cap_usd`` as in the sort value); the risk envelope keeps the spec's own names
(``overallRisk``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import pairwise
from typing import Any

import msgspec

from ...records import RatingSnapshot
from ...registry import tags_for
from ...storage.db import Row
from ...storage.episodes import severity
from ...timefmt import format_ts

DEPEG_TAG = "depeg_price_deviation"
PRICE_CATEGORY = "price_stability"
_snapshot_decoder = msgspec.json.Decoder(RatingSnapshot)


@lru_cache(maxsize=4096)
def _day(day: int) -> str:
    return format_ts(day * 86400.0)[:10]


def iso(ts: float | None) -> str | None:
    """``format_ts`` output; whole seconds (every refresh) take a fast path, because a
    720-hour history formats thousands of them per request."""
    if ts is None:
        return None
    seconds = float(ts)
    if not seconds.is_integer() or seconds < 0:
        return format_ts(seconds)
    day, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{_day(day)}T{hours:02d}:{minutes:02d}:{secs:02d}Z"


def risk_envelope(rating: float, tier: str, detected_at: str | None,
                  deviation_pct: float | None) -> dict[str, Any]:
    """The shared envelope: one ``depeg_price_deviation`` issue while below-peg tiers hold.

    watch and warning count as medium, critical as high; ok and premium carry no issue
    (above peg is not a loss of peg). Severity is the rating on the spec's 0-10 tag
    scale, fractional as the spec allows for pegged-token tags.
    """
    level = severity(tier)
    issues: list[dict[str, Any]] = []
    if level > 0:
        dev = "unknown" if deviation_pct is None else f"{deviation_pct:+.3f}%"
        tag: dict[str, Any] = {
            "key": DEPEG_TAG, "name": "Depeg: price deviation", "type": "depegRisk",
            "severity": round(rating / 10.0, 2),
            "description": f"Depeg tier {tier}: rating {rating:.1f}, deviation from peg {dev}",
            "context": {"detected_at": detected_at} if detected_at else {},
        }
        issues.append({
            "score": rating, "tags": [tag],
            "categories": {PRICE_CATEGORY: {
                "key": PRICE_CATEGORY, "name": "Price Stability",
                "description": "Price deviation from the peg and its persistence",
                "tags": {DEPEG_TAG: True}}},
        })
    return {"score": rating, "count": len(issues), "medium": int(level in (1, 2)),
            "high": int(level == 3), "overallRisk": rating, "issues": issues}


def decode_snapshot(row: Row) -> RatingSnapshot:
    return _snapshot_decoder.decode(row["snapshot"])


def is_stale(row: Row, snap: RatingSnapshot, stale_after: float, now: float) -> bool:
    """Stale when the feed went quiet, when the engine said the *price* behind the rating
    is old (slippage or oracle ticks alone do not make a rating fresh), or when nothing
    has refreshed the stored rating for ``stale_after`` seconds of wall time (the monitor
    stopped, or a restarted service still holds the previous run's ratings)."""
    received = row["received_at"]
    return (snap.staleness_seconds >= stale_after or snap.metrics.get("stale") == 1.0
            or received is None or now - float(received) >= stale_after)


def item(row: Row, snap: RatingSnapshot, stale_after: float, now: float) -> dict[str, Any]:
    registered = row["peg_type"] is not None
    detected = row["episode_started"] if row["episode_started"] is not None else row["tier_since"]
    return {
        "address": row["token_address"],
        "chain": row["chain"],
        "symbol": row["reg_symbol"] or row["snap_symbol"],
        "name": row["name"] if registered else None,
        "registered": registered,
        "peg_type": row["peg_type"],
        "peg_reference": row["peg_reference"],
        "market_cap_usd": row["market_cap_usd"],
        "tags": list(tags_for(row["peg_type"])),
        "rating": snap.rating,
        "tier": snap.tier,
        "band_tier": snap.band_tier,
        "deviation_pct": snap.deviation_pct,
        "price_usd": snap.price_usd,
        "peg_usd": snap.peg_usd,
        "updated_at": snap.timestamp,
        "tier_since": iso(row["tier_since"]),
        "staleness_seconds": snap.staleness_seconds,
        "stale": is_stale(row, snap, stale_after, now),
        "collapsed": bool(row["collapsed"]),
        "risk": risk_envelope(snap.rating, snap.tier, iso(detected), snap.deviation_pct),
    }


#: Why a registered token has no rating (the engine rates nothing without a price and a peg).
UNRATED_REASON = "no price with a peg received yet"


def unrated_item(row: Row) -> dict[str, Any]:
    """A registered token the monitor cannot rate yet: listed, rating null, never ok/0."""
    return {
        "address": row["token_address"], "chain": row["chain"], "symbol": row["symbol"],
        "name": row["name"], "registered": True, "peg_type": row["peg_type"],
        "peg_reference": row["peg_reference"], "market_cap_usd": row["market_cap_usd"],
        "tags": list(tags_for(row["peg_type"])), "rating": None, "tier": None,
        "unrated_reason": UNRATED_REASON,
    }


def _num(value: str | None) -> float | None:
    try:
        parsed = float(value) if value is not None else None
    except ValueError:
        return None
    return parsed if parsed is not None and math.isfinite(parsed) else None


def flat_metrics(snap: RatingSnapshot, row: Row, points: list[Row],
                 episodes: list[Row], changes: int) -> dict[str, float | None]:
    """Every number behind the rating, flat: the engine's metrics, each signal's value,
    score, weight and contribution, and figures derived over the requested window."""
    out: dict[str, float | None] = {k: v for k, v in snap.metrics.items()
                                    if v is None or isinstance(v, int | float)}
    for s in snap.signals:
        out[f"signal_{s.name}_value"] = s.value
        out[f"signal_{s.name}_score"] = s.score
        out[f"signal_{s.name}_weight"] = s.weight
        out[f"signal_{s.name}_contribution"] = s.contribution
        out[f"signal_{s.name}_observed"] = 1.0 if s.observed else 0.0
    price, peg = _num(snap.price_usd), _num(snap.peg_usd)
    ts = float(row["ts"])
    derived: dict[str, float | None] = {
        "rating": snap.rating,
        "tier_severity": float(severity(snap.tier)),
        "band_tier_severity": float(severity(snap.band_tier)),
        "deviation_pct": snap.deviation_pct,
        "price_usd": price,
        "peg_usd": peg,
        "price_to_peg": price / peg if price is not None and peg else None,
        "staleness_seconds": snap.staleness_seconds,
        "tier_age_seconds": ts - float(row["tier_since"]),
        "signals_observed": float(sum(s.observed for s in snap.signals)),
        "signals_total": float(len(snap.signals)),
        "contribution_sum": sum(s.contribution for s in snap.signals),
        "window_points": float(len(points)),
        "window_tier_changes": float(changes),
        "episodes_total": float(len(episodes)),
        "episodes_open": float(sum(e["recovered_at"] is None for e in episodes)),
    }
    ratings = [float(p["rating"]) for p in points]
    devs = [float(p["deviation_pct"]) for p in points if p["deviation_pct"] is not None]
    prices = [v for v in (_num(p["price_usd"]) for p in points) if v is not None]
    for name, values in (("rating", ratings), ("deviation_pct", devs), ("price_usd", prices)):
        derived[f"window_{name}_min"] = min(values) if values else None
        derived[f"window_{name}_max"] = max(values) if values else None
        derived[f"window_{name}_mean"] = sum(values) / len(values) if values else None
    seconds = dict.fromkeys(("ok", "watch", "warning", "critical", "premium"), 0.0)
    for a, b in pairwise(points):
        if a["tier"] in seconds:
            seconds[a["tier"]] += float(b["ts"]) - float(a["ts"])
    for tier, secs in seconds.items():
        derived[f"window_seconds_{tier}"] = secs
    for key, value in derived.items():
        out.setdefault(key, value)
    return out


def episode(row: Row, latest_ts: float) -> dict[str, Any]:
    started, recovered = float(row["started_at"]), row["recovered_at"]
    end = float(recovered) if recovered is not None else latest_ts
    return {
        "started_at": iso(started),
        "recovered_at": iso(recovered),
        "ongoing": recovered is None,
        "recovery_seconds": None if recovered is None else float(recovered) - started,
        "duration_seconds": max(0.0, end - started),
        "started_tier": row["started_tier"],
        "worst_tier": row["worst_tier"],
        "peak_deviation_pct": row["peak_deviation_pct"],
        "peak_at": iso(row["peak_at"]),
        "peak_price_usd": row["peak_price_usd"],
        "peak_rating": row["peak_rating"],
        "start_event_id": row["start_event_id"],
        "recovery_event_id": row["recovery_event_id"],
    }


def point(row: Row) -> dict[str, Any]:
    return {"timestamp": iso(row["ts"]), "rating": row["rating"], "tier": row["tier"],
            "deviation_pct": row["deviation_pct"], "price_usd": row["price_usd"],
            "peg_usd": row["peg_usd"]}
