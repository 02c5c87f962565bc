"""How much of a flaky receiver's traffic the delivery worker sends while probing it.

    python benchmarks/bench_probe.py [--sends 200000] [--seed 1] [--slots 4]

A receiver failing a share of its requests at random is probed after each failure
(behind every other endpoint, one send in flight, one more per success in a row:
monitor/webhooks/probe.py) until it has enough successes in a row. This drives
:class:`~monitor.webhooks.probe.Probes` itself with ``--sends`` outcomes drawn at each
failure rate, one after another (a real worker has several in flight, so a relapse
comes sooner than here), and prints the share of sends made while probed and the mean
number of sends it was allowed in flight (``--slots`` out of the probe): under the rule
as shipped, and the share under the rule before the relapses doubled what is needed
(two successes in a row every time, ``MAX_PROBE_SUCCESSES`` = ``PROBE_SUCCESSES``). No
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


def probed_share(rate: float, sends: int, seed: int, slots: int = 4) -> tuple[float, float]:
    """The share of ``sends`` made while the endpoint was probed, and the mean number of
    sends it was allowed in flight."""
    draws = random.Random(seed)
    probes = probe.Probes(slots)
    probed = 0
    allowed = 0
    for claim in range(sends):
        if "receiver" in probes.failing:
            probed += 1
            allowed += probes.slots["receiver"]
        else:
            allowed += slots
        if draws.random() < rate:
            probes.failed("receiver", claim)
        else:
            probes.succeeded("receiver")
    return probed / sends, allowed / sends


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sends", type=int, default=200_000, help="outcomes per rate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--slots", type=int, default=4,
                        help="per_endpoint_concurrency (default 4, the configuration's)")
    args = parser.parse_args()
    shipped = probe.MAX_PROBE_SUCCESSES
    print(f"sends made while probed, {args.sends:,} sends per failure rate, seed {args.seed},"
          f" {args.slots} slots")
    print(f"{'failure rate':>12}  {'probed':>8}  {'mean slots':>10}  {'probed, two in a row':>20}")
    for rate in RATES:
        now, allowed = probed_share(rate, args.sends, args.seed, args.slots)
        probe.MAX_PROBE_SUCCESSES = probe.PROBE_SUCCESSES  # no doubling: the rule before
        try:
            before, _ = probed_share(rate, args.sends, args.seed, args.slots)
        finally:
            probe.MAX_PROBE_SUCCESSES = shipped
        print(f"{rate:>12.2f}  {now:>8.1%}  {allowed:>10.2f}  {before:>20.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
