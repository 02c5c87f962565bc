"""The mypyc build as a command (``depeg-monitor compile``, docs/compiled.md).

One real build per module (``compiled_home``: the command run into a temporary data
directory, ~15-45 s: mypyc, gcc and the Python headers, which CI machines have), so CI
checks the build rather than skipping it. The truth is the pure-Python modules: every
comparison runs both sides as separate processes, the pure one with
``DEPEG_MONITOR_COMPILED=off``, and first checks which modules each really loaded. What
the loader refuses (a stale build, another interpreter's, none at all) is checked on
copies of that build or without one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from monitor.compiled import (
    DATA_DIR_ENV,
    ENV,
    MANIFEST,
    MODULES,
    OFF,
    Manifest,
    build_dir,
    default_location,
    interpreter_tag,
    source_digests,
    source_stats,
    started_as_command,
)
from monitor.compiled_build import IGNORE_MISSING_IMPORTS, _replace, replaces
from monitor.config import load_config
from monitor.paths import data_dir
from monitor.ticks import encode_tick, make_tick
from tests.conftest import REPO, data_file

FILES = ("ticks/busd_2023-02_binance_1m.csv", "ticks/usdc_2022-11_to_2023-03_chainlink.csv",
         "ticks/usdc_2023-03_binanceus_1m.csv")
#: The first tick's time in the generated file (every_kind_of_tick).
T0 = 1_700_000_000
#: Prints the files of a compiled module of each package (monitor, monitor.engine).
PROBE = ("import monitor.engine.windows as w, monitor.tickfiles as t;"
         "print(w.__file__); print(t.__file__)")
WARNING = "is not used:"


def env_with(data_home: Path, compiled: str | None = None) -> dict[str, str]:
    """This environment with ``data_home`` as XDG_DATA_HOME (the data directory
    ``data_home/depeg-monitor``) and the variable set to ``compiled`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k not in (ENV, DATA_DIR_ENV)}
    env["XDG_DATA_HOME"] = str(data_home)
    if compiled is not None:
        env[ENV] = compiled
    return env


def cli(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "monitor", *argv], env=env,
                          capture_output=True, text=True, check=False)


def probe(env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *flags, "-c", PROBE], env=env,
                          capture_output=True, text=True, check=True)


def replay(tmp: Path, env: dict[str, str], name: str,
           files: tuple[str, ...] = FILES) -> tuple[bytes, bytes]:
    out, ratings = tmp / f"{name}.events.jsonl", tmp / f"{name}.ratings.jsonl"
    done = cli(["--log-level", "warning", "replay", "--out", str(out), "--ratings",
                str(ratings), *(str(data_file(f)) for f in files)], env)
    assert done.returncode == 0, done.stderr[-2000:]
    return out.read_bytes(), ratings.read_bytes()


#: The extension module a stale build leaves in the data directory (the fixture's).
STALE_MODULE = "monitor/engine/windows" + interpreter_tag()


@pytest.fixture(scope="module")
def compiling(tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The module's one real build: ``depeg-monitor compile`` (no options: the default
    location), where warnings are errors, in a data directory holding a stale build (one
    made before a source was edited: its manifest's digest of that module no longer
    matches; its extension module a placeholder), as a user rebuilding after an edit or an
    upgrade runs it. A first build takes the same path but for the swap
    (``test_a_first_build_replaces_nothing``)."""
    home = tmp_path_factory.mktemp("data-home")
    out = home / "depeg-monitor" / "compiled"
    (out / STALE_MODULE).parent.mkdir(parents=True)
    (out / STALE_MODULE).write_bytes(b"stale")
    stats = source_stats()  # the edit: a new digest and a new mtime (edited() below)
    stats[MODULES[0]] = (stats[MODULES[0]][0], stats[MODULES[0]][1] - 10**9)
    stale = Manifest(interpreter_tag(), {**source_digests(), MODULES[0]: "0" * 64}, stats,
                     [STALE_MODULE])
    (out / MANIFEST).write_text(stale.render())
    done = subprocess.run([sys.executable, "-W", "error", "-m", "monitor", "--log-format",
                           "json", "compile"], env=env_with(home), capture_output=True,
                          text=True, check=False)
    return home, done


@pytest.fixture(scope="module")
def compiled_home(compiling: tuple[Path, subprocess.CompletedProcess[str]]) -> Path:
    """A data home whose data directory holds the build :func:`compiling` made, after
    checking what the command said."""
    home, done = compiling
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = home / "depeg-monitor" / "compiled"
    # Progress as component.event log lines, then one line saying how it will be used.
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [line["event"] for line in lines] == [
        "compiled.build_started", "compiled.mypyc_finished", "compiled.build_finished"
    ], done.stderr
    assert done.stdout.splitlines() == [done.stdout.strip()]
    assert done.stdout.startswith(f"compiled build ready in {out}: depeg-monitor processes "
                                  "with this data directory")
    manifest = Manifest.parse((out / MANIFEST).read_text())
    assert manifest is not None and manifest.interpreter == interpreter_tag()
    assert manifest.sources == source_digests() and manifest.stats == source_stats()
    compiled = {m.removesuffix(interpreter_tag()) for m in manifest.modules}
    assert {m.removesuffix(".py") for m in MODULES} <= compiled
    assert all((out / m).is_file() for m in manifest.modules)
    return home


def test_a_process_with_that_data_directory_runs_the_build_byte_for_byte(
        tmp_path: Path, compiled_home: Path) -> None:
    auto, pure = env_with(compiled_home), env_with(compiled_home, OFF)
    loaded = probe(auto)
    assert [Path(f).suffix for f in loaded.stdout.split()] == [".so", ".so"], loaded.stdout
    assert all(f.startswith(str(compiled_home)) for f in loaded.stdout.split())
    assert loaded.stderr == ""
    assert [Path(f).suffix for f in probe(pure).stdout.split()] == [".py", ".py"]
    expected = replay(tmp_path, pure, "pure")
    assert expected[0] and expected[1]
    assert replay(tmp_path, auto, "compiled") == expected


#: A parent that loads the build, then a ``multiprocessing`` child (spawn: a new
#: interpreter given the parent's ``sys.path``) importing a module that is not compiled
#: through one that is (``monitor.testing`` -> ``engine.tiers`` -> ``engine.readplan``).
SPAWN = """
import multiprocessing, sys
import monitor.engine.windows as w

def child():
    import monitor.testing
    import monitor.engine.params as p
    print(p.__file__)

if __name__ == "__main__":
    print(w.__file__)
    print(next(m.__file__ for n, m in sys.modules.items() if n.endswith("__mypyc")))
    print(any("compiled" in entry for entry in sys.path))
    done = multiprocessing.get_context("spawn").Process(target=child)
    done.start()
    done.join()
    sys.exit(done.exitcode)
"""


def test_a_spawned_child_loads_the_build_too(tmp_path: Path, compiled_home: Path) -> None:
    """The build's folder on ``sys.path`` made the child import it as a namespace package
    ``monitor`` (an editable install's finder is asked after the path), which failed."""
    script = tmp_path / "spawning.py"
    script.write_text(SPAWN)
    done = subprocess.run([sys.executable, str(script)], env=env_with(compiled_home),
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    parent, runtime, on_path, child = done.stdout.split()
    assert parent.startswith(str(compiled_home)) and parent.endswith(".so")
    assert runtime.startswith(str(compiled_home)) and runtime.endswith(".so")
    assert on_path == "False"
    assert child.startswith(str(compiled_home)) and child.endswith(".so")


def test_status_says_which_modules_run(compiled_home: Path) -> None:
    build = compiled_home / "depeg-monitor" / "compiled"
    used = cli(["compile", "--status"], env_with(compiled_home))
    assert used.returncode == 0 and used.stdout.startswith(f"modules: compiled ({build};")
    off = cli(["compile", "--status"], env_with(compiled_home, OFF))
    assert off.stdout.startswith(f"modules: python ({ENV}={OFF};"), off.stdout
    assert off.stdout.splitlines()[0].endswith("engine.py)")
    # The daemon's monitor.started fields, in a process that loaded the engine (and whose
    # environment changed after: what was loaded is reported, not what would be now).
    fields = subprocess.run(
        [sys.executable, "-c", "import json, os, monitor.engine; from monitor.compiled import "
         f"log_fields; os.environ['{ENV}'] = 'off'; print(json.dumps(log_fields()))"],
        env=env_with(compiled_home), capture_output=True, text=True, check=True)
    assert json.loads(fields.stdout) == {"engine_modules": "compiled",
                                         "engine_build": str(build)}


#: Runs the CLI with argv from the command line, then prints the engine module it loaded.
RUN_THEN_PROBE = ("import sys; from monitor.cli import main; rc = main(sys.argv[1:]); "
                  "import monitor.engine.engine as e; print(e.__file__); sys.exit(rc)")


@pytest.mark.parametrize("named_by", ["--data-dir", "--config", "DEPEG_CONFIG"])
def test_a_data_directory_named_on_the_command_line_brings_its_build(
        tmp_path: Path, compiled_home: Path, named_by: str) -> None:
    """The environment's data directory has no build; the one ``--data-dir`` or a config
    file names has: the command (here a replay) runs that build, with the sources' bytes."""
    data = compiled_home / "depeg-monitor"
    env = env_with(tmp_path / "empty-home")
    config = tmp_path / "config.toml"
    config.write_text(f'[storage]\ndata_dir = "{data}"\n')
    options = {"--data-dir": ["--data-dir", str(data)], "--config": ["--config", str(config)],
               "DEPEG_CONFIG": []}[named_by]
    if named_by == "DEPEG_CONFIG":
        env["DEPEG_CONFIG"] = str(config)
    out, ratings = tmp_path / "events.jsonl", tmp_path / "ratings.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", RUN_THEN_PROBE, *options, "--log-level", "warning", "replay",
         "--out", str(out), "--ratings", str(ratings), *(str(data_file(f)) for f in FILES)],
        env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    engine_file = done.stdout.splitlines()[-1]
    assert engine_file.startswith(str(data / "compiled")) and engine_file.endswith(".so")
    assert WARNING not in done.stderr and done.stderr.startswith("ticks read: 53680")
    pure = replay(tmp_path, env_with(tmp_path / "empty-home", OFF), "pure")
    assert (out.read_bytes(), ratings.read_bytes()) == pure
    status = cli([*options, "compile", "--status"], env)
    assert status.stdout.startswith(f"modules: compiled ({data / 'compiled'};"), status.stdout


def every_kind_of_tick(path: Path) -> Path:
    """A tick file exercising each field the engine applies, as JSON lines: prices under
    changing pegs, slippage-only and oracle ticks, exact duplicates, same-time ticks that
    differ, ticks out of order within the lateness, ticks past it, and cross-chain spread
    observations; three tokens, one depegging for a while (tier changes)."""
    rng = random.Random(15)
    lines: list[bytes] = []
    for n in range(3_000):
        token = n % 3
        ts = T0 + 20 * (n // 3)
        chain, address = "eth", "0x" + f"{token + 1:x}" * 40
        if n % 23 == 0 and n > 300:
            ts -= 1_000  # past the lateness: dropped as late
        elif n % 19 == 0:
            ts -= 50  # out of order, within the lateness
        dip = 0.04 if token == 1 and 900 <= n < 1_800 else 0.0
        price = f"{1.0 - dip + rng.gauss(0, 0.0008):.6f}"
        peg = "1" if n % 400 < 200 else "1.0"
        if n % 29 == 0:
            tick = make_tick(ts, chain, address, "", source="spread",
                             cross_chain_spread_bps=rng.uniform(0, 40), cross_chain_chains=3)
        elif n % 31 == 0:
            tick = make_tick(ts, chain, address, f"T{token}", slippage_bps=rng.uniform(5, 90))
        else:
            tick = make_tick(ts, chain, address, f"T{token}", price, peg,
                             slippage_bps=rng.uniform(5, 90) if n % 7 == 0 else None,
                             oracle_price_usd=price if n % 11 == 0 else None)
        lines.append(encode_tick(tick))
        if n % 13 == 0:
            lines.append(encode_tick(tick))  # an exact duplicate: dropped
        elif n % 17 == 0 and tick.price is not None:  # the same time, another price
            lines.append(encode_tick(make_tick(ts, chain, address, f"T{token}",
                                               f"{tick.price * 0.999:.6f}", peg)))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_the_compiled_engine_takes_every_kind_of_tick_as_the_sources_do(
        tmp_path: Path, compiled_home: Path) -> None:
    """The shared files hold prices only. This replays a file with every field the engine
    reads from a tick, in both builds: native code can part from the interpreter on a path
    no price-only file takes (a None, an int where a float was, an insertion in place)."""
    ticks = every_kind_of_tick(tmp_path / "every-kind.jsonl")
    runs = []
    for name, env in (("pure", env_with(compiled_home, OFF)),
                      ("compiled", env_with(compiled_home))):
        events, ratings = tmp_path / f"{name}.events.jsonl", tmp_path / f"{name}.ratings.jsonl"
        done = cli(["--log-level", "warning", "replay", "--out", str(events), "--ratings",
                    str(ratings), str(ticks)], env)
        assert done.returncode == 0, done.stderr[-2000:]
        # The summary's counts, not the lines naming the output files.
        counts = done.stderr.split("transitions written to")[0]
        runs.append((events.read_bytes(), ratings.read_bytes(), counts))
    assert runs[1] == runs[0]
    summary = runs[0][2]
    # What the file holds reached the engine: late and duplicate ticks dropped, tier
    # changes made, snapshots with the slippage, oracle and spread figures.
    assert "late ticks dropped: 0," not in summary and "duplicates dropped: 0," not in summary
    assert runs[0][0]
    metrics = json.loads(runs[0][1].splitlines()[-1])["metrics"]
    assert all(metrics[name] is not None for name in (
        "slippage_bps", "oracle_price_usd", "cross_chain_spread_pct"))


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
print(type(rows[0]).__module__)
"""


def test_the_compiled_engine_saves_and_restores_byte_for_byte(compiled_home: Path) -> None:
    """The engine module itself is compiled: its saved states (msgspec structs kept in
    engine/saved.py) and what a restored engine goes on to publish match the sources'."""
    files = [str(data_file(f)) for f in FILES]
    runs = {}
    for name, env in (("pure", env_with(compiled_home, OFF)),
                      ("compiled", env_with(compiled_home))):
        done = subprocess.run([sys.executable, "-c", _STATE_ROUND_TRIP, *files], env=env,
                              check=True, capture_output=True, text=True)
        runs[name] = done.stdout.split()
    assert runs["pure"][0].endswith(".py") and runs["compiled"][0].endswith(".so")
    assert runs["compiled"][1] == runs["pure"][1]
    # The build's ticks are its native class (monitor/tick.py), the held ones saved as
    # the sources' struct: the same bytes.
    assert (runs["pure"][2], runs["compiled"][2]) == ("monitor.ticks", "monitor.tick")


#: Prints the daemon loop's module file, then tests/daemon/test_feed.py's summary of it.
_FEED = ("import monitor.daemon.feed as f; from tests.daemon.test_feed import summary; "
         "print(f.__file__); print(summary())")


def test_the_compiled_daemon_loop_feeds_as_the_sources_do(compiled_home: Path) -> None:
    """The daemon's per-tick loop (monitor/daemon/feed.py) is compiled too: the same
    outputs, refusals (reasons and details, in order), coverage counts and clock."""
    runs = {}
    for name, env in (("pure", env_with(compiled_home, OFF)),
                      ("compiled", env_with(compiled_home))):
        done = subprocess.run([sys.executable, "-c", _FEED], env=env, cwd=REPO, check=True,
                              capture_output=True, text=True)
        runs[name] = done.stdout.splitlines()
    assert runs["pure"][0].endswith(".py") and runs["compiled"][0].endswith(".so")
    assert runs["compiled"][1] == runs["pure"][1]
    assert json.loads(runs["pure"][1])["refused"]  # the summary has refusals to compare


def stale_copy(compiled_home: Path, tmp_path: Path, **change: object) -> Path:
    """A copy of the build in another data home, its manifest's attributes changed."""
    home = tmp_path / "stale-home"
    shutil.copytree(compiled_home / "depeg-monitor", home / "depeg-monitor")
    path = home / "depeg-monitor" / "compiled" / MANIFEST
    manifest = Manifest.parse(path.read_text())
    assert manifest is not None
    for name, value in change.items():
        setattr(manifest, name, value)
    path.write_text(manifest.render())
    return home


def edited(manifest_of: Path, digest: bool, mtime: bool) -> dict[str, object]:
    """The manifest's sources as if MODULES[0] had been edited since (a new digest and a
    new mtime) or only touched (a new mtime)."""
    manifest = Manifest.parse((manifest_of / "depeg-monitor" / "compiled" / MANIFEST)
                              .read_text())
    assert manifest is not None
    sources, stats = dict(manifest.sources), dict(manifest.stats)
    if digest:
        sources[MODULES[0]] = "0" * 64
    if mtime:
        stats[MODULES[0]] = (stats[MODULES[0]][0], stats[MODULES[0]][1] - 10**9)
    return {"sources": sources, "stats": stats}


def test_a_stale_build_is_ignored_with_one_warning(tmp_path: Path,
                                                  compiled_home: Path) -> None:
    """A source edited since the build (its digest no longer matches): the sources run,
    start-up says so once and how to fix it, and the process works as without a build."""
    home = stale_copy(compiled_home, tmp_path, **edited(compiled_home, True, True))
    env = env_with(home)
    loaded = probe(env)
    assert [Path(f).suffix for f in loaded.stdout.split()] == [".py", ".py"]
    assert loaded.stderr.count(WARNING) == 1, loaded.stderr
    assert "the sources changed since it was built" in loaded.stderr
    assert "run `depeg-monitor compile` to rebuild it" in loaded.stderr
    # Even where warnings are errors, start-up goes on (the warning is written instead).
    strict = probe(env, "-W", "error")
    assert [Path(f).suffix for f in strict.stdout.split()] == [".py", ".py"]
    assert strict.stderr.count(WARNING) == 1, strict.stderr
    files = FILES[:1]
    stale = replay(tmp_path, env, "stale", files)
    assert stale == replay(tmp_path, env_with(compiled_home, OFF), "pure", files)
    # The command warns once too, after its command line, unless it is `compile`, whose
    # --status says it instead (and whose build replaces such a one: the fixture's).
    command = cli(["config"], env)
    assert command.returncode == 0 and command.stderr.count(WARNING) == 1, command.stderr
    status = cli(["compile", "--status"], env)
    assert status.stderr == ""
    assert status.stdout.startswith("modules: python (the build in ") and \
        "is not used: the sources changed since it was built" in status.stdout


def test_compile_replaces_a_stale_build_without_warning_about_it(
        compiling: tuple[Path, subprocess.CompletedProcess[str]], compiled_home: Path) -> None:
    """Rebuilding is the fix the warning asks for: the command says what it replaces in
    its start line and gives no warning (the build ran where warnings are errors); the
    stale build's files are gone, and the new build is the one processes then load,
    silently."""
    _, done = compiling
    assert WARNING not in done.stderr and "RuntimeWarning" not in done.stderr, done.stderr
    started = next(json.loads(line) for line in done.stderr.splitlines()
                   if line.startswith("{"))
    assert started["event"] == "compiled.build_started"
    assert started["replaces"] == ("a build not in use: the sources changed since it was "
                                   "built")
    replaced = compiled_home / "depeg-monitor" / "compiled" / STALE_MODULE
    assert replaced.read_bytes()[:4] == b"\x7fELF"  # the new build's, not the placeholder
    loaded = probe(env_with(compiled_home))
    assert [Path(f).suffix for f in loaded.stdout.split()] == [".so", ".so"]
    assert loaded.stderr == ""


def test_a_first_build_replaces_nothing(tmp_path: Path) -> None:
    """Where no build was made yet: the start line's words, and the staged build moved
    into place whole (the path a first build takes; the fixture's build replaces one)."""
    out = tmp_path / "data" / "compiled"
    assert replaces(out) == "nothing (no previous build)"
    staging = tmp_path / "data" / ".compiled.staging-1"
    (staging / "monitor").mkdir(parents=True)
    (staging / "monitor" / "module.so").write_bytes(b"built")
    (staging / MANIFEST).write_text("manifest")
    _replace(staging, out)
    assert not staging.exists()
    assert (out / "monitor" / "module.so").read_bytes() == b"built"
    assert (out / MANIFEST).read_text() == "manifest"
    assert sorted(p.name for p in out.parent.iterdir()) == ["compiled"]


@pytest.mark.parametrize(("argv", "orig_argv", "held"), [
    (["/opt/venv/bin/depeg-monitor", "compile"], ["python", "/opt/venv/bin/depeg-monitor"],
     True),
    (["C:/venv/Scripts/depeg-monitor.exe", "run"], ["python"], True),
    (["-m", "compile"], ["python", "-W", "error", "-m", "monitor", "compile"], True),
    (["-m", "replay"], ["python", "-mmonitor.cli", "replay"], True),
    (["-m"], ["python", "-m", "pytest"], False),
    (["-c", "compile"], ["python", "-c", "import monitor", "compile"], False),
    (["/usr/bin/pytest", "compile"], ["python", "/usr/bin/pytest", "compile"], False),
], ids=["console-script", "windows-launcher", "python-m", "python-m-cli", "other-module",
        "python-c", "other-program"])
def test_only_the_command_holds_its_warning_for_the_command_line(
        argv: list[str], orig_argv: list[str], held: bool) -> None:
    """The ``depeg-monitor`` command gives the warning after parsing its command line (so
    that ``compile`` can leave it out); any other program importing ``monitor`` gets it at
    import, as before."""
    assert started_as_command(argv, orig_argv) is held


def test_a_touched_source_is_hashed_and_still_matches(tmp_path: Path,
                                                     compiled_home: Path) -> None:
    """Sizes and mtimes are only the quick check: a different mtime over the same bytes
    (a checkout, a reinstall) is settled by the digests, and the build is used."""
    home = stale_copy(compiled_home, tmp_path, **edited(compiled_home, False, True))
    loaded = probe(env_with(home))
    assert [Path(f).suffix for f in loaded.stdout.split()] == [".so", ".so"]
    assert loaded.stderr == ""


def test_another_interpreters_build_is_ignored(tmp_path: Path, compiled_home: Path) -> None:
    home = stale_copy(compiled_home, tmp_path, interpreter=".cpython-39-other.so")
    loaded = probe(env_with(home))
    assert [Path(f).suffix for f in loaded.stdout.split()] == [".py", ".py"]
    assert loaded.stderr.count(WARNING) == 1
    assert "it was built for .cpython-39-other.so" in loaded.stderr


def test_off_runs_the_sources_and_says_nothing(compiled_home: Path) -> None:
    loaded = probe(env_with(compiled_home, OFF))
    assert [Path(f).suffix for f in loaded.stdout.split()] == [".py", ".py"]
    assert loaded.stderr == ""


def test_a_build_named_by_the_variable_is_used_wherever_it_is(tmp_path: Path,
                                                             compiled_home: Path) -> None:
    """A build made with --out (here: the fixture's, moved) and named by the variable;
    the data directory's own location has none."""
    elsewhere = tmp_path / "builds" / "mine"
    shutil.copytree(compiled_home / "depeg-monitor" / "compiled", elsewhere)
    loaded = probe(env_with(tmp_path / "empty-home", str(elsewhere)))
    assert all(f.startswith(str(elsewhere)) and f.endswith(".so")
               for f in loaded.stdout.split()), loaded.stdout
    assert loaded.stderr == ""


def test_no_build_means_the_sources_without_a_word(tmp_path: Path) -> None:
    loaded = probe(env_with(tmp_path))
    assert [Path(f).suffix for f in loaded.stdout.split()] == [".py", ".py"]
    assert loaded.stderr == ""


def test_a_build_of_other_sources_is_not_used(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / MANIFEST).write_text(Manifest(
        interpreter_tag(), dict.fromkeys(MODULES, "0" * 64), dict.fromkeys(MODULES, (0, 0)),
        ["monitor/engine/engine.so"]).render())
    monkeypatch.setenv(ENV, str(tmp_path))
    with pytest.warns(RuntimeWarning, match="sources changed"):
        assert build_dir() is None


#: The command in a process where mypyc cannot be imported (as in an install without the
#: extra): sys.modules[name] = None is how Python marks a module unimportable.
_WITHOUT_MYPYC = """
import sys
sys.modules["mypyc"] = None
from monitor.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_mypyc_the_command_says_what_to_install(tmp_path: Path) -> None:
    out = tmp_path / "build"
    done = subprocess.run([sys.executable, "-c", _WITHOUT_MYPYC, "compile", "--out", str(out)],
                          env=env_with(tmp_path), capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr.startswith("compile: mypyc (part of mypy) is not installed")
    assert "pip install 'depeg-monitor[compiled]'" in done.stderr
    assert not out.exists()


def test_without_a_c_compiler_the_command_says_so(tmp_path: Path) -> None:
    out = tmp_path / "build"
    done = cli(["compile", "--out", str(out)],
               {**env_with(tmp_path), "CC": str(tmp_path / "no-such-cc")})
    assert done.returncode == 1
    assert done.stderr.startswith("compile: no C compiler:"), done.stderr
    assert "apt-get install gcc" in done.stderr
    assert not out.exists()


@pytest.mark.parametrize("where", ["checkout", "occupied"])
def test_the_command_writes_only_where_it_may(tmp_path: Path, where: str) -> None:
    """Never into the source tree; never over a directory that is not a previous build."""
    if where == "checkout":
        out = REPO / "compiled-here"
    else:
        out = tmp_path / "mine"
        out.mkdir()
        (out / "notes.txt").write_text("keep me")
    done = cli(["compile", "--out", str(out)], env_with(tmp_path))
    assert done.returncode == 1
    if where == "checkout":
        assert "inside the source tree" in done.stderr
        assert not out.exists()
    else:
        assert "is not a previous build" in done.stderr
        assert [p.name for p in out.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("env", [
    {},
    {"XDG_DATA_HOME": "/srv/xdg"},
    {"XDG_DATA_HOME": "relative/ignored"},
    {DATA_DIR_ENV: "~/state", "XDG_DATA_HOME": "/srv/xdg"},
    {DATA_DIR_ENV: "/var/lib/depeg-monitor"},
], ids=["home", "xdg", "relative-xdg", "storage-variable", "storage-absolute"])
def test_the_default_location_is_the_data_directory_the_environment_names(
        env: dict[str, str]) -> None:
    """What the loader finds before any configuration is read is where the command builds
    without options: the data directory the configuration resolves from the same
    environment (monitor/paths.py), plus compiled/."""
    env = {"HOME": "/home/someone", **env}
    assert default_location(env) == str(data_dir(load_config(env=env), env) / "compiled")


def test_the_build_type_checks_as_the_checkout_does() -> None:
    """The build's mypy settings (an installed package has no pyproject.toml) ignore the
    same untyped packages as pyproject's [tool.mypy]."""
    mypy = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    ignored = [m for o in mypy["overrides"] if o.get("ignore_missing_imports")
               for m in o["module"]]
    assert sorted(ignored) == sorted(IGNORE_MISSING_IMPORTS)
    assert mypy["strict"] is True


def test_the_build_type_checks_without_the_report_extra(tmp_path: Path) -> None:
    """The build's type check (mypyc stops on any mypy error) over the installed sources in
    an environment where matplotlib is not installed -- `pip install '.[compiled]'`, no
    `report` extra, as the Docker image and the systemd install do. mypy is given an
    interpreter that sees this environment's packages but matplotlib's."""
    import site

    from monitor.compiled_build import MYPY_INI

    packages = Path(site.getsitepackages()[0])
    visible = tmp_path / "packages"
    visible.mkdir()
    for entry in packages.iterdir():
        if not entry.name.startswith(("matplotlib", "mpl_toolkits", "__editable__")) \
                and entry.suffix != ".pth":
            (visible / entry.name).symlink_to(entry)
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    (next(env.glob("lib/python*/site-packages")) / "visible.pth").write_text(f"{visible}\n")
    python = env / "bin" / "python"
    assert subprocess.run([python, "-c", "import msgspec"], check=False).returncode == 0
    assert subprocess.run([python, "-c", "import matplotlib"], capture_output=True,
                          check=False).returncode != 0
    work = tmp_path / "work"
    shutil.copytree(REPO / "monitor", work / "monitor",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    (work / "mypy.ini").write_text(MYPY_INI)
    done = subprocess.run([sys.executable, "-m", "mypy", "--python-executable", str(python),
                           "--no-incremental", *MODULES], cwd=work, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
