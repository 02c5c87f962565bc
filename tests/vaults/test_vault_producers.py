"""``depeg-monitor produce vaults``: fact files and the simulator onto vaults.facts, keyed
chain:vault, every record valid for the daemon; bad lines reported, never published."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import jsonschema
import pytest

from monitor.cli import main
from monitor.kafka.embedded import EmbeddedBroker
from monitor.vaults.facts import decode_facts, encode_update
from producers.vault_synthetic import INCIDENTS, generate_facts, make_vaults
from tests.kafka.kafkatools import TopicReader

from .support import synthetic_updates, write_facts

REPO = Path(__file__).resolve().parents[2]


def read_all(bootstrap: str, topic: str, count: int) -> list[object]:
    async def go() -> list[object]:
        async with TopicReader(bootstrap, topic) as reader:
            await reader.until(lambda r: len(r) >= count, 30, f"{count} records")
            while await reader.poll(500):
                pass
            return reader.records

    return asyncio.run(go())


@pytest.mark.broker
def test_produce_vaults_files_and_simulate(broker: EmbeddedBroker, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    updates = synthetic_updates(vaults=5, hours=2)
    facts = write_facts(tmp_path / "facts.jsonl", updates)
    with facts.open("ab") as fh:
        fh.write(b'{"ts": 1, "chain": "eth", "vault": "nope"}\n')
    servers = ["--bootstrap-servers", broker.bootstrap_servers]
    assert main(["produce", "vaults", str(facts), *servers]) == 0
    out = capsys.readouterr()
    assert f"published {len(updates)} fact records, 1 bad rows skipped" in out.out
    assert "bad_address" in out.err
    assert main(["produce", "vaults", "simulate", "--vaults", "8", "--rate", "1000",
                 "--duration", "0.05", "--time-scale", "3600", *servers]) == 0
    records = read_all(broker.bootstrap_servers, "vaults.facts", len(updates) + 8)
    published = [decode_facts(r.value) for r in records]  # type: ignore[attr-defined]
    for rec, update in zip(records, published, strict=True):
        assert rec.key == update.key.encode()  # type: ignore[attr-defined]
    values = {r.value for r in records}  # type: ignore[attr-defined]
    assert {encode_update(u) for u in updates} <= values  # every good line, as validated
    assert len({u.key for u in published}) == 5 + 8


def test_simulated_vaults_cover_every_label_and_match_the_fact_schema() -> None:
    schema = json.loads((REPO / "monitor" / "schemas" / "vault-facts.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    vaults = make_vaults(64, seed=5, tokens=20)
    assert {v.protocol for v in vaults} == {"lendA", "lendB", "lendC", "lendD", "lendE",
                                            "lendF", "yieldA", "yieldB"}
    assert {v.contract_type for v in vaults} == {"erc4626_vault", "strategy_vault",
                                                 "lending_wrapper", "bridge_vault"}
    assert {v.chain for v in vaults} == {"eth", "arb", "base", "opt", "pol", "bsc"}
    assert {v.incident for v in vaults} == set(INCIDENTS)
    for update in generate_facts(vaults[:16], seed=5, start=1.7e9, interval=3600,
                                 duration=86400):
        raw = encode_update(update)
        errors = list(validator.iter_errors(json.loads(raw)))
        assert not errors, (raw[:200], errors[:3])
        assert decode_facts(raw) == update
