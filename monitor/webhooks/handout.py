"""In which order the worker starts the claimed deliveries waiting for a slot.

Senders started together run one after another on the event loop: each one's first
steps (signing, writing the request to the socket, where a loopback receiver woken on
the same core can hold the writer for a while) finish before the next one's begin. So
the order decides who waits. Deliveries are handed out like water filling slots: each
next one goes to the endpoint with the fewest sends in flight and already handed out,
and endpoints being probed (a send failed, and not enough have succeeded in a row
since) go after every other (``behind``): a receiver that answers errors at once is tried up to
``max_attempts`` times per delivery, and handed out first its retries made a healthy
endpoint's new delivery wait for their sends (docs/performance.md, thirty-third pass).
Among equals, the order of ``ready`` (the oldest claim first). The dispatcher asks it
both when a cycle's claims start and when a sender picks its next delivery from another
endpoint.

An endpoint ``behind`` also takes at most the sends in flight the probe gives it (one
after a failure, one more per success in a row: :mod:`.probe`), so a dead receiver holds
one slot, not ``per_endpoint_concurrency`` of them, and each of its sends' ends (a
timeout, a failure cycle, a new connection) costs the others a quarter as often.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping


def handout(ready: Mapping[str, int], in_flight: Mapping[str, int], per_endpoint: int,
            free: int, behind: Mapping[str, int] | None = None) -> list[str]:
    """The endpoints to take the next ready delivery from, in order: at most ``free``
    in all, none past its bound of sends in flight (``per_endpoint``, or its value in
    ``behind`` if lower), none past its ``ready`` count.

    ``ready``: deliveries waiting per endpoint, in the order the endpoints were first
    claimed for; ``in_flight``: sends running per endpoint (absent: none); ``behind``:
    endpoints to serve after all others, each with the sends it may have in flight (they
    are probed: :mod:`.probe`)."""
    behind = behind or {}
    # (served late, load, claim order, endpoint, its bound): ``i`` is unique, so the
    # bound rides along without ever being compared.
    heap: list[tuple[bool, int, int, str, int]] = []
    for i, (e, n) in enumerate(ready.items()):
        load, bound = in_flight.get(e, 0), min(behind.get(e, per_endpoint), per_endpoint)
        if n > 0 and load < bound:
            heap.append((e in behind, load, i, e, bound))
    heapq.heapify(heap)
    left = dict(ready)
    order: list[str] = []
    while heap and len(order) < free:
        late, load, i, endpoint, bound = heapq.heappop(heap)
        order.append(endpoint)
        left[endpoint] -= 1
        if left[endpoint] > 0 and load + 1 < bound:
            heapq.heappush(heap, (late, load + 1, i, endpoint, bound))
    return order
