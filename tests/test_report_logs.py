"""``depeg-monitor replay --report`` as a user runs it: every log line it writes is a
structured ``component.event`` line (QA found matplotlib's first-run "generated new
fontManager" INFO line in the middle of the replay output)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

EVENT = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")


def test_report_logs_only_component_event_lines(tmp_path: Path) -> None:
    # A fresh matplotlib cache directory: the first run on a machine is what logged.
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl"),
           "XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path)}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "depeg-monitor"), "--log-format", "json", "replay",
         str(REPO / "examples" / "depeg-demo.csv"), "--report", "report.md"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report.md").exists()
    assert "transitions: 6" in done.stderr  # the human summary shares stderr with the logs
    for line in done.stderr.splitlines():
        if line.startswith("{"):
            assert EVENT.match(json.loads(line)["event"]), line
