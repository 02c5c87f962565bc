"""The pure cross-chain spread stage: ticks in (any order of chains), spread ticks out.

For every asset listed on two or more chains (:mod:`.assets`) the stage keeps each chain's
prices (as price/peg) and, at every refresh boundary ``B`` of event time (the engine's own
grid, multiples of ``model.refresh_seconds``), publishes one observation per token of the
asset: ``cross_chain_spread_bps`` = (max - min of each chain's latest price/peg at or
before ``B``, if at most ``price_max_age_seconds`` old) in basis points, and
``cross_chain_chains`` = how many chains that covered (the spread is null under two).

Determinism: boundary ``B`` is published only once every chain of the asset has been seen
past ``B`` (so its prices up to ``B`` are all in), or, for a chain whose ticks stopped, once
the other chains are ``quiet_after_seconds`` past ``B`` *and* the caller says it has read
everything there is to read (``caught_up``; a replay always has). The value depends only on
ticks at or before ``B``, never on how far past ``B`` a chain happened to be. A registered
chain never seen at all is waited for only while the reader is not caught up. So the replay
(time-merged files) and the daemon (partitions read in any interleaving) publish the same
observations. Ticks at or before an already published boundary are too late and ignored
(counted). See docs/cross-chain-spread.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import msgspec

from ..ticks import SPREAD_SOURCE, Tick, make_tick
from .assets import AssetMap


class _Member(msgspec.Struct):
    chain: str
    token: str
    symbol: str = ""
    peg: float | None = None
    max_ts: float = -math.inf
    #: (ts, price/peg), in time order; only what a future boundary can still use.
    prices: list[tuple[float, float]] = []


class _Asset(msgspec.Struct):
    members: dict[str, _Member] = {}
    next_boundary: float | None = None
    max_ts: float = -math.inf


class _State(msgspec.Struct):
    version: int
    assets: dict[str, _Asset]


@dataclass(slots=True)
class SpreadStats:
    ticks: int = 0
    late: int = 0
    boundaries: int = 0
    published: int = 0


def _always() -> bool:
    return True


class SpreadStage:
    def __init__(self, assets: AssetMap, *, every: int, price_max_age: float,
                 quiet_after: float) -> None:
        if every <= 0:
            raise ValueError("the spread stage needs a positive refresh interval")
        self._asset_of: Mapping[str, str] = assets.asset_of
        self._registered: dict[str, int] = {}
        for name in assets.asset_of.values():
            self._registered[name] = self._registered.get(name, 0) + 1
        self.every = every
        self.price_max_age = price_max_age
        self.quiet_after = quiet_after
        self._assets: dict[str, _Asset] = {}
        self.stats = SpreadStats()

    def process(self, tick: Tick, caught_up: Callable[[], bool] = _always) -> list[Tick]:
        """Take one tick; return the spread ticks it made due (boundary order, then key)."""
        if tick.cross_chain_chains is not None or tick.source == SPREAD_SOURCE:
            return []  # our own output, read back from the same topic
        name = self._asset_of.get(tick.key)
        if name is None:
            return []
        self.stats.ticks += 1
        asset = self._assets.setdefault(name, _Asset())
        if asset.next_boundary is not None and tick.ts <= asset.next_boundary - self.every:
            self.stats.late += 1
            return []
        member = asset.members.get(tick.key)
        if member is None:
            member = asset.members[tick.key] = _Member(tick.chain, tick.token)
        if tick.symbol:
            member.symbol = tick.symbol
        if tick.peg is not None:
            member.peg = tick.peg
        if tick.price is not None and member.peg is not None:
            self._add_price(member, tick.ts, tick.price / member.peg)
        member.max_ts = max(member.max_ts, tick.ts)
        asset.max_ts = max(asset.max_ts, tick.ts)
        if asset.next_boundary is None:
            asset.next_boundary = float((math.floor(tick.ts / self.every) + 1) * self.every)
        return self._due(name, asset, caught_up)

    def release(self, caught_up: Callable[[], bool]) -> list[Tick]:
        """The boundaries that waited only for the reader to catch up, once it has.

        :meth:`process` asks ``caught_up`` only when a tick of the asset comes in; a reader
        that catches up on records of no asset (its own outputs read back, other tokens)
        would otherwise hold such a boundary until the asset's next tick, and for ever at
        the end of a finite input. The daemon calls this after each batch it read."""
        out: list[Tick] = []
        for name in sorted(self._assets):
            out.extend(self._due(name, self._assets[name], caught_up))
        return out

    def flush(self) -> list[Tick]:
        """End of a finite input: publish every boundary some chain has passed."""
        out: list[Tick] = []
        for name in sorted(self._assets):
            asset = self._assets[name]
            while asset.next_boundary is not None and asset.max_ts > asset.next_boundary:
                out.extend(self._publish(asset))
        return out

    def waiting(self) -> dict[str, float]:
        """Per asset: event seconds its newest tick is ahead of its last published boundary
        (0 before the first boundary)."""
        out: dict[str, float] = {}
        for name, asset in self._assets.items():
            if asset.next_boundary is not None:
                out[name] = max(0.0, asset.max_ts - (asset.next_boundary - self.every))
        return out

    # -- state (the daemon's checkpoint) -----------------------------------------------
    def export_state(self) -> bytes:
        return msgspec.msgpack.encode(_State(version=1, assets=self._assets))

    def restore_state(self, blob: bytes) -> None:
        self._assets = msgspec.msgpack.decode(blob, type=_State).assets

    # -- internals -----------------------------------------------------------------------
    @staticmethod
    def _add_price(member: _Member, ts: float, ratio: float) -> None:
        prices = member.prices
        i = len(prices)
        while i and prices[i - 1][0] > ts:  # a tick slightly out of order
            i -= 1
        prices.insert(i, (ts, ratio))

    def _due(self, name: str, asset: _Asset, caught_up: Callable[[], bool]) -> list[Tick]:
        out: list[Tick] = []
        while asset.next_boundary is not None:
            b = asset.next_boundary
            behind = sum(1 for m in asset.members.values() if m.max_ts <= b)
            if behind == len(asset.members):
                break  # nobody is past the boundary yet
            if behind and (asset.max_ts < b + self.quiet_after or not caught_up()):
                break  # wait for the chains still behind
            if len(asset.members) < self._registered[name] and not caught_up():
                # A registered chain not seen yet may only be further back in the input
                # (another partition not read yet); once everything there is has been
                # read, it is absent, not late, and is not waited for.
                break
            out.extend(self._publish(asset))
        return out

    def _publish(self, asset: _Asset) -> list[Tick]:
        b = asset.next_boundary
        assert b is not None
        ratios: list[float] = []
        for member in asset.members.values():
            latest = self._latest_at(member, b)
            if latest is not None and b - latest[0] <= self.price_max_age:
                ratios.append(latest[1])
        chains = len(ratios)
        spread = round((max(ratios) - min(ratios)) * 1e4, 4) if chains >= 2 else None
        asset.next_boundary = b + self.every
        self.stats.boundaries += 1
        out = [make_tick(b, m.chain, m.token, m.symbol, cross_chain_spread_bps=spread,
                         cross_chain_chains=chains, source=SPREAD_SOURCE)
               for _, m in sorted(asset.members.items())]
        self.stats.published += len(out)
        return out

    @staticmethod
    def _latest_at(member: _Member, b: float) -> tuple[float, float] | None:
        """The newest price at or before ``b``; older ones are dropped (no later boundary
        can need them)."""
        prices = member.prices
        i = 0
        while i < len(prices) and prices[i][0] <= b:
            i += 1
        if i == 0:
            return None
        del prices[:i - 1]
        return prices[0]
