"""The committed pegged-token registry against the Token Lists schema, and `registry check`."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from eth_utils.address import is_checksum_address
from jsonschema import Draft7Validator

from monitor.chains import CHAINS
from monitor.cli import main
from monitor.registry import load_registry
from monitor.tokenlist import CHAIN_IDS

REPO = Path(__file__).resolve().parent.parent
REGISTRY = REPO / "deploy" / "registry" / "pegged-tokens.tokenlist.json"
#: The schema as the @uniswap/token-lists npm package publishes it (tests/evm/install.sh).
NPM_SCHEMA = REPO / "tests/evm/node_modules/@uniswap/token-lists/src/tokenlist.schema.json"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "monitor", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def registry() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(REGISTRY.read_text(encoding="utf-8"))
    return doc


def test_registry_validates_against_the_published_token_lists_schema(
        registry: dict[str, Any]) -> None:
    assert NPM_SCHEMA.is_file(), "run tests/evm/install.sh (.ci/run does) for the npm schema"
    schema = json.loads(NPM_SCHEMA.read_text())
    errors = list(Draft7Validator(schema).iter_errors(registry))
    assert errors == []
    # The copy the package ships for `registry check` is the published schema unchanged.
    shipped = json.loads((REPO / "monitor/schemas/tokenlist.schema.json").read_text())
    assert shipped == schema


def test_every_token_is_checksummed_unique_and_on_the_seven_chains(
        registry: dict[str, Any]) -> None:
    tokens = registry["tokens"]
    assert all(is_checksum_address(t["address"]) for t in tokens)
    keys = [(t["chainId"], t["address"].lower()) for t in tokens]
    assert len(keys) == len(set(keys))
    by_chain = Counter(t["chainId"] for t in tokens)
    assert set(by_chain) == set(CHAIN_IDS.values())  # every chain has pegged tokens
    assert len(tokens) >= 400
    pegs = Counter(t["extensions"]["pegType"] for t in tokens)
    assert {"usd", "eur", "gold", "nav"} <= set(pegs)
    # Well-known real tokens are where the public lists put them.
    eth = {(t["symbol"], t["address"]) for t in tokens if t["chainId"] == 1}
    assert ("USDC", "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48") in eth
    assert ("PAXG", "0x45804880De22913dAFE09f4980848ECE6EcbAf78") in eth
    assert ("sDAI", "0x83F20F44975D03b1b09e64809B757c47f942BEeA") in eth


def test_registry_check_prints_the_count_per_chain(registry: dict[str, Any]) -> None:
    result = cli("registry", "check", str(REGISTRY))
    assert result.returncode == 0, result.stderr
    want = Counter(t["chainId"] for t in registry["tokens"])
    line = result.stdout.strip()
    for chain in CHAINS:
        assert f"{chain} {want[CHAIN_IDS[chain]]}" in line
    assert f"{len(registry['tokens'])} tokens" in line


def test_registry_check_names_every_problem(
        registry: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = copy.deepcopy(registry)
    first = doc["tokens"][0]
    doc["tokens"].append(copy.deepcopy(first))  # duplicate
    lower = copy.deepcopy(doc["tokens"][1])
    lower["address"] = lower["address"].lower()  # not checksummed
    lower["chainId"] = 43114  # and an unknown chain
    doc["tokens"][1] = lower
    doc["tokens"][2]["extensions"]["pegType"] = "doge"
    doc["tokens"][3]["extensions"]["sources"] = {"pool": "0x1234"}
    bad = tmp_path / "bad.tokenlist.json"
    bad.write_text(json.dumps(doc))
    assert main(["registry", "check", str(bad)]) == 1  # in process: the CLI's own entry point
    err = capsys.readouterr().err
    assert f"duplicate of tokens[0] (chainId {first['chainId']}, {first['address']})" in err
    assert "is not checksummed" in err and "chainId 43114 is not one of the chains" in err
    assert "extensions.pegType 'doge'" in err
    assert "extensions.sources.pool '0x1234' is not a 0x + 40 hex digit address" in err
    assert "4 problem(s)" in err or "5 problem(s)" in err
    assert main(["registry", "check", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_the_api_registry_loads_a_token_list(registry: dict[str, Any]) -> None:
    tokens = load_registry(REGISTRY)
    assert len(tokens) == len(registry["tokens"])
    usdc = next(t for t in tokens if t.address == "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48")
    assert (usdc.chain, usdc.peg_type, usdc.symbol) == ("eth", "usd", "USDC")


def test_registry_check_defaults_to_the_configured_registry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """No FILE: registry.path is checked (Token List or TOML); none configured is exit 2
    naming the setting (FILE used to be required)."""
    monkeypatch.delenv("DEPEG_CONFIG", raising=False)
    monkeypatch.setenv("DEPEG_REGISTRY__PATH", "")
    assert main(["registry", "check"]) == 2
    assert "DEPEG_REGISTRY__PATH" in capsys.readouterr().err
    monkeypatch.setenv("DEPEG_REGISTRY__PATH", str(REGISTRY))
    assert main(["registry", "check"]) == 0
    assert f"{len(load_registry(REGISTRY))} tokens" in capsys.readouterr().out
    toml = tmp_path / "registry.toml"
    toml.write_text("".join(
        f'[[token]]\nchain = "{chain}"\naddress = "0x{n:040x}"\nsymbol = "USDC"\n'
        f'asset = "usdc"\n' for n, chain in enumerate(["eth", "arb", "arb"], start=1)))
    monkeypatch.setenv("DEPEG_REGISTRY__PATH", str(toml))
    assert main(["registry", "check"]) == 0
    assert "3 tokens (eth 1, arb 2)" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text('[[token]]\nchain = "doge"\naddress = "0x1"\nsymbol = "X"\n')
    monkeypatch.setenv("DEPEG_REGISTRY__PATH", str(bad))
    assert main(["registry", "check"]) == 1
    assert str(bad) in capsys.readouterr().err
