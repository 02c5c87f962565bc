"""``depeg-monitor compile``: build the mypyc-compiled hot modules (docs/compiled.md).

Cheap to import (the command's ``--help``): the build itself is monitor/compiled_build.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import compiled
from .commands import Command

if TYPE_CHECKING:
    from .config import Config

HELP = ("build the engine, CSV and replay modules with mypyc (faster replay and monitor); "
        "--status shows which modules run")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", metavar="DIR", type=Path,
        help=f"where to put the build (default: {compiled.DIRECTORY}/ in the data directory; "
             f"a build elsewhere is used with {compiled.ENV}=DIR)")
    parser.add_argument(
        "--status", action="store_true",
        help="build nothing: say whether processes in this environment run the compiled "
             "build or the pure-Python modules, and why")


def _status(config: Config) -> int:
    import monitor.engine.engine as engine

    used = compiled.in_use()
    wanted = os.environ.get(compiled.ENV, "").strip()
    print(f"modules: {used['modules']} "
          f"({used.get('build') or used.get('why')}; engine: {engine.__file__})")
    print(f"{compiled.ENV}: {wanted or '(unset: the data directory)'}")
    print(f"data directory's location: {Path(config.storage.data_dir) / compiled.DIRECTORY}")
    return 0


def _run(args: argparse.Namespace, config: Config) -> int:
    if args.status:
        return _status(config)
    from .compiled_build import BuildError, build
    from .logs import get_logger
    from .paths import ensure_data_dir

    default = Path(config.storage.data_dir) / compiled.DIRECTORY
    out = (args.out or default).expanduser().resolve()
    log = get_logger(__name__)
    try:
        if out == default.resolve():
            ensure_data_dir(Path(config.storage.data_dir))  # 0700, as every data directory
        build(out, log)
    except BuildError as exc:
        print(f"compile: {exc}", file=sys.stderr)
        return 1
    print(_how_it_is_used(out, default.resolve()))
    return 0


def _how_it_is_used(out: Path, default: Path) -> str:
    """The final line: which processes will load the build, or how to make them."""
    wanted = os.environ.get(compiled.ENV, "").strip()
    done = f"compiled build ready in {out}"
    if wanted.lower() == compiled.OFF:
        return (f"{done}; {compiled.ENV}={wanted} here, so processes with this environment "
                f"run the pure-Python modules: unset it (or set {compiled.ENV}={out}) to use it")
    if wanted and Path(wanted).expanduser().resolve() == out:
        return (f"{done}: depeg-monitor processes started with {compiled.ENV}={wanted} "
                "(replay, monitor, run, every command) load it in place of the pure-Python "
                "modules")
    if not wanted and out == default:
        return (f"{done}: depeg-monitor processes with this data directory (replay, monitor, "
                f"run, every command) now load it; {compiled.ENV}={compiled.OFF} runs pure "
                "Python, `depeg-monitor compile --status` shows which runs")
    return (f"{done}: processes do not find it by themselves (it is not compiled/ in their "
            f"data directory, {default}). Use it with: export {compiled.ENV}={out}")


command = Command(
    name="compile",
    help=HELP,
    description=(
        "Compiles the engine, the CSV reader and the replay loop (monitor/compiled.py's "
        "MODULES) with mypyc into compiled/ in the data directory (or --out DIR), never into "
        "the source tree. Every later depeg-monitor process whose data directory (--data-dir, "
        f"the config file's storage.data_dir, {compiled.DATA_DIR_ENV}, else "
        "$XDG_DATA_HOME/depeg-monitor, else ~/.local/share/depeg-monitor) holds a build made "
        "from the same sources for the same interpreter loads it in place of the pure-Python "
        f"modules (byte-identical output); a stale build is ignored with a warning. "
        f"{compiled.ENV}=off forces pure Python, {compiled.ENV}=DIR names a build made with "
        "--out. Needs mypy, setuptools "
        "(pip install 'depeg-monitor[compiled]'), a C compiler and the Python headers; "
        "takes about a minute. See docs/compiled.md."
    ),
    add_arguments=_add_arguments,
    run=_run,
)
