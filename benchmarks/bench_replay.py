"""Replay throughput, memory per token, and replay time against a bare ``csv.reader`` pass.

    python benchmarks/bench_replay.py [FILE]
    python benchmarks/bench_replay.py --table [--rounds 3] [--no-compiled]   # the README rows
        [--shapes]         # then the same ticks in other shapes (printed, not emitted)
        [--instructions]   # also each side once under callgrind: instruction counts, a
                           # ratio that does not move with the machine's load (valgrind)
        [--baseline SRC]   # also SRC's replay (another checkout, e.g. `git archive` of
                           # main), pure and its own mypyc build, in the same rotation

``--table`` times whole processes: a bare ``csv.reader`` pass, ``depeg-monitor replay``
(pure Python, the default install) and the same replay with the optional mypyc build
(monitor/compiled.py; built once into a temporary directory, or the one
``DEPEG_MONITOR_COMPILED`` names), in rotating order: two rows, one ratio each. Every
side runs as installed: the project's modules byte-compiled once into a temporary
``PYTHONPYCACHEPREFIX``, ``PYTHONDONTWRITEBYTECODE`` unset (one line per side says whether
the children loaded that bytecode); the checkout is never written.

Targets (issue 2): a 1-minute, one-month file replays in under 5x a bare CSV pass; under
20 KB of window state per token. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from monitor.config import ModelConfig
from monitor.engine import Engine
from monitor.replay import run_replay
from monitor.tickfiles import read_file
from monitor.ticks import make_tick


def _shared_ticks() -> Path:
    """``shared/data/ticks`` beside the checkout (``/work/main``) or beside its worktrees'
    folder (``/work/wt/NAME``): the nearest ancestor holding it."""
    here = Path(__file__).resolve()
    for parent in here.parents[1:]:
        if (parent / "shared/data/ticks").is_dir():
            return parent / "shared/data/ticks"
    return here.parents[2] / "shared/data/ticks"


DEFAULT = _shared_ticks() / "usdc_2023-03_binanceus_1m.csv"


def best_of(n: int, fn: object) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def bare_csv(path: Path) -> None:
    with path.open(newline="") as fh:
        for _ in csv.reader(fh):
            pass


def memory_per_token(tokens: int = 2000, ticks_per_token: int = 180) -> float:
    """Bytes of engine state per token after each token has seen three hours of ticks."""
    ticks = [
        make_tick(1_700_000_000 + i * 60, "eth", f"0x{n:040x}", "T", f"{1 - (i % 7) * 1e-4:.6f}",
                  "1", "5" if i % 10 == 0 else None)
        for i in range(ticks_per_token) for n in range(tokens)
    ]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    engine = Engine(ModelConfig())
    for t in ticks:
        engine.process(t)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return grown / tokens


TICKS = DEFAULT.parent
BARE = ("import csv, sys\nfor name in sys.argv[1:]:\n    with open(name, newline='') as fh:\n"
        "        for _ in csv.reader(fh):\n            pass\n")


def child_cpu(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, bool]:
    """CPU seconds (user + system) of one child process run to the end, and its success;
    CPU, not wall time, so the figure is the work done and not the machine's load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, check=False, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done.returncode == 0


def baseline_envs(src: str, tmp: str, pure: dict[str, str],
                  compiled: bool) -> dict[str, dict[str, str]]:
    """Environments running another checkout's ``monitor`` (``PYTHONPATH`` puts it before
    the installed one) in place of this one: pure, and with its own mypyc build."""
    from monitor.compiled import ENV

    # Its pure modules: no variable (an older loader reads "off" as a directory) and an
    # empty data directory (a newer one looks for a build there).
    env = {k: v for k, v in pure.items() if k not in (ENV, "DEPEG_STORAGE__DATA_DIR")}
    env.update(PYTHONPATH=src, XDG_DATA_HOME=os.path.join(tmp, "baseline-data"))
    envs = {"base": env}
    if compiled:
        folder = os.path.join(tmp, "compiled-baseline")
        built = subprocess.run([sys.executable, os.path.join(src, "benchmarks",
                                "build_compiled.py"), "--out", folder], env=env,
                               capture_output=True, text=True, check=False)
        probe = subprocess.run([sys.executable, "-c", "import monitor.engine.engine as e;"
                                "print(e.__file__)"], env={**env, ENV: folder}, cwd=src,
                               capture_output=True, text=True, check=False)
        if built.returncode == 0 and probe.stdout.strip().endswith(".so") \
                and probe.stdout.startswith(os.path.abspath(folder)):
            envs["base-mypyc"] = {**env, ENV: folder}
        else:
            print(f"no baseline mypyc row: {(built.stderr + probe.stderr).strip()[-300:]}")
    return envs


def instructions(argv: list[str], env: dict[str, str], tmp: str) -> int | None:
    """Instructions one run of ``argv`` executes (``valgrind --tool=callgrind``; its
    children, such as the console script's interpreter, are not followed: ``argv`` must
    be the process that does the work). None when valgrind is missing or the run fails."""
    out = os.path.join(tmp, "callgrind.out")
    try:
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                               *argv], env=env, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return None
    for line in done.stderr.splitlines():
        if "Collected :" in line and done.returncode == 0:
            return int(line.rsplit(":", 1)[1])
    return None


def instruction_rows(argv: dict[str, list[str]], envs: dict[str, dict[str, str]],
                     tmp: str) -> None:
    """Each side once under callgrind, and its ratio to the bare pass in instructions."""
    counts = {which: instructions(argv[which], envs[which], tmp) for which in envs}
    bare = counts.get("bare")
    if not bare:
        print("instructions: not counted (valgrind missing, or the bare pass failed)")
        return
    for which, count in counts.items():
        if count is None:
            print(f"instructions {which:<10} not counted (the run failed under valgrind)")
        else:
            print(f"instructions {which:<10} {count / 1e6:9,.0f} M  ({count / bare:.2f}x the "
                  "bare csv.reader pass)")


#: Other shapes of the same ticks (``--shapes``): how a feed's own files often differ
#: from the shared ones, each a path of the reader of its own (monitor/csvplain.py,
#: monitor/jsonlplain.py).
SHAPES = ("slippage", "producers", "epoch", "jsonl")


def shaped_files(files: list[str], shape: str, folder: str) -> list[str]:
    """``files`` rewritten into ``folder`` in ``shape``: ``slippage``, a slippage cell in
    every row (the same values every run); ``producers``, the eight columns the producers
    write (producers/csvout.py), an oracle price 1 bp above the price in every row;
    ``epoch``, the time as whole epoch seconds; ``jsonl``, JSON lines as on
    ``depeg.ticks`` (a dump of the topic). The same ticks otherwise."""
    import csv
    from datetime import UTC, datetime

    made = []
    for name in files:
        if shape == "jsonl":
            made.append(jsonl_copy(name, folder))
            continue
        with open(name, newline="", encoding="utf-8") as fh:
            header, *rows = list(csv.reader(fh))
        if shape == "producers":
            header = [*header, "oracle_price_usd"]
        out = os.path.join(folder, f"{shape}-{Path(name).name}")
        with open(out, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(header)
            for n, row in enumerate(rows):
                if shape == "slippage":
                    row[6] = f"{n * 7919 % 400 / 10:.1f}"
                elif shape == "producers":
                    row.append(f"{float(row[4]) * 1.0001:.8f}")
                elif shape == "epoch":
                    when = datetime.strptime(row[0], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
                    row[0] = str(int(when.timestamp()))
                writer.writerow(row)
        made.append(out)
    return made


def jsonl_copy(name: str, folder: str) -> str:
    """The ticks of the CSV file ``name`` as JSON lines in ``folder``, each line the wire
    JSON the producers publish (``encode_tick``)."""
    from monitor.tickfiles import BadRow, read_csv
    from monitor.ticks import encode_tick

    out = os.path.join(folder, f"jsonl-{Path(name).stem}.jsonl")
    with open(out, "wb") as fh:
        for row in read_csv(Path(name)):
            if isinstance(row, BadRow):
                raise SystemExit(f"FAILED: {name}:{row.line}: {row.reason}")
            fh.write(encode_tick(row) + b"\n")
    return out


def table_row(rounds: int, compiled: bool = True, baseline: str | None = None,
              count_instructions: bool = False, shape: str | None = None) -> None:
    """Whole processes over every shared real tick file: a bare ``csv.reader`` pass
    against ``depeg-monitor replay`` (the pure-Python default, and the optional mypyc
    build unless ``compiled`` is False), in rotating order, ``rounds`` times; with
    ``baseline`` (another checkout's root) its replay too, printed, not emitted. With
    ``shape`` (:data:`SHAPES`), over those files in that shape: printed, not emitted (the
    README's row is the shared files')."""
    from common import (
        bytecode_line,
        compiled_env,
        emit,
        fail_on_errors,
        installed_env,
        machine_line,
        show,
        warm_bytecode,
    )

    from monitor.compiled import ENV, OFF

    files = sorted(str(p) for p in TICKS.glob("*.csv"))
    if not files:
        print(f"FAILED: no tick files in {TICKS}", file=sys.stderr)
        sys.exit(1)
    ticks = sum(Path(f).read_bytes().count(b"\n") - 1 for f in files)
    cli = str(Path(sys.executable).with_name("depeg-monitor"))
    print(machine_line())
    print(f"{len(files)} files, {ticks:,} ticks" + (f", in the shape {shape!r}" if shape else "")
          + (" (the bare pass: csv.reader over the CSV files)" if shape == "jsonl" else ""))
    pure = {**os.environ, ENV: OFF}  # not a build in the data directory either
    cpu: dict[str, list[float]] = {"bare": [], "replay": [], "mypyc": [], "base": [],
                                   "base-mypyc": []}
    errors = 0
    bare_files = files  # the limit of the jsonl shape: the csv.reader pass of the CSV
    with tempfile.TemporaryDirectory() as tmp:
        if shape is not None:
            files = shaped_files(files, shape, tmp)
            if shape != "jsonl":
                bare_files = files
        envs = {"bare": pure, "replay": pure}
        build = compiled_env(tmp) if compiled else None
        if build is not None:
            envs["mypyc"] = build
        if baseline is not None:
            envs.update(baseline_envs(os.path.abspath(baseline), tmp, pure, compiled))
        out = os.path.join(tmp, "events.jsonl")
        replay = [cli, "--log-level", "warning", "replay", "--overwrite", "--out", out, *files]
        argv = {"bare": [sys.executable, "-c", BARE, *bare_files], "replay": replay,
                "mypyc": replay, "base": replay, "base-mypyc": replay}
        # Every side as installed: project .pyc files compiled once (common.installed_env).
        envs = {which: installed_env(tmp, env) for which, env in envs.items()}
        order = list(envs)
        for which in order:
            print(bytecode_line(which, *warm_bytecode(argv[which], envs[which])))
        for n in range(rounds):
            for which in order[n % len(order):] + order[:n % len(order)]:
                seconds, ok = child_cpu(argv[which], envs[which])
                errors += not ok
                cpu[which].append(seconds * 1000)
                print(f"  round {n + 1} {which:<10} {seconds * 1000:9.1f} ms CPU",
                      flush=True)
        if count_instructions:
            instruction_rows(argv, envs, tmp)
    bare = cpu["bare"]
    print(show("bare csv.reader pass (process)", bare, "ms CPU"))
    fail_on_errors(errors, "the replay runs")
    rows = [("replay", "", "depeg-monitor replay")]
    if cpu["mypyc"]:
        rows.append(("mypyc", " (mypyc build)", "depeg-monitor replay, mypyc build"))
    for which, name in (("base", "baseline replay"), ("base-mypyc", "baseline, mypyc build")):
        if cpu[which]:
            ratio = statistics.median(cpu[which]) / statistics.median(bare)
            print(show(name, cpu[which], "ms CPU"))
            print(f"{name} / bare csv.reader (CPU, medians): {ratio:.1f}x")
    for which, label, name in rows:
        project = cpu[which]
        print(show(name, project, "ms CPU"))
        ratio = statistics.median(project) / statistics.median(bare)
        print(f"{name} / bare csv.reader (CPU, medians): {ratio:.1f}x  (target <= 5x, then 3x)")
        if shape is not None:
            continue
        emit(f"replay, {len(files)} real files, {ticks:,} ticks, whole process (CPU){label}",
             unit="ms", limit_name="bare `csv.reader` pass (process)", limit=bare,
             project=project, ratio=ratio, target="<= 5x (then 3x)", met=ratio <= 5,
             note=f"{ticks / (statistics.median(project) / 1000):,.0f} ticks per CPU-second")


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Replay throughput and memory per token on one file, or (--table) the "
                    "README rows: whole-process replay against a bare csv.reader pass.")
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT,
                        help=f"tick file for the single-file figures (default {DEFAULT.name})")
    parser.add_argument("--table", action="store_true",
                        help="the README rows over the shared real files, in rotating rounds")
    parser.add_argument("--rounds", type=int, default=3, help="--table rounds (default 3)")
    parser.add_argument("--no-compiled", action="store_true",
                        help="--table without the mypyc build's row")
    parser.add_argument("--instructions", action="store_true",
                        help="--table: also each side once under callgrind (instruction counts)")
    parser.add_argument("--baseline", metavar="SRC",
                        help="--table: also SRC's replay (another checkout), pure and mypyc")
    parser.add_argument("--shapes", action="store_true",
                        help="--table: then the same ticks in other shapes (a slippage cell "
                             "in every row, the producers' eight columns, epoch times, "
                             "JSON lines against the CSV files' bare pass), printed, not "
                             "emitted")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.table:
        table_row(args.rounds, compiled=not args.no_compiled, baseline=args.baseline,
                  count_instructions=args.instructions)
        for shape in SHAPES if args.shapes else ():
            table_row(args.rounds, compiled=not args.no_compiled, baseline=args.baseline,
                      count_instructions=args.instructions, shape=shape)
        return
    path = args.file
    if not path.exists():
        print(f"skip: {path} not found (real data lives in ../shared/data)")
        return
    rows = sum(1 for _ in path.open()) - 1
    t_csv = best_of(5, lambda: bare_csv(path))
    t_parse = best_of(3, lambda: list(read_file(path)))
    parsed = list(read_file(path))
    t_engine = best_of(3, lambda: run_replay(parsed, ModelConfig(), snapshots=False))
    t_snaps = best_of(3, lambda: run_replay(parsed, ModelConfig()))
    t_replay = best_of(3, lambda: run_replay(read_file(path), ModelConfig(), snapshots=False))
    print(f"file: {path.name} ({rows} ticks)")
    print(f"bare csv.reader pass:      {t_csv * 1000:8.1f} ms")
    print(f"parse + validate ticks:    {t_parse * 1000:8.1f} ms")
    print(f"engine only (parsed):      {t_engine * 1000:8.1f} ms  ({rows / t_engine:,.0f} ticks/s)")
    print(f"engine + rating snapshots: {t_snaps * 1000:8.1f} ms  ({rows / t_snaps:,.0f} ticks/s)")
    print(f"replay end to end:         {t_replay * 1000:8.1f} ms  ({rows / t_replay:,.0f} ticks/s)")
    print(f"replay / bare csv ratio:   {t_replay / t_csv:8.2f}x  (target < 5x)")
    print(f"engine state per token:    {memory_per_token() / 1024:8.2f} KB  (target < 20 KB)")


if __name__ == "__main__":
    main()
