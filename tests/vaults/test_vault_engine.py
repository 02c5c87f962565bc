"""The vault engine's behaviour over time: records only on change, the depeg link by event
time (also when a change arrives late), state export/restore that continues exactly, the
attention rule, and the Issue's worked example."""

from __future__ import annotations

import json
import random

from monitor.vaults.config import VaultsConfig
from monitor.vaults.depeg_link import DepegChange
from monitor.vaults.engine import VaultEngine
from monitor.vaults.facts import FactUpdate, decode_facts
from monitor.vaults.records import VaultRating, encode_rating

from .support import START, synthetic_updates

CONFIG = VaultsConfig()
USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
VAULT = "0x" + "7c" * 20
HOUR = 3600.0

SOLID = {"underlying_address": USDC, "underlying_risk": "battle_tested", "tvl_usd": 5e7,
         "owner_kind": "multisig", "timelock_seconds": 172800, "redemption_open": True,
         "source_verified": True, "audit_count": 3, "event_count": 5000,
         "deployed_at": "2022-01-01T00:00:00Z"}


def facts(ts: float, **fields: object) -> FactUpdate:
    return decode_facts(json.dumps({"ts": ts, "chain": "eth", "vault": VAULT,
                                    **fields}).encode())


def change(ts: float, tier: str) -> DepegChange:
    return DepegChange(ts=ts, chain="eth", token=USDC, tier=tier)


def test_records_only_on_change() -> None:
    engine = VaultEngine(CONFIG)
    first = engine.process(facts(START, **SOLID))
    assert len(first) == 1 and first[0].tier == "low" and first[0].verdict == "safe_to_list"
    assert engine.process(facts(START + HOUR, tvl_usd=5.1e7)) == []  # nothing a reader sees
    closed = engine.process(facts(START + 2 * HOUR, redemption_open=False))
    assert [r.verdict for r in closed] == ["do_not_list"]
    assert closed[0].floor is not None and closed[0].floor.tag == "vault-redemption-closed"
    assert closed[0].attention_needed


def test_depeg_tags_follow_the_underlyings_tier() -> None:
    engine = VaultEngine(CONFIG)
    engine.process(facts(START, **SOLID))
    seen = []
    for n, tier in enumerate(["watch", "warning", "critical", "warning", "ok", "premium"]):
        for r in engine.on_depeg(change(START + (n + 1) * HOUR, tier)):
            seen.append((tier, r.tags, r.underlying_depeg_tier))
    tags = {tier: tags for tier, tags, _ in seen}
    assert tags["watch"] == ["vault-underlying-depegging"]
    assert tags["critical"] == ["vault-underlying-depeg-critical"]
    assert tags["warning"] == ["vault-underlying-depegging"]
    assert tags["ok"] == []
    assert "premium" not in tags  # ok -> premium changes nothing a reader sees


def test_a_vault_that_learns_its_underlying_later_gets_the_tier_in_force() -> None:
    engine = VaultEngine(CONFIG)
    engine.on_depeg(change(START - HOUR, "critical"))
    record = engine.process(facts(START, **SOLID))[-1]
    assert "vault-underlying-depeg-critical" in record.tags and record.tier == "critical"


def test_a_late_depeg_change_is_still_applied() -> None:
    engine = VaultEngine(CONFIG)
    engine.process(facts(START, **SOLID))
    engine.process(facts(START + 2 * HOUR, tvl_usd=1e8))
    # Arrives after a fact later than itself: applied at the vault's current time.
    late = engine.on_depeg(change(START + HOUR, "critical"))
    assert late and late[0].ts == "2023-11-15T00:13:20Z"  # START + 2 h, the vault's clock
    assert "vault-underlying-depeg-critical" in late[0].tags


def test_arrival_order_of_depeg_changes_before_later_facts_does_not_matter() -> None:
    """Depeg changes delivered early (before facts that precede them in event time) give the
    records of the time-ordered merge: the engine applies them when the vault reaches them."""
    updates = [facts(START + i * HOUR, **{**(SOLID if i == 0 else {}), "tvl_usd": 5e7 + i})
               for i in range(6)]
    changes = [change(START + 1.5 * HOUR, "watch"), change(START + 3.5 * HOUR, "ok")]
    merged = VaultEngine(CONFIG)
    in_time: list[VaultRating] = []
    items: list[FactUpdate | DepegChange] = [*updates, *changes]
    for item in sorted(items, key=lambda x: x.ts):
        in_time += merged.process(item) if isinstance(item, FactUpdate) else merged.on_depeg(item)
    early = VaultEngine(CONFIG)
    for c in changes:
        early.on_depeg(c)  # known before any fact (the daemon loads the table first)
    out: list[VaultRating] = []
    for u in updates:
        out += early.process(u)
    assert [encode_rating(r) for r in out] == [encode_rating(r) for r in in_time]
    assert len(in_time) == 3


def test_export_restore_continues_exactly() -> None:
    updates = synthetic_updates(vaults=8, hours=12)
    rng = random.Random(7)
    cut = rng.randrange(len(updates) // 3, 2 * len(updates) // 3)
    whole = VaultEngine(CONFIG)
    expected = [encode_rating(r) for u in updates for r in whole.process(u)]
    first = VaultEngine(CONFIG)
    got = [encode_rating(r) for u in updates[:cut] for r in first.process(u)]
    second = VaultEngine(CONFIG)
    for key in list(first.keys()):
        second.restore_state(first.export_state(key))
    got += [encode_rating(r) for u in updates[cut:] for r in second.process(u)]
    assert got == expected


def test_attention_when_the_rating_jumps_and_not_a_day_later() -> None:
    engine = VaultEngine(CONFIG)
    base = engine.process(facts(START, **SOLID))[-1]
    assert base.rating is not None and not base.attention_needed
    # +12 points, still safe_to_list: attention only because of the rise.
    jump = engine.process(facts(START + HOUR, upgradeable=True, pausable=True))[-1]
    assert jump.rating is not None and jump.rating - base.rating >= 10
    assert jump.verdict in ("safe_to_list", "caution") and jump.attention_needed
    later = engine.process(facts(START + 26 * HOUR, tvl_usd=6e7))
    assert later and not later[-1].attention_needed and later[-1].rating == jump.rating


def test_unrated_until_enough_facts_are_known() -> None:
    engine = VaultEngine(CONFIG)
    first = engine.process(facts(START, tvl_usd=5e7, owner_kind="eoa"))[-1]
    assert first.rating is None and first.tier == "unknown" and first.verdict == "caution"
    assert first.risk.score is None and first.explanation.startswith("unrated")
    rated = engine.process(facts(START + 1, **SOLID))[-1]
    assert rated.rating is not None and rated.tier != "unknown"


def test_the_issue_example_reads_back_from_the_record() -> None:
    """ "78 because redemptions are closed and the owner is an EOA with no timelock" """
    engine = VaultEngine(CONFIG)
    record = engine.process(facts(START, **{**SOLID, "owner_kind": "eoa", "timelock_seconds": 0,
                                            "redemption_open": False}))[-1]
    assert record.rating == 80 and record.tier == "critical" and record.verdict == "do_not_list"
    assert record.tags == ["vault-eoa-owner", "vault-no-timelock", "vault-redemption-closed"]
    assert record.explanation.startswith("80 because users cannot withdraw (floor 80)")
    by_category = {c.category: c for c in record.contributions}
    governance = by_category["vault_governance_risk"]
    assert governance.points == 18.0
    assert governance.facts == {"owner_kind": "eoa", "timelock_seconds": 0.0}
    assert by_category["vault_liquidity_risk"].facts == {"redemption_open": False}
    assert record.risk.count == 3 and record.risk.high == 1 and record.risk.medium == 2
