"""The fast CLI start-up (only the chosen command is imported) prints exactly what the
parser built from every imported command prints: the same listing, the same per-command
help, the same errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from monitor import cli
from monitor.command_index import HELP
from producers.command import PRODUCERS


def _full_parser() -> object:
    commands = cli.discover()
    commands.setdefault("config", cli._config_command())
    return cli.build_parser(commands)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_index_matches_every_commands_own_help() -> None:
    commands = cli.discover()
    assert {name: HELP[name] for name in commands if name in HELP} == {
        name: c.help for name, c in commands.items() if name in HELP}
    assert set(HELP) <= set(commands), "an indexed command no longer exists"


def test_top_level_help_is_the_full_parsers(capsys: pytest.CaptureFixture[str]) -> None:
    expected = _full_parser().format_help()  # type: ignore[attr-defined]
    assert _run(["--help"], capsys)[:2] == (0, expected)
    assert _run([], capsys)[:2] == (2, expected)


@pytest.mark.parametrize("name", sorted(HELP))
def test_each_commands_help_is_the_full_parsers(name: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    full = _full_parser()
    sub = next(a for a in full._actions if a.dest == "command")  # type: ignore[attr-defined]
    expected = sub.choices[name].format_help()
    assert _run(["--log-level", "warning", name, "--help"], capsys)[:2] == (0, expected)


@pytest.mark.parametrize("argv", [["no-such-command"], ["replay", "--no-such-option"],
                                  ["replay"], ["--log-format", "xml", "status"]])
def test_usage_errors_are_the_full_parsers(argv: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _full_parser().parse_args(argv)  # type: ignore[attr-defined]
    expected = (int(exc.value.code or 0), *capsys.readouterr())
    assert expected[0] == 2
    assert _run(argv, capsys) == expected


#: What a command imports only when it runs: the Kafka client, the HTTP stack, the database
#: drivers, the webhook crypto, the chain adapters' ABI codec, the engine.
HEAVY = ("aiokafka", "aiohttp", "asyncpg", "aiosqlite", "cryptography", "eth_abi", "eth_utils",
         "monitor.engine")

#: Runs ``depeg-monitor ARGV...`` in-process, then prints the exit code and which of the
#: heavy modules (first argument, comma-separated) got imported.
_IMPORTED_BY = """
import json, sys
from monitor.cli import main
heavy = sys.argv[1].split(",")
try:
    main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "heavy": sorted(
    m for m in sys.modules if m.split(".")[0] in heavy or m in heavy)}), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [*([name, "--help"] for name in [*sorted(HELP), "config"]),
                                  *([name, "--no-such-option"] for name in sorted(HELP))],
                         ids=" ".join)
def test_help_and_usage_errors_import_no_heavy_stack(argv: list[str]) -> None:
    """Each command's --help (and a usage error) in a fresh interpreter: the answer comes
    from the command's own parser without importing what only running it needs, which is
    what keeps them fast (timed in benchmarks/bench_cli.py)."""
    done = subprocess.run([sys.executable, "-c", _IMPORTED_BY, ",".join(HEAVY), *argv],
                          capture_output=True, text=True, check=False)
    result = json.loads(done.stderr.strip().splitlines()[-1])
    if argv[1] == "--help":
        assert result["code"] == 0 and done.stdout.startswith(f"usage: depeg-monitor {argv[0]}")
    else:
        assert result["code"] == 2 and "depeg-monitor" in done.stderr and ": error: " in done.stderr
    assert result["heavy"] == []


#: A producer's --help neither logs nor runs a loop: structlog (~50 ms) and asyncio (~25 ms)
#: stay out too.
PRODUCER_HEAVY = (*HEAVY, "structlog", "asyncio")


@pytest.mark.parametrize("argv", [*(["produce", name, "--help"] for name in PRODUCERS),
                                  *(["produce", name, "--no-such-option"] for name in PRODUCERS)],
                         ids=" ".join)
def test_producers_help_and_usage_errors_import_no_heavy_stack(argv: list[str]) -> None:
    """As for the commands: ``produce NAME --help`` imports that producer's module for its
    options, and only that (the producer's machinery is imported by its run)."""
    done = subprocess.run([sys.executable, "-c", _IMPORTED_BY, ",".join(PRODUCER_HEAVY),
                           *argv], capture_output=True, text=True, check=False)
    result = json.loads(done.stderr.strip().splitlines()[-1])
    if argv[-1] == "--help":
        assert result["code"] == 0
        assert done.stdout.startswith(f"usage: depeg-monitor produce {argv[1]}")
    else:
        assert result["code"] == 2 and ": error: " in done.stderr
    assert result["heavy"] == []


def test_the_entry_point_reader_agrees_with_importlib_metadata() -> None:
    from importlib.metadata import entry_points

    standard = {(ep.name, ep.value) for ep in entry_points(group=cli.GROUP)}
    assert standard and {(ep.name, ep.value) for ep in cli.entry_points(cli.GROUP)} == standard


def test_a_replay_imports_no_logging_stack_or_network_stack(tmp_path: Path) -> None:
    """A clean replay logs nothing, so it does not import structlog (and asyncio and, in
    a development install, rich behind it: most of a short replay's start-up), nor any
    network client, nor what it needs no more: hashlib (OpenSSL; event ids use the stdlib's
    own SHA-1), the vault tag catalog (the default blocking tags skip its check), logging
    itself (configured when first imported: monitor/logsetup.py), configparser (the entry
    points are read without it) and shutil (argparse's help formatter asked it for the
    terminal width); it still writes its transitions."""
    ticks = tmp_path / "ticks.csv"
    ticks.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n"
                     "2023-03-11T07:50:00Z,eth,0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48,"
                     "USDC,0.99,1,\n")
    out = tmp_path / "out.jsonl"
    heavy = ("structlog", "rich", "asyncio", "aiokafka", "aiohttp", "asyncpg", "aiosqlite",
             "hashlib", "_hashlib", "monitor.vaults.catalog", "logging", "monitor.logs",
             "configparser", "shutil")
    done = subprocess.run([sys.executable, "-c", _IMPORTED_BY, ",".join(heavy),
                           "--log-level", "warning", "--data-dir", str(tmp_path / "data"),
                           "replay", "--out", str(out), str(ticks)],
                          capture_output=True, text=True, check=False)
    result = json.loads(done.stderr.strip().splitlines()[-1])
    assert result["code"] == 0 and out.exists(), done.stderr
    assert result["heavy"] == []
