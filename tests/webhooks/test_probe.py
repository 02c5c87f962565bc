"""The probe's rules, on :class:`~monitor.webhooks.probe.Probes` alone (the dispatcher's
use of them, with real receivers, is in test_dispatcher_probe.py)."""

from __future__ import annotations

import random

from monitor.webhooks.probe import (
    MAX_FAILING_ENDPOINTS,
    MAX_PROBE_SUCCESSES,
    PROBE_SUCCESSES,
    Probes,
    failing_share,
)


def _successes_to_leave(probes: Probes, endpoint: str) -> int:
    """Successes it takes ``endpoint`` to leave the probe from here."""
    n = 0
    while endpoint in probes.failing:
        probes.succeeded(endpoint)
        n += 1
        assert n <= MAX_PROBE_SUCCESSES, "never left the probe"
    return n


def test_each_relapse_on_parole_doubles_the_successes_needed_up_to_the_bound() -> None:
    probes = Probes()
    assert probes.failed("a", claim=7)
    assert probes.failing == {"a": 7}
    needed = PROBE_SUCCESSES
    seen = []
    for _ in range(6):
        seen.append(_successes_to_leave(probes, "a"))
        assert probes.failed("a", claim=8)  # fails at once: a relapse
    assert seen == [min(needed * 2 ** i, MAX_PROBE_SUCCESSES) for i in range(6)]
    assert seen[-1] == MAX_PROBE_SUCCESSES


def test_a_served_parole_forgets_the_failures() -> None:
    probes = Probes()
    probes.failed("a", claim=1)
    assert _successes_to_leave(probes, "a") == PROBE_SUCCESSES
    probes.failed("a", claim=2)
    assert _successes_to_leave(probes, "a") == 2 * PROBE_SUCCESSES
    for _ in range(2 * PROBE_SUCCESSES - 1):  # one short of its parole
        probes.succeeded("a")
    probes.failed("a", claim=3)
    assert _successes_to_leave(probes, "a") == 4 * PROBE_SUCCESSES
    for _ in range(4 * PROBE_SUCCESSES):  # its parole served
        probes.succeeded("a")
    probes.failed("a", claim=4)
    assert _successes_to_leave(probes, "a") == PROBE_SUCCESSES


def test_a_failure_while_probed_restarts_the_count_and_gives_nothing_back() -> None:
    probes = Probes(max_slots=1)
    probes.failed("a", claim=1)
    probes.succeeded("a")
    assert not probes.failed("a", claim=5)  # one slot before and after: nothing to give back
    assert probes.failing == {"a": 1}  # the mark of its first failure stands
    assert _successes_to_leave(probes, "a") == PROBE_SUCCESSES


def test_a_probed_endpoint_gets_one_more_slot_per_success_and_one_at_a_failure() -> None:
    probes = Probes(max_slots=3)
    probes.failed("a", claim=1)
    probes.failed("a", claim=2)  # at once again: a relapse is not possible yet
    assert probes.slots == {"a": 1}
    probes.succeeded("a")
    assert probes.slots == {"a": 2}
    # Fewer slots, but what it holds was claimed inside the share: nothing is given back
    # and the mark of its entry into the probe stands.
    assert not probes.failed("a", claim=7)
    assert probes.failing == {"a": 1} and probes.slots == {"a": 1}
    assert not probes.failed("a", claim=8)
    probes.failed("b", claim=9)
    for _ in range(PROBE_SUCCESSES - 1):
        probes.succeeded("b")
    probes.succeeded("b")  # leaves the probe: no slot count kept
    assert "b" not in probes.slots
    # Relapsed, "b" needs four: its slots grow to the bound, never past it.
    probes.failed("b", claim=10)
    seen = []
    while "b" in probes.failing:
        seen.append(probes.slots["b"])
        probes.succeeded("b")
    assert seen == [1, 2, 3, 3]


def test_successes_of_an_endpoint_never_failed_change_nothing() -> None:
    probes = Probes()
    for _ in range(3):
        probes.succeeded("a")
    assert probes.failed("a", claim=1)
    assert _successes_to_leave(probes, "a") == PROBE_SUCCESSES


def test_memory_is_bounded() -> None:
    probes = Probes()
    for i in range(3 * MAX_FAILING_ENDPOINTS):
        probes.failed(f"e{i}", claim=i)
        if i % 2:  # half leave the probe and stay on parole, sent nothing more
            _successes_to_leave(probes, f"e{i}")
    assert len(probes.failing) <= MAX_FAILING_ENDPOINTS
    assert len(probes._recovery) <= 2 * MAX_FAILING_ENDPOINTS


def test_an_endpoint_relapsing_as_the_parole_records_are_trimmed_can_still_leave() -> None:
    """The trim of parole records at the memory bound must not drop the record of the
    endpoint failing right then: without it, it could never leave the probe."""
    probes = Probes()
    for i in range(2 * MAX_FAILING_ENDPOINTS):
        probes.failed(f"e{i}", claim=i)
        _successes_to_leave(probes, f"e{i}")  # all on parole, none probed
    assert probes.failed("e0", claim=0)  # a relapse, at the bound: the trim runs
    assert _successes_to_leave(probes, "e0") == 2 * PROBE_SUCCESSES


def test_share_against_a_brute_force_of_its_rule() -> None:
    """Each failing endpoint gets at most ``per_slot`` per slot less what it holds; all of them
    together never more than the share less what they hold; everyone with nothing
    held gets one claim before anyone gets a second; turns rotate."""
    draw = random.Random(4)
    for _ in range(500):
        probes = Probes(max_slots=4)
        endpoints = [f"e{i}" for i in range(draw.randint(1, 8))]
        for i, e in enumerate(endpoints):
            probes.failed(e, claim=i)
            for _ in range(draw.randint(0, 1)):  # one success: two slots
                probes.succeeded(e)
        per_slot = 4
        cap = {e: per_slot * probes.slots[e] for e in endpoints}
        share = failing_share(draw.randint(1, 20))
        room = {"healthy": 16}
        for e in endpoints:
            if draw.random() < 0.4:
                # It holds some, or more than its slots allow now: back to one slot
                # after a failure, it keeps what it was claimed for more.
                room[e] = cap[e] - draw.randint(0, cap[e] + 2 * per_slot)
        held = {e: cap[e] - room.get(e, cap[e]) for e in endpoints}
        before = dict(room)
        probes.share(room, share, per_slot)
        assert room["healthy"] == before["healthy"]
        given = {e: room[e] for e in endpoints}
        assert all(0 <= given[e] <= max(cap[e] - held[e], 0) for e in endpoints)
        assert sum(given.values()) <= max(share - sum(held.values()), 0)
        expected_total = min(max(share - sum(held.values()), 0),
                             sum(max(cap[e] - held[e], 0) for e in endpoints))
        assert sum(given.values()) == expected_total
        if any(given[e] > 1 for e in endpoints):
            assert all(given[e] >= 1 or held[e] >= 1 for e in endpoints)
