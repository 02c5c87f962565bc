"""The due policy and the commit-offset rule (``monitor/daemon/coverage.py``).

The rule is checked against brute force: over random partitions (tokens of very different
rates), random checkpoints writing random subsets of tokens, and crashes at random points,
the committed offset is the largest one below which every tick is inside its token's
written state, and a restart from it (with the restore's per-token skip,
``skip_restored``) ends with every token holding each of its ticks exactly once, in order.
"""

from __future__ import annotations

import random

from monitor.daemon.coverage import Uncovered
from monitor.daemon.partitions import skip_restored

A, B = "eth:a", "eth:b"


def test_a_token_is_due_after_enough_ticks_or_time_or_a_tickless_change() -> None:
    u = Uncovered()
    u.took(A, 10, now=100.0)
    u.took(B, 11, now=100.5)
    for offset in range(12, 14):
        u.took(A, offset, now=101.0)
    assert u.due(101.0, every_ticks=3, max_age=60) == [A]  # three ticks
    assert u.due(160.4, every_ticks=9, max_age=60) == [A]  # A's first tick 60 s old
    assert u.due(160.5, every_ticks=9, max_age=60) == [A, B]
    assert u.commit_offset(14) == 10
    u.written([A])
    assert u.commit_offset(14) == 11 and u.changed_keys() == {B}
    u.changed(A, now=170.0)  # e.g. a live-clock refresh: no tick, written next time
    assert u.due(170.0, every_ticks=9, max_age=600) == [A]
    assert u.commit_offset(14) == 11  # a change without a tick holds no offset back
    u.written([A, B])
    assert len(u) == 0 and u.commit_offset(14) == 14


def brute_force_commit(ticks: list[str], position: int, covered: dict[str, int]) -> int:
    """The largest c <= position with every tick below c inside its token's state."""
    c = 0
    while c < position and c < covered.get(ticks[c], 0):
        c += 1
    return c


def run_partition(rng: random.Random, n_ticks: int) -> None:
    tokens = [f"eth:{i}" for i in range(rng.randint(1, 8))]
    weights = [rng.choice((1, 2, 10, 50)) for _ in tokens]  # rare and busy tokens
    ticks = rng.choices(tokens, weights, k=n_ticks)
    every, max_age = rng.randint(1, 12), rng.uniform(0.0, 30.0)
    # The broker: each token's newest state (its offset and what it held) and the commit.
    states: dict[str, tuple[int, list[int]]] = {}
    committed = 0
    # One instance's life: what its engine holds per token, from its restore on.
    held: dict[str, list[int]] = {}
    uncovered = Uncovered()
    skip_below: dict[str, int] = {}
    offset, now = 0, 0.0
    crashes = rng.randint(0, 3)
    while offset < n_ticks:
        key = ticks[offset]
        if not skip_restored(skip_below, key, offset):
            held.setdefault(key, []).append(offset)
            uncovered.took(key, offset, now)
        offset += 1
        now += rng.uniform(0.0, 2.0)
        roll = rng.random()
        if roll < 0.15:  # a checkpoint: the due tokens, or (adversarial) any subset
            changed = sorted(uncovered.changed_keys())
            keys = (uncovered.due(now, every, max_age) if rng.random() < 0.5
                    else rng.sample(changed, rng.randint(0, len(changed))))
            for k in keys:
                # A state written now holds every tick of k below the position, and the
                # restore skips k's ticks below it.
                states[k] = (max(offset, skip_below.get(k, offset)), list(held[k]))
            uncovered.written(keys)
            target = uncovered.commit_offset(offset)
            covered = {k: s[0] for k, s in states.items()}
            assert target == brute_force_commit(ticks, offset, covered)
            committed = max(committed, target)
        elif roll < 0.17 and crashes:  # kill -9: a new instance restores and re-reads
            crashes -= 1
            held = {k: list(s[1]) for k, s in states.items()}
            skip_below = {k: s[0] for k, s in states.items() if s[0] > committed}
            uncovered = Uncovered()
            offset = committed
    # Every tick of every token exactly once, in offset order.
    want: dict[str, list[int]] = {}
    for o, k in enumerate(ticks):
        want.setdefault(k, []).append(o)
    assert held == want


def test_commit_offset_rule_against_brute_force_and_restarts() -> None:
    rng = random.Random(20261123)
    for _ in range(600):
        run_partition(rng, rng.randint(1, 120))
