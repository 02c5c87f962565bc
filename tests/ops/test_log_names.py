"""Every log event is named ``component.event`` (``api.listening``, ``webhook.attempt``),
in every package, so an operator can filter one component's events with one prefix."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO

NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
LEVELS = {"debug", "info", "warning", "error", "exception", "critical"}


def _event_names(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        targets = [func]
        if isinstance(func, ast.IfExp):  # (log.info if ok else log.warning)("name", ...)
            targets = [func.body, func.orelse]
        if all(isinstance(t, ast.Attribute) and t.attr in LEVELS
               and isinstance(t.value, ast.Name) and t.value.id in {"log", "logger"}
               for t in targets):
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
    return found


def test_every_log_event_is_component_dot_event() -> None:
    checked, bad = 0, []
    for package in ("monitor", "consumers", "producers"):
        for path in sorted((REPO / package).rglob("*.py")):
            for line, name in _event_names(path):
                checked += 1
                if not NAME.match(name):
                    bad.append(f"{path.relative_to(REPO)}:{line}: {name!r}")
    assert checked > 50  # the scan really sees the log calls
    assert not bad, "log events not named component.event:\n" + "\n".join(bad)
