"""``depeg-monitor``: one console script, subcommands discovered from entry points."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from . import __version__
from .command_index import HELP, is_service
from .commands import Command
from .entrypoints import EntryPoint, entry_points

__all__ = ["GROUP", "EntryPoint", "HelpFormatter", "build_parser", "discover", "entry_points",
           "main"]

if TYPE_CHECKING:  # the config module is loaded when a command runs, not for --help
    from .config import Config

GROUP = "depeg_monitor.commands"


def _load(ep: EntryPoint) -> Command | None:
    try:
        command = ep.load()
    except ImportError as exc:
        # One broken or not-yet-installed plugin must not take every command down.
        print(f"depeg-monitor: skipping command {ep.name!r}: {exc}", file=sys.stderr)
        return None
    return command if isinstance(command, Command) else None


def discover() -> dict[str, Command]:
    """Every command, imported (slow: each pulls in its dependencies)."""
    found: dict[str, Command] = {}
    for ep in entry_points(GROUP):
        command = _load(ep)
        if command is not None:
            found[command.name] = command
    return dict(sorted(found.items()))


def _listed(eps: list[EntryPoint]) -> dict[str, Command]:
    """Commands for the top-level listing: the indexed ones as placeholders carrying just
    their help (nothing imported), the others imported for theirs."""
    found: dict[str, Command] = {}
    for ep in eps:
        if ep.name in HELP:
            found[ep.name] = Command(ep.name, HELP[ep.name], lambda _parser: None,
                                     lambda _args, _config: 2)
        elif (command := _load(ep)) is not None:
            found[command.name] = command
    return dict(sorted(found.items()))


#: A URL's password (compiled by the ``config`` command only: not at every start).
_URL_PASSWORD = r"(://[^:/@]+:)[^@]+@"


def _redacted(tree: Any) -> Any:
    """The config with secrets masked: it gets pasted into tickets and chat."""
    if isinstance(tree, dict):
        return {
            k: "[redacted]" if v and any(w in k for w in ("secret", "password")) else _redacted(v)
            for k, v in tree.items()
        }
    if isinstance(tree, str):
        import re

        return re.sub(_URL_PASSWORD, r"\1[redacted]@", tree)
    return tree


def _config_command() -> Command:
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--defaults", action="store_true",
                            help="print every setting's default, with what it means (TOML)")
        parser.add_argument("--example", action="store_true",
                            help="print depeg-monitor.example.toml (the defaults, commented "
                                 "out, ready to copy and edit)")

    def run(args: argparse.Namespace, config: object) -> int:
        import msgspec

        from .config import to_toml_comments

        if args.example:
            from .config_doc import example

            print(example(), end="")
        elif args.defaults:
            print(to_toml_comments(), end="")
        else:
            shown = _redacted(msgspec.to_builtins(config))
            print(msgspec.json.format(msgspec.json.encode(shown)).decode())
        return 0

    return Command("config", "print the effective configuration (file + environment)", add, run)


def _columns() -> int:
    """``shutil.get_terminal_size().columns``, which argparse's help formatter asks for at
    every ``add_argument``, without importing :mod:`shutil` (with zlib, bz2 and lzma behind
    it): ``$COLUMNS`` when a positive number, else stdout's terminal width, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, as wide as it would make itself (``shutil`` less 2)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _columns() - 2 if width is None else width)


class _Unparsed:
    """A subcommand of the first pass: takes nothing and leaves every argument over for
    the second, as an ``ArgumentParser(add_help=False)`` without arguments does, without
    building one per command (17 of them, with their gettext look-ups, were a tenth of
    a replay's start-up past the interpreter's own)."""

    def __init__(self, **_options: object) -> None:
        pass

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        return namespace or argparse.Namespace(), list(args or ())


def build_parser(commands: dict[str, Command], placeholders: bool = False
                 ) -> argparse.ArgumentParser:
    """The full parser; ``placeholders``: subcommands without their own options or -h
    (what they are given is left over, for the second pass)."""
    parser = argparse.ArgumentParser(
        prog="depeg-monitor", formatter_class=HelpFormatter,
        description=(
            "Watches pegged tokens for loss of peg. Configuration comes from --config (or "
            "$DEPEG_CONFIG), then DEPEG_<SECTION>__<FIELD> environment variables; "
            "`depeg-monitor config --defaults` lists every setting."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="runtime files: database, secret key, run state (storage.data_dir; "
                             "default $XDG_DATA_HOME/depeg-monitor or "
                             "~/.local/share/depeg-monitor)")
    parser.add_argument("--log-level", metavar="LEVEL", help="debug, info, warning, error")
    parser.add_argument("--log-format", choices=["auto", "json", "console"],
                        help="log format (default: json unless stderr is a terminal)")
    if placeholders:
        # argparse calls only parse_known_args on a subcommand's parser (and its help,
        # -h, is the second pass's): typed as a parser for add_subparsers' sake.
        unparsed = cast("type[argparse.ArgumentParser]", _Unparsed)
        first = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=unparsed)
        for command in commands.values():
            first.add_parser(command.name, help=command.help)
        return parser
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in commands.values():
        child = sub.add_parser(command.name, help=command.help, formatter_class=HelpFormatter,
                               description=command.description or command.help)
        command.add_arguments(child)
    return parser


def _follow_data_dir(config_file: str | None, data_dir: str | None) -> Config | None:
    """Load the compiled build (monitor/compiled.py) of the data directory ``--data-dir``
    or the config file names, before the command's modules are imported; the config
    loaded for it (``main`` uses it rather than reading the file again), or None when it
    does not load: the real load below reports that."""
    from .compiled import use_data_dir
    from .config import ConfigError, load_config

    try:
        config = load_config(config_file, data_dir=data_dir)
    except ConfigError:
        return None
    use_data_dir(str(config.storage.data_dir))
    return config


def _freeze_start_up() -> None:
    """A job's start-up heap (modules, classes, functions, parsers: what lives until the
    process ends) moved out of the cyclic collector's reach, as a service does with its
    own once started (``[gc]``, monitor/gcpolicy.py): no full collection during the run,
    nor the one at the interpreter's exit, walks it again (a replay of the shared files:
    -25 M instructions, 0.9 %). What the job allocates is collected as before. Only when
    ``main`` is the process: frozen, a caller's own objects (a test run) would never be
    collected."""
    import gc

    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    """Two passes, so only the command that runs is imported: the first parses against
    placeholder subcommands (enough for the top-level --help and to learn the command's
    name), the second against that one command, fully built. Without ``argv`` (the
    console script, ``python -m monitor``) the process ends when this returns."""
    whole_process = argv is None
    argv = sys.argv[1:] if argv is None else argv
    eps = entry_points(GROUP)
    listed = _listed(eps)
    listed.setdefault("config", _config_command())
    top = build_parser(listed, placeholders=True)
    first, _ = top.parse_known_args(argv)
    if not first.command:
        top.print_help()  # the listing is the full parser's (tests/test_cli_startup.py)
        return 2
    if is_service(first.command, argv):
        # A stop while it starts is kept and honoured once the service runs (earlystop).
        from .earlystop import install

        install()
    from .config import CONFIG_ENV  # loaded below in any case

    early = None
    if first.data_dir or first.config or os.environ.get(CONFIG_ENV):
        early = _follow_data_dir(first.config, first.data_dir)
    from .compiled import release_warning

    # A build the process does not use is warned about now that the data directory is
    # known; `compile` replaces that build (or reports it with --status): no warning.
    release_warning(quiet=first.command == "compile")
    chosen = next((ep for ep in eps if ep.name == first.command), None)
    command = _load(chosen) if chosen is not None else None
    commands = {first.command: command or listed[first.command]}
    args = build_parser(commands).parse_args(argv)
    from .config import ConfigError, load_config

    try:
        same = (args.config, args.data_dir) == (first.config, first.data_dir)
        config = early if early is not None and same else \
            load_config(args.config, data_dir=args.data_dir)
    except ConfigError as exc:
        print(f"depeg-monitor: {exc}", file=sys.stderr)
        return 2
    from .logsetup import configure_when_imported

    # A command that never logs (a clean replay) never imports logging either.
    configure_when_imported(
        level=args.log_level or config.logging.level,
        fmt=args.log_format or config.logging.format,
    )
    if whole_process and not is_service(args.command, argv):
        _freeze_start_up()
    try:
        return commands[args.command].run(args, config)
    except BrokenPipeError:
        # The reader of stdout went away (`depeg-monitor keys list | head`): no traceback,
        # and nothing more written; the exit status a shell gives a process ended by
        # SIGPIPE. stdout points at /dev/null so the interpreter's last flush is quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + 13


if __name__ == "__main__":
    sys.exit(main())
