"""Which endpoints the delivery worker probes, and when it stops.

An endpoint whose send failed is *probed*: its sends go one at a time, one more at once
for each success in a row (up to ``per_endpoint_concurrency``) and back to one at its
next failure, one slot's worth of its deliveries is claimed per send it may have in
flight, and its deliveries start after every other endpoint's (:mod:`.handout`). A dead
receiver then holds one slot, not ``per_endpoint_concurrency``, and all of them together
at most half the worker's (:func:`failing_share`). An endpoint leaves the probe after
``PROBE_SUCCESSES`` sends in a row succeed, more if it keeps relapsing
(``MAX_PROBE_SUCCESSES``). The way back is gradual because a receiver that needs its
slots (slow, and failing some of its requests) was otherwise held to one send at a
time while probed: one answering in 0.2 s and failing a fifth of its requests made
about half the attempts it needed at 10 events/s, and with the gradual way back it keeps
up (``bench_delivery.py --neighbours slowflaky``, docs/performance.md, fortieth pass).
The dispatcher (:mod:`.dispatcher`) asks :class:`Probes` what to do; this module sends nothing and
reads no clock.
"""

from __future__ import annotations

__all__ = ["MAX_FAILING_ENDPOINTS", "MAX_PROBE_SUCCESSES", "PROBE_SUCCESSES", "Probes",
           "failing_share"]

#: Endpoints remembered as failing, at most: they are served after the others
#: (:mod:`.handout`) and probed one send at a time, and every claim carries their room
#: (so its cost grows with them). Past this the memory starts over: forgotten endpoints
#: get their full slots, outside the share, until their next failure (safe for leases: a
#: delivery claimed for one slot goes out no later on more).
MAX_FAILING_ENDPOINTS = 1_000
#: Successes in a row that take an endpoint out of the probe. One was not enough: a
#: receiver failing every other request (a flaky proxy, a deploy rolling) left the probe
#: at each success with all its slots, sent its claimed retries at once and failed
#: again, and a healthy neighbour's p99 read 1.40-1.48x its baseline; kept in the probe
#: until two in a row, 1.11 on SQLite and 0.81 on PostgreSQL (``bench_delivery.py
#: --neighbours flap``, docs/performance.md, thirty-ninth pass).
PROBE_SUCCESSES = 2
#: Most successes in a row an endpoint that keeps relapsing must show to leave the probe.
#: An endpoint that fails again before it has served its parole (as many successes out of
#: the probe as it needed to leave it) needs twice as many the next time: a receiver
#: failing a third of its requests at random met two in a row every few sends, left the
#: probe with all its slots each time and sent its claimed retries at once, and a healthy
#: neighbour's p99 read 1.24-1.31x its baseline; with the doubling 1.04-1.12
#: (``bench_delivery.py --neighbours flaky``, docs/performance.md, fortieth pass). The
#: bound keeps a receiver that fails rarely but unluckily from being held one send at a
#: time for good.
MAX_PROBE_SUCCESSES = 16


def failing_share(max_concurrency: int) -> int:
    """Deliveries the failing endpoints may hold claimed at once, all together: half the
    worker's slots (at least one), so they never hold more than half of its sends, and
    healthy endpoints always have the other half and the claims to fill them."""
    return max(max_concurrency // 2, 1)


class _Recovery:
    """An endpoint's failures, remembered while it is probed and on parole after it:
    its successes in a row since its last failure, and how many it needs to leave the
    probe (as many again end its parole)."""

    __slots__ = ("needed", "streak")

    def __init__(self) -> None:
        self.needed = PROBE_SUCCESSES
        self.streak = 0


class Probes:
    """The endpoints being probed, and those on parole. ``max_slots``: the sends in
    flight an endpoint may have at most (``per_endpoint_concurrency``)."""

    def __init__(self, max_slots: int = 1) -> None:
        self.max_slots = max(max_slots, 1)
        #: Endpoints probed, each with the number of the last claim asked for before it
        #: entered the probe (a claim asked for earlier gave it a healthy endpoint's
        #: room, outside the share: what it brings for the endpoint is given back). The
        #: same dict for the object's life.
        self.failing: dict[str, int] = {}
        #: The sends in flight each probed endpoint may have: one after a failure, one
        #: more per success in a row, at most ``max_slots``. The same dict for the
        #: object's life.
        self.slots: dict[str, int] = {}
        self._recovery: dict[str, _Recovery] = {}
        self._turn = 0  # where the failing endpoints' room is handed out from

    def failed(self, endpoint: str, claim: int) -> bool:
        """A send to ``endpoint`` failed; ``claim``: the number of the last claim asked
        for. Returns whether it enters the probe: its deliveries claimed and not sent were
        claimed outside the failing endpoints' share (:meth:`share`), to be given back,
        and so is what claims asked for up to ``claim`` bring. Probed already, it is back
        to one slot and keeps what it holds: that was claimed inside the share (the
        dispatcher sends none of it past its lease)."""
        recovery = self._recovery.get(endpoint)
        if recovery is not None:
            recovery.streak = 0
            if endpoint in self.failing:
                self.slots[endpoint] = 1
                return False
            recovery.needed = min(recovery.needed * 2, MAX_PROBE_SUCCESSES)  # a relapse
        if len(self.failing) >= MAX_FAILING_ENDPOINTS:
            self.failing.clear()  # bounded memory; an order and probes are lost
            self.slots.clear()
            self._recovery.clear()
            recovery = None
        if len(self._recovery) >= 2 * MAX_FAILING_ENDPOINTS:
            # Bounded memory: endpoints on parole that are sent nothing more.
            self._recovery = {e: r for e, r in self._recovery.items() if e in self.failing}
        # Set again, not only when new: the trim above may have dropped its parole record.
        self._recovery[endpoint] = recovery or _Recovery()
        self.failing[endpoint] = claim
        self.slots[endpoint] = 1
        return True

    def succeeded(self, endpoint: str) -> None:
        """A send to ``endpoint`` succeeded. Probed, it may have one more send in flight,
        and it has all its slots again after as many successes in a row as it needs; on
        parole, its failures are forgotten after as many more."""
        recovery = self._recovery.get(endpoint)
        if recovery is None:
            return
        recovery.streak += 1
        if endpoint in self.failing:
            if recovery.streak >= recovery.needed:
                del self.failing[endpoint]
                del self.slots[endpoint]
            else:
                self.slots[endpoint] = min(self.slots[endpoint] + 1, self.max_slots)
        elif recovery.streak >= 2 * recovery.needed:
            del self._recovery[endpoint]

    def share(self, room: dict[str, int], share: int, per_slot: int) -> None:
        """Set the failing endpoints' ``room`` (claims each can still take, by endpoint;
        an endpoint absent holds nothing): each at most ``per_slot`` per send it may have
        in flight less what it holds, and all of them together never holding more than ``share``
        (:func:`failing_share`). Without that bound, enough dead receivers (64 at the
        defaults; 16 before the probe) held every claim the worker may make, and a
        healthy endpoint's rows were not claimed at all: minutes of delay at 16
        (``benchmarks/bench_outage.py``). What is left of the share goes one claim per
        endpoint first, then the rest, starting where the last call stopped, so every
        failing endpoint gets its turn to be probed."""
        failing = list(self.failing)
        if not failing:
            return
        cap = {e: per_slot * self.slots[e] for e in failing}
        held = {e: cap[e] - room.get(e, cap[e]) for e in failing}
        left = share - sum(held.values())
        start = self._turn % len(failing)
        turn = failing[start:] + failing[:start]
        give = dict.fromkeys(failing, 0)
        for first in (True, False):
            for i, endpoint in enumerate(turn):
                top = 1 if first else cap[endpoint]
                more = max(min(top - held[endpoint] - give[endpoint], left), 0)
                if more:
                    give[endpoint] += more
                    left -= more
                    self._turn = start + i + 1  # the next call starts after it
        room.update(give)
