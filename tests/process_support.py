"""Child processes of the tests: none may outlive the test that started it."""

from __future__ import annotations

import subprocess
from typing import Any


def reap(proc: subprocess.Popen[Any]) -> None:
    """Kill ``proc`` if it still runs and wait for it: the clean-up after a test that may have
    failed before stopping it (a passing test stops it itself, and checks how it ended)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
