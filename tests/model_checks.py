"""Independent checks of the depeg model's promises, recomputed from the prices themselves.

Shared by the replay tests on the shared real files and on the raw sanity episodes.
"""

from __future__ import annotations

import bisect
import csv
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from monitor.config import ModelConfig
from monitor.records import RatingSnapshot
from monitor.timefmt import parse_ts

CFG = ModelConfig()
#: The all-clear promise (README "The rating model"): once the price has been within
#: 0.5 % of peg for 60 minutes, with no new stress, the tier is ok within 2 hours.
AT_PEG, NEED, WITHIN = 0.005, 3600.0, 7200.0


def band_of(rating: float) -> str:
    for edge, tier in ((CFG.critical_at, "critical"), (CFG.warning_at, "warning"),
                       (CFG.watch_at, "watch")):
        if rating >= edge:
            return tier
    return "ok"


def tier_matches_band(tier: str, rating: float) -> bool:
    """tier == band(rating), premium being the above-peg ok (written out independently of
    the engine's own ``band``)."""
    b = band_of(rating)
    return tier == b or (tier == "premium" and b == "ok")


@dataclass
class AllClear:
    recoveries: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)


def at_peg_stretches(prices: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``(start, end)`` of every stretch the price (a step function of ``(ts, price/peg)``)
    spent within 0.5 % of peg after having been off it."""
    stretches: list[tuple[float, float]] = []
    start: float | None = None
    was_off = False
    for ts, ratio in prices:
        if abs(ratio - 1.0) <= AT_PEG:
            if start is None and was_off:
                start = ts
        else:
            if start is not None:
                stretches.append((start, ts))
            start, was_off = None, True
    if start is not None and prices:
        stretches.append((start, prices[-1][0]))
    return stretches


def all_clear_failures(prices: list[tuple[float, float]],
                       snaps: list[RatingSnapshot]) -> AllClear:
    """For every stretch at peg lasting at least 60 + 120 minutes, the tier two hours after
    its first 60 minutes must be ok (or premium)."""
    result = AllClear()
    times = [parse_ts(s.timestamp) for s in snaps]
    for start, end in at_peg_stretches(prices):
        check_at = start + NEED + WITHIN
        if end < check_at:
            continue
        j = bisect.bisect_right(times, check_at) - 1
        if j < 0 or times[j] <= start + NEED:
            continue
        result.recoveries += 1
        if snaps[j].tier not in ("ok", "premium"):
            result.failures.append((snaps[j].timestamp, snaps[j].tier))
    return result


# -- raw sanity episodes (converted into temporary tick files, never into the repo) -----

HEADER = "ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n"


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def binance_klines(src: Path, dst: Path, token: str, symbol: str) -> Path:
    """Binance 1-minute klines (close) into a canonical tick CSV."""
    with src.open() as fh, dst.open("w") as out:
        out.write(HEADER)
        for row in csv.DictReader(fh):
            ts = row["wall_clock_utc"].replace(" ", "T").replace("+00:00", "Z")
            out.write(f"{ts},eth,{token},{symbol},{row['close']},1,\n")
    return dst


def chainlink_rounds(src: Path, dst: Path, token: str, symbol: str,
                     start: str = "", end: str = "9999") -> Path:
    """Chainlink rounds (8-decimal answers at ``updatedAt``) into a canonical tick CSV."""
    with src.open() as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    seen: set[int] = set()
    with dst.open("w") as out:
        out.write(HEADER)
        for row in sorted(rows, key=lambda r: int(r["updatedAt"])):
            ts = int(row["updatedAt"])
            iso = _iso(ts)
            if ts in seen or not start <= iso < end:
                continue
            seen.add(ts)
            out.write(f"{iso},eth,{token},{symbol},{int(row['answer']) / 1e8},1,\n")
    return dst
