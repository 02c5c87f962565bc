"""A progress bar on stderr when it is a terminal, silence otherwise (CI, pipes, logs)."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO


class Progress:
    """Counts units (bytes, records) towards a total and redraws at most 10 times a second."""

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.total = max(total, 1)
        self.label = label
        self.done = 0
        self._started = time.monotonic()
        self._drawn = 0.0

    def update(self, done: int) -> None:
        self.done = done
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn < 0.1 and done < self.total:
            return
        self._drawn = now
        frac = min(done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        elapsed = now - self._started
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        self.stream.write(f"\r{self.label} [{bar:<30}] {frac:6.1%}  eta {eta:5.0f}s ")
        self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.enabled:
            self.update(self.total)
            self.stream.write("\n")
            self.stream.flush()
