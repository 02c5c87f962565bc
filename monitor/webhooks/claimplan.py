"""What the delivery worker claims next: whether a due read is worth making now, how
many deliveries each endpoint may still take, and whether the read walks the due index.

The dispatcher (:mod:`.dispatcher`) owns the sends; this module owns the memory of past
reads that decides the next one (which endpoints were full, whether the last read was cut
at its limit, which backlog blocked the walk). It runs no statement and reads only the
monotonic clock it is given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sized

from ..config import DeliveryConfig
from ..storage.delivery_batches import CycleResult
from ..storage.due_read import ClaimRequest, full_endpoints
from .probe import Probes, failing_share

__all__ = ["CLAIM_AHEAD", "ClaimPlan"]

#: Claimed deliveries (in flight + ready) per slot: more than one keeps a claimed delivery
#: behind every send, so the next one starts without waiting for a database round trip.
#: 4, not 2: a cycle claims at most the room left (this times the bounds, less what is in
#: flight and ready), so at 2 a busy worker ran ~25-delivery cycles back to back and paid
#: a cycle's fixed cost (statement, commit, array encoding) that often; at 4 the cycles
#: carry ~40, and the CPU per delivery of the worker and of the PostgreSQL server fell by
#: ~10-15 % in two of three interleaved runs (docs/performance.md, "Delivery, seventh
#: round"; a loaded machine, the third even). The price: a claim's lease
#: is longer (4 x timeout_seconds + the margin), so after a crash its deliveries wait
#: that long before another worker retries them.
CLAIM_AHEAD = 4


class ClaimPlan:
    """The worker's claims: what to ask for, and what the answers say about the next."""

    def __init__(self, config: DeliveryConfig, probes: Probes) -> None:
        self.config = config
        self.probes = probes
        #: Claims asked for, numbered when asked (see :meth:`request`).
        self.claims = 0
        #: The last due read was cut at its limit (and made progress): read again now.
        self.more_due = True
        #: Endpoints where a send finished since the last read.
        self.freed: set[str] = set()
        self._full_at_read: set[str] = set()  # endpoints without room at the last read
        #: Endpoints without room when the last walk met its bound (see :meth:`_walks`).
        self._walk_blocked: frozenset[str] = frozenset()
        self._read_at = -float("inf")

    @property
    def per_endpoint(self) -> int:
        """Claims an endpoint with all its slots may hold."""
        return max(self.config.per_endpoint_concurrency, 1) * CLAIM_AHEAD

    def room(self, in_flight: Mapping[str, int],
             ready: Mapping[str, Sized]) -> dict[str, int]:
        """Claims each endpoint with claimed deliveries can still take: a failing one
        one slot's worth per send the probe lets it have in flight (a lease counts on
        at most CLAIM_AHEAD sends per slot ahead of it)."""
        slots = self.probes.slots
        per_endpoint = self.per_endpoint
        room = {e: (CLAIM_AHEAD * slots[e] if e in slots else per_endpoint) - n
                for e, n in in_flight.items()}
        for endpoint, queue in ready.items():
            left = room.get(endpoint)
            if left is None:
                left = CLAIM_AHEAD * slots[endpoint] if endpoint in slots else per_endpoint
            room[endpoint] = left - len(queue)
        return room

    def request(self, look: bool, in_flight: Mapping[str, int],
                ready: Mapping[str, Sized], monotonic: float
                ) -> tuple[int, dict[str, int], bool] | None:
        """What to claim now: (limit, room by endpoint, whether to walk), or None when
        there is no room or no reason to think anything is due.

        The due query leaves out endpoints without room, so when every endpoint with due
        rows is full it reads (a bounded walk, then each subscription's oldest rows) to
        find nothing. It therefore runs only when something may be claimable: new
        deliveries (``look``), a read cut at its limit, a slot freed at an endpoint that
        was full when last read, or the poll interval (retries coming due, deliveries
        made by another process). ``monotonic``: the clock the poll interval is timed
        on."""
        per_endpoint = self.per_endpoint
        held = sum(in_flight.values()) + sum(len(q) for q in ready.values())
        limit = max(self.config.max_concurrency, 1) * CLAIM_AHEAD - held
        if limit <= 0:
            return None
        stale = monotonic - self._read_at >= self.config.poll_interval_seconds
        if not (look or stale or self.more_due or self.freed & self._full_at_read):
            return None
        room = self.room(in_flight, ready)
        if room and not (look or stale or self.more_due) and max(room.values()) <= 0:
            # Only endpoints not held yet could take more: the poll finds them. Not after
            # a read cut at its limit: its unread rows may be such an endpoint's (a
            # hanging endpoint's backlog fills a read, and a healthy endpoint's new row
            # behind it waited for the next event or the poll: 30-70 ms p99 at 50/s).
            return None
        # Enough for the endpoints with room plus one new endpoint's worth; more is
        # claimed in the next cycle (a read cut at its limit brings one at once).
        limit = min(limit, sum(n for n in room.values() if n > 0) + per_endpoint)
        self.probes.share(room, failing_share(self.config.max_concurrency), CLAIM_AHEAD)
        self._full_at_read = {e for e, n in room.items() if n <= 0}
        self.freed.clear()
        # Numbered when asked for, not when taken: an endpoint that fails while this
        # claim is on its way was given a healthy endpoint's room in it, so what it takes
        # for that endpoint is given back (its number is not past the failure's mark).
        self.claims += 1
        return limit, room, self._walks(room, per_endpoint)

    def _walks(self, room: dict[str, int], per_endpoint: int) -> bool:
        """Whether the read walks the due index, or reads by subscription only.

        A walk that meets its bound short of the claim is followed by a read by
        subscription. Behind a hanging endpoint that is every cycle: its backlog is the
        oldest due rows, the walk passes over up to its bound of them (each joined to its
        subscription) only to find nothing it may claim, and the rows come from the read
        by subscription. So while every endpoint that was without room at such a walk
        still has none, the read skips the walk. The read by subscription alone claims
        what the walk and it would (due_read), so this saves the walk's cost and changes
        no claim. As soon as one of them has room, reads walk again: its backlog's head
        is claimable then, and the walk reaches it at once (cut at its rows, it keeps the
        skip: see :meth:`read`). Skipping those walks too, until the poll interval, made
        a busy drain read by subscription in most cycles (every endpoint has room in
        turn): each subscription's oldest rows for every endpoint with room, ~900 rows
        to claim ~60, 3.3 ms a cycle where a walk takes 0.2 (docs/performance.md, 39th
        pass). A walk that met its bound with every endpoint having room (a paused
        subscription's backlog) skips nothing: nothing would tell when to walk again."""
        blocked = self._walk_blocked
        return not blocked or any(room.get(e, per_endpoint) > 0 for e in blocked)

    def read(self, claim: ClaimRequest, result: CycleResult, monotonic: float) -> None:
        """A cycle made ``claim``'s read and came back with ``result``."""
        self._read_at = monotonic
        if claim.walk:
            # A walk that met its bound sets the endpoints whose backlog it passed
            # over; one that came back short of its rows says the backlog is gone; one
            # cut at its rows (an endpoint of them with room again, its backlog's
            # head read) says nothing of what lies behind: the skip stands.
            if result.by_subscription:
                self._walk_blocked = frozenset(full_endpoints(claim))
            elif not result.more_due:
                self._walk_blocked = frozenset()
        # Only when this read made progress: rows left behind because their
        # endpoints have no room are looked at again when a slot frees, not in a spin.
        self.more_due = result.more_due and bool(result.claimed or result.exhausted)

    def filled(self, claim: ClaimRequest, result: CycleResult,
               room_now: Mapping[str, int]) -> None:
        """``claim``'s deliveries are held (``room_now``: :meth:`room` after them).
        Endpoints it filled up may have due rows left behind too (the read stops taking
        an endpoint's rows at its room): a slot freed at any of them must bring a read,
        or those rows wait for the poll interval (this stalled the end of every burst
        for up to poll_interval_seconds)."""
        self._full_at_read |= {e for e, n in room_now.items() if n <= 0}
        # ... judged by the room the read was given, not by the room now: sends that
        # finished at such an endpoint during the cycle free room again, and it then
        # looked not full, so its rows waited for the poll (1 s stalls on PostgreSQL).
        taken = Counter(d.endpoint for d, _ in result.claimed)
        taken.update(d.endpoint for d in result.exhausted)
        self._full_at_read |= {e for e, n in taken.items()
                               if claim.room.get(e, claim.default_room) <= n}
