"""The entry points of installed distributions, read from their ``entry_points.txt``
files: importing :mod:`importlib.metadata` (it pulls in the email package) cost more than
the rest of ``depeg-monitor --help``, and :mod:`configparser` ~8.6 M instructions of
every start (monitor/cli.py discovers its commands here)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator


class EntryPoint:
    """One ``name = module:attribute`` line of an installed distribution. A plain class:
    a dataclass compiles its generated methods at every start."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value: str) -> None:
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r})"

    def load(self) -> object:
        module, _, attribute = self.value.partition(":")
        found: object = importlib.import_module(module.strip())
        for part in filter(None, attribute.strip().split(".")):
            found = getattr(found, part)
        return found


def entry_points(group: str) -> list[EntryPoint]:
    """The group's entry points from every distribution on ``sys.path``, first one of a
    name winning (as :mod:`importlib.metadata` does). Read directly from the
    ``entry_points.txt`` files: importing :mod:`importlib.metadata` (it pulls in the
    email package) cost more than the rest of ``--help``."""
    found: dict[str, EntryPoint] = {}
    wanted = group.encode()
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        folder = os.path.join(entry or ".", "")  # with its separator: joined by hand below
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            path = f"{folder}{name}{os.sep}entry_points.txt"
            # Most distributions have no such file: a test that raises no exception,
            # where a failed open() raised one per distribution (~100 of them here).
            if not os.access(path, os.R_OK):
                continue
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            # Most of the rest have no entry of ours: skip them before decoding (UTF-8
            # holds the group's bytes exactly where its text holds the group).
            if wanted not in data:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            for key, value in _section(text, group):
                found.setdefault(key, EntryPoint(key, value))
    return list(found.values())


def _section(text: str, group: str) -> Iterator[tuple[str, str]]:
    """The ``name = value`` lines of ``[group]`` in an ``entry_points.txt``, read the way
    :mod:`importlib.metadata` reads them (stripped lines, ``#`` and ``;`` comments, ``[section]``
    headers, split at the first ``=``) rather than with :mod:`configparser`, whose import
    and parser (9 regular expressions compiled) cost ~8.6 M instructions a start."""
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group:
            name, sep, value = line.partition("=")
            if sep:
                yield name.strip(), value.strip()
