"""The optional mypyc build (monitor/compiled.py) replays byte for byte as the sources do.

Uses the build ``DEPEG_MONITOR_COMPILED`` names, or else makes one in a temporary
directory with ``benchmarks/build_compiled.py`` (~15 s: mypyc, gcc and the Python headers,
which CI machines have), so CI checks the build rather than skipping it. The truth is
the pure-Python modules, run in this process (the suite never sets the variable for
itself); the compiled run is a separate process, and the test first checks it really
loaded the compiled modules.
A build from other sources is refused by the loader, which is checked without a build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import data_file

from monitor.compiled import ENV, MANIFEST, MODULES, build_dir, interpreter_tag

BUILD = os.environ.get(ENV, "").strip()
BUILD_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "build_compiled.py"
FILES = ("ticks/busd_2023-02_binance_1m.csv", "ticks/usdc_2022-11_to_2023-03_chainlink.csv",
         "ticks/usdc_2023-03_binanceus_1m.csv")


def replay(tmp: Path, env: dict[str, str], name: str) -> tuple[bytes, bytes]:
    out, ratings = tmp / f"{name}.events.jsonl", tmp / f"{name}.ratings.jsonl"
    files = [str(data_file(f)) for f in FILES]
    subprocess.run([sys.executable, "-m", "monitor", "--log-level", "warning", "--data-dir",
                    str(tmp / name), "replay", "--out", str(out), "--ratings", str(ratings),
                    *files], env=env, check=True, capture_output=True)
    return out.read_bytes(), ratings.read_bytes()


@pytest.fixture(scope="module")
def compiled_build(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The build under test: the one named by the variable, else a fresh one."""
    if BUILD:
        return BUILD
    out = tmp_path_factory.mktemp("compiled")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    done = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--out", str(out)], env=env,
                          check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return str(out)


def test_the_compiled_build_replays_byte_for_byte(tmp_path: Path, compiled_build: str) -> None:
    compiled_env = {**os.environ, ENV: compiled_build}
    pure_env = {k: v for k, v in os.environ.items() if k != ENV}
    probe = subprocess.run(
        [sys.executable, "-c", "import monitor.engine.windows as w, monitor.tickfiles as t;"
         "print(w.__file__); print(t.__file__)"],
        env=compiled_env, check=True, capture_output=True, text=True)
    assert all(line.endswith(".so") for line in probe.stdout.split()), probe.stdout
    pure = replay(tmp_path, pure_env, "pure")
    assert pure[0] and pure[1]
    assert replay(tmp_path, compiled_env, "compiled") == pure


def test_a_build_of_other_sources_is_not_used(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / MANIFEST).write_text(json.dumps({
        "interpreter": interpreter_tag(), "sources": dict.fromkeys(MODULES, "0" * 64)}))
    monkeypatch.setenv(ENV, str(tmp_path))
    with pytest.warns(RuntimeWarning, match="sources changed"):
        assert build_dir() is None
