"""Signals and weights to a 0-100 rating, renormalised over the signals actually observed.

A price-only feed has no slippage or oracle data; scoring their absence as zero would cap
it at 70 and a token at 0.88 could never be critical. So the rating is the weighted mean
over observed signals only.
"""

from __future__ import annotations

from ..config import Weights
from ..records import SignalValue
from .signals import Signal


def weight_of(weights: Weights, name: str) -> float:
    return float(getattr(weights, name))


def combine(signals: tuple[Signal, ...], weights: Weights) -> tuple[float, list[SignalValue]]:
    observed_weight = sum(weight_of(weights, s.name) for s in signals if s.observed)
    values: list[SignalValue] = []
    total = 0.0
    for s in signals:
        w = weight_of(weights, s.name)
        share = (w / observed_weight) if (s.observed and observed_weight > 0) else 0.0
        points = 100.0 * share * s.score
        total += points
        values.append(SignalValue(
            name=s.name, value=s.value, score=round(s.score, 6), weight=w,
            contribution=round(points, 4), observed=s.observed,
        ))
    return round(min(100.0, max(0.0, total)), 2), values
