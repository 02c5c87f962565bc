"""A simulated on-chain price oracle (a Chainlink-style push feed) for synthetic tokens.

Real oracles do not stream: they publish a new answer when the aggregated price moved more
than a deviation threshold since the last answer, or when the heartbeat expires. Their
answer also lags the market: the aggregation round, the threshold and the block time add
up to minutes, and a feed that reads from slow venues lags a fast depeg by much more.
That lag is what the headroom signal measures (|market price - oracle| / peg), so the
simulator gives every token an oracle and the ``depeg`` scenario an oracle that lags.

Pure and deterministic: the oracle only sees the token's own noise-free price path (no
random draws of its own), so adding it changed none of the simulated market prices.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final

#: Publish when the answer moved this much (fraction of the last answer) ...
DEVIATION_THRESHOLD: Final = 0.0025
#: ... or when this many event seconds passed since the last answer (the model's
#: ``oracle_max_age_seconds`` defaults to an hour, so a healthy feed never goes stale).
HEARTBEAT_SECONDS: Final = 1200.0
#: How far a lagging oracle trails the market (the ``depeg`` scenario's feed).
LAGGING_ORACLE_SECONDS: Final = 1800.0


@dataclass(slots=True)
class OracleFeed:
    """Answers of one token's oracle; ``lag_seconds`` 0 is a prompt feed."""

    lag_seconds: float
    _history: deque[tuple[float, float]]
    _last_answer: float | None = None
    _last_at: float | None = None

    @classmethod
    def make(cls, lag_seconds: float) -> OracleFeed:
        return cls(lag_seconds, deque())

    def observe(self, t: float, fair_price: float) -> float | None:
        """Record the market's noise-free price at ``t``; return the oracle's new answer
        if it publishes one at ``t`` (None: no new round)."""
        history = self._history
        history.append((t, fair_price))
        # The price the feed sees is the newest one at least ``lag_seconds`` old.
        seen: float | None = None
        while history and history[0][0] <= t - self.lag_seconds:
            seen = history.popleft()[1]
            if not history or history[0][0] > t - self.lag_seconds:
                history.appendleft((t - self.lag_seconds, seen))
                break
        if seen is None:
            return None  # the feed has nothing old enough yet (its first minutes)
        last, at = self._last_answer, self._last_at
        due = (last is None or at is None or t - at >= HEARTBEAT_SECONDS
               or abs(seen - last) >= DEVIATION_THRESHOLD * last)
        if not due:
            return None
        self._last_answer, self._last_at = seen, t
        return seen
