"""A command whose reader goes away (``depeg-monitor keys list | head``) ends without a
traceback: the reader closed its end, so the rest of the output has nowhere to go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_closed_stdout_ends_quietly_with_the_sigpipe_status(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before the command writes a byte: every write fails
    env = {k: v for k, v in os.environ.items() if k != "DEPEG_CONFIG"}
    env |= {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    try:
        done = subprocess.run([str(Path(sys.executable).parent / "depeg-monitor"), "config",
                               "--defaults"], cwd=tmp_path, env=env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr, done.stderr
    assert "BrokenPipeError" not in done.stderr
    assert done.returncode == 141, done.stderr
