"""The garbage-collector policy of the long-running services (``[gc]``, docs/performance.md).

Why: CPython's cyclic collector runs a generation-0 pass every 700 net allocations of
tracked objects and a full (generation-2) pass every 100 of those; a full pass walks every
tracked object in the process. A service holds many long-lived ones (per-token engine
state, aiokafka clients, structlog and prometheus registries, imported modules), so in the
live monitor the collector was ~12 % of the process's samples while the engine alone spent
~2 % in it. Nearly all of that heap exists once the service has started and lives until
it stops: freezing it (``gc.freeze``: moved to a permanent generation no pass scans) and
collecting less often removes most of that walk. Reference cycles made later are still
collected (tests/test_gcpolicy.py); only objects alive at the freeze are exempt, and those
are freed by reference counting like any other unless they end up in a cycle.

Call :func:`service_started` (applies, logs ``<service>.gc_policy``) once a service has
finished starting (imports done, state
restored); calling it again (several services in one ``run`` process, a second assignment)
freezes what was added since and sets the same thresholds.
"""

from __future__ import annotations

import gc

from msgspec import Struct

from .config import GcConfig


class GcApplied(Struct, frozen=True):
    """What :func:`apply_gc_policy` did, for the service's start log line."""

    enabled: bool
    thresholds: tuple[int, int, int]
    #: Objects moved to the permanent generation by this call (0 without a freeze).
    frozen: int


def apply_gc_policy(settings: GcConfig) -> GcApplied:
    """Set the collector's thresholds from ``settings`` and, with ``settings.freeze``,
    collect the start-up garbage (so it is not frozen with the live objects) and freeze
    the rest. With ``settings.enabled`` false nothing changes: CPython's defaults stay."""
    if not settings.enabled:
        return GcApplied(False, gc.get_threshold(), 0)
    frozen = 0
    if settings.freeze:
        before = gc.get_freeze_count()
        gc.collect()
        gc.freeze()
        frozen = gc.get_freeze_count() - before
    gc.set_threshold(settings.threshold0, settings.threshold1, settings.threshold2)
    return GcApplied(True, gc.get_threshold(), frozen)


def service_started(service: str, settings: GcConfig) -> GcApplied:
    """The one call of a service's start path: apply the policy and log what it did."""
    from .logs import get_logger

    applied = apply_gc_policy(settings)
    get_logger(__name__).info(f"{service}.gc_policy", enabled=applied.enabled,
                              thresholds=list(applied.thresholds), frozen=applied.frozen)
    return applied
