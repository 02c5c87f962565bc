"""Two per-send costs of the delivery worker's loop: the ``delivered_at`` stamp and the
timeout guard's look-up of its task.

    python benchmarks/bench_send_stamps.py [--rounds 5] [--calls 200000]

The figures behind the thirty-sixth pass (docs/performance.md), each side timed inside
a running event loop, as the worker runs them, interleaved for ``--rounds``:

1. a stamp: ``format_ts(time.time())`` against ``SecondStamps.format(time.time())`` (the
   sender's, its second's text made once a second). Every stamp of both is compared: a
   text that differs is an error and fails the run;
2. a guard: ``SharedTimeout.guard()`` (it asks ``asyncio.current_task()``: Python code
   on CPython 3.11 around a ``get_running_loop()`` that calls ``getpid()``) against
   ``guard(task)`` with the task handed in, each entered and left while an older send's
   guard is open (the shared timer armed, as in a busy worker).

Printed, not asserted (ns per call, this thread's CPU); the README's delivery rows come
from ``bench_delivery.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from common import fail_on_errors, machine_line, show

from monitor.timefmt import SecondStamps, format_ts
from monitor.webhooks.deadlines import SharedTimeout


def stamps(calls: int, cached: bool) -> tuple[float, int]:
    """(ns of CPU per stamp, texts that differ from format_ts's)."""
    stamper = SecondStamps()
    stamp = stamper.format if cached else format_ts
    started = time.thread_time()
    for _ in range(calls):
        stamp(time.time())
    elapsed = time.thread_time() - started
    # The same kind of values again, the stamps side by side with format_ts.
    errors = 0
    if cached:
        for _ in range(min(calls, 20_000)):
            now = time.time()
            errors += stamp(now) != format_ts(now)
    return elapsed / calls * 1e9, errors


async def guards(calls: int, given: bool) -> float:
    """ns of CPU per guard made, entered and left, while another send's guard stays open
    (as in a busy worker: the shared timer stays armed for the oldest send)."""
    shared = SharedTimeout(60.0)
    task = asyncio.current_task()
    release = asyncio.Event()
    entered = asyncio.Event()

    async def older_send() -> None:
        async with shared.guard():
            entered.set()
            await release.wait()

    other = asyncio.create_task(older_send())
    await entered.wait()
    started = time.thread_time()
    if given:
        for _ in range(calls):
            async with shared.guard(task):
                pass
    else:
        for _ in range(calls):
            async with shared.guard():
                pass
    elapsed = time.thread_time() - started
    release.set()
    await other
    return elapsed / calls * 1e9


async def main(rounds: int, calls: int) -> None:
    print(machine_line())
    figures: dict[str, list[float]] = {"format_ts": [], "SecondStamps": [],
                                       "guard()": [], "guard(task)": []}
    errors = 0
    for n in range(rounds):
        order = [False, True] if n % 2 == 0 else [True, False]
        for cached in order:
            ns, bad = stamps(calls, cached)
            errors += bad
            figures["SecondStamps" if cached else "format_ts"].append(ns)
        for given in order:
            figures["guard(task)" if given else "guard()"].append(await guards(calls, given))
        print(f"  round {n + 1}: " + ", ".join(f"{k} {v[-1]:.0f} ns" for k, v in
                                                figures.items()), flush=True)
    for name, values in figures.items():
        print(show(name, values, "ns CPU a call"))
    fail_on_errors(errors, "the stamps' comparison with format_ts")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (>= 3)")
    parser.add_argument("--calls", type=int, default=200_000, help="calls per side and round")
    args = parser.parse_args()
    asyncio.run(main(max(args.rounds, 3), args.calls))
