"""The CLI's logging set-up, applied when :mod:`logging` is first imported.

Every command configures logging before it runs (monitor/cli.py), but a clean ``replay``
never logs, and importing :mod:`logging` (with ``string``, ``threading``, ``traceback``)
and ``monitor.logs`` was ~22 M instructions of its start-up, ~7 % of the process past the
interpreter's own. So when nothing has imported :mod:`logging` yet, the configuration
waits here and a finder on ``sys.meta_path`` watches for that import: right after the
``logging`` module has run, it imports ``monitor.logs``, whose last lines apply the
waiting configuration (:func:`take_waiting`), before the importer gets ``logging`` back
and so before anything can log. When :mod:`logging` is imported already (a service's
modules, the tests), ``configure_logging`` runs at once, as it always did.

This module imports nothing beyond ``sys`` at its top: it is loaded at every start.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

#: The names ``logging.Logger.setLevel`` accepts before anything adds its own (none can:
#: ``logging`` is not imported yet when a level is checked here).
LEVELS = frozenset({"CRITICAL", "FATAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG",
                    "NOTSET"})

#: ``configure_logging``'s arguments, waiting for :mod:`logging`'s first import.
_waiting: list[tuple[str, str, IO[str]]] = []


def configure_when_imported(level: str, fmt: str, stream: IO[str] | None = None) -> None:
    """``monitor.logs.configure_logging(level, fmt, stream)``, now if :mod:`logging` is
    imported, else right after its first import. A level ``logging`` would refuse is
    refused here and now, with its error (``ValueError: Unknown level: 'X'``)."""
    if level.upper() not in LEVELS:
        raise ValueError(f"Unknown level: {level.upper()!r}")
    stream = stream or sys.stderr
    if "logging" in sys.modules:
        from .logs import configure_logging

        configure_logging(level, fmt, stream)
        return
    _waiting[:] = [(level, fmt, stream)]
    if not any(isinstance(finder, _OnLoggingImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OnLoggingImport())


def take_waiting() -> tuple[str, str, IO[str]] | None:
    """The configuration waiting for :mod:`logging` (given once), or None."""
    return _waiting.pop() if _waiting else None


class _OnLoggingImport:
    """A finder for ``logging`` alone: it lets the other finders find it, and has its loader
    import ``monitor.logs`` right after running it (once; then it steps aside)."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: object = None) -> Any:
        if name != "logging":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                run(module)
            finally:
                del loader.exec_module  # this loader's own method again
            if _waiting:
                # Imported now, or being imported (its `import logging` led here): either
                # way its last lines configure, before anything can log.
                import monitor.logs  # noqa: F401

        # On this spec's loader only (a new object per module found): the loader stays
        # the standard one for logging's __loader__, its source and its tracebacks.
        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
