"""The fast CLI start-up (only the chosen command is imported) prints exactly what the
parser built from every imported command prints: the same listing, the same per-command
help, the same errors."""

from __future__ import annotations

import pytest

from monitor import cli
from monitor.command_index import HELP


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


def test_the_entry_point_reader_agrees_with_importlib_metadata() -> None:
    from importlib.metadata import entry_points

    standard = {(ep.name, ep.value) for ep in entry_points(group=cli.GROUP)}
    assert standard and {(ep.name, ep.value) for ep in cli.entry_points(cli.GROUP)} == standard
