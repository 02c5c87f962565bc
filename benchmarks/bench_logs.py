"""What one structured log line costs, as the services write them.

    python benchmarks/bench_logs.py [--lines 3000] [--rounds 3] [--baseline SRC]

Each round runs a fresh process per log format (JSON, console) that configures logging
as the services do (``monitor.logs.configure_logging``, into a file) and writes
``--lines`` lines of a failed webhook attempt's fields (ids, status, error; one field in
ten carries a credential-shaped value, as an error text quoting a URL might); prints the
CPU µs per line, min/median/max over the rounds. ``--baseline SRC`` runs the same with
another checkout's ``monitor`` first on ``PYTHONPATH`` (``git archive REV | tar -x -C
SRC``), interleaved. Errors (counted, and the run fails on any): a line that is not one
JSON object in the JSON format, a line missing, the credential written unmasked, the
``monitor`` of another tree than the side's imported.
No table row: a line's cost is a share of the rows that log (docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import fail_on_errors, machine_line, show

REPO = Path(__file__).resolve().parent.parent

#: The child: configure logging into a file, write the lines, print CPU seconds and the
#: number of lines that are wrong (unparsable JSON, a credential left in).
_CHILD = r"""
import json, sys, time
import monitor.logs
from monitor.logs import configure_logging, get_logger
fmt, lines, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
secret = "whsec_" + "k3Y" * 12
with open(path, "w") as out:
    configure_logging("info", fmt, stream=out)
    log = get_logger("monitor.webhooks.attempts")
    log.warning("webhook.warm_up")
    started = time.process_time()
    for n in range(lines):
        error = f"refused by https://hooks.example/x?secret={secret}" if n % 10 == 0 \
            else "timeout after 10s"
        log.warning("webhook.attempt", delivery_id=f"0e0a9bcb-8327-583a-916f-{n:012d}",
                    subscription_id="88e6ef45-1bd9-4f95-b56d-10ed812caa54",
                    event_id="bbf66015-3bf0-4c82-9f7f-268aac863c02", attempt=1, manual=False,
                    outcome="failed", status_code=None, latency_ms=2001.4, error=error,
                    recorded=True)
    used = time.process_time() - started
text = open(path).read()
written = text.splitlines()[1:]
bad = abs(len(written) - lines) + sum(secret[6:] in line for line in written)
if fmt == "json":
    for line in written:
        try:
            bad += not isinstance(json.loads(line), dict)
        except ValueError:
            bad += 1
print(used, bad, monitor.logs.__file__)
"""


def run_child(fmt: str, lines: int, src: Path, tmp: str) -> tuple[float, int]:
    env = dict(os.environ, PYTHONPATH=str(src))
    # cwd: not the checkout, whose modules ``-c`` would import before PYTHONPATH's.
    done = subprocess.run([sys.executable, "-c", _CHILD, fmt, str(lines),
                           str(Path(tmp) / f"{fmt}.log")], capture_output=True, text=True,
                          env=env, cwd=tmp, check=False)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return 0.0, lines
    used, bad, module = done.stdout.split()
    if not Path(module).resolve().is_relative_to(src):
        print(f"  {src}: monitor.logs came from {module}", file=sys.stderr)
        return 0.0, lines
    return float(used) / lines * 1e6, int(bad)


def main(args: argparse.Namespace) -> None:
    print(machine_line())
    sides = [("this checkout", REPO)]
    if args.baseline:
        sides.insert(0, ("baseline", Path(args.baseline).resolve()))
    figures: dict[tuple[str, str], list[float]] = {}
    errors = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            for name, src in sides if n % 2 == 0 else sides[::-1]:
                for fmt in ("json", "console"):
                    per_line, bad = run_child(fmt, args.lines, src, tmp)
                    errors += bad
                    figures.setdefault((name, fmt), []).append(per_line)
                    print(f"  round {n + 1} {name:<13} {fmt:<7} {per_line:7.1f} µs a line"
                          f"  errors {bad}", flush=True)
    for (name, fmt), values in figures.items():
        print(show(f"{name}, {fmt}", values, "µs CPU a line"))
    if args.baseline:
        for fmt in ("json", "console"):
            ratio = (statistics.median(figures[("this checkout", fmt)])
                     / statistics.median(figures[("baseline", fmt)]))
            print(f"{fmt}: this checkout / baseline (medians) {ratio:.2f}")
    fail_on_errors(errors, "the log lines")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=3000, help="lines per process")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--baseline", help="another checkout's source tree to compare")
    main(parser.parse_args())
