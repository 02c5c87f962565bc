"""Which failed attempts get a warning line: at most two per failing endpoint and interval.

A receiver that is down fails every attempt sent to it. One warning per attempt made
the log as busy as the failing traffic: a dead host behind a hundred subscriptions wrote
lines by the thousand, each ~40 µs of the worker's event loop, time the healthy
endpoints' sends waited for. So per endpoint (scheme, host, port) and ``interval``:

* the first failed attempt is logged at warning in full, as before (``webhook.attempt``);
* the others in the interval are logged at debug (still every one, with the level down)
  and counted;
* when the interval has passed, one warning sums them up (``webhook.attempts_failed``):
  how many, for how many subscriptions, the last status code and error.

Every attempt stays in the attempt history (``/webhooks/deliveries``) and the metrics;
only the log is thinned. Pure: the caller passes the clock's reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FailedAttemptLog", "FailureSummary"]


@dataclass
class FailureSummary:
    """Failed attempts at one endpoint not logged at warning during one interval."""

    endpoint: str
    #: When the interval started: the failure that was logged in full.
    since: float
    #: Failed attempts after that one, within the interval.
    failed: int = 0
    subscriptions: set[str] = field(default_factory=set)
    last_status_code: int | None = None
    last_error: str | None = None
    last_delivery_id: str = ""


class FailedAttemptLog:
    """Decides, per failed automatic attempt, whether it is the endpoint's warning line."""

    def __init__(self, interval: float) -> None:
        #: 0: every failed attempt is a warning (no summaries).
        self.interval = interval
        self._open: dict[str, FailureSummary] = {}

    def failed(self, endpoint: str, now: float, subscription_id: str, delivery_id: str,
               status_code: int | None, error: str | None
               ) -> tuple[bool, FailureSummary | None]:
        """(whether to log this failure at warning, a summary of the endpoint's interval
        that just ended, if it had failures not logged at warning)."""
        if self.interval <= 0:
            return True, None
        current = self._open.get(endpoint)
        if current is None or now - current.since >= self.interval:
            self._open[endpoint] = FailureSummary(endpoint, now)
            return True, current if current is not None and current.failed else None
        current.failed += 1
        current.subscriptions.add(subscription_id)
        current.last_status_code = status_code
        current.last_error = error
        current.last_delivery_id = delivery_id
        return False, None

    def due(self, now: float) -> list[FailureSummary]:
        """Summaries of the intervals that have passed by ``now`` (each once), and those
        intervals closed: an endpoint's next failure is logged in full again."""
        if not self._open:
            return []
        ended = [e for e, s in self._open.items() if now - s.since >= self.interval]
        return [s for s in (self._open.pop(e) for e in ended) if s.failed]

    def close(self) -> list[FailureSummary]:
        """Every interval's summary now (the worker is stopping)."""
        summaries = [s for s in self._open.values() if s.failed]
        self._open.clear()
        return summaries
