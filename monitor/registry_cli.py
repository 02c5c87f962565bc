"""``depeg-monitor registry check FILE``: validate a Token Lists registry file.

Exit 0 with the token count per chain when the file is valid; exit 1 with every problem
(schema, checksums, duplicates, unknown chains, the peg extension) otherwise; 2 when the file
cannot be read or is not JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .commands import Command
from .config import Config
from .tokenlist import chains_in_order, check_tokenlist


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="registry_action", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate a Token Lists registry file",
                           description=__doc__)
    check.add_argument("file", type=Path, metavar="FILE", help="registry (.tokenlist.json)")


def run(args: argparse.Namespace, config: Config) -> int:
    try:
        doc = json.loads(args.file.read_text(encoding="utf-8"))
    except OSError as exc:
        print(f"registry check: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"registry check: {args.file} is not JSON: {exc}", file=sys.stderr)
        return 2
    report = check_tokenlist(doc)
    for error in report.errors:
        print(f"{args.file}: {error}", file=sys.stderr)
    counts = ", ".join(f"{chain} {n}" for chain, n in chains_in_order(report))
    if not report.ok:
        print(f"registry check: {args.file}: {len(report.errors)} problem(s) in "
              f"{report.tokens} tokens", file=sys.stderr)
        return 1
    print(f"{args.file}: valid Token List, {report.tokens} tokens ({counts})")
    return 0


command = Command(
    name="registry",
    help="token registry tools: `registry check FILE` validates a Token Lists registry",
    add_arguments=add_arguments,
    run=run,
    description=__doc__ or "",
)
