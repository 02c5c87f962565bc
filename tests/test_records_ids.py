"""Event ids are UUIDv5 (RFC 4122) over the transition's identity: ``monitor.records``
computes them with the stdlib's own SHA-1 module instead of ``uuid.uuid5`` (which imports
hashlib and OpenSSL); the ids must be exactly uuid5's, or replays and restarts would stop
re-emitting the ids downstream already has."""

from __future__ import annotations

import random
import uuid

from monitor.records import EVENT_NAMESPACE, event_id

TIERS = ("ok", "watch", "warning", "critical", "premium")


def test_event_ids_are_uuid5_of_the_transition() -> None:
    rng = random.Random(15)
    for n in range(5000):
        chain = rng.choice(("eth", "arbitrum", "base", "ünïcödé", "", "链"))
        token = "0x" + "".join(rng.choice("0123456789abcdef") for _ in range(40))
        stamp = f"2023-03-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:00" + (
            f".{n % 1000:03d}Z" if n % 3 else "Z")
        old, new = rng.choice(TIERS), rng.choice(TIERS)
        name = f"{chain}:{token}|{stamp}|{old}|{new}"
        assert event_id(chain, token, stamp, old, new) == str(uuid.uuid5(EVENT_NAMESPACE, name))


def test_a_known_id_and_its_version() -> None:
    """One id fixed in the test: a change to the namespace or the name's layout shows."""
    got = event_id("eth", "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
                   "2023-03-11T07:50:00Z", "ok", "critical")
    parsed = uuid.UUID(got)
    assert parsed.version == 5 and parsed.variant == uuid.RFC_4122
    assert got == str(uuid.uuid5(uuid.UUID("6f1c2f4e-5d0a-4c3b-9a57-2d1f0b7c8e41"),
                                 "eth:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48|"
                                 "2023-03-11T07:50:00Z|ok|critical"))
