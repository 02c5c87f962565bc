"""The [gc] policy (monitor/gcpolicy.py) on the real daemon: its start freezes the start-up
heap and sets the configured thresholds, and over a long run reference cycles made after
the start are still collected without anyone calling ``gc.collect`` (memory stays bounded).

The truth is CPython's own bookkeeping: whether an object is in a collected generation
(``gc.get_objects``) and whether a weak reference to an object in a dropped cycle is dead.
The collector is put back after each test by ``gc_policy_undone`` (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from monitor.config import Config, GcConfig
from monitor.daemon import MonitorDaemon
from monitor.gcpolicy import apply_gc_policy
from monitor.kafka.embedded import EmbeddedBroker
from monitor.testing import publish
from monitor.ticks import make_tick

from .kafkatools import fast_kafka, tick_records, wait_for

pytestmark = pytest.mark.broker


class Node:
    """One half of a two-object reference cycle."""

    other: Node | None = None


def in_collected_generations(obj: object) -> bool:
    """Whether the collector still scans ``obj`` (False once frozen)."""
    return any(o is obj for o in gc.get_objects())


def cycles(count: int) -> list[weakref.ref[Node]]:
    """``count`` dropped two-object cycles; weak references to one object of each."""
    refs = []
    for _ in range(count):
        a, b = Node(), Node()
        a.other, b.other = b, a
        refs.append(weakref.ref(a))
    return refs


async def test_daemon_start_freezes_startup_heap_and_cycles_are_still_collected(
        broker: EmbeddedBroker) -> None:
    policy = GcConfig()  # the shipped defaults
    config = Config(kafka=fast_kafka(broker.bootstrap_servers))
    k = config.kafka
    tokens = [f"0x{i:040x}" for i in range(40)]
    early = [make_tick(1_700_000_000, "eth", tokens[0], "T", "1.0", "1")]  # before start
    assert in_collected_generations(early)
    stop = asyncio.Event()
    daemon = MonitorDaemon(config)
    task = asyncio.create_task(daemon.run(stop))
    try:
        await daemon.joined.wait()
        # The start applied the configured policy ...
        assert gc.get_threshold() == (policy.threshold0, policy.threshold1, policy.threshold2)
        # ... froze what start-up made (this test's early object, the daemon, its restored
        # partitions) and nothing made after it.
        assert gc.get_freeze_count() > 0
        assert not in_collected_generations(early)
        assert not in_collected_generations(daemon)
        assert daemon._parts and not any(map(in_collected_generations,
                                              daemon._parts.values()))
        late = [object()]
        assert in_collected_generations(late)

        # A long run: ticks through the daemon between bursts of cyclic garbage, several
        # generation-0 thresholds' worth of tracked allocations in all.
        refs: list[weakref.ref[Node]] = []
        total = 0
        for step in range(4):
            ticks = [make_tick(1_700_000_000 + 60 * (step * 50 + i), "eth", token, "T",
                               f"{1 + 0.0001 * i:.6f}", "1")
                     for i in range(50) for token in tokens]
            total += await publish(broker.bootstrap_servers, k.ticks_topic,
                                   tick_records(ticks))
            refs += cycles(policy.threshold0)

            async def processed(total: int = total) -> bool:
                return daemon.stats.ticks >= total

            await wait_for(processed, 60, f"{total} ticks processed")
        alive = sum(ref() is not None for ref in refs)
        # No gc.collect() here: the thresholds alone collected them. At most the cycles
        # since the last generation-0 pass (or the one before) can still be alive.
        assert refs[0]() is None, "the first cycle was never collected"
        assert alive < 2 * policy.threshold0, f"{alive} of {len(refs)} cycles still alive"
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def test_disabled_policy_keeps_cpython_defaults() -> None:
    gc.set_threshold(700, 10, 10)
    frozen = gc.get_freeze_count()
    applied = apply_gc_policy(GcConfig(enabled=False))
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == frozen
    assert not applied.enabled and applied.frozen == 0
    applied = apply_gc_policy(GcConfig(freeze=False, threshold0=1234))
    assert gc.get_threshold() == (1234, 20, 10) and gc.get_freeze_count() == frozen
