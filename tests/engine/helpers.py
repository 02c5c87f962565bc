"""Small tick builders for engine tests."""

from __future__ import annotations

from monitor.ticks import Tick, make_tick

USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
GOLD = "0x45804880de22913dafe09f4980848ece6ecbaf78"
T0 = 1_700_000_100.0  # 2023-11-14T22:15:00Z: a refresh boundary (multiple of 300)


def price_ticks(prices: list[float], *, start: float = T0, every: float = 60.0,
                token: str = USDC, peg: str = "1", symbol: str = "USDC") -> list[Tick]:
    return [
        make_tick(start + i * every, "eth", token, symbol, repr(p), peg)
        for i, p in enumerate(prices)
    ]
