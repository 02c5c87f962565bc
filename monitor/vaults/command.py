"""``depeg-monitor vaults``: the vault daemon, and ``vaults replay`` over fact files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

from ..commands import Command, add_bootstrap_servers, with_bootstrap_servers
from ..config import Config
from ..paths import data_dir

DESCRIPTION = """\
Without an action: run the vault daemon. It consumes fact records from vaults.facts and the
depeg monitor's tier changes from depeg.tier-changes, rates every vault (41 tags -> 0-100
rating -> tier and listing verdict), publishes each change to vaults.ratings, dead-letters
bad fact records to vaults.facts.dlq with the reason, and keeps each vault's state on the
compacted vaults.state topic so a restart or a rebalance continues where it stopped. Run
several with the same group to split the partitions. SIGTERM/Ctrl-C: the batch in flight
finishes, states are written, offsets committed.

`vaults replay FACTS.jsonl... [--depeg TRANSITIONS.jsonl...] [--out OUT.jsonl]` runs the same
engine over fact files and depeg tier-change files (as `depeg-monitor replay` writes them),
merged by event time, and writes the vaults.ratings records; byte-identical on every run.

Settings: [vaults] (thresholds, floors, severity_points, category_cap, blocking_tags,
min_known_facts, attention_*, facts_topic, ratings_topic, dlq_topic, state_topic, group) and
[kafka] for the broker. `depeg-monitor config --defaults` prints every setting; docs/vaults.md
explains them.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_bootstrap_servers(parser)
    parser.add_argument("--group", metavar="NAME", help="consumer group (overrides vaults.group)")
    sub = parser.add_subparsers(dest="vaults_action", metavar="ACTION")
    replay = sub.add_parser(
        "replay", help="run fact files through the vault engine, write vaults.ratings records",
        description=("Merges fact files (JSON lines, DESIGN.md 'Vault facts') and depeg "
                     "tier-change files by event time, runs the vault engine and writes one "
                     "vaults.ratings record per change to --out, in event-time order. Bad "
                     "lines are counted and shown with their reason on stderr. Settings: "
                     "[vaults] of --config."))
    replay.add_argument("facts", nargs="+", type=Path, metavar="FACTS.jsonl",
                        help="fact files, one JSON object per line")
    replay.add_argument("--depeg", nargs="+", type=Path, default=[], metavar="TRANSITIONS.jsonl",
                        help="depeg tier-change files (DEPEG_TIER_CHANGE event objects)")
    replay.add_argument("--out", type=Path,
                        help="write the vaults.ratings records here, one per line (default: "
                             "replays/<first file>.vault-ratings.jsonl in the data directory)")
    replay.add_argument("--overwrite", action="store_true",
                        help="replace an output file that already exists (default: refuse)")


def run(args: argparse.Namespace, config: Config) -> int:
    if args.vaults_action == "replay":
        return _replay(args, config)
    return run_daemon(args, config)


def apply_overrides(config: Config, args: argparse.Namespace) -> Config:
    config = with_bootstrap_servers(config, getattr(args, "bootstrap_servers", None))
    if getattr(args, "group", None):
        vaults = msgspec.structs.replace(config.vaults, group=args.group)
        config = msgspec.structs.replace(config, vaults=vaults)
    return config


def run_daemon(args: argparse.Namespace, config: Config) -> int:
    """The vault daemon alone (no broker configured: exit 2 naming the setting)."""
    from ..services import run_broker_service
    from .daemon import run_service  # aiokafka and the engine: loaded only to run

    return run_broker_service("vaults", run_service, apply_overrides(config, args))


def _replay(args: argparse.Namespace, config: Config) -> int:
    from ..replay import clash  # the engine: loaded only for a replay
    from .replay import replay_files

    missing = [str(p) for p in [*args.facts, *args.depeg] if not p.is_file()]
    if missing:
        print(f"vaults replay: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    out = replay_output(args, config)
    # The same guard as ``depeg-monitor replay``: never an input, never an existing file
    # unless --overwrite.
    problem = clash(out, None, [*args.facts, *args.depeg], args.overwrite)
    if problem is not None:
        print(f"vaults replay: {problem}", file=sys.stderr)
        return 2
    summary = replay_files(args.facts, args.depeg, out, config.vaults)
    print(summary.render(), file=sys.stderr)
    print(f"vaults replay: wrote {out}", file=sys.stderr)
    return 0


def replay_output(args: argparse.Namespace, config: Config) -> Path:
    """``--out``, else beside ``depeg-monitor replay``'s outputs in the data directory,
    named after the first fact file (as ``replay`` names its own)."""
    if args.out is not None:
        return Path(args.out)
    stem = args.facts[0].name.split(".")[0] or "vaults"
    return data_dir(config) / "replays" / f"{stem}.vault-ratings.jsonl"


command = Command(
    name="vaults",
    help="rate ERC-4626 vaults: the vault daemon (Kafka), or `vaults replay` over fact files",
    add_arguments=add_arguments,
    run=run,
    description=DESCRIPTION,
)
