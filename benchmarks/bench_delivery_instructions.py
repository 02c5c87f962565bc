"""The PostgreSQL backend's instructions per delivery of the worker's cycle, under callgrind.

The backends' CPU time per delivery (``bench_delivery_server.py``) moves by ±15 % from one
drain to the next on a shared machine; a change to the cycle's SQL worth a few percent
cannot be read from it. Instructions can: this runs the same server-only drains against a
PostgreSQL server started under valgrind's callgrind, which writes one file per server
process when it exits, and reads the instruction count of the one backend that ran only
the worker's cycles (the connection the database object pins, taken before the set-up).
Two runs of the same code differ by well under 1 %.

Start a throw-away server under callgrind first (as a user other than root; the data
directory and the output directory are yours to choose), e.g.::

    initdb -D /tmp/pgcg/data -A trust -U postgres
    valgrind --tool=callgrind --callgrind-out-file=/tmp/pgcg/out/cg.%p \\
        postgres -D /tmp/pgcg/data -p 5499 -c listen_addresses=127.0.0.1 \\
        -c unix_socket_directories=/tmp/pgcg -c autovacuum=off &

then::

    PYTHONPATH=. python benchmarks/bench_delivery_instructions.py \\
        --storage-url postgresql://postgres@127.0.0.1:5499/postgres \\
        --callgrind-dir /tmp/pgcg/out --against HEAD~1

``--against REV`` alternates each drain of this tree's cycle with one of the cycle of
that git revision (its ``delivery_cycle_pg.py`` and ``delivery_batches.py``, loaded from
git beside this tree's modules). A drain of 10,000 deliveries takes ~1.5 minutes under
callgrind. The first cycles of a connection run custom plans (planning included in the
count), so short drains read higher than a long-running worker's cycles cost.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_delivery_server import drain
from delivery_worker import drop_created, fresh_url

import monitor.webhooks.dispatcher as dispatcher_module
from monitor.storage.delivery_batches import run_cycle

REPO = Path(__file__).resolve().parent.parent


def cycle_of(revision: str) -> Callable[..., Any]:
    """``run_cycle`` as it is at ``revision``: its two modules loaded from git under
    other names, the rest of the package this tree's."""
    loaded: dict[str, types.ModuleType] = {}
    for name, path in (("delivery_cycle_pg", "monitor/storage/delivery_cycle_pg.py"),
                       ("delivery_batches", "monitor/storage/delivery_batches.py")):
        text = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:{path}"],
                              capture_output=True, text=True, check=True).stdout
        text = text.replace("from .delivery_cycle_pg import",
                            "from ._then_delivery_cycle_pg import")
        module = types.ModuleType(f"monitor.storage._then_{name}")
        module.__package__ = "monitor.storage"
        sys.modules[module.__name__] = module
        exec(compile(text, f"{revision}:{path}", "exec"), module.__dict__)
        loaded[name] = module
    run_cycle: Callable[..., Any] = loaded["delivery_batches"].run_cycle
    return run_cycle


def instructions(directory: Path, pid: int, wait: float = 120.0) -> int:
    """The total instruction count callgrind wrote for process ``pid`` (when it exits)."""
    path = directory / f"cg.{pid}"
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("totals:"):
                    return int(line.split()[1])
        time.sleep(0.1)
    raise SystemExit(f"no callgrind totals for process {pid} in {directory} (is the server"
                     " running under callgrind with --callgrind-out-file=DIR/cg.%p?)")


async def main(args: argparse.Namespace) -> None:
    # The dispatcher calls the run_cycle its module imported: swapped there, per drain.
    sides: dict[str, Callable[..., Any]] = {"this tree": run_cycle}
    if args.against:
        sides[args.against] = cycle_of(args.against)
    per_delivery: dict[str, list[float]] = {name: [] for name in sides}
    errors = 0
    try:
        for n in range(args.rounds):
            order = list(sides) if n % 2 == 0 else list(reversed(sides))
            for name in order:
                vars(dispatcher_module)["run_cycle"] = sides[name]
                url = await fresh_url(args.storage_url, Path("."))
                try:
                    d = await drain(url, 100, args.deliveries // 100, args.endpoints)
                except SystemExit as exc:  # deliveries left undelivered
                    errors += 1
                    print(f"round {n + 1} {name}: {exc}", flush=True)
                    continue
                assert d.pinned_pid is not None
                count = instructions(args.callgrind_dir, d.pinned_pid) / d.deliveries
                per_delivery[name].append(count)
                print(f"round {n + 1} {name}: {count:10,.0f} instructions per delivery"
                      f" ({d.deliveries / d.cycles:.1f} deliveries per cycle)", flush=True)
    finally:
        await drop_created()
    for name, counts in per_delivery.items():
        if counts:
            print(f"{name}: median {statistics.median(counts):,.0f} instructions per delivery"
                  f" (min {min(counts):,.0f}, max {max(counts):,.0f}, {len(counts)} drains)")
    if errors:
        raise SystemExit(f"{errors} drains failed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage-url", required=True,
                        help="a PostgreSQL server running under callgrind (see above)")
    parser.add_argument("--callgrind-dir", type=Path, required=True,
                        help="where that server's callgrind writes cg.<pid> files")
    parser.add_argument("--against", default="",
                        help="a git revision whose cycle alternates with this tree's")
    parser.add_argument("--deliveries", type=int, default=10000)
    parser.add_argument("--endpoints", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1)
    asyncio.run(main(parser.parse_args()))
