"""The truth for fault tests: ``depeg-monitor replay`` of the same input, record by record.

Every record the daemon publishes (rating snapshots and tier changes) must be byte-identical
to the replay's record of the same kind, token and timestamp; every replay record the live
daemon can have made must have been published at least once.

"Can have made": replay flushes the lateness buffer at the end of its input, a live stream
never ends. The engine evaluates a refresh boundary ``B`` once a tick later than ``B`` is
applied, and the daemon has applied a token's ticks up to ``max_ts - lateness_seconds``. So
the daemon owes exactly the replay's records dated before the token's newest tick at or
below that horizon.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from monitor.config import Config
from monitor.records import RatingSnapshot, TierChangeEvent
from monitor.ticks import Tick
from monitor.timefmt import parse_ts

Identity = tuple[str, str, str]  # (kind, chain:token, timestamp)


class _Probe(msgspec.Struct):
    """Just enough of either record to identify it."""

    timestamp: str
    chain: str | None = None
    token_address: str | None = None
    data: dict[str, Any] | None = None


def identity(kind: str, value: bytes) -> Identity:
    probe = msgspec.json.decode(value, type=_Probe)
    if probe.data is not None:
        key = f"{probe.data['chain']}:{probe.data['token_address']}"
    else:
        key = f"{probe.chain}:{probe.token_address}"
    return kind, key, probe.timestamp


def replay(files: list[Path], out_dir: Path,
           env: dict[str, str] | None = None) -> dict[Identity, bytes]:
    """Run ``depeg-monitor replay`` (the CLI, a child process) on ``files``; ``env`` adds
    configuration (``DEPEG_*``) the daemon under test runs with too."""
    events, ratings = out_dir / "replay-events.jsonl", out_dir / "replay-ratings.jsonl"
    subprocess.run([sys.executable, "-m", "monitor", "replay", *map(str, files),
                    "--out", str(events), "--ratings", str(ratings)],
                   check=True, capture_output=True, env={**os.environ, **(env or {})})
    truth: dict[Identity, bytes] = {}
    for kind, path in (("tier_change", events), ("rating", ratings)):
        for line in path.read_bytes().splitlines():
            ident = identity(kind, line)
            assert ident not in truth, f"replay made two records for {ident}"
            truth[ident] = line
    return truth


def owed(truth: dict[Identity, bytes], ticks: list[Tick],
         config: Config | None = None) -> set[Identity]:
    """The replay records a daemon that consumed every tick must have published."""
    lateness = (config or Config()).model.lateness_seconds
    by_token: dict[str, list[float]] = defaultdict(list)
    for t in ticks:
        by_token[t.key].append(t.ts)
    applied_until: dict[str, float] = {}
    for key, stamps in by_token.items():
        horizon = max(stamps) - lateness
        applied_until[key] = max((ts for ts in stamps if ts <= horizon), default=float("-inf"))
    return {ident for ident in truth if parse_ts(ident[2]) < applied_until[ident[1]]}


@dataclass
class Verdict:
    lost: list[Identity] = field(default_factory=list)
    spurious: list[Identity] = field(default_factory=list)
    differing: list[Identity] = field(default_factory=list)
    duplicates: int = 0
    published: int = 0

    def assert_exact(self) -> None:
        assert not (self.lost or self.spurious or self.differing), (
            f"{len(self.lost)} lost (e.g. {self.lost[:3]}), {len(self.spurious)} spurious "
            f"(e.g. {self.spurious[:3]}), {len(self.differing)} differ from replay "
            f"(e.g. {self.differing[:3]}); {self.published} published, "
            f"{self.duplicates} byte-identical duplicates")


def judge(published: list[tuple[str, bytes]], truth: dict[Identity, bytes],
          must: set[Identity]) -> Verdict:
    verdict = Verdict(published=len(published))
    seen: set[Identity] = set()
    for kind, value in published:
        ident = identity(kind, value)
        expected = truth.get(ident)
        if expected is None:
            verdict.spurious.append(ident)
        elif expected != value:
            verdict.differing.append(ident)
        elif ident in seen:
            verdict.duplicates += 1
        seen.add(ident)
    verdict.lost = sorted(must - seen)
    return verdict


def decode_check(kind: str, value: bytes) -> None:
    """The record is a valid instance of its schema (not only bytes that match)."""
    msgspec.json.decode(value, type=TierChangeEvent if kind == "tier_change" else RatingSnapshot)
