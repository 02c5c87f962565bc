"""What the worker's log says about its attempts: summaries, not a line per attempt.

A worker sending thousands of deliveries a second wrote a line for each (tens of µs of its
event loop apiece, a third of its CPU at the default level), and a receiver that is down
fails every attempt sent to it: a dead host behind a hundred subscriptions wrote
warnings by the thousand while the healthy endpoints' sends waited. So, per
``interval`` (``delivery.attempt_log_seconds``):

* successful attempts are logged at debug, and summed up in one info line
  (``webhook.delivered``: how many, to how many endpoints, the slowest);
* per endpoint (scheme, host, port), the first failed attempt is logged at warning in
  full (``webhook.attempt``); the others at debug, counted, then summed up in one warning
  once the interval has passed (``webhook.attempts_failed``: how many, how many of them
  gave their delivery up, for how many subscriptions, the last status code and error).

Every attempt stays in the attempt history (``/webhooks/deliveries``) and the metrics;
only the log is thinned. Pure: the caller passes the clock's reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DeliveredSummary", "DeliveredTally", "FailedAttemptLog", "FailureSummary"]


@dataclass
class FailureSummary:
    """Failed attempts at one endpoint not logged at warning during one interval."""

    endpoint: str
    #: When the interval started: the failure that was logged in full.
    since: float
    #: Failed attempts after that one, within the interval.
    failed: int = 0
    #: Of those, the ones that were their delivery's last (``max_retries_exceeded``).
    given_up: int = 0
    subscriptions: set[str] = field(default_factory=set)
    last_status_code: int | None = None
    last_error: str | None = None
    last_delivery_id: str = ""


class FailedAttemptLog:
    """Decides, per failed automatic attempt, whether it is the endpoint's warning line."""

    def __init__(self, interval: float) -> None:
        #: 0: every failed attempt is a warning (each one starts an interval that has
        #: already passed, so nothing is ever counted).
        self.interval = interval
        self._open: dict[str, FailureSummary] = {}

    def failed(self, endpoint: str, now: float, subscription_id: str, delivery_id: str,
               status_code: int | None, error: str | None, gave_up: bool = False
               ) -> tuple[bool, FailureSummary | None]:
        """(whether to log this failure at warning, a summary of the endpoint's interval
        that just ended, if it had failures not logged at warning). ``gave_up``: the
        attempt was its delivery's last."""
        current = self._open.get(endpoint)
        if current is None or now - current.since >= self.interval:
            self._open[endpoint] = FailureSummary(endpoint, now)
            return True, current if current is not None and current.failed else None
        current.failed += 1
        current.given_up += gave_up
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


@dataclass
class DeliveredSummary:
    """Successful attempts during one interval."""

    since: float
    delivered: int = 0
    endpoints: set[str] = field(default_factory=set)
    slowest_ms: float = 0.0


class DeliveredTally:
    """Counts successful attempts for the interval's ``webhook.delivered`` line."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._open: DeliveredSummary | None = None

    def delivered(self, endpoint: str, now: float, latency_ms: float) -> None:
        current = self._open
        if current is None:
            current = self._open = DeliveredSummary(now)
        current.delivered += 1
        current.endpoints.add(endpoint)
        if latency_ms > current.slowest_ms:
            current.slowest_ms = latency_ms

    def due(self, now: float) -> DeliveredSummary | None:
        """The interval's summary once it has passed by ``now`` (then a new one opens at
        the next success)."""
        current = self._open
        if current is None or now - current.since < self.interval:
            return None
        self._open = None
        return current

    def close(self) -> DeliveredSummary | None:
        current, self._open = self._open, None
        return current
