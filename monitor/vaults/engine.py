"""The pure vault engine: fact updates and depeg tier changes in, ``vaults.ratings`` out.

No I/O and no clock: every evaluation happens at an event time taken from its input.

Public surface::

    engine = VaultEngine(VaultsConfig(), depeg=DepegTable())
    engine.process(update)          # a FactUpdate -> list[VaultRating]
    engine.on_depeg(change)         # record a DepegChange, re-rate the vaults holding it
    engine.catch_up()               # apply depeg changes no vault has seen yet (after restore)
    blob = engine.export_state(key) # one vault's whole state, bytes
    engine.restore_state(blob)

How the depeg link stays deterministic. Each vault keeps ``depeg_mark``, the event time up to
which it has applied its underlying's tier changes. A fact at ``t`` first applies the changes
in ``(mark, t]`` (each at its own time, possibly emitting a record), then the fact; a tier
change that arrives applies at once to vaults whose clock has not passed it. So the outputs
are those of one merge of both inputs by event time (depeg first on equal times), whatever
the arrival order, as long as a tier change arrives before facts later than it; a tier change
that arrives later than that is applied at the vault's current time (documented: late).

Each vault's clock never goes back: an evaluation runs at ``max(clock, input ts)``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator

import msgspec

from ..timefmt import format_ts
from .config import VaultsConfig
from .depeg_link import DepegChange, DepegTable
from .envelope import risk_envelope
from .facts import FactUpdate, VaultFacts, apply_update
from .rating import rate, scorer_for
from .records import VaultRating
from .tags import Context, evaluate_tags, known_rated_facts
from .verdict import attention_needed, tier_for, verdict_for

STATE_VERSION = 1


class Emitted(msgspec.Struct, array_like=True, frozen=True):
    """What the last record said; a new record is written only when this changes."""

    rating: int | None
    tier: str
    verdict: str
    tags: tuple[str, ...]
    attention: bool


class VaultState(msgspec.Struct, array_like=True):
    """One vault's whole state: exported into the daemon's checkpoints."""

    version: int
    chain: str
    vault: str
    facts: VaultFacts
    #: Event time of the newest evaluation (-inf before the first).
    clock: float
    #: Depeg tier changes of the underlying at or before this time are applied.
    depeg_mark: float
    underlying_tier: str | None
    #: tag -> event time it started firing (the envelope's ``detected_at``).
    since: dict[str, float]
    #: (event time, rating) whenever the rating changed, pruned to the attention window
    #: (plus the one in force at its start).
    history: list[tuple[float, int]]
    last: Emitted | None = None

    @property
    def key(self) -> str:
        return f"{self.chain}:{self.vault}"

    @property
    def underlying_key(self) -> str | None:
        address = self.facts.underlying_address
        return f"{self.chain}:{address}" if address else None


class VaultEngineStats(msgspec.Struct):
    facts: int = 0
    depeg_changes: int = 0
    depeg_duplicates: int = 0
    records: int = 0


#: Formatting a time is a strftime call; the same few times recur in every record of a vault.
_iso = functools.lru_cache(maxsize=65536)(format_ts)

_state_encoder = msgspec.msgpack.Encoder()
_state_decoder = msgspec.msgpack.Decoder(VaultState)


class VaultEngine:
    def __init__(self, config: VaultsConfig, depeg: DepegTable | None = None) -> None:
        self.config = config
        #: Shared between the engines of one process (one per partition in the daemon).
        self.depeg = depeg if depeg is not None else DepegTable()
        self.stats = VaultEngineStats()
        self._vaults: dict[str, VaultState] = {}
        #: underlying token key -> keys of the vaults holding it.
        self._holders: dict[str, set[str]] = {}
        self._blocking = frozenset(config.blocking_tags)
        self._scorer = scorer_for(config)

    # -- inputs -------------------------------------------------------------------------
    def process(self, update: FactUpdate) -> list[VaultRating]:
        """Apply one fact record; the records it causes, in event-time order."""
        self.stats.facts += 1
        state = self._vaults.get(update.key)
        if state is None:
            state = VaultState(version=STATE_VERSION, chain=update.chain, vault=update.vault,
                               facts=VaultFacts(), clock=float("-inf"),
                               depeg_mark=float("-inf"), underlying_tier=None, since={},
                               history=[])
            self._vaults[update.key] = state
        out = self._apply_depeg(state, until=update.ts)
        before = state.underlying_key
        state.facts = apply_update(state.facts, update)
        now = max(state.clock, update.ts)
        after = state.underlying_key
        if after != before:
            self._unindex(before, state.key)
            if after is not None:
                self._holders.setdefault(after, set()).add(state.key)
                state.underlying_tier = self.depeg.tier_at(after, now)
            else:
                state.underlying_tier = None
            state.depeg_mark = now
        out += self._evaluate(state, now)
        return out

    def on_depeg(self, change: DepegChange) -> list[VaultRating]:
        """Record one tier change of a token and re-rate every vault holding it."""
        if not self.depeg.add(change):
            self.stats.depeg_duplicates += 1
            return []
        self.stats.depeg_changes += 1
        return self.refresh_holders(change.key)

    def refresh_holders(self, token_key: str) -> list[VaultRating]:
        """Apply what the depeg table knows to the vaults holding ``token_key``.

        The daemon's engines share one table: it records a change once, then calls this on
        every engine.
        """
        out: list[VaultRating] = []
        for key in sorted(self._holders.get(token_key, ())):
            out += self._apply_depeg(self._vaults[key], until=float("inf"))
        return out

    def holders(self, token_key: str) -> list[str]:
        """Keys of the vaults whose underlying is ``token_key``."""
        return sorted(self._holders.get(token_key, ()))

    def catch_up(self) -> list[VaultRating]:
        """Apply every tier change no vault has seen (after restoring states)."""
        out: list[VaultRating] = []
        for key in sorted(self._vaults):
            out += self._apply_depeg(self._vaults[key], until=float("inf"))
        return out

    # -- the depeg link ---------------------------------------------------------------
    def _apply_depeg(self, state: VaultState, until: float) -> list[VaultRating]:
        token = state.underlying_key
        if token is None:
            return []
        out: list[VaultRating] = []
        for ts, tier in self.depeg.between(token, state.depeg_mark, until):
            state.depeg_mark = ts
            if tier != state.underlying_tier:
                state.underlying_tier = tier
                out += self._evaluate(state, max(state.clock, ts))
        # A change that arrived late (at or before the mark) can alter the tier in force.
        in_force = self.depeg.tier_at(token, state.depeg_mark)
        if in_force is not None and in_force != state.underlying_tier:
            state.underlying_tier = in_force
            out += self._evaluate(state, max(state.clock, state.depeg_mark))
        return out

    def _unindex(self, token_key: str | None, vault_key: str) -> None:
        if token_key is None:
            return
        holders = self._holders.get(token_key)
        if holders is not None:
            holders.discard(vault_key)
            if not holders:
                del self._holders[token_key]

    # -- one evaluation ---------------------------------------------------------------
    def _evaluate(self, state: VaultState, now: float) -> list[VaultRating]:
        """Tags, rating, tier, verdict and attention at ``now``; a record when they changed.

        The explanation, contributions and envelope are built only for a record (most fact
        updates change nothing a reader sees)."""
        config = self.config
        state.clock = now
        facts = state.facts
        tags = evaluate_tags(facts, Context(config.thresholds, now, state.underlying_tier))
        known = known_rated_facts(facts)
        rating = self._scorer.score(tags, facts.underlying_risk, known)
        tier = tier_for(rating)
        verdict = verdict_for(rating, tags, self._blocking)
        for tag in list(state.since):
            if tag not in tags:
                del state.since[tag]
        for tag in tags:
            state.since.setdefault(tag, now)
        rise = self._record_history(state, now, rating)
        attention = attention_needed(verdict, rise, config.attention_rise_points)
        sorted_tags = tuple(sorted(tags))
        emitted = Emitted(rating, tier, verdict, sorted_tags, attention)
        if emitted == state.last:
            return []
        state.last = emitted
        self.stats.records += 1
        result = rate(tags, facts, known, config, state.underlying_tier)
        tag_list = list(sorted_tags)
        detected = {tag: _iso(state.since[tag]) for tag in tag_list}
        return [VaultRating(
            ts=_iso(now), chain=state.chain, vault=state.vault, rating=rating, tier=tier,
            verdict=verdict, tags=tag_list, attention_needed=attention,
            risk=risk_envelope(rating, tag_list, result.tag_points, detected),
            contributions=result.contributions, floor=result.floor,
            explanation=result.explanation, known_facts=known,
            underlying_depeg_tier=state.underlying_tier,
        )]

    def _record_history(self, state: VaultState, now: float, rating: int | None) -> float:
        """Keep the rating history of the attention window; return the rise within it."""
        history = state.history
        if rating is not None and (not history or history[-1][1] != rating):
            history.append((now, rating))
        start = now - self.config.attention_window_seconds
        while len(history) >= 2 and history[1][0] <= start:
            del history[0]  # the first entry stays while it was in force at the window start
        if rating is None or not history:
            return 0.0
        return float(rating - min(r for _, r in history))

    # -- state ------------------------------------------------------------------------
    def keys(self) -> Iterator[str]:
        return iter(self._vaults)

    def __len__(self) -> int:
        return len(self._vaults)

    def state(self, key: str) -> VaultState | None:
        return self._vaults.get(key)

    def export_state(self, key: str) -> bytes:
        return _state_encoder.encode(self._vaults[key])

    def restore_state(self, blob: bytes) -> str:
        """Install one exported vault state (replacing any); returns its key."""
        state = _state_decoder.decode(blob)
        old = self._vaults.get(state.key)
        if old is not None:
            self._unindex(old.underlying_key, old.key)
        self._vaults[state.key] = state
        if state.underlying_key is not None:
            self._holders.setdefault(state.underlying_key, set()).add(state.key)
        return state.key

    def forget(self, keys: Iterable[str]) -> None:
        for key in list(keys):
            state = self._vaults.pop(key, None)
            if state is not None:
                self._unindex(state.underlying_key, key)
