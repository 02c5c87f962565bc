"""One validation for every way a tick arrives; bad input is a reason, never a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.ticks import (
    BAD_TICK_REASONS,
    MAX_TICK_BYTES,
    BadTick,
    decode_tick,
    encode_tick,
    make_tick,
)

USDC = "0xA0b86991c6218b36c1d19d4a2e9eB0cE3606eB48"


def test_json_tick_round_trips_and_normalises_the_address() -> None:
    raw = (b'{"ts":"2023-03-11T07:50:00Z","chain":"eth","token":"' + USDC.encode()
           + b'","symbol":"USDC","price_usd":"0.8748","peg_usd":1,"source":"x"}')
    tick = decode_tick(raw)
    assert tick.token == USDC.lower() and tick.price == 0.8748 and tick.price_text == "0.8748"
    assert tick.peg_text == "1" and tick.ts == 1678521000.0
    assert decode_tick(encode_tick(tick)) == tick


def test_epoch_seconds_and_offsets_are_accepted() -> None:
    a = make_tick(1678521000, "eth", USDC, "USDC", 1.0)
    b = make_tick("2023-03-11T08:50:00+01:00", "eth", USDC, "USDC", 1.0)
    assert a.ts == b.ts


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\x00\xff garbage", "bad_json"),
        (b'{"ts": 1, "chain": "eth"}', "bad_schema"),
        (b'{"ts": [], "chain": "eth", "token": "x"}', "bad_schema"),
        (b'{"ts": "soon", "chain": "eth", "token": "' + USDC.encode() + b'", "price_usd": 1}',
         "bad_ts"),
        (b'{"ts": 1, "chain": "solana", "token": "' + USDC.encode() + b'", "price_usd": 1}',
         "unknown_chain"),
        (b'{"ts": 1, "chain": "eth", "token": "0xabc", "price_usd": 1}', "bad_address"),
        (b'{"ts": 1, "chain": "eth", "token": "' + USDC.encode() + b'", "price_usd": "NaN"}',
         "bad_price"),
        (b'{"ts": 1, "chain": "eth", "token": "' + USDC.encode() + b'", "price_usd": -2}',
         "bad_price"),
        (b'{"ts": 1, "chain": "eth", "token": "' + USDC.encode() + b'", "price_usd": true}',
         "bad_schema"),
        # JSON integers past a float's range, in every numeric field (they crashed the
        # daemon's loop with an OverflowError instead of a dead letter).
        *((b'{"ts": 1, "chain": "eth", "token": "' + USDC.encode() + b'", "price_usd": 1, "'
           + name.encode() + b'": ' + digits + b'}', reason)
          for name, reason in [("price_usd", "bad_price"), ("peg_usd", "bad_peg"),
                               ("slippage_bps", "bad_slippage"),
                               ("oracle_price_usd", "bad_oracle_price"),
                               ("cross_chain_spread_bps", "bad_spread")]
          for digits in (b"1" + b"0" * 400, b"9" * 4000)),
        (b'{"ts": 1, "chain": "eth", "token": "' + USDC.encode() + b'"}', "no_observation"),
        (b"x" * (MAX_TICK_BYTES + 1), "too_large"),
        (None, "empty"),
    ],
)
def test_bad_ticks_name_their_reason(raw: bytes | None, reason: str) -> None:
    with pytest.raises(BadTick) as info:
        decode_tick(raw)
    assert info.value.reason == reason


@pytest.mark.parametrize("chain, token", [
    ("eth", "0x" + "ab" * 20), (" ETH ", "0x" + "AB" * 20), ("Eth", " 0x" + "aB" * 20 + " "),
    ("eth", "0x" + "ab" * 19), ("nochain", "0x" + "ab" * 20), ("eth", "0x" + "zz" * 20),
])
def test_checked_token_keys_are_cached_without_changing_an_answer(chain: str, token: str) -> None:
    """The (chain, token) check is cached; each answer, refusals included, is the one the
    uncached rules give, the second time as the first."""
    from monitor.chains import is_chain, normalize_address

    want_chain = chain.strip().lower()
    want_address = normalize_address(token)
    for _ in range(2):
        if not is_chain(want_chain):
            with pytest.raises(BadTick, match="unknown chain"):
                make_tick("2024-01-01T00:00:00Z", chain, token, "X", "1")
        elif want_address is None:
            with pytest.raises(BadTick, match="malformed token address"):
                make_tick("2024-01-01T00:00:00Z", chain, token, "X", "1")
        else:
            tick = make_tick("2024-01-01T00:00:00Z", chain, token, "X", "1")
            assert (tick.chain, tick.token) == (want_chain, want_address)


#: Any JSON value a producer could send in a field: integers of any size msgspec reads
#: (up to 4,299 digits; past a float's range apart, as hypothesis seldom reaches it),
#: floats, texts (numbers among them), booleans, null, nesting.
_json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers() | st.integers(min_value=10 ** 308, max_value=10 ** 4000).map(
        lambda n: n * (-1) ** (n % 2)) | st.text(max_size=30)
    | st.sampled_from(["1", " 0.99 ", "1e999", "-0", "NaN", "", "2023-03-11T07:50:00Z",
                       "eth", USDC, "1" + "0" * 400]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=5)
_fields = ["ts", "chain", "token", "symbol", "price_usd", "peg_usd", "slippage_bps",
           "oracle_price_usd", "source", "cross_chain_spread_bps", "cross_chain_chains"]


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({"ts": st.just(1_678_000_000) | _json_values,
                              "chain": st.just("eth") | _json_values,
                              "token": st.just(USDC) | _json_values,
                              "price_usd": st.just("1") | _json_values},
                             optional={name: _json_values for name in _fields[3:]
                                       if name != "price_usd"}))
def test_any_json_record_is_a_tick_or_a_bad_tick_never_another_error(
        record: dict[str, Any]) -> None:
    """The daemon dead-letters a BadTick and carries on; any other exception stops its
    loop, and the record (never committed) stops it again after every restart."""
    try:
        tick = decode_tick(json.dumps(record).encode())
    except BadTick as exc:
        assert exc.reason in BAD_TICK_REASONS
    else:
        assert tick.chain == "eth" and tick.token == USDC.lower()
