"""The worker's claim plan (monitor/webhooks/claimplan.py): when a due read is made,
with how much room per endpoint, and when it skips the walk of the due index.

Pure: no database, no clock but the one passed in. The dispatcher's tests
(test_dispatcher_*.py) check the same rules end to end against real databases."""

from __future__ import annotations

from collections import deque

from monitor.config import DeliveryConfig
from monitor.storage.deliveries import DueDelivery
from monitor.storage.delivery_batches import CycleResult
from monitor.storage.due_read import ClaimRequest
from monitor.webhooks.claimplan import CLAIM_AHEAD, ClaimPlan
from monitor.webhooks.probe import Probes, failing_share

CONFIG = DeliveryConfig(max_concurrency=8, per_endpoint_concurrency=2, poll_interval_seconds=1.0)
PER_ENDPOINT = 2 * CLAIM_AHEAD


def _plan() -> ClaimPlan:
    return ClaimPlan(CONFIG, Probes(CONFIG.per_endpoint_concurrency))


def _delivery(endpoint: str, n: int = 0) -> DueDelivery:
    return DueDelivery(f"d{n}", "s", "k", "e", "t", "pending", 0, 0.0, endpoint + "/",
                       endpoint, "sealed", None, None, b"{}", n + 1)


def _claim(room: dict[str, int], walk: bool = True) -> ClaimRequest:
    return ClaimRequest(10, room, PER_ENDPOINT, "tok", 0.0, 1.0, 5, walk)


def _read(plan: ClaimPlan, look: bool, in_flight: dict[str, int] | None = None,
          ready: dict[str, deque[int]] | None = None, at: float = 0.0
          ) -> tuple[int, dict[str, int], bool] | None:
    return plan.request(look, in_flight or {}, ready or {}, at)


def test_room_is_the_endpoint_bound_less_what_it_holds() -> None:
    plan = _plan()
    room = plan.room({"a": 2, "b": 1}, {"b": deque([1, 2, 3]), "c": deque([1])})
    assert room == {"a": PER_ENDPOINT - 2, "b": PER_ENDPOINT - 4, "c": PER_ENDPOINT - 1}


def test_a_probed_endpoint_has_one_slots_worth_per_send_it_may_have() -> None:
    plan = _plan()
    plan.probes.failed("a", plan.claims)
    assert plan.room({"a": 1}, {}) == {"a": CLAIM_AHEAD - 1}
    plan.probes.succeeded("a")  # one more send at once
    assert plan.room({"a": 1}, {}) == {"a": 2 * CLAIM_AHEAD - 1}


def test_the_limit_is_what_the_worker_may_hold_less_what_it_holds() -> None:
    plan = _plan()
    got = _read(plan, True, {"a": 2}, {"a": deque(range(3))})
    assert got is not None
    limit, room, walk = got
    # Bounded by the whole worker's claims and by the room shown plus one new endpoint's.
    assert limit == min(8 * CLAIM_AHEAD - 5, (PER_ENDPOINT - 5) + PER_ENDPOINT)
    assert room == {"a": PER_ENDPOINT - 5}
    assert walk
    assert plan.claims == 1


def test_nothing_is_read_when_the_worker_holds_all_it_may() -> None:
    plan = _plan()
    full = {f"e{i}": PER_ENDPOINT for i in range(4)}
    assert _read(plan, True, full) is None
    assert plan.claims == 0


def test_without_a_reason_to_look_the_next_read_waits_for_the_poll_interval() -> None:
    plan = _plan()
    plan.more_due = False
    assert _read(plan, True, at=10.0) is not None  # new deliveries: read
    plan.read(_claim({}), CycleResult(), 10.0)
    assert _read(plan, False, at=10.5) is None  # nothing new, the poll not due
    assert _read(plan, False, at=11.0) is not None  # the poll interval passed


def test_a_slot_freed_at_an_endpoint_that_was_full_brings_a_read() -> None:
    plan = _plan()
    held = {"a": PER_ENDPOINT, "b": 1}
    got = _read(plan, True, held, at=10.0)
    assert got is not None and got[1]["a"] == 0
    plan.read(_claim(got[1]), CycleResult(), 10.0)
    plan.freed.add("b")  # not full when read: no reason
    assert _read(plan, False, held, at=10.1) is None
    plan.freed.add("a")
    got = _read(plan, False, held, at=10.1)  # (its room taken again since)
    assert got is not None
    plan.read(_claim(got[1]), CycleResult(), 10.1)
    # That free was answered by the read: the next needs a free of its own.
    assert _read(plan, False, held, at=10.2) is None


def test_an_endpoint_a_claim_filled_counts_as_full_even_if_a_send_freed_room_since() -> None:
    plan = _plan()
    claim = _claim({"a": 2})
    taken = CycleResult(claimed=[(_delivery("a", 1), 1), (_delivery("a", 2), 1)])
    plan.read(claim, taken, 10.0)
    plan.filled(claim, taken, {"a": 3})  # room again now: a send finished meanwhile
    plan.freed.add("a")
    assert _read(plan, False, {"a": 1}, at=10.1) is not None


def test_a_read_cut_at_its_limit_reads_again_only_if_it_made_progress() -> None:
    plan = _plan()
    plan.read(_claim({}), CycleResult(more_due=True), 10.0)
    assert not plan.more_due  # rows left behind for want of room: no spin
    plan.read(_claim({}), CycleResult(claimed=[(_delivery("a"), 1)], more_due=True), 10.0)
    assert plan.more_due
    assert _read(plan, False, {"a": 1}, at=10.1) is not None


def test_the_walk_is_skipped_while_the_endpoints_that_blocked_it_stay_full() -> None:
    plan = _plan()
    blocked = _claim({"hang": 0, "ok": 3})
    plan.read(blocked, CycleResult(by_subscription=True), 10.0)
    got = _read(plan, True, {"hang": PER_ENDPOINT, "ok": 1}, at=10.1)
    assert got is not None and not got[2]  # the hanging endpoint's backlog: no walk
    got = _read(plan, True, {"hang": PER_ENDPOINT - 1, "ok": 1}, at=10.2)
    assert got is not None and got[2]  # room there again: its backlog's head is due
    # A walk that came back short of its rows: the backlog is gone, walk from now on.
    plan.read(blocked, CycleResult(by_subscription=True), 10.3)
    plan.read(_claim({"hang": 0}), CycleResult(), 10.4)
    got = _read(plan, True, {"hang": PER_ENDPOINT}, at=10.5)
    assert got is not None and got[2]


def test_a_walk_cut_at_its_rows_keeps_the_skip() -> None:
    plan = _plan()
    plan.read(_claim({"hang": 0}), CycleResult(by_subscription=True), 10.0)
    plan.read(_claim({"hang": 1}), CycleResult(more_due=True), 10.1)
    got = _read(plan, True, {"hang": PER_ENDPOINT}, at=10.2)
    assert got is not None and not got[2]


def test_the_failing_endpoints_room_stays_within_their_share() -> None:
    plan = _plan()
    for e in ("x", "y", "z", "w", "v"):
        plan.probes.failed(e, plan.claims)
    got = _read(plan, True, {"ok": 1})
    assert got is not None
    room = got[1]
    failing = sum(room.get(e, 0) for e in ("x", "y", "z", "w", "v"))
    assert failing <= failing_share(CONFIG.max_concurrency)
    assert room["ok"] == PER_ENDPOINT - 1
