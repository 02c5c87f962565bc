"""Bytecodes the interpreter runs, counted per function and per source line.

A deterministic measure of pure-Python work that takes seconds: callgrind takes minutes
per run and names the interpreter's C functions, not the lines that made them work. A
count per line shows where a path's bytecodes go, and two trees compared show what a
change removed::

    with Counting() as counts:
        work()
    print(counts.report(per=ticks, top=20))

It uses ``sys.settrace`` with ``f_trace_opcodes``: every frame entered while counting is
traced and each of its opcode events counted. Modules of the compiled build run no
bytecode and count nothing, so count with ``DEPEG_MONITOR_COMPILED=off``. A bytecode is
not a unit of time (a call or a dict lookup costs several simple ones, and C functions
count nothing), so confirm a change's cost with callgrind or the benchmark itself.
Tracing slows the work about 100 times (decoding and taking ticks: 98 times); the
counts do not depend on that.
"""

from __future__ import annotations

import linecache
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any


@dataclass
class Bytecodes:
    """What :class:`Counting` counted: bytecodes per (file, function) and per (file, line)."""

    functions: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: Line 0: an opcode with no line (``f_lineno`` is None for a few in 3.11).
    lines: Counter[tuple[str, int]] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.functions.values())

    def report(self, per: int, top: int) -> str:
        """The total, the ``top`` functions and the ``top`` lines, each per one of ``per``
        units of work (ticks, rows), with the source of each line."""
        per = max(per, 1)
        out = [f"bytecodes per unit: {self.total / per:,.1f} ({per:,} units)",
               f"top {top} functions (bytecodes per unit):"]
        out += [f"  {n / per:9.1f}  {_short(path)}:{name}"
                for (path, name), n in self.functions.most_common(top)]
        out.append(f"top {top} lines (bytecodes per unit):")
        for (path, line), n in self.lines.most_common(top):
            source = linecache.getline(path, line).strip() if line else ""
            out.append(f"  {n / per:9.1f}  {_short(path)}:{line}  {source[:90]}")
        return "\n".join(out)


def _short(path: str) -> str:
    """A source file's path from the package that holds it (``monitor/engine/engine.py``)."""
    parts = Path(path).parts
    for root in ("monitor", "consumers", "producers", "benchmarks", "site-packages"):
        if root in parts:
            return "/".join(parts[parts.index(root) + (root == "site-packages"):])
    return Path(path).name


class Counting:
    """Count the bytecodes run by the frames entered inside the ``with`` block (on this
    thread); ``__enter__`` gives the :class:`Bytecodes` it fills."""

    def __init__(self) -> None:
        self.counts = Bytecodes()
        self._previous: Any = None

    def __enter__(self) -> Bytecodes:
        functions, lines = self.counts.functions, self.counts.lines
        own = self.__exit__.__code__  # the block's end is not the work counted

        def trace(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                code = frame.f_code
                functions[(code.co_filename, code.co_qualname)] += 1
                lines[(code.co_filename, frame.f_lineno or 0)] += 1
            elif event == "call":
                if frame.f_code is own:
                    return None
                # From the first opcode after the frame's RESUME (which runs before the
                # call event): a function's count is what ``dis`` lists, less its RESUME.
                frame.f_trace_opcodes = True
            return trace

        self._previous = sys.gettrace()
        sys.settrace(trace)
        return self.counts

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._previous)
