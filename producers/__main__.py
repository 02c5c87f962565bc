"""``python -m producers ...``: the ``produce`` command alone (same as ``depeg-monitor produce``).

Useful where only this package's command should load (tests, minimal images).
"""

from __future__ import annotations

import sys

from monitor.cli import build_parser
from monitor.config import ConfigError, load_config
from monitor.logs import configure_logging

from .command import command


def main(argv: list[str] | None = None) -> int:
    parser = build_parser({"produce": command})
    args = parser.parse_args(["produce", *(sys.argv[1:] if argv is None else argv)])
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"depeg-monitor produce: {exc}", file=sys.stderr)
        return 2
    configure_logging(level=args.log_level or config.logging.level,
                      fmt=args.log_format or config.logging.format)
    return command.run(args, config)


if __name__ == "__main__":
    sys.exit(main())
