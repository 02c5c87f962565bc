"""The live-monitor benchmark's peer: Quix Streams doing one tumbling 5-minute mean per
token over the same topic, in a child process (its own event loop and RocksDB state).
Optional (``pip install -e '.[bench]'``); bench_monitor.py's peer row. Imported, not run.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile

QUIX_CHILD = """
import json, sys, time
from datetime import timedelta
from quixstreams import Application
bootstrap, topic, group, total, warm, state_dir = sys.argv[1:7]
total, warm = int(total), int(warm)
app = Application(broker_address=bootstrap, consumer_group=group,
                  auto_offset_reset="earliest", state_dir=state_dir, loglevel="WARNING")
seen = {"n": 0, "start": None, "end": None, "at": 0}
def tick_time(value, headers, timestamp, timestamp_type):
    from datetime import datetime
    return int(datetime.fromisoformat(value["ts"].replace("Z", "+00:00")).timestamp() * 1000)
def count(value):
    if seen["start"] is None and seen["n"] >= warm:
        seen["start"], seen["at"] = time.perf_counter(), seen["n"]
    seen["n"] += 1
    if seen["n"] >= total:
        seen["end"] = time.perf_counter()
        app.stop()
    return value
sdf = app.dataframe(app.topic(topic, value_deserializer="json", timestamp_extractor=tick_time))
sdf = sdf.update(count).apply(lambda v: float(v["price_usd"]))
sdf = sdf.tumbling_window(timedelta(minutes=5)).mean().final()
app.run()
print(json.dumps({"seen": seen["n"],
                  "rate": (seen["n"] - seen["at"]) / (seen["end"] - seen["start"])}))
"""


def quix_available() -> bool:
    return importlib.util.find_spec("quixstreams") is not None


def quix_round(bootstrap: str, topic: str, group: str, total: int, warm: int = 0) -> float:
    """Quix Streams (optional, ``pip install quixstreams``): one tumbling 5-minute mean of
    the price per token over the same topic, in a child process (its own event loop and
    RocksDB state). Timed from its record past ``warm`` to its last."""
    with tempfile.TemporaryDirectory() as state_dir:
        done = subprocess.run([sys.executable, "-c", QUIX_CHILD, bootstrap, topic, group,
                               str(total), str(warm), state_dir], capture_output=True, text=True,
                              timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"quix peer failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["seen"] < total:
        raise RuntimeError(f"quix peer saw {result['seen']} of {total} records")
    return float(result["rate"])
