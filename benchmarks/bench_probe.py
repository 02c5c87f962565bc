"""How much of a flaky receiver's traffic the delivery worker sends one at a time.

    python benchmarks/bench_probe.py [--sends 200000] [--seed 1]

A receiver failing a share of its requests at random is probed (one send at a time,
behind every other endpoint: monitor/webhooks/probe.py) after each failure, until it
has enough successes in a row. This drives :class:`~monitor.webhooks.probe.Probes`
itself with ``--sends`` outcomes drawn at each failure rate, one after another (out of
the probe a real worker sends up to ``per_endpoint_concurrency`` at once, so a relapse
comes sooner than here), and prints the share of sends made while probed: under the
rule as shipped, and under the rule before the relapses doubled what is needed (two
successes in a row every time, ``MAX_PROBE_SUCCESSES`` = ``PROBE_SUCCESSES``). No
clock, no I/O: the figures are exact for the seed. Errors: none possible but a crash.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor.webhooks import probe

RATES = (0.01, 0.05, 0.1, 0.2, 1 / 3, 0.5)


def probed_share(rate: float, sends: int, seed: int) -> float:
    """The share of ``sends`` made while the endpoint was probed."""
    draws = random.Random(seed)
    probes = probe.Probes()
    probed = 0
    for claim in range(sends):
        if "receiver" in probes.failing:
            probed += 1
        if draws.random() < rate:
            probes.failed("receiver", claim)
        else:
            probes.succeeded("receiver")
    return probed / sends


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sends", type=int, default=200_000, help="outcomes per rate")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    shipped = probe.MAX_PROBE_SUCCESSES
    print(f"sends made while probed, {args.sends:,} sends per failure rate, seed {args.seed}")
    print(f"{'failure rate':>12}  {'as shipped':>10}  {'two in a row':>12}")
    for rate in RATES:
        now = probed_share(rate, args.sends, args.seed)
        probe.MAX_PROBE_SUCCESSES = probe.PROBE_SUCCESSES  # no doubling: the rule before
        try:
            before = probed_share(rate, args.sends, args.seed)
        finally:
            probe.MAX_PROBE_SUCCESSES = shipped
        print(f"{rate:>12.2f}  {now:>10.1%}  {before:>12.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
