"""What a refresh works out from a token's windows and observations, before the stateful
steps (the published rating's memory and the tier) that the engine runs on top."""

from __future__ import annotations

from ..config import ModelConfig
from ..records import SignalValue
from .params import Params, params
from .rating import floor_rating
from .readings import count_beyond
from .signals import Observations, evaluate
from .windows import Windows

#: A refresh's inputs to ``publish`` and ``step``: functions of the windows, the
#: observations, the configuration and the refresh time only (no per-token memory):
#: ``(raw, floor, deviation, calm, above)``, the weighted rating of the observed signals;
#: the hard floor the price alone guarantees; the mean deviation over the deviation window
#: (or the last one); no price below the persistence line in the calm window; whole
#: buckets of the last hour above the premium line (0, not counted, while deviation <
#: premium_enter: no tier reads it then). A plain tuple: a named one is built by a
#: Python-level ``__new__``, once per refresh.
Figures = tuple[float, float, float, bool, int]


def refresh_figures(w: Windows, obs: Observations, cfg: ModelConfig, now: float,
                    detail: bool) -> tuple[Figures, list[SignalValue], dict[str, float | None]]:
    """The figures of a refresh at ``now`` of a token with a price; with ``detail`` also
    the per-signal breakdown and the metrics of the rating snapshot."""
    return figures_of(w, obs, params(cfg), now, detail)


def figures_of(w: Windows, obs: Observations, cfg: Params, now: float,
               detail: bool) -> tuple[Figures, list[SignalValue], dict[str, float | None]]:
    """:func:`refresh_figures` with the settings already looked up (the engine's call)."""
    raw, signals, observed_weight, deviation, metrics, calm_min = evaluate(
        w, obs, cfg, now, detail=detail)
    floor = floor_rating(w, now, cfg)
    if deviation is None:
        deviation = w.last_dev
    if deviation is None:
        raise ValueError("a refresh of a token without a price has no figures")
    # Calm: no price more than persistence_low below peg in the calm window.
    calm = calm_min >= -cfg.persistence_low
    # The premium count is read only by a token at least premium_enter above peg
    # (``tiers.step_tier`` enters premium only then): below that it is not counted.
    above = count_beyond(w, now, 3600, cfg.premium_lines, above=True)[0] \
        if deviation >= cfg.premium_enter else 0
    if detail:
        # The sum ``sum(s.weight for s in signals if s.observed)`` gave: the same weights
        # in the same order.
        metrics["observed_weight_pct"] = observed_weight
    return (raw, floor, deviation, calm, above), signals, metrics
