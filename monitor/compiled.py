"""Opt-in: the hot modules compiled with mypyc, loaded in place of their sources.

``python benchmarks/build_compiled.py`` compiles :data:`MODULES` into a directory of its
own (never the checkout) and ``DEPEG_MONITOR_COMPILED=<that directory>`` makes the
``monitor`` and ``monitor.engine`` packages look there first. The pure-Python modules
stay the reference and the fallback: without the variable nothing changes; with it, a
build whose sources differ from the files beside this one (edited since, or another
checkout), or made for another interpreter, is ignored with a warning and the sources
run. ``tests/test_compiled_build.py`` checks a build gives byte-identical replays.

This module must stay cheap and dependency-free: both package ``__init__`` files call it,
so it imports nothing beyond ``os`` and ``sys`` until the variable is set (CLI start-up).
"""

from __future__ import annotations

import os
import sys

#: The modules compiled: the engine, the CSV path and the replay loop. Never a module
#: that defines a msgspec struct (mypyc would turn it into a native class and break its
#: encoding): those live in ``engine/saved.py``, ``ticks.py`` and ``records.py``.
MODULES = ("monitor/engine/windows.py", "monitor/engine/readings.py",
           "monitor/engine/ringfields.py", "monitor/engine/signals.py",
           "monitor/engine/rating.py", "monitor/engine/tiers.py",
           "monitor/engine/memo.py", "monitor/engine/params.py",
           "monitor/engine/figures.py", "monitor/engine/rounding.py",
           "monitor/engine/steady.py", "monitor/engine/engine.py", "monitor/tickfiles.py",
           "monitor/timefmt.py", "monitor/replay.py")
ENV = "DEPEG_MONITOR_COMPILED"
MANIFEST = "depeg-monitor-compiled.json"
#: The checkout's (or installed tree's) root: the directory holding ``monitor/``.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def source_digests(root: str = SOURCE_ROOT) -> dict[str, str]:
    """SHA-256 of each compiled module's source: a build is used only for these bytes."""
    try:  # CPython's own SHA-256 (3.11): hashlib would load OpenSSL, ~2 ms of every start
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from hashlib import sha256

    digests = {}
    for module in MODULES:
        with open(os.path.join(root, module), "rb") as fh:
            digests[module] = sha256(fh.read()).hexdigest()
    return digests


def interpreter_tag() -> str:
    """The extension suffix of this interpreter (``.cpython-311-x86_64-linux-gnu.so``)."""
    import importlib.machinery

    return importlib.machinery.EXTENSION_SUFFIXES[0]


_checked: dict[str, str | None] = {}


def build_dir() -> str | None:
    """The compiled build to use, or None (not asked for, or not usable: warned)."""
    wanted = os.environ.get(ENV, "").strip()
    if not wanted:
        return None
    if wanted in _checked:
        return _checked[wanted]
    import json
    import warnings

    folder = os.path.abspath(wanted)
    problem = None
    try:
        with open(os.path.join(folder, MANIFEST), encoding="utf-8") as fh:
            manifest = json.load(fh)
    except (OSError, ValueError) as exc:
        problem = f"no readable {MANIFEST} ({exc})"
    else:
        if manifest.get("interpreter") != interpreter_tag():
            problem = f"built for {manifest.get('interpreter')}, this is {interpreter_tag()}"
        elif manifest.get("sources") != source_digests():
            problem = "the sources changed since it was built; rebuild it"
    if problem is not None:
        warnings.warn(f"{ENV}={wanted}: not used, {problem}", RuntimeWarning, stacklevel=3)
        _checked[wanted] = None
        return None
    # mypyc's shared runtime library is a top-level module of the build directory.
    if folder not in sys.path:
        sys.path.append(folder)
    _checked[wanted] = folder
    return folder


def search_first(package: str, path: list[str]) -> None:
    """Put the build's directory for ``package`` before the sources in its ``__path__``."""
    folder = build_dir()
    if folder is not None:
        compiled = os.path.join(folder, *package.split("."))
        if os.path.isdir(compiled) and compiled not in path:
            path.insert(0, compiled)
