"""``depeg-monitor vaults replay``: fact files (+ depeg tier changes) through the vault engine.

The inputs are merged by event time (a depeg tier change before a fact record of the same
time; otherwise file order), run through the same :class:`VaultEngine` the daemon runs, and
every ``vaults.ratings`` record is written in the order the engine made it: event-time order.
Same inputs, same bytes, on every run.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..progress import Progress
from .config import VaultsConfig
from .depeg_link import BadDepegEvent, DepegChange, decode_depeg_change
from .engine import VaultEngine
from .facts import BadFacts, FactUpdate, decode_facts
from .records import VaultRating, encode_rating

MAX_BAD_LINES_SHOWN = 20

#: On equal event times a depeg change goes first: the engine applies a change at time t
#: before a fact of time t (see engine.py), so live and replay agree.
DEPEG_FIRST, FACTS_SECOND = 0, 1

Item = tuple[float, int, int, FactUpdate | DepegChange]


@dataclass
class VaultReplaySummary:
    facts: int = 0
    depeg_changes: int = 0
    bad_lines: int = 0
    bad_reasons: Counter[str] = field(default_factory=Counter)
    bad_examples: list[str] = field(default_factory=list)
    vaults: int = 0
    records: int = 0
    tiers: Counter[str] = field(default_factory=Counter)

    def bad(self, path: Path, line: int, reason: str, detail: str) -> None:
        self.bad_lines += 1
        self.bad_reasons[reason] += 1
        if len(self.bad_examples) < MAX_BAD_LINES_SHOWN:
            self.bad_examples.append(f"  {path}:{line}: {reason}: {detail}")

    def render(self) -> str:
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(self.bad_reasons.items()))
        lines = [f"fact records read: {self.facts}, depeg tier changes read: "
                 f"{self.depeg_changes}",
                 f"bad lines: {self.bad_lines}" + (f" ({reasons})" if reasons else "")]
        lines += self.bad_examples
        if self.bad_lines > len(self.bad_examples):
            lines.append(f"  … and {self.bad_lines - len(self.bad_examples)} more")
        lines.append(f"vaults: {self.vaults}, rating records: {self.records}")
        lines.append("last tier per vault: " + ", ".join(
            f"{tier}={n}" for tier, n in sorted(self.tiers.items())))
        return "\n".join(lines)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with path.open("rb") as fh:
        for number, line in enumerate(fh, start=1):
            if line.strip():
                yield number, line


def read_inputs(fact_files: Iterable[Path], depeg_files: Iterable[Path],
                summary: VaultReplaySummary) -> list[Item]:
    """Every valid input, sorted by (event time, depeg first, reading order)."""
    items: list[Item] = []
    seq = 0
    for path in depeg_files:
        for number, line in _lines(path):
            try:
                change = decode_depeg_change(line.strip())
            except BadDepegEvent as exc:
                summary.bad(path, number, "bad_depeg_event", str(exc))
                continue
            seq += 1
            summary.depeg_changes += 1
            items.append((change.ts, DEPEG_FIRST, seq, change))
    for path in fact_files:
        for number, line in _lines(path):
            try:
                update = decode_facts(line.strip())
            except BadFacts as exc:
                summary.bad(path, number, exc.reason, exc.detail)
                continue
            seq += 1
            summary.facts += 1
            items.append((update.ts, FACTS_SECOND, seq, update))
    items.sort(key=lambda item: item[:3])
    return items


def run_vault_replay(items: Iterable[Item], config: VaultsConfig,
                     summary: VaultReplaySummary | None = None) -> list[VaultRating]:
    summary = summary or VaultReplaySummary()
    engine = VaultEngine(config)
    records: list[VaultRating] = []
    last_tier: dict[str, str] = {}
    for _, _, _, item in items:
        produced = engine.process(item) if isinstance(item, FactUpdate) else engine.on_depeg(item)
        for record in produced:
            last_tier[record.key] = record.tier
        records += produced
    summary.vaults = len(engine)
    summary.records = len(records)
    summary.tiers = Counter(last_tier.values())
    return records


def replay_files(fact_files: list[Path], depeg_files: list[Path], out: Path,
                 config: VaultsConfig, stream: TextIO = sys.stderr) -> VaultReplaySummary:
    summary = VaultReplaySummary()
    items = read_inputs(fact_files, depeg_files, summary)
    with Progress(len(items), "vaults replay", stream) as bar:
        def counted() -> Iterator[Item]:
            for n, item in enumerate(items, start=1):
                if n % 1000 == 0:
                    bar.update(n)
                yield item

        records = run_vault_replay(counted(), config, summary)
    # As ``depeg-monitor replay`` writes: a temporary file beside ``out``, then a rename,
    # so an interrupted replay never leaves half a file under the name asked for.
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    with partial.open("wb") as fh:
        for record in records:
            fh.write(encode_rating(record))
            fh.write(b"\n")
    partial.replace(out)
    return summary
