"""``depeg-monitor registry check [FILE]``: validate a token registry file.

FILE defaults to the configured registry (``registry.path``). A ``.json`` file is a Token
List: exit 0 with the token count per chain when it is valid; exit 1 with every problem
(schema, checksums, duplicates, unknown chains, the peg extension) otherwise. Any other file
is the TOML registry format, checked as start-up loads it (exit 1 with the first problem).
Exit 2 when no file is given and none is configured, or the file cannot be read or is not
JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from .chains import CHAINS
from .commands import Command

if TYPE_CHECKING:
    from .config import Config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="registry_action", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate a Token Lists registry file",
                           description=__doc__)
    check.add_argument("file", type=Path, metavar="FILE", nargs="?",
                       help="registry (.tokenlist.json, or the TOML format); default: "
                            "registry.path of the configuration")


def run(args: argparse.Namespace, config: Config) -> int:
    # The Token Lists checker pulls in eth-utils (address checksums): imported to check,
    # not for ``registry --help``.
    from .tokenlist import chains_in_order, check_tokenlist

    if args.file is None:
        if not config.registry.path:
            print("registry check: no FILE given and no registry configured: pass FILE, or "
                  "set registry.path (DEPEG_REGISTRY__PATH)", file=sys.stderr)
            return 2
        args.file = Path(config.registry.path)
    if args.file.suffix != ".json" and args.file.is_file():
        return _check_toml(args.file)
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


def _check_toml(path: Path) -> int:
    """The TOML registry, validated by the loader start-up uses (it stops at the first
    problem, as start-up does)."""
    from .registry import RegistryError, load_registry

    try:
        tokens = load_registry(path)
    except RegistryError as exc:
        print(f"registry check: {exc}", file=sys.stderr)
        return 1
    per_chain = Counter(t.chain for t in tokens)
    counts = ", ".join(f"{chain} {per_chain[chain]}" for chain in CHAINS if per_chain[chain])
    print(f"{path}: valid registry, {len(tokens)} tokens ({counts})")
    return 0


command = Command(
    name="registry",
    help="token registry tools: `registry check [FILE]` validates a registry (default: "
         "the configured registry.path)",
    add_arguments=add_arguments,
    run=run,
    description=__doc__ or "",
)
