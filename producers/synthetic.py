"""Synthetic pegged tokens: a seeded, pure tick generator (no clock, no I/O).

Each token has a chain, an address derived from the seed, a peg (USD, EUR, gold or the NAV
of a yield-bearing token, so ``peg_usd`` is not always 1) and a scenario:

- ``calm``: price noise of a few basis points around the peg, thin steady slippage;
- ``depeg``: episodes that slide 2-12 % below peg, hold, then recover;
- ``collapse``: one slide to 10-60 % of peg that never recovers (UST-like);
- ``premium``: episodes 0.8-3 % above peg that fade back;
- ``drain``: liquidity leaves: slippage of a 100k sell climbs to hundreds of bp while the
  price barely moves.

Every token also has an on-chain oracle (:mod:`producers.synthetic_oracle`) whose answers
ride on the ticks as ``oracle_price_usd`` when it publishes a round; the ``depeg`` tokens'
oracle lags the market by half an hour, so the headroom signal (oracle divergence) shows.

Times are event seconds; episodes last tens of minutes to hours, so at ``--time-scale 60``
a demo shows tier changes within a minute or two. The first episode starts early (within
``first_episode_within`` seconds) so the demo does not wait. Same seed, same ticks.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from monitor.chains import CHAINS
from monitor.ticks import Tick, make_tick

from .synthetic_oracle import LAGGING_ORACLE_SECONDS, OracleFeed

SCENARIOS: Final = ("calm", "depeg", "collapse", "premium", "drain")
PEGS: Final = ("USD", "EUR", "gold", "NAV")

#: Mix after the first five tokens (which show one of each scenario): mostly calm.
SCENARIO_WEIGHTS: Final = (70, 12, 3, 7, 8)
PEG_WEIGHTS: Final = (60, 15, 10, 15)
SYMBOL_PREFIX: Final = {"USD": "USD", "EUR": "EUR", "gold": "XAU", "NAV": "NAV"}
YEAR: Final = 365.25 * 86400


@dataclass(frozen=True, slots=True)
class TokenSpec:
    index: int
    chain: str
    address: str
    symbol: str
    peg_kind: str
    scenario: str
    peg0: float  # peg in USD at the start
    base_slippage_bps: float
    noise_bps: float


@dataclass(slots=True)
class _Episode:
    start: float
    ramp: float
    hold: float
    recover: float  # math.inf: never recovers
    depth: float  # signed fraction of peg: -0.05 is 5 % below
    slippage_bps: float  # extra slippage at full depth

    @property
    def end(self) -> float:
        return self.start + self.ramp + self.hold + self.recover

    def level(self, t: float) -> float:
        """0..1 share of the full move at event time ``t`` (smooth in, hold, decay out)."""
        x = t - self.start
        if x <= 0:
            return 0.0
        if x < self.ramp:
            u = x / self.ramp
            return u * u * (3 - 2 * u)
        x -= self.ramp
        if x < self.hold or math.isinf(self.recover):
            return 1.0
        x -= self.hold
        # Exponential recovery: 95 % gone after ``recover`` seconds.
        return math.exp(-3.0 * x / self.recover) if x < self.recover else 0.0


def token_address(seed: int, index: int) -> str:
    """A stable fake contract address: same seed and index, same address."""
    return "0x" + hashlib.sha256(f"depeg-sim:{seed}:{index}".encode()).hexdigest()[:40]


def make_tokens(count: int, seed: int) -> list[TokenSpec]:
    rng = random.Random(f"tokens:{seed}")
    tokens = []
    for i in range(count):
        scenario = SCENARIOS[i] if i < len(SCENARIOS) else rng.choices(
            SCENARIOS, SCENARIO_WEIGHTS)[0]
        peg_kind = "USD" if i < len(SCENARIOS) else rng.choices(PEGS, PEG_WEIGHTS)[0]
        peg0 = {"USD": 1.0, "EUR": rng.uniform(1.04, 1.12), "gold": rng.uniform(1900, 2700),
                "NAV": rng.uniform(1.0, 1.25)}[peg_kind]
        tokens.append(TokenSpec(
            index=i,
            chain=CHAINS[i % len(CHAINS)],
            address=token_address(seed, i),
            symbol=f"{SYMBOL_PREFIX[peg_kind]}{i}-{scenario}",
            peg_kind=peg_kind,
            scenario=scenario,
            peg0=peg0,
            base_slippage_bps=rng.uniform(2.0, 15.0),
            noise_bps=rng.uniform(1.0, 4.0),
        ))
    return tokens


#: Circle's USDC on eth and arb: the committed Token List
#: (deploy/registry/pegged-tokens.tokenlist.json) names both under ``asset = "usdc"``, so a
#: registry holding them makes the spread stage compare the two (docs/cross-chain-spread.md).
USDC_PAIR: Final = (("eth", "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"),
                    ("arb", "0xaf88d065e77c8cc2239327c5edb3a432268e5831"))


def cross_chain_pair(first_index: int, seed: int) -> list[TokenSpec]:
    """USDC on eth (calm) and on arb (depegging episodes): one asset on two chains whose
    prices part, so a demo shows a cross-chain spread. Real addresses, because the spread
    stage learns which tokens are one asset from the registry, never from symbols."""
    rng = random.Random(f"pair:{seed}")
    return [TokenSpec(index=first_index + n, chain=chain, address=address, symbol="USDC",
                      peg_kind="USD", scenario=scenario, peg0=1.0,
                      base_slippage_bps=rng.uniform(2.0, 6.0), noise_bps=rng.uniform(1.0, 2.0))
            for n, ((chain, address), scenario) in enumerate(zip(USDC_PAIR,
                                                                 ("calm", "depeg"),
                                                                 strict=True))]


class _TokenPath:
    """One token's price, peg and slippage through event time (its own random stream)."""

    def __init__(self, spec: TokenSpec, seed: int, start: float, first_within: float) -> None:
        self.spec = spec
        self.rng = random.Random(f"path:{seed}:{spec.index}")
        self.noise = 0.0
        self.peg_walk = 0.0
        self.last_t = start
        self.episode: _Episode | None = None
        self.next_start = start + self.rng.uniform(0.1, 1.0) * first_within
        lag = LAGGING_ORACLE_SECONDS if spec.scenario == "depeg" else 0.0
        self.oracle = OracleFeed.make(lag)

    def _new_episode(self, t: float) -> _Episode | None:
        r, kind = self.rng, self.spec.scenario
        if kind == "calm":
            return None
        if kind == "depeg":
            return _Episode(t, r.uniform(300, 900), r.uniform(1200, 3600), r.uniform(1800, 5400),
                            -r.uniform(0.02, 0.12), r.uniform(50, 300))
        if kind == "collapse":
            return _Episode(t, r.uniform(1800, 5400), math.inf, math.inf,
                            -r.uniform(0.4, 0.9), r.uniform(800, 3000))
        if kind == "premium":
            return _Episode(t, r.uniform(300, 900), r.uniform(1200, 3600), r.uniform(1200, 3600),
                            r.uniform(0.008, 0.03), 0.0)
        return _Episode(t, r.uniform(600, 1800), r.uniform(1800, 5400), r.uniform(1800, 5400),
                        -r.uniform(0.0, 0.003), r.uniform(300, 1500))

    def _peg(self, dt: float) -> float:
        """The peg moves too: a NAV accrues yield, EUR and gold wander like their markets."""
        spec = self.spec
        if spec.peg_kind == "NAV":  # 4.5 % a year, never down
            self.peg_walk += math.log1p(0.045) * dt / YEAR
        elif spec.peg_kind in ("EUR", "gold"):
            vol = 0.10 if spec.peg_kind == "EUR" else 0.15  # annualised
            self.peg_walk += self.rng.gauss(0.0, vol * math.sqrt(dt / YEAR))
        return spec.peg0 * math.exp(self.peg_walk)

    def step(self, t: float) -> tuple[float, float, float | None, float | None]:
        """(price, peg, slippage or None, oracle answer or None) at event time ``t``
        (t never goes back)."""
        dt, self.last_t = t - self.last_t, t
        spec, r = self.spec, self.rng
        peg = self._peg(max(dt, 0.0))
        if self.episode is None and t >= self.next_start:
            self.episode = self._new_episode(t)
        level, depth, extra_slip = 0.0, 0.0, 0.0
        if self.episode is not None:
            level = self.episode.level(t)
            depth, extra_slip = self.episode.depth, self.episode.slippage_bps
            if t >= self.episode.end:
                # Calm spell of one to four hours, then the next episode.
                self.next_start = t + r.uniform(3600, 4 * 3600)
                self.episode = None
        # AR(1) noise in basis points; a stressed market is several times noisier.
        stress = 1.0 + 6.0 * level * min(abs(depth) / 0.02, 1.0)
        self.noise = 0.9 * self.noise + r.gauss(0.0, spec.noise_bps * 1e-4 * stress)
        fair = max(peg * (1.0 + depth * level), peg * 1e-4)
        price = max(peg * (1.0 + depth * level + self.noise), peg * 1e-4)
        slippage = None
        if r.random() < 0.25:  # a liquidity quote arrives on about a quarter of ticks
            slippage = spec.base_slippage_bps * r.uniform(0.8, 1.25) + extra_slip * level
        return price, peg, slippage, self.oracle.observe(t, fair)


def _fmt(value: float) -> str:
    return format(value, ".10g")


def generate(
    tokens: list[TokenSpec],
    *,
    seed: int,
    start: float,
    interval: float,
    duration: float | None = None,
    first_episode_within: float = 600.0,
) -> Iterator[Tick]:
    """Ticks of all tokens in event-time order: each token every ``interval`` seconds,
    staggered evenly inside the interval, for ``duration`` event seconds (None: forever)."""
    if interval <= 0:
        raise ValueError("interval must be positive")
    paths = [_TokenPath(spec, seed, start, first_episode_within) for spec in tokens]
    offsets = [interval * i / max(len(tokens), 1) for i in range(len(tokens))]
    step = 0
    while True:
        base = start + step * interval
        for path, offset in zip(paths, offsets, strict=True):
            t = base + offset
            if duration is not None and t - start >= duration:
                return
            price, peg, slippage, oracle = path.step(t)
            spec = path.spec
            yield make_tick(
                round(t, 3), spec.chain, spec.address, spec.symbol, _fmt(price), _fmt(peg),
                None if slippage is None else round(slippage, 2),
                None if oracle is None else _fmt(oracle), source="simulate",
            )
        step += 1
