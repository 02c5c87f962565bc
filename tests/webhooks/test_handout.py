"""Which claimed deliveries start first: endpoints whose last send failed after all others.

A receiver that answers errors at once is tried up to five times per delivery. When its
retries started before a healthy endpoint's new delivery, each of their sends (signing,
the request's write) ran first on the event loop: the healthy endpoint's p99 rose ~1.5x
next to a receiver answering 503 (docs/performance.md, thirty-third pass). Checked as a
pure order against a brute-force recomputation, and on a real worker with one slot.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.webhooks.handout import handout
from monitor.webhooks.secrets import SecretBox
from tests.webhook_support import (
    ENCRYPTION_KEY,
    queue_for_new_subscription,
    receiver,
    running_dispatcher,
)

ENDPOINTS = [f"http://10.0.0.{i}:80" for i in range(6)]


def brute_force(ready: dict[str, int], in_flight: dict[str, int], per_endpoint: int,
                free: int, behind: dict[str, int]) -> list[str]:
    """One pick at a time: among the endpoints with a delivery left and a free slot (for
    those behind, their own number of slots if lower), the one not behind, with the
    fewest sends (in flight + picked), first in ``ready``."""
    left, load = dict(ready), dict(in_flight)
    order: list[str] = []
    rank = {e: i for i, e in enumerate(ready)}
    while len(order) < free:
        open_ = [e for e in ready if left[e] > 0
                 and load.get(e, 0) < _bound(e, per_endpoint, behind)]
        if not open_:
            break
        pick = min(open_, key=lambda e: (e in behind, load.get(e, 0), rank[e]))
        order.append(pick)
        left[pick] -= 1
        load[pick] = load.get(pick, 0) + 1
    return order


def _bound(endpoint: str, per_endpoint: int, behind: dict[str, int]) -> int:
    return min(behind[endpoint], per_endpoint) if endpoint in behind else per_endpoint


@given(ready=st.dictionaries(st.sampled_from(ENDPOINTS), st.integers(0, 6), max_size=6),
       in_flight=st.dictionaries(st.sampled_from(ENDPOINTS), st.integers(0, 5), max_size=6),
       per_endpoint=st.integers(1, 5), free=st.integers(0, 40),
       behind=st.dictionaries(st.sampled_from(ENDPOINTS), st.integers(1, 5), max_size=6))
def test_handout_fills_the_least_loaded_healthy_endpoints_first(
        ready: dict[str, int], in_flight: dict[str, int], per_endpoint: int, free: int,
        behind: dict[str, int]) -> None:
    order = handout(ready, in_flight, per_endpoint, free, behind)
    assert order == brute_force(ready, in_flight, per_endpoint, free, behind)
    # Work-conserving within the bounds: as many as the slots and the deliveries allow.
    room = sum(min(n, max(_bound(e, per_endpoint, behind) - in_flight.get(e, 0), 0))
               for e, n in ready.items())
    assert len(order) == min(free, room)


async def test_a_failing_endpoints_next_delivery_waits_for_a_healthy_ones(
        webhook_db: Database) -> None:
    # One slot: sends go one at a time, so the receivers' arrival order is the worker's.
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                            max_concurrency=1, per_endpoint_concurrency=1,
                            poll_interval_seconds=3600.0, backoff_base_seconds=3600.0,
                            backoff_max_seconds=3600.0)
    box = SecretBox.from_config(config)
    async with receiver([503]) as failing, receiver([200]) as healthy:
        # The failing endpoint's first delivery is the oldest, so it goes out first;
        # the next two events reach both endpoints and are claimed with it.
        await queue_for_new_subscription(webhook_db, box, failing.url, 1)
        await queue_for_new_subscription(webhook_db, box, healthy.url, 2)
        async with running_dispatcher(webhook_db, config, box):
            await failing.wait_requests(2)
            await healthy.wait_requests(1)
    assert failing.answered[:2] == [503, 503]
    # Once the first answer failed, the healthy endpoint's delivery (claimed in the same
    # cycle) went out before the failing one's next: the slot's sender used to take its
    # own endpoint's next delivery at once.
    assert failing.received[0].at < healthy.received[0].at < failing.received[1].at
