"""The bytecode counter of the benchmarks (``benchmarks/bytecodes.py``).

Its counts are checked against ``dis``: a function without branches runs every
instruction ``dis`` lists once (its RESUME runs before the trace sees the frame), and a
loop's iterations each run the instructions of its body.
"""

from __future__ import annotations

import dis
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bytecodes import Counting

from tests.conftest import REPO


def straight(a: int) -> int:
    b = a + 1
    c = b * 2
    return c - a


def looped(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def _listed(function: Callable[..., object]) -> int:
    """What ``dis`` lists for ``function``, less RESUME: the opcodes a trace can see."""
    return sum(1 for i in dis.get_instructions(function) if i.opname != "RESUME")


def test_a_function_without_branches_runs_what_dis_lists() -> None:
    with Counting() as counts:
        straight(3)
    assert counts.functions == {(__file__, "straight"): _listed(straight)}
    assert counts.total == _listed(straight)


def test_each_line_counts_its_own_instructions() -> None:
    with Counting() as counts:
        straight(3)
    first = straight.__code__.co_firstlineno
    per_line: dict[int, int] = {}
    for i in dis.get_instructions(straight):
        if i.opname != "RESUME" and i.positions is not None and i.positions.lineno:
            per_line[i.positions.lineno] = per_line.get(i.positions.lineno, 0) + 1
    assert {line: n for (path, line), n in counts.lines.items() if path == __file__} \
        == per_line
    assert min(per_line) == first + 1  # the body, not the ``def`` line


def test_a_loop_counts_its_body_once_per_iteration() -> None:
    """Each further iteration runs the loop's instructions once: from its FOR_ITER to
    its backward jump, as ``dis`` lists them."""
    listed = list(dis.get_instructions(looped))
    start = next(k for k, i in enumerate(listed) if i.opname == "FOR_ITER")
    end = next(k for k, i in enumerate(listed) if i.opname.startswith("JUMP_BACKWARD"))
    body = end - start + 1
    runs = []
    for n in (10, 20):
        with Counting() as counts:
            looped(n)
        runs.append(counts.total)
    assert runs[1] - runs[0] == 10 * body


def test_nothing_is_counted_after_the_block() -> None:
    before = sys.gettrace()
    with Counting() as counts:
        pass
    straight(3)
    assert counts.total == 0
    assert sys.gettrace() is before  # the tracer before the block is back


def test_the_report_is_per_unit() -> None:
    with Counting() as counts:
        for _ in range(4):
            straight(3)
    text = counts.report(per=4, top=3)
    assert f"bytecodes per unit: {_listed(straight):,.1f} (4 units)" in text
    assert "return c - a" in text


def test_monitor_loop_prints_the_count_per_tick() -> None:
    """The harness's option: a few timed ticks of the pure build, the engine's functions
    among the counted."""
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "monitor_loop.py"), "--mode", "daemon",
         "--tokens", "20", "--ticks", "200", "--warmup", "200", "--bytecodes", "5"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "DEPEG_MONITOR_COMPILED": "off"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bytecodes per unit:" in done.stdout
    assert "monitor/engine/engine.py:Engine.take" in done.stdout \
        or "monitor/engine/engine.py:Engine._release" in done.stdout, done.stdout
