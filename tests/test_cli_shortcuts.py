"""The CLI's start-up shortcuts against what they replace: the first pass's placeholder
subcommand against an empty ``ArgumentParser``, the help formatter's width against
``shutil``'s, the entry-point reader against :mod:`importlib.metadata`, ``Command``
against the frozen dataclass it was, and logging configured on its first import
(monitor/logsetup.py) against ``configure_logging`` called directly."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.metadata
import io
import json
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor import cli, entrypoints, logsetup
from monitor.commands import Command

#: Command-line words: options, option=value, "--", "-", negative numbers, spaces.
_WORDS = st.lists(st.one_of(
    st.sampled_from(["--", "-", "-h", "--help", "--out", "--out=x", "-5", "-1.5", "a b",
                     "-x y", "replay", "file.csv", "--config", "=", ""]),
    st.text(alphabet="-=ab1 .", max_size=6)), max_size=8)


@given(_WORDS)
@settings(max_examples=300, deadline=None)
def test_the_placeholder_leaves_what_an_empty_parser_leaves(words: list[str]) -> None:
    empty = argparse.ArgumentParser(prog="p", add_help=False)
    expected = empty.parse_known_args(words)
    got = cli._Unparsed(prog="p").parse_known_args(words)
    assert (vars(got[0]), got[1]) == (vars(expected[0]), expected[1])


@given(_WORDS)
@settings(max_examples=200, deadline=None)
def test_the_first_pass_finds_what_real_subparsers_find(words: list[str]) -> None:
    """The top-level parser with placeholders against one with empty real subparsers:
    the same namespace and leftovers, or the same usage error."""
    commands = {name: Command(name, f"{name} help", lambda _p: None, lambda _a, _c: 0)
                for name in ("replay", "status")}
    real = cli.build_parser(commands)
    for action in real._actions:
        if isinstance(action, argparse._SubParsersAction):
            for parser in action.choices.values():
                parser._actions.clear()
                parser._option_string_actions.clear()
    results: list[object] = []
    for parser in (cli.build_parser(commands, placeholders=True), real):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
                namespace, rest = parser.parse_known_args(["replay", *words])
            results.append((vars(namespace), rest))
        except SystemExit as exc:  # a usage error (an ambiguous option, ...)
            results.append((exc.code, err.getvalue()))
    assert results[0] == results[1]


@pytest.mark.parametrize("columns", [None, "", "0", "-3", "abc", "100", " 90", "21"])
def test_the_help_formatter_is_as_wide_as_shutils(columns: str | None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    for lines in (None, "30"):
        if lines is None:
            monkeypatch.delenv("LINES", raising=False)
        else:
            monkeypatch.setenv("LINES", lines)
        mine, standard = cli.HelpFormatter("p"), argparse.HelpFormatter("p")
        assert (mine._width, mine._max_help_position) == (
            standard._width, standard._max_help_position)


_ENTRY_TEXTS = [
    "[console_scripts]\na = b:c\n\n[depeg_monitor.commands]\nreplay = monitor.replay:command\n"
    "  status=monitor.status:command  \n# comment = x:y\n\n[other]\nreplay = z:z\n",
    "[depeg_monitor.commands]\nx = m.n:attr.sub [extra]\ny= m : a\n",
    "[depeg_monitor.commands.more]\nx = a:b\n[ depeg_monitor.commands ]\ny = c:d\n",
    "\n\n[depeg_monitor.commands]\n\n    indented = a.b:c\nwith=equals = a:b=c\n",
]


@pytest.mark.parametrize("text", _ENTRY_TEXTS)
def test_the_entry_point_section_is_read_as_importlib_metadata_reads_it(
        text: str, tmp_path: Path) -> None:
    (tmp_path / "entry_points.txt").write_text(text, encoding="utf-8")
    standard = [(ep.name, ep.value) for ep in
                importlib.metadata.PathDistribution(tmp_path).entry_points
                if ep.group == cli.GROUP]
    assert list(entrypoints._section(text, cli.GROUP)) == standard


def test_command_behaves_as_the_frozen_dataclass_it_was() -> None:
    @dataclasses.dataclass(frozen=True)
    class Command:  # the former definition, under the same name for its repr
        name: str
        help: str
        add_arguments: Callable[[argparse.ArgumentParser], None]
        run: Callable[[argparse.Namespace, object], int]
        description: str = ""

    Command.__qualname__ = "Command"

    def add(_parser: argparse.ArgumentParser) -> None:
        pass

    def run(_args: argparse.Namespace, _config: object) -> int:
        return 0

    from monitor.commands import Command as Mine

    for args, kwargs in [(("a", "h", add, run), {}), (("a", "h", add, run, "d"), {}),
                         (("a", "h"), {"add_arguments": add, "run": run, "description": "x"})]:
        old, new = Command(*args, **kwargs), Mine(*args, **kwargs)  # type: ignore[arg-type]
        assert repr(new) == repr(old)
        assert hash(new) == hash(old)
        assert new == Mine(*args, **kwargs) and not new != Mine(*args, **kwargs)  # type: ignore[arg-type]
        assert new != Mine("other", "h", add, run) and new != old
        for field in ("name", "help", "add_arguments", "run", "description"):
            assert getattr(new, field) == getattr(old, field)
            with pytest.raises(AttributeError):
                setattr(new, field, "x")
            with pytest.raises(AttributeError):
                delattr(new, field)


def test_a_level_is_refused_as_logging_refuses_it() -> None:
    assert logsetup.LEVELS == set(logging.getLevelNamesMapping())
    for level in ("bogus", "10", "warn ", ""):
        with pytest.raises(ValueError) as standard:
            logging.Logger("x").setLevel(level.upper())
        with pytest.raises(ValueError) as mine:
            logsetup.configure_when_imported(level, "json")
        assert str(mine.value) == str(standard.value)


#: In a fresh interpreter: configure (``how``), then import logging the way ``first``
#: says, log twice below and once at the level, and print what came out on stderr.
_FRESH = """
import io, json, sys
how, first, level = sys.argv[1:4]
stream = io.StringIO()
stream.isatty = lambda: False
if how == "waiting":
    from monitor.logsetup import configure_when_imported
    configure_when_imported(level, "json", stream)
    assert "logging" not in sys.modules and "monitor.logs" not in sys.modules
else:
    from monitor.logs import configure_logging
    configure_logging(level, "json", stream)
if first == "logging":
    import logging
    logging.getLogger("lib").debug("below %s", "it")
    logging.getLogger("lib").warning("at %s, api_key=%s", "warning", "secret-value")
    logging.getLogger("aiokafka").info("chatty")
else:
    from monitor.logs import get_logger
    get_logger("ours").debug("below")
    get_logger("ours").warning("at", api_key="dpm_0123456789abcdefghij", n=1)
import logging
from monitor.logsetup import _OnLoggingImport
print(json.dumps({
    "lines": [{k: v for k, v in json.loads(line).items() if k != "timestamp"}
              for line in stream.getvalue().splitlines()],
    "level": logging.getLogger().level,
    "finders": sum(isinstance(f, _OnLoggingImport) for f in sys.meta_path),
    "own_exec": "exec_module" in vars(logging.__spec__.loader),
}))
"""


@pytest.mark.parametrize("first", ["logging", "monitor.logs"])
@pytest.mark.parametrize("level", ["warning", "info"])
def test_logging_configured_on_its_first_import_logs_as_configured_at_once(
        first: str, level: str) -> None:
    """Whether a library's ``import logging`` or ``monitor.logs`` (whose own import of
    logging sets the configuring off) comes first: the same records, the same level, and
    nothing left behind (no finder, the loader's own ``exec_module``)."""
    results = []
    for how in ("waiting", "at-once"):
        done = subprocess.run([sys.executable, "-c", _FRESH, how, first, level],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        results.append(json.loads(done.stdout))
    assert results[0] == results[1]
    assert results[0]["lines"] and results[0]["finders"] == 0 and not results[0]["own_exec"]


def test_with_logging_imported_it_is_configured_at_once() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logsetup.configure_when_imported("error", "json")
        assert root.level == logging.ERROR and len(root.handlers) == 1
        assert logsetup.take_waiting() is None
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


#: ``main()`` as the process (``sys.argv``), or called with arguments; the frozen count.
_FREEZE = """
import gc, sys
from monitor.cli import main
as_process = sys.argv[1] == "process"
argv = sys.argv[2:]
before = gc.get_freeze_count()
if as_process:
    sys.argv = ["depeg-monitor", *argv]
    code = main()
else:
    code = main(argv)
print(code, gc.get_freeze_count() > before)
"""


@pytest.mark.parametrize("as_process", [True, False])
def test_a_job_freezes_its_start_up_only_when_main_is_the_process(
        as_process: bool, tmp_path: Path) -> None:
    """Called with arguments (a test, a caller of its own), ``main`` leaves the collector
    as it found it; as the process, a job's start-up heap is frozen before it runs."""
    done = subprocess.run(
        [sys.executable, "-c", _FREEZE, "process" if as_process else "call",
         "--data-dir", str(tmp_path / "data"), "config"],
        capture_output=True, text=True, check=False)
    assert done.stdout.splitlines()[-1] == f"0 {as_process}", done.stderr
