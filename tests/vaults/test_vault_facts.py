"""Fact records: the DESIGN.md contract decoded and validated in one place, with a clear
reason for bad input; the partial-update merge (null clears, absent leaves unchanged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.vaults.facts import (
    FACT_FIELDS,
    MAX_FACT_BYTES,
    BadFacts,
    VaultFacts,
    apply_update,
    decode_facts,
    encode_update,
)

VAULT = "0x" + "Ab" * 20


def record(**fields: object) -> bytes:
    return json.dumps({"ts": "2024-05-01T00:00:00Z", "chain": "eth", "vault": VAULT,
                       **fields}).encode()


def test_every_design_field_is_a_fact() -> None:
    """Against the contract itself: the field table of DESIGN.md "Vault facts"."""
    design = Path(__file__).resolve().parents[3] / "shared" / "DESIGN.md"
    if not design.is_file():
        pytest.skip(f"{design} not available")
    text = design.read_text().split("## Vault facts", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1] and cells[1] not in ("field", "---"):
            names.update(n.strip() for n in cells[1].split(","))
    assert names == {"ts", "chain", "vault", *FACT_FIELDS}


def test_decode_normalises_and_accepts_decimal_strings() -> None:
    update = decode_facts(record(tvl_usd="1250000.50", utilization=0.5, audit_count="3",
                                 deployed_at=1_600_000_000, unknown_field={"x": 1},
                                 underlying_address="0xA0B86991C6218B36C1D19D4A2E9EB0CE3606EB48"))
    assert update.vault == VAULT.lower() and update.ts == 1714521600.0
    assert update.changes == {"tvl_usd": 1250000.5, "utilization": 0.5, "audit_count": 3,
                              "deployed_at": 1.6e9,
                              "underlying_address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"}


def test_null_clears_absent_keeps() -> None:
    facts = apply_update(VaultFacts(), decode_facts(record(tvl_usd=10, redemption_open=False)))
    facts = apply_update(facts, decode_facts(record(redemption_open=None, apy_pct=4)))
    assert facts.tvl_usd == 10.0  # absent: unchanged
    assert facts.redemption_open is None  # null: cleared
    assert facts.apy_pct == 4.0


@pytest.mark.parametrize(("raw", "reason", "words"), [
    (None, "empty", "no value"),
    (b"  ", "empty", "no value"),
    (b"x" * (MAX_FACT_BYTES + 1), "too_large", "limit"),
    (b"{not json", "bad_json", ""),
    (b'{"ts": 1, "chain": "eth"}', "bad_schema", "vault"),
    (record(upgradeable=1), "bad_schema", "upgradeable"),
    (json.dumps({"ts": "yesterday", "chain": "eth", "vault": VAULT}).encode(), "bad_ts", ""),
    (json.dumps({"ts": 1, "chain": "doge", "vault": VAULT}).encode(), "unknown_chain", "doge"),
    (json.dumps({"ts": 1, "chain": "eth", "vault": "0x12"}).encode(), "bad_address", "0x12"),
    (record(underlying_address="USDC"), "bad_address", "underlying_address"),
    (record(utilization=1.2), "bad_value", "utilization 1.2 is outside [0, 1]"),
    (record(looping_rate=-0.1), "bad_value", "looping_rate"),
    (record(tvl_usd="lots"), "bad_value", "tvl_usd is not a number"),
    (record(tvl_usd="nan"), "bad_value", "not finite"),
    (record(audit_count=2.5), "bad_value", "whole number"),
    (record(owner_kind="king"), "bad_value", "owner_kind"),
    (record(contract_type="vault"), "bad_value", "contract_type"),
    (record(composition=[{"share_pct": 5}]), "bad_value", "composition[0].symbol"),
    (record(lending_market=[1]), "bad_schema", "lending_market"),
    (record(deployed_at="soon"), "bad_value", "deployed_at"),
])
def test_bad_records_are_refused_with_a_reason(raw: bytes | None, reason: str, words: str) -> None:
    with pytest.raises(BadFacts) as caught:
        decode_facts(raw)
    assert caught.value.reason == reason
    assert words in str(caught.value)


def test_solana_addresses_keep_their_case() -> None:
    sol = "So11111111111111111111111111111111111111112"
    update = decode_facts(json.dumps({"ts": 1, "chain": "sol", "vault": sol}).encode())
    assert update.vault == sol


numbers = st.one_of(st.none(), st.floats(0, 1e12, allow_nan=False))


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({}, optional={"tvl_usd": numbers, "fee_bps": numbers,
                                           "upgradeable": st.one_of(st.none(), st.booleans()),
                                           "name": st.one_of(st.none(), st.text(max_size=20))}),
       st.fixed_dictionaries({}, optional={"tvl_usd": numbers,
                                           "upgradeable": st.one_of(st.none(), st.booleans())}))
def test_merge_matches_a_dict_update_and_survives_encoding(first: dict[str, object],
                                                            second: dict[str, object]) -> None:
    """Independent truth: a plain dict update over the JSON objects."""
    expected: dict[str, object] = {}
    facts = VaultFacts()
    for fields in (first, second):
        update = decode_facts(record(**fields))
        assert decode_facts(encode_update(update)) == update
        facts = apply_update(facts, update)
        expected.update(fields)
    for name in FACT_FIELDS:
        want = expected.get(name)
        if isinstance(want, str):
            want = want.strip()
        assert getattr(facts, name) == want, name
