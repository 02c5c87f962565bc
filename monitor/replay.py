"""``depeg-monitor replay``: tick files through the engine, transitions out, byte for byte.

The same :class:`~monitor.engine.Engine` the daemon runs; event time throughout, so a
month of one-minute data replays in well under a second per token-month and two runs
give identical files.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .commands import Command
from .config import Config, ModelConfig
from .paths import data_dir
from .records import RatingSnapshot, TierChangeEvent, encode
from .tickfiles import BadRow, Row, read_file_batches
from .tickmerge import merge_batches
from .ticks import BadTick
from .timefmt import parse_ts
from .timesanity import check_not_future, future_limit

if TYPE_CHECKING:  # the engine and the registry: imported by a replay, not by replay --help
    from .engine import Output
    from .spread.feed import SpreadFeed

MAX_BAD_ROWS_SHOWN = 20


@dataclass
class ReplaySummary:
    ticks: int = 0
    bad_rows: int = 0
    bad_reasons: Counter[str] = field(default_factory=Counter)
    bad_examples: list[BadRow] = field(default_factory=list)
    tokens: int = 0
    late: int = 0
    duplicates: int = 0
    no_peg: int = 0
    snapshots: int = 0
    transitions: Counter[str] = field(default_factory=Counter)
    spread_observations: int = 0
    spread_input_dropped: int = 0
    #: Where the outputs went ("" when not written).
    transitions_path: str = ""
    ratings_path: str = ""

    def render(self) -> str:
        lines = [
            f"ticks read: {self.ticks}",
            f"bad rows: {self.bad_rows}"
            + (f" ({', '.join(f'{k}={v}' for k, v in sorted(self.bad_reasons.items()))})"
               if self.bad_rows else ""),
        ]
        lines += [f"  {b.path}:{b.line}: {b.reason}: {b.detail}" for b in self.bad_examples]
        if self.bad_rows > len(self.bad_examples):
            lines.append(f"  … and {self.bad_rows - len(self.bad_examples)} more")
        lines += [
            f"late ticks dropped: {self.late}, duplicates dropped: {self.duplicates}, "
            f"prices without a peg: {self.no_peg}",
            f"tokens: {self.tokens}, transitions: {sum(self.transitions.values())}",
        ]
        lines += [f"  {key}: {n}" for key, n in sorted(self.transitions.items())]
        if self.spread_observations or self.spread_input_dropped:
            lines.append(f"cross-chain spread observations: {self.spread_observations} "
                         f"(recomputed; {self.spread_input_dropped} in the input ignored)")
        if self.transitions_path:
            lines.append(f"transitions written to {self.transitions_path}")
        lines.append(f"rating snapshots: {self.snapshots} written to {self.ratings_path}"
                     if self.ratings_path else
                     "rating snapshots: not written (pass --ratings [FILE])")
        return "\n".join(lines)


def _sort_key(item: tuple[int, Output]) -> tuple[float, str, int]:
    seq, out = item
    key = f"{out.data.chain}:{out.data.token_address}" if isinstance(out, TierChangeEvent) \
        else f"{out.chain}:{out.token_address}"
    return parse_ts(out.timestamp), key, seq


def run_replay(rows: Iterable[Row], model: ModelConfig,
               summary: ReplaySummary | None = None, *,
               snapshots: bool = True, now: float | None = None,
               config: Config | None = None,
               ) -> tuple[list[TierChangeEvent], list[RatingSnapshot], ReplaySummary]:
    """Replay rows through a fresh engine; outputs in event-time order (then key, then
    the order the engine made them). Ticks dated more than
    ``model.future_tolerance_seconds`` after ``now`` (default: the wall clock) are
    counted as bad rows ``future_ts``, as the daemon dead-letters them. With ``config``,
    its registry's multi-chain assets also go through the cross-chain spread stage,
    exactly as the daemon's do."""
    summary = summary or ReplaySummary()
    config = config if config is not None else Config(model=model)
    feed: SpreadFeed | None = None
    if config.spread.enabled and config.registry.path:
        from .spread.feed import SpreadFeed

        feed = SpreadFeed(config, snapshots=snapshots)
        engine = feed.engine
    else:
        # No registry (or spread off): no asset has chains to compare, so the feed would
        # be the bare engine (monitor/spread/feed.py, ``assets_for``); its stage and the
        # registry are then not even imported.
        from .engine import Engine

        engine = Engine(config.model, snapshots=snapshots, keep_tags=False)  # no records
    # Without a spread stage the feed hands every tick to the engine: call it directly.
    plain = feed is None or feed.stage is None
    produced: list[tuple[int, Output]] = []
    # The outputs of one tick: the engine appends to this list (``Engine.take``), no
    # list made per tick.
    outs: list[Output] = []
    take = engine.take
    seq = 0
    wall = time.time() if now is None else now
    tolerance = model.future_tolerance_seconds
    wall_limit = future_limit(None, wall, tolerance)
    # Each token's newest accepted tick time: the current run's in ``top`` (-inf before
    # any: ``future_limit`` takes ``max`` with the wall clock, as for None), the others'
    # in ``newest``, written back when the run ends.
    newest: dict[str, float] = {}
    top = -math.inf
    ticks = 0
    # The previous tick's chain and token objects and its key: a file's reader hands out
    # the same two strings for every row of a token, so a run of one token's rows builds
    # (and hashes) its key once.
    last_chain = last_token = key = ""
    for row in rows:
        if isinstance(row, BadRow):
            summary.bad_rows += 1
            summary.bad_reasons[row.reason] += 1
            if len(summary.bad_examples) < MAX_BAD_ROWS_SHOWN:
                summary.bad_examples.append(row)
            continue
        chain, token = row.chain, row.token
        if chain is not last_chain or token is not last_token:
            if key:
                newest[key] = top
            key = f"{chain}:{token}"  # Tick.key
            last_chain, last_token = chain, token
            top = newest.get(key, -math.inf)
        ts = row.ts
        # The bound is never below wall + tolerance: only a tick past that is checked.
        if ts > wall_limit:
            try:  # the same bound the daemon applies (monitor/timesanity.py)
                check_not_future(row, top, wall, tolerance)
            except BadTick as exc:
                summary.bad_rows += 1
                summary.bad_reasons[exc.reason] += 1
                continue
        if ts > top:
            top = ts
        ticks += 1
        if plain or feed is None:
            take(row, key, None, outs)  # its key, built above: none built per tick
        else:
            outs += feed.process(row)
        if outs:
            for out in outs:
                seq += 1
                produced.append((seq, out))
            outs.clear()
    summary.ticks += ticks
    for out in feed.flush() if feed is not None else engine.flush():
        seq += 1
        produced.append((seq, out))
    produced.sort(key=_sort_key)
    events = [o for _, o in produced if isinstance(o, TierChangeEvent)]
    ratings = [o for _, o in produced if isinstance(o, RatingSnapshot)]
    summary.tokens = len(list(engine.keys()))
    summary.late = engine.stats.late
    summary.duplicates = engine.stats.duplicates
    summary.no_peg = engine.stats.no_peg
    summary.snapshots = len(ratings)
    if feed is not None and feed.stage is not None:
        summary.spread_observations = feed.stage.stats.published
        summary.spread_input_dropped = feed.input_spread_dropped
    for e in events:
        summary.transitions[f"{e.data.chain}:{e.data.token_address} ({e.data.symbol})"] += 1
    return events, ratings, summary


def _with_progress(paths: list[Path], rows: Iterator[Row], stream: TextIO) -> Iterator[Row]:
    """``rows``, drawing a progress bar on ``stream`` when it is a terminal (else the rows
    themselves: no generator step per row for a bar nobody sees)."""
    return _counted(paths, rows, stream) if stream.isatty() else rows


def _counted(paths: list[Path], rows: Iterator[Row], stream: TextIO) -> Iterator[Row]:
    from .progress import Progress  # only for a terminal: not imported by a piped replay

    total_bytes = sum(p.stat().st_size for p in paths)
    # Rows are about as long as the first file's first lines; good enough for a bar.
    with paths[0].open("rb") as fh:
        sample = fh.read(65536)
    per_row = max(1, len(sample) // max(1, sample.count(b"\n")))
    with Progress(total_bytes // per_row, "replay", stream) as bar:
        for n, row in enumerate(rows, start=1):
            if n % 1000 == 0:
                bar.update(n)
            yield row


def write_jsonl(path: Path, records: Iterable[TierChangeEvent | RatingSnapshot]) -> int:
    """Write to a temporary file beside ``path``, then rename: an interrupted replay never
    leaves half a file under the name asked for. Returns the records written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    count = 0
    with tmp.open("wb") as fh:
        for record in records:
            fh.write(encode(record))
            fh.write(b"\n")
            count += 1
    tmp.replace(path)
    return count


#: ``--ratings`` given without a file name.
DEFAULT_NAME = "-"


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=Path, metavar="FILE",
                   help="canonical tick CSV (ts,chain,token,symbol,price_usd,peg_usd,"
                        "slippage_bps) or JSON-lines tick files; several are merged by time")
    p.add_argument("--out", type=Path,
                   help="write DEPEG_TIER_CHANGE event objects here, one per line (default: "
                        "replays/<first file>.transitions.jsonl in the data directory)")
    p.add_argument("--ratings", type=Path, nargs="?", const=Path(DEFAULT_NAME),
                   help="also write every rating snapshot here, one per line (no FILE: "
                        "replays/<first file>.ratings.jsonl in the data directory)")
    p.add_argument("--report", type=Path, metavar="FILE.html|FILE.md",
                   help="also write a model report: per token, price, rating and tier over "
                        "time with the transitions marked (HTML with embedded plots, or "
                        "Markdown with PNG plots beside it); needs the `report` extra")
    p.add_argument("--overwrite", action="store_true",
                   help="replace output files that already exist (default: refuse)")


def output_paths(args: argparse.Namespace, config: Config) -> tuple[Path, Path | None]:
    """``--out`` and ``--ratings`` with their defaults in the data directory."""
    folder = data_dir(config) / "replays"
    stem = args.files[0].name.split(".")[0] or "replay"
    out = args.out or folder / f"{stem}.transitions.jsonl"
    ratings = args.ratings
    if ratings is not None and str(ratings) == DEFAULT_NAME:
        ratings = folder / f"{stem}.ratings.jsonl"
    return out, ratings


def clash(out: Path, ratings: Path | None, inputs: list[Path], overwrite: bool) -> str | None:
    """Why these outputs must not be written, or None."""
    outputs = [p for p in (out, ratings) if p is not None]
    resolved = [p.resolve() for p in outputs]
    if len(set(resolved)) < len(resolved):
        return f"--out and --ratings are the same file ({out})"
    for path, real in zip(outputs, resolved, strict=True):
        if any(real == f.resolve() for f in inputs):
            return f"{path} is one of the input files; it would be overwritten"
        if path.exists() and not overwrite:
            return f"{path} already exists; pass --overwrite to replace it, or another name"
    return None


def _run(args: argparse.Namespace, config: Config) -> int:
    missing = [str(p) for p in args.files if not p.is_file()]
    if missing:
        print(f"replay: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    out, ratings_path = output_paths(args, config)
    problem = clash(out, ratings_path, args.files, args.overwrite)
    if problem is None and args.report is not None:
        problem = clash(args.report, None, [*args.files, out], args.overwrite)
    if problem is not None:
        print(f"replay: {problem}", file=sys.stderr)
        return 2
    if args.report:
        from .report import ReportError, check_report_path  # no matplotlib import yet

        try:
            check_report_path(args.report)
        except ReportError as exc:
            print(f"replay: {exc}", file=sys.stderr)
            return 2
    # Only a registry file can be unreadable (no file: no registry module imported).
    registry_errors: tuple[type[Exception], ...] = ()
    if config.registry.path:
        from .registry import RegistryError

        registry_errors = (RegistryError,)
    # Lists of rows from the files and their merge (no generator step per row), flattened
    # in C.
    rows: Iterator[Row] = chain.from_iterable(
        merge_batches(read_file_batches(p) for p in args.files))
    rows = _with_progress(args.files, rows, sys.stderr)
    try:
        events, snapshots, summary = run_replay(
            rows, config.model,
            snapshots=ratings_path is not None or args.report is not None, config=config)
    except registry_errors as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    write_jsonl(out, events)
    summary.transitions_path = str(out)
    if ratings_path is not None:
        write_jsonl(ratings_path, snapshots)
        summary.ratings_path = str(ratings_path)
    if args.report:
        from .report import write_report  # matplotlib: loaded only when asked for

        write_report(args.report, snapshots, events, config.model)
        print(f"report: {args.report}", file=sys.stderr)
    print(summary.render(), file=sys.stderr)
    return 0


command = Command(
    name="replay",
    help="run tick files through the engine and write the tier changes it would have sent",
    description=(
        "Reads canonical CSV or JSON-lines tick files (tokens may be mixed), runs the same "
        "engine as the daemon in event time, and writes one DEPEG_TIER_CHANGE event object "
        "per line to --out in event-time order (default: replays/ in the data directory, "
        "never the current directory unless asked). The output is byte-identical on every "
        "run; an existing file is not overwritten without --overwrite. Model settings come "
        "from the [model] section of --config; tokens that share an asset id in the "
        "registry also get cross-chain spread observations, computed as the spread stage "
        "computes them (docs/cross-chain-spread.md)."
    ),
    add_arguments=_add_arguments,
    run=_run,
)
