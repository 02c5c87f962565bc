"""The tick as the compiled build holds it: a plain class, so a native one there.

The engine reads ~17 fields of every tick. In the mypyc build (monitor/compiled.py) a
field of a msgspec struct can only be read through the generic attribute lookup (~160
instructions with what it calls), while a field of a class compiled with the engine is a
load at a fixed offset: that is ~11 % of the compiled replay's instructions. So this
module is compiled, and there :data:`monitor.ticks.Tick` is this class.

The pure-Python build keeps :class:`monitor.ticks.TickStruct`, a msgspec struct: it is
made in C, three times faster than this class's ``__init__`` runs in the interpreter,
and the pure replay makes one per row. Same fields in the same order, same defaults,
equality by value, a hash, a ``repr`` and ``key`` alike: ``tests/test_tick.py`` holds
the two to that. Neither build ever holds both (:func:`monitor.ticks.tick_class`); the
state topic carries the struct's encoding (``engine/tokenstate.py`` converts).
"""

from __future__ import annotations

#: The fields, in the struct's order (``TickStruct.__struct_fields__``).
FIELDS = ("ts", "chain", "token", "symbol", "price", "price_text", "peg", "peg_text",
          "slippage_bps", "oracle_price", "source", "oracle_text",
          "cross_chain_spread_bps", "cross_chain_chains")


class Tick:
    """A validated observation. Prices keep their original decimal text for the events.
    Never changed once made (as the frozen struct it stands for)."""

    __slots__ = ("chain", "cross_chain_chains", "cross_chain_spread_bps", "oracle_price",
                 "oracle_text", "peg", "peg_text", "price", "price_text", "slippage_bps",
                 "source", "symbol", "token", "ts")

    ts: float
    chain: str
    token: str
    symbol: str
    price: float | None
    price_text: str | None
    peg: float | None
    peg_text: str | None
    slippage_bps: float | None
    oracle_price: float | None
    source: str
    oracle_text: str | None
    #: Cross-chain spread of the token's asset, in bp of peg (published by the spread
    #: stage, never by a market producer; see docs/cross-chain-spread.md).
    cross_chain_spread_bps: float | None
    #: How many chains that spread covered (under two the spread is None); set on every
    #: spread observation, so a spread tick is recognisable even when it has no spread.
    cross_chain_chains: int | None

    def __init__(self, ts: float, chain: str, token: str, symbol: str,
                 price: float | None = None, price_text: str | None = None,
                 peg: float | None = None, peg_text: str | None = None,
                 slippage_bps: float | None = None, oracle_price: float | None = None,
                 source: str = "", oracle_text: str | None = None,
                 cross_chain_spread_bps: float | None = None,
                 cross_chain_chains: int | None = None) -> None:
        self.ts = ts
        self.chain = chain
        self.token = token
        self.symbol = symbol
        self.price = price
        self.price_text = price_text
        self.peg = peg
        self.peg_text = peg_text
        self.slippage_bps = slippage_bps
        self.oracle_price = oracle_price
        self.source = source
        self.oracle_text = oracle_text
        self.cross_chain_spread_bps = cross_chain_spread_bps
        self.cross_chain_chains = cross_chain_chains

    @property
    def key(self) -> str:
        return f"{self.chain}:{self.token}"

    def _values(self) -> tuple[object, ...]:
        """The fields' values, in :data:`FIELDS` order."""
        return (self.ts, self.chain, self.token, self.symbol, self.price, self.price_text,
                self.peg, self.peg_text, self.slippage_bps, self.oracle_price, self.source,
                self.oracle_text, self.cross_chain_spread_bps, self.cross_chain_chains)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tick):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}"
                          for name, value in zip(FIELDS, self._values(), strict=True))
        return f"Tick({inner})"


__all__ = ["FIELDS", "Tick"]
