"""Shared by the vault tests: synthetic fact files and depeg tier-change records."""

from __future__ import annotations

from pathlib import Path

from monitor.records import TierChangeData, TierChangeEvent, encode, event_id
from monitor.timefmt import format_ts
from monitor.vaults.facts import FactUpdate, encode_update
from producers.vault_synthetic import generate_facts, make_vaults

START = 1_700_000_000.0


def synthetic_updates(vaults: int = 12, hours: float = 24, seed: int = 3,
                      interval: float = 1800) -> list[FactUpdate]:
    specs = make_vaults(vaults, seed, tokens=10, first_incident_within=hours * 3600 / 2)
    return list(generate_facts(specs, seed=seed, start=START, interval=interval,
                               duration=hours * 3600))


def write_facts(path: Path, updates: list[FactUpdate]) -> Path:
    path.write_bytes(b"".join(encode_update(u) + b"\n" for u in updates))
    return path


def tier_change(ts: float, chain: str, token: str, old: str, new: str) -> TierChangeEvent:
    when = format_ts(ts)
    return TierChangeEvent(
        event_type="DEPEG_TIER_CHANGE", event_id=event_id(chain, token, when, old, new),
        timestamp=when,
        data=TierChangeData(token_address=token, chain=chain, symbol="TKN", old_tier=old,
                            new_tier=new, risk_score=50.0, deviation_pct=-1.0,
                            price_usd="0.99", peg_usd="1"))


def depeg_episode(chain: str, token: str, at: float) -> list[TierChangeEvent]:
    """ok -> watch -> critical -> ok, an hour apart from ``at``."""
    return [tier_change(at, chain, token, "ok", "watch"),
            tier_change(at + 3600, chain, token, "watch", "critical"),
            tier_change(at + 7200, chain, token, "critical", "ok")]


def write_events(path: Path, events: list[TierChangeEvent]) -> Path:
    path.write_bytes(b"".join(encode(e) + b"\n" for e in events))
    return path
