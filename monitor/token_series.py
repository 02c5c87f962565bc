"""The per-token gauges (``depeg_token_*``): a collector over each token's latest rating
snapshot, capped at a number of tokens.

Apart from monitor/metrics.py, which declares every other metric, because it is a mechanism
rather than a declaration: metrics.py makes the one process-wide instance, hands it the
counter of what the cap drops, and registers it.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Final

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily

from .records import RatingSnapshot

#: Rating signals (label ``signal``), the field names of ``ModelConfig.weights``.
SIGNALS: Final = (
    "price_deviation", "slippage", "persistence_50bp", "persistence_100bp",
    "volatility_burst", "headroom",
)
#: Numeric tier level for ``depeg_token_tier_level`` (premium below ok: above peg).
TIER_LEVEL: Final = {"premium": -1, "ok": 0, "watch": 1, "warning": 2, "critical": 3}
#: Default cap on tokens with per-token series (about 11 series each).
TOKEN_SERIES_CAP: Final = 500


#: The per-token gauge families, in export order: name, help, and whether a ``signal``
#: label follows the token's (chain, symbol, token). Exported by :class:`TokenSeries`.
_TOKEN_FAMILIES: Final = (
    ("depeg_token_rating", "Latest 0-100 rating of a tracked token.", False),
    ("depeg_token_tier_level",
     "Current tier of a token: -1 premium, 0 ok, 1 watch, 2 warning, 3 critical.", False),
    ("depeg_token_signal_score", "0-1 score of one rating signal of a token.", True),
    ("depeg_token_deviation_ratio", "5-minute deviation of price from peg (0.01 = 1 %).",
     False),
    ("depeg_token_price_usd", "Latest price of a token in USD.", False),
    ("depeg_token_staleness_seconds", "Seconds since the token's last tick.", False),
    ("depeg_token_stale", "1 while the price behind the token's rating is older than "
     "model.stale_after_seconds (the rating is the last known, not a fresh one).", False),
)


class TokenSeries:
    """Per-token gauges for at most ``cap`` distinct tokens (first come, first kept),
    exported at scrape time from each token's latest rating snapshot.

    The cap bounds the series count (about 11 per token) whatever the registry holds; the
    token registry bounds it further in production. A dropped token still counts in every
    aggregate metric; ``forget`` frees its slot when a token leaves the registry.

    A collector, not gauge children: setting ~11 children per snapshot (each a lock and a
    ``float``) was about a third of the monitor's per-snapshot output work at 1 tick per
    minute, for values read once per scrape. ``observe`` keeps the snapshot; ``collect``
    gives what the gauges held: the same series, labels (the symbol of the token's first
    snapshot) and values, a value a later snapshot lacks (no deviation or price, a signal
    missing: never from the engine) staying at the last one seen. Price texts are
    decimal numbers (``ticks.py`` parsed them); one that is not exports no price.
    """

    def __init__(self, cap: int = TOKEN_SERIES_CAP, *, dropped: Counter) -> None:
        self.cap = cap
        #: Counts the snapshots over the cap (``depeg_token_series_dropped_total``).
        self._dropped = dropped
        #: The labels of each token with series, in first-seen order (the export order).
        self._labels: dict[tuple[str, str], tuple[str, str, str]] = {}
        self._latest: dict[tuple[str, str], RatingSnapshot] = {}
        #: Per token, values of earlier snapshots that a later one lacked: ``deviation``,
        #: ``price`` and signal names (filled only then).
        self._kept: dict[tuple[str, str], dict[str, float]] = {}

    def observe(self, snap: RatingSnapshot) -> bool:
        """Export one snapshot; False when the token is over the cap."""
        key = (snap.chain, snap.token_address)
        prev = self._latest.get(key)
        if prev is None:
            if len(self._labels) >= self.cap:
                self._dropped.inc()
                return False
            self._labels[key] = (snap.chain, snap.symbol, snap.token_address)
        elif snap.deviation_pct is None or snap.price_usd is None \
                or list(map(_NAME, snap.signals)) != _SIGNAL_NAMES:
            # It lacks a value the gauges would keep from before: keep them.
            self._kept[key] = _values(prev, self._kept.get(key))
        self._latest[key] = snap
        return True

    def observe_all(self, snaps: list[RatingSnapshot]) -> None:
        """``observe`` for each of ``snaps`` in order (the daemon's batch of snapshots), in
        one call; the snapshots over the cap are counted with one increment, not one locked
        ``inc`` each (at 1 tick per token per minute with more tokens than the cap, half of
        the snapshots)."""
        labels, latest, cap = self._labels, self._latest, self.cap
        latest_of = latest.get
        dropped = 0
        for snap in snaps:
            key = (snap.chain, snap.token_address)
            prev = latest_of(key)
            if prev is None:
                if len(labels) >= cap:
                    dropped += 1
                    continue
                labels[key] = (snap.chain, snap.symbol, snap.token_address)
            elif snap.deviation_pct is None or snap.price_usd is None \
                    or list(map(_NAME, snap.signals)) != _SIGNAL_NAMES:
                self._kept[key] = _values(prev, self._kept.get(key))
            latest[key] = snap
        if dropped:
            self._dropped.inc(dropped)

    def forget(self, chain: str, token: str) -> None:
        key = (chain, token)
        self._labels.pop(key, None)
        self._latest.pop(key, None)
        self._kept.pop(key, None)

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(name, doc, labels=[*_TOKEN, "signal"] if signal else _TOKEN)
                for name, doc, signal in _TOKEN_FAMILIES]

    def collect(self) -> list[GaugeMetricFamily]:
        families = self.describe()
        rating, tier, signal, deviation, price, staleness, stale = families
        latest, kept = self._latest, self._kept
        for key, labels in list(self._labels.items()):
            snap = latest.get(key)
            if snap is None:  # forgotten since the copy (a scrape from another thread)
                continue
            values = _values(snap, kept.get(key)) if key in kept else _values(snap, None)
            rating.add_metric(labels, float(snap.rating))
            tier.add_metric(labels, float(TIER_LEVEL.get(snap.tier, 0)))
            for name, value in values.items():
                if name == "deviation":
                    deviation.add_metric(labels, value)
                elif name == "price":
                    price.add_metric(labels, value)
                else:
                    signal.add_metric([*labels, name], value)
            staleness.add_metric(labels, float(snap.staleness_seconds))
            stale.add_metric(labels, 1.0 if snap.metrics.get("stale") == 1.0 else 0.0)
        return families


_TOKEN: Final = ["chain", "symbol", "token"]
_SIGNAL_NAMES: Final = list(SIGNALS)
#: A signal's name (``observe``'s check maps it in C: a list comprehension is a frame).
_NAME: Final = attrgetter("name")


def _values(snap: RatingSnapshot, kept: dict[str, float] | None) -> dict[str, float]:
    """The deviation, price and signal scores ``snap`` exports, over ``kept``."""
    values = {} if kept is None else dict(kept)
    if snap.deviation_pct is not None:
        values["deviation"] = snap.deviation_pct / 100.0
    if snap.price_usd is not None:
        try:
            values["price"] = float(snap.price_usd)
        except ValueError:
            pass
    for s in snap.signals:
        if s.name in SIGNALS:
            values[s.name] = float(s.score)
    return values
