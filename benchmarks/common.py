"""What every benchmark shares: the machine line, round statistics, the result record.

Each script measures the project next to its *limit* (the bare thing it cannot beat:
a bare POST loop, a bare ``csv.reader`` pass, …) in the same process run, interleaved
over several rounds, and ends with one ``BENCH-RESULT {json}`` line per row of the
README's performance table; ``benchmarks/report.py`` turns those lines into the table.
A benchmark that saw any error or non-2xx answer exits non-zero (:func:`fail_on_errors`):
a fast wrong answer is not a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

RESULT_PREFIX = "BENCH-RESULT "


def cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo``; else what ``platform`` says, maybe
    nothing): two machines with the same cores and memory moved some ratios by more than
    their targets' margins (docs/performance.md), so the table names the processor too."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine() -> dict[str, Any]:
    """Cores, processor, memory and load: figures from a loaded machine are lower, and say
    so."""
    mem_kb = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_kb = int(line.split()[1])
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {"cores": os.cpu_count() or 0, "cpu": cpu_model(),
            "memory_gb": round(mem_kb / 1024 / 1024, 1),
            "load": [round(x, 2) for x in load], "python": platform.python_version()}


def machine_line() -> str:
    m = machine()
    cpu = f" ({m['cpu']})" if m["cpu"] else ""
    return (f"machine: {m['cores']} cores{cpu}, {m['memory_gb']} GB, load average "
            f"{' '.join(map(str, m['load']))}, python {m['python']}")


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def quantile(ordered: Sequence[float], q: float) -> float:
    """The value at fraction ``q`` of ``ordered`` (sorted): the nearest rank, no
    interpolation, so a tail figure is one that was measured."""
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def show(name: str, values: Sequence[float], unit: str) -> str:
    s = spread(values)
    return (f"{name:<34} min {s['min']:10.1f}  median {s['median']:10.1f}  "
            f"max {s['max']:10.1f} {unit}  ({len(values)} rounds)")


def emit(row: str, *, unit: str, limit_name: str, limit: Sequence[float] | None,
         project: Sequence[float], ratio: float | None, target: str, met: bool,
         note: str = "") -> None:
    """Print the machine-readable line report.py reads (one per table row)."""
    record = {"row": row, "unit": unit, "limit_name": limit_name,
              "limit": spread(limit) if limit else None, "project": spread(project),
              "ratio": ratio, "target": target, "met": met, "note": note,
              "machine": machine()}
    print(RESULT_PREFIX + json.dumps(record), flush=True)


def fail_on_errors(errors: int, what: str) -> None:
    if errors:
        print(f"FAILED: {errors} errors/non-2xx during {what}", file=sys.stderr, flush=True)
        sys.exit(1)


@asynccontextmanager
async def scratch_postgres(server_url: str) -> AsyncIterator[str]:
    """A fresh PostgreSQL database on the server ``server_url`` names, dropped afterwards
    (also when the benchmark fails), so runs never see each other's rows."""
    import asyncpg  # only the PostgreSQL cases need it

    name = f"depeg_bench_{os.urandom(5).hex()}"
    admin = await asyncpg.connect(server_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    try:
        yield server_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        admin = await asyncpg.connect(server_url)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def add_backend_args(parser: argparse.ArgumentParser) -> None:
    """``--db`` (which stores to measure) and ``--pg-url`` (the PostgreSQL server that
    gets a throw-away database)."""
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")


async def on_each_backend(args: argparse.Namespace, tmp: str | Path,
                          run: Callable[[str, str], Awaitable[None]]) -> None:
    """``run(kind, url)`` on the stores ``--db`` chose: a SQLite file in ``tmp``, then a
    scratch PostgreSQL database (:func:`scratch_postgres`)."""
    if args.db in ("sqlite", "both"):
        await run("sqlite", f"sqlite:///{tmp}/bench.db")
    if args.db in ("postgresql", "both"):
        async with scratch_postgres(args.pg_url) as url:
            await run("postgresql", url)


def compiled_env(tmp: str) -> dict[str, str] | None:
    """An environment running the optional mypyc build (monitor/compiled.py): the one
    ``DEPEG_MONITOR_COMPILED`` names, else one built now into ``tmp`` with ``depeg-monitor
    compile --out`` (~15-45 s). None when it cannot be built here (no mypy, compiler or
    headers): the row is then left out, said so."""
    from monitor.compiled import ENV, OFF

    pure = {**os.environ, ENV: OFF}
    folder = os.environ.get(ENV, "").strip()
    if not folder or folder.lower() == OFF:
        folder = os.path.join(tmp, "compiled")
        built = subprocess.run([sys.executable, "-m", "monitor", "--log-level", "warning",
                                "compile", "--out", folder], env=pure, capture_output=True,
                               text=True, check=False)
        if built.returncode != 0:
            print(f"no mypyc build row: the build failed ({built.stderr.strip()[-300:]})")
            return None
    env = {**pure, ENV: folder}
    # A build the loader refuses (other sources, other interpreter) would time the
    # sources under the build's name: check the engine really loads compiled.
    probe = subprocess.run([sys.executable, "-c", "import monitor.engine.engine as e;"
                            "print(e.__file__)"], env=env, capture_output=True, text=True,
                           check=False)
    if not probe.stdout.strip().endswith(".so"):
        print(f"no mypyc build row: {folder} is not used ({probe.stderr.strip()[-300:]})")
        return None
    return env


PROJECT_PACKAGES = ("monitor", "producers", "consumers")


def installed_env(tmp: str, base: dict[str, str] | None = None,
                  packages: Sequence[str] = PROJECT_PACKAGES) -> dict[str, str]:
    """``base`` (default: this environment) as an installed package would see it: the
    project's modules byte-compiled once into ``tmp/pycache`` (``PYTHONPYCACHEPREFIX``),
    ``PYTHONDONTWRITEBYTECODE`` dropped. With that variable set (as on the shared machine)
    every child recompiled every project module at each start (~34 ms) while the stdlib
    it is compared with loads the .pyc files written at install. Nothing is written into
    the checkout: the prefix takes every .pyc read or written, stdlib's included, so a
    child's first run writes the stdlib modules it imports there (:func:`warm_bytecode`)."""
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
    root = Path(__file__).resolve().parents[1]
    folders = [str(root / name) for name in packages if (root / name).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], env=env,
                   capture_output=True, check=False)
    return env


def warm_bytecode(argv: Sequence[str], env: dict[str, str]) -> tuple[int, int]:
    """Run ``argv`` (a Python script or ``python …``) once under ``python -v`` so the
    prefix holds every module it imports, then once more: how many modules that second
    run loaded from cached bytecode and how many it compiled from source (0 when the
    timed runs start from bytecode, as an installed package's do)."""
    command = list(argv) if argv[0] == sys.executable else [sys.executable, *argv]
    command.insert(1, "-v")
    cached = compiled = 0
    for _ in range(2):
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              check=False)
        lines = [line for line in done.stderr.splitlines()
                 if line.startswith("# code object from ")]
        # ``-v`` quotes the .pyc path it loaded, and names the .py bare when it compiled.
        cached = sum(line.endswith(".pyc'") for line in lines)
        compiled = len(lines) - cached
    return cached, compiled


def bytecode_line(which: str, cached: int, compiled: int) -> str:
    used = "used" if cached and not compiled else "NOT fully used"
    return (f"{which}: installed bytecode {used} ({cached} modules from .pyc, {compiled} "
            f"compiled at start; PYTHONPYCACHEPREFIX in a temporary directory, "
            f"PYTHONDONTWRITEBYTECODE unset)")


class GcTimer:
    """Wall time spent in Python's cyclic garbage collector while started (``gc.callbacks``),
    per generation: the GC's share of a round without a profiler (docs/performance.md)."""

    def __init__(self) -> None:
        import time

        self._clock = time.perf_counter
        self._began = 0.0
        self.seconds = [0.0, 0.0, 0.0]
        self.counts = [0, 0, 0]

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = self._clock()
        else:
            generation = info["generation"]
            self.seconds[generation] += self._clock() - self._began
            self.counts[generation] += 1

    def __enter__(self) -> GcTimer:
        import gc

        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        import gc

        gc.callbacks.remove(self._callback)

    def line(self, wall: float) -> str:
        total = sum(self.seconds)
        return (f"GC {total * 1000:.0f} ms = {100 * total / wall:.1f} % of the {wall:.2f} s "
                f"timed "
                f"(collections gen0/1/2 {self.counts[0]}/{self.counts[1]}/{self.counts[2]}, "
                f"gen2 {self.seconds[2] * 1000:.0f} ms)")
