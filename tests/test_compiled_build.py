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

from monitor.compiled import ENV, MANIFEST, MODULES, build_dir, interpreter_tag
from tests.conftest import data_file

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


#: Half the ticks through an engine, every token's state exported and restored into a new
#: engine, the rest through that one: prints the engine module's file, then a digest of
#: every output and every saved state (the daemon's checkpoint path, compiled or not).
_STATE_ROUND_TRIP = """
import hashlib, sys
from pathlib import Path
from monitor.config import ModelConfig
from monitor.engine import Engine, engine as module
from monitor.records import encode
from monitor.tickfiles import merge_by_time, read_file
from monitor.ticks import Tick
rows = [r for r in merge_by_time(read_file(Path(p)) for p in sys.argv[1:]) if isinstance(r, Tick)]
digest = hashlib.sha256()
first, half = Engine(ModelConfig()), len(rows) // 2
for row in rows[:half]:
    for out in first.process(row):
        digest.update(encode(out))
states = sorted((key, first.export_state(key)) for key in first.keys())
second = Engine(ModelConfig())
for key, blob in states:
    digest.update(blob)
    assert second.restore_state(blob) == key
for row in rows[half:]:
    for out in second.process(row):
        digest.update(encode(out))
for out in second.flush():
    digest.update(encode(out))
for key in sorted(second.keys()):
    digest.update(second.export_state(key))
print(module.__file__)
print(digest.hexdigest())
"""


def test_the_compiled_engine_saves_and_restores_byte_for_byte(compiled_build: str) -> None:
    """The engine module itself is compiled: its saved states (msgspec structs kept in
    engine/saved.py) and what a restored engine goes on to publish match the sources'."""
    files = [str(data_file(f)) for f in FILES]
    runs = {}
    for name, env in (("pure", {k: v for k, v in os.environ.items() if k != ENV}),
                      ("compiled", {**os.environ, ENV: compiled_build})):
        done = subprocess.run([sys.executable, "-c", _STATE_ROUND_TRIP, *files], env=env,
                              check=True, capture_output=True, text=True)
        runs[name] = done.stdout.split()
    assert runs["pure"][0].endswith(".py") and runs["compiled"][0].endswith(".so")
    assert runs["compiled"][1] == runs["pure"][1]


def test_a_build_of_other_sources_is_not_used(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / MANIFEST).write_text(json.dumps({
        "interpreter": interpreter_tag(), "sources": dict.fromkeys(MODULES, "0" * 64)}))
    monkeypatch.setenv(ENV, str(tmp_path))
    with pytest.warns(RuntimeWarning, match="sources changed"):
        assert build_dir() is None
