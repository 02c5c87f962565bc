"""``depeg-monitor``: one console script, subcommands discovered from entry points."""

from __future__ import annotations

import argparse
import re
import sys
from importlib.metadata import entry_points
from typing import Any

from . import __version__
from .commands import Command
from .config import ConfigError, load_config, to_toml_comments
from .logs import configure_logging

GROUP = "depeg_monitor.commands"


def discover() -> dict[str, Command]:
    found: dict[str, Command] = {}
    for ep in entry_points(group=GROUP):
        try:
            command = ep.load()
        except ImportError as exc:
            # One broken or not-yet-installed plugin must not take every command down.
            print(f"depeg-monitor: skipping command {ep.name!r}: {exc}", file=sys.stderr)
            continue
        if isinstance(command, Command):
            found[command.name] = command
    return dict(sorted(found.items()))


_URL_PASSWORD = re.compile(r"(://[^:/@]+:)[^@]+@")


def _redacted(tree: Any) -> Any:
    """The config with secrets masked: it gets pasted into tickets and chat."""
    if isinstance(tree, dict):
        return {
            k: "[redacted]" if v and any(w in k for w in ("secret", "password")) else _redacted(v)
            for k, v in tree.items()
        }
    if isinstance(tree, str):
        return _URL_PASSWORD.sub(r"\1[redacted]@", tree)
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


def build_parser(commands: dict[str, Command]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="depeg-monitor",
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in commands.values():
        child = sub.add_parser(command.name, help=command.help,
                               description=command.description or command.help)
        command.add_arguments(child)
    return parser


def main(argv: list[str] | None = None) -> int:
    commands = discover()
    commands.setdefault("config", _config_command())
    parser = build_parser(commands)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        config = load_config(args.config, data_dir=args.data_dir)
    except ConfigError as exc:
        print(f"depeg-monitor: {exc}", file=sys.stderr)
        return 2
    configure_logging(
        level=args.log_level or config.logging.level,
        fmt=args.log_format or config.logging.format,
    )
    return commands[args.command].run(args, config)


if __name__ == "__main__":
    sys.exit(main())
