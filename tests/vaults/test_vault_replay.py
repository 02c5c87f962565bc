"""``depeg-monitor vaults replay``: byte-identical output, valid records, the depeg link
(synthetic and the real USDC March 2023 depeg), bad lines reported, not fatal."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from monitor.cli import main
from monitor.config import ModelConfig
from monitor.records import encode
from monitor.replay import run_replay
from monitor.tickfiles import read_file
from monitor.vaults.config import VaultsConfig
from monitor.vaults.records import decode_rating
from monitor.vaults.verdict import tier_for, verdict_for
from tests.conftest import data_file

from .support import START, depeg_episode, synthetic_updates, write_events, write_facts

REPO = Path(__file__).resolve().parents[2]
USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
VAULT = "0x" + "5a" * 20


def rating_validator() -> jsonschema.Draft7Validator:
    schema = json.loads((REPO / "monitor" / "schemas" / "vault-rating.json").read_text())
    return jsonschema.Draft7Validator(schema)


def replay(tmp_path: Path, name: str, facts: list[Path], depeg: list[Path]) -> bytes:
    out = tmp_path / name
    args = ["vaults", "replay", *map(str, facts), "--out", str(out)]
    if depeg:
        args += ["--depeg", *map(str, depeg)]
    assert main(args) == 0
    return out.read_bytes()


def test_replay_is_byte_identical_and_every_record_is_valid(tmp_path: Path) -> None:
    updates = synthetic_updates()
    facts = write_facts(tmp_path / "facts.jsonl", updates)
    linked = next(u for u in updates if u.changes.get("underlying_address"))
    events = depeg_episode(linked.chain, linked.changes["underlying_address"], START + 4 * 3600)
    depeg = write_events(tmp_path / "depeg.jsonl", events)
    first = replay(tmp_path, "a.jsonl", [facts], [depeg])
    second = replay(tmp_path, "b.jsonl", [facts], [depeg])
    assert first == second and first
    validator = rating_validator()
    records = [decode_rating(line) for line in first.splitlines()]
    blocking = VaultsConfig().blocking_tags
    last_ts = ""
    for line, record in zip(first.splitlines(), records, strict=True):
        assert not list(validator.iter_errors(json.loads(line)))
        assert record.tier == tier_for(record.rating)
        assert record.verdict == verdict_for(record.rating, record.tags, blocking)
        assert record.tags == sorted(record.tags)
        assert record.ts >= last_ts  # event-time order
        last_ts = record.ts
    # Every vault appears, and the vault holding the depegging token went critical and back.
    assert {r.vault for r in records} == {u.vault for u in updates}
    held = [r for r in records if r.vault == linked.vault]
    critical = [r for r in held if "vault-underlying-depeg-critical" in r.tags]
    assert critical and critical[0].ts == events[1].timestamp
    assert critical[0].tier == "critical" and critical[0].verdict == "do_not_list"
    after = [r for r in held if r.ts > critical[-1].ts]
    assert after and "vault-underlying-depeg-critical" not in after[0].tags
    assert after[0].ts == events[2].timestamp


def test_bad_lines_are_reported_and_skipped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    updates = synthetic_updates(vaults=4, hours=2)
    facts = write_facts(tmp_path / "facts.jsonl", updates)
    clean = replay(tmp_path, "clean.jsonl", [facts], [])
    dirty = tmp_path / "dirty.jsonl"
    dirty.write_bytes(facts.read_bytes() + b'{"ts": 1, "chain": "eth"}\nnot json\n'
                      b'{"ts": 1, "chain": "eth", "vault": "0x' + b"1" * 40
                      + b'", "utilization": 7}\n')
    capsys.readouterr()
    assert replay(tmp_path, "dirty_out.jsonl", [dirty], []) == clean
    err = capsys.readouterr().err
    assert "bad lines: 3 (bad_json=1, bad_schema=1, bad_value=1)" in err
    assert "utilization 7 is outside [0, 1]" in err


@pytest.mark.data
def test_usdc_march_2023_depeg_tags_a_usdc_vault_and_releases_it(tmp_path: Path) -> None:
    """The real USDC ticks through the depeg engine, its tier changes into the vault replay."""
    ticks = data_file("ticks/usdc_2023-03_binanceus_1m.csv")
    events, _, _ = run_replay(read_file(ticks), ModelConfig(), snapshots=False)
    depeg = write_events(tmp_path / "usdc.jsonl", events)
    facts = tmp_path / "vault.jsonl"
    facts.write_text(json.dumps({
        "ts": "2023-03-01T00:00:00Z", "chain": "eth", "vault": VAULT, "name": "USDC vault",
        "underlying_symbol": "USDC", "underlying_address": USDC,
        "underlying_risk": "battle_tested", "tvl_usd": 2.5e8, "owner_kind": "multisig",
        "timelock_seconds": 172800, "redemption_open": True, "source_verified": True,
        "audit_count": 4, "event_count": 90000, "deployed_at": "2021-01-01T00:00:00Z",
    }) + "\n")
    records = [decode_rating(line) for line in
               replay(tmp_path, "out.jsonl", [facts], [depeg]).splitlines()]
    by_tier = {e.timestamp: e.data.new_tier for e in events}
    critical_at = min(ts for ts, tier in by_tier.items() if tier == "critical")
    recovered_at = max(ts for ts, tier in by_tier.items() if tier == "ok")
    tagged = [r for r in records if "vault-underlying-depeg-critical" in r.tags]
    assert tagged[0].ts == critical_at  # re-rated at the depeg's own event time
    assert tagged[0].tier == "critical" and tagged[0].verdict == "do_not_list"
    assert records[0].tier == "low" and records[0].verdict == "safe_to_list"
    final = records[-1]
    assert final.ts == recovered_at and final.tags == [] and final.tier == "low"
    # Watch/warning in between carry the milder tag, never both at once.
    for r in records:
        assert not {"vault-underlying-depegging", "vault-underlying-depeg-critical"} <= set(
            r.tags)
    assert any("vault-underlying-depegging" in r.tags for r in records)
    assert encode(events[0])  # the file we fed is the monitor's own output format


def test_without_out_the_output_goes_to_the_data_dir_and_is_not_overwritten(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """As ``depeg-monitor replay``: no ``--out`` means replays/<first file>.vault-ratings
    .jsonl in the data directory; an existing output or an input is refused (exit 2) unless
    --overwrite (``--out`` used to be required)."""
    data = tmp_path / "data"
    monkeypatch.setenv("DEPEG_STORAGE__DATA_DIR", str(data))
    facts = write_facts(tmp_path / "facts.jsonl", synthetic_updates(vaults=3, hours=2))
    want = replay(tmp_path, "explicit.jsonl", [facts], [])
    assert main(["vaults", "replay", str(facts)]) == 0
    default = data / "replays" / "facts.vault-ratings.jsonl"
    assert default.read_bytes() == want
    assert main(["vaults", "replay", str(facts)]) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert main(["vaults", "replay", str(facts), "--overwrite"]) == 0
    assert default.read_bytes() == want
    assert main(["vaults", "replay", str(facts), "--out", str(facts), "--overwrite"]) == 2
    assert "is one of the input files" in capsys.readouterr().err
    assert facts.read_bytes()  # the input is untouched
