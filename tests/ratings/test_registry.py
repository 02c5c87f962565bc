"""The token registry file: the shipped example parses; bad entries stop start-up clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.registry import RegistryError, load_registry, parse_registry, tags_for

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "tokens.example.toml"


def test_example_registry_parses() -> None:
    tokens = load_registry(EXAMPLE)
    assert len(tokens) >= 20
    by_key = {(t.chain, t.symbol): t for t in tokens}
    usdc = by_key[("eth", "USDC")]
    assert usdc.address == "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
    assert by_key[("eth", "PAXG")].tags == ("rwa", "commodity", "gold")
    assert by_key[("eth", "sDAI")].tags == ("rwa", "yield")
    assert by_key[("eth", "EURC")].tags == ("stablecoin", "non-usd")
    assert {t.chain for t in tokens} >= {"eth", "arb", "opt", "base", "pol", "bsc"}


def test_no_path_means_no_registry() -> None:
    assert load_registry("") == []
    assert tags_for(None) == ("unregistered",)


@pytest.mark.parametrize(("entry", "message"), [
    ('chain = "sol"\naddress = "0x' + "1" * 40 + '"\nsymbol = "X"', "chain 'sol'"),
    ('chain = "eth"\naddress = "0x123"\nsymbol = "X"', "address"),
    ('chain = "eth"\naddress = "0x' + "1" * 40 + '"\nsymbol = "X"\npeg_type = "yen"',
     "peg_type 'yen'"),
    ('chain = "eth"\naddress = "0x' + "1" * 40 + '"\nsymbol = "X"\nmarket_cap_usd = -1',
     "market_cap_usd"),
    ('chain = "eth"\naddress = "0x' + "1" * 40 + '"\nsymbol = "X"\ncolour = "red"', "colour"),
])
def test_bad_entries_are_named(entry: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message.replace("(", r"\(")):
        parse_registry(f"[[token]]\n{entry}\n", "tokens.toml")


def test_duplicates_are_refused() -> None:
    one = '[[token]]\nchain = "eth"\naddress = "0x' + "a" * 40 + '"\nsymbol = "X"\n'
    with pytest.raises(RegistryError, match="listed twice"):
        parse_registry(one + one.replace("aaaa", "AAAA", 1))
