"""Kept for scripts and older notes: ``depeg-monitor compile`` builds the mypyc modules.

    python benchmarks/build_compiled.py [--out DIR]   # = depeg-monitor compile [--out DIR]

The build lives in monitor/compiled_build.py (docs/compiled.md); this only runs the
command, with the same options. ``bench_replay.py --baseline`` runs another checkout's
copy of this script, which is why it stays.
"""

from __future__ import annotations

import sys

from monitor.cli import main

if __name__ == "__main__":
    sys.exit(main(["compile", *sys.argv[1:]]))
