"""The hot modules compiled with mypyc, loaded in place of their sources when built.

``depeg-monitor compile`` (monitor/compiled_build.py) compiles :data:`MODULES` into
``compiled/`` in the data directory; every later process then loads them from there: the
``__init__`` of each package in :data:`PACKAGES` calls :func:`search_first`, which puts
the build's directory before the sources in the package's ``__path__``. Which build, if
any (docs/compiled.md):

* ``DEPEG_MONITOR_COMPILED=off``: none, the pure-Python modules;
* ``DEPEG_MONITOR_COMPILED=<dir>``: that build (a build made with ``--out``);
* unset or empty: ``compiled/`` in the data directory *as the environment names it*
  (``DEPEG_STORAGE__DATA_DIR``, else ``$XDG_DATA_HOME/depeg-monitor``, else
  ``~/.local/share/depeg-monitor``), when one was built there. The modules are chosen
  when the package is imported, before ``--data-dir`` or a config file is read.

The pure-Python modules stay the reference and the fallback: a build whose sources differ
from the files beside this one (edited since, or another checkout or version), made for
another interpreter, or incomplete, is ignored with one warning (re-run the command; the
``depeg-monitor`` command gives it once its command line is parsed, ``compile`` never) and
the sources run. ``tests/test_compiled_build.py`` checks a build replays byte for byte.

This module must stay cheap and dependency-free: the packages' ``__init__`` files call it,
so it imports nothing beyond ``os`` and ``sys`` (CLI start-up); with a build, it reads the
manifest and compares the sources' sizes and mtimes, hashing them only when those differ.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence  # loaded with os already: free

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (~2 ms of every start): mypy
#: reads any name so spelled as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

#: The modules compiled: the engine, the tick file readers, the replay loop, the
#: monitor daemon's per-tick loop and the tick class they share (``tick.py``). Never a
#: module that defines a msgspec struct (mypyc would turn it into a native class and break
#: its encoding): those live in ``engine/saved.py``, ``ticks.py`` and ``records.py``.
MODULES = ("monitor/engine/windows.py", "monitor/engine/readings.py",
           "monitor/engine/ringfields.py", "monitor/engine/signals.py",
           "monitor/engine/rating.py", "monitor/engine/tiers.py",
           "monitor/engine/memo.py", "monitor/engine/params.py",
           "monitor/engine/figures.py", "monitor/engine/rounding.py",
           "monitor/engine/steady.py", "monitor/engine/engine.py",
           "monitor/engine/tokenstate.py", "monitor/engine/outputs.py",
           "monitor/engine/refresh.py",
           "monitor/engine/ringroll.py", "monitor/engine/windowquery.py", "monitor/tickfiles.py",
           "monitor/csvplain.py", "monitor/tickrows.py", "monitor/jsonlplain.py",
           "monitor/timefmt.py", "monitor/replay.py", "monitor/daemon/feed.py",
           "monitor/tick.py")
#: The packages holding compiled modules: each one's ``__init__`` calls :func:`search_first`.
PACKAGES = ("monitor", "monitor.engine", "monitor.daemon")
ENV = "DEPEG_MONITOR_COMPILED"
#: The value of :data:`ENV` that forces the pure-Python modules.
OFF = "off"
#: The build's manifest: plain ``key value`` lines (parsed without the json module, which
#: would be most of this module's cost at every start with a build): :class:`Manifest`.
MANIFEST = "depeg-monitor-compiled.txt"
MANIFEST_HEADER = "depeg-monitor compiled build, manifest 1"
#: The build's directory inside the data directory (the command's default ``--out``).
DIRECTORY = "compiled"
#: The environment form of ``storage.data_dir`` (monitor/config/process.py).
DATA_DIR_ENV = "DEPEG_STORAGE__DATA_DIR"
#: The checkout's (or installed tree's) root: the directory holding ``monitor/``.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REBUILD = "run `depeg-monitor compile` to rebuild it"


def source_stats(root: str = SOURCE_ROOT) -> dict[str, tuple[int, int]]:
    """Size and modification time (ns) of each compiled module's source."""
    stats = {}
    for module in MODULES:
        st = os.stat(os.path.join(root, module))
        stats[module] = (st.st_size, st.st_mtime_ns)
    return stats


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


class Manifest:
    """What a build was made from: the interpreter, each source's digest (and its size
    and mtime then, so an unchanged file need not be hashed again), and its modules."""

    def __init__(self, interpreter: str, sources: dict[str, str],
                 stats: dict[str, tuple[int, int]], modules: list[str],
                 info: dict[str, str] | None = None) -> None:
        self.interpreter = interpreter
        self.sources = sources
        self.stats = stats
        self.modules = modules
        #: Informative lines (mypy version, source root): shown, never compared.
        self.info = info or {}

    def render(self) -> str:
        lines = [MANIFEST_HEADER, f"interpreter {self.interpreter}"]
        lines += [f"{key} {value}" for key, value in self.info.items()]
        for module, digest in self.sources.items():
            size, mtime = self.stats[module]
            lines.append(f"source {module} {digest} {size} {mtime}")
        lines += [f"module {module}" for module in self.modules]
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, text: str) -> Manifest | None:
        """The manifest ``text`` holds, or None when it is not one."""
        lines = text.splitlines()
        if not lines or lines[0] != MANIFEST_HEADER:
            return None
        fields: dict[str, str] = {}
        sources: dict[str, str] = {}
        stats: dict[str, tuple[int, int]] = {}
        modules: list[str] = []
        try:
            for line in lines[1:]:
                key, _, value = line.partition(" ")
                if key == "source":
                    module, digest, size, mtime = value.rsplit(" ", 3)
                    sources[module] = digest
                    stats[module] = (int(size), int(mtime))
                elif key == "module":
                    modules.append(value)
                else:
                    fields[key] = value
        except ValueError:
            return None
        interpreter = fields.pop("interpreter", "")
        return cls(interpreter, sources, stats, modules, fields)

    def matches_sources(self, root: str = SOURCE_ROOT) -> bool:
        """Whether the sources are the bytes this was built from: by size and mtime when
        none changed (no file read), else by digest (a touched file still matches)."""
        if set(self.sources) != set(MODULES):
            return False
        if source_stats(root) == self.stats:
            return True
        return source_digests(root) == self.sources


def interpreter_tag() -> str:
    """The extension suffix of this interpreter (``.cpython-311-x86_64-linux-gnu.so``)."""
    import importlib.machinery

    return importlib.machinery.EXTENSION_SUFFIXES[0]


def default_location(env: Mapping[str, str] | None = None) -> str:
    """``compiled/`` in the data directory the environment names: what monitor/paths.py
    resolves without ``--data-dir`` or a config file (tests check they agree). Written
    with ``os.path`` alone: pathlib is not imported yet when this runs."""
    env = os.environ if env is None else env
    configured = env.get(DATA_DIR_ENV, "")
    if configured:
        data = os.path.realpath(os.path.expanduser(configured))
    elif (xdg := env.get("XDG_DATA_HOME", "").strip()) and os.path.isabs(xdg):
        data = os.path.join(xdg, "depeg-monitor")
    elif sys.platform == "win32" and env.get("LOCALAPPDATA"):
        data = os.path.join(env["LOCALAPPDATA"], "depeg-monitor")
    else:
        home = env.get("HOME") or os.path.expanduser("~")
        data = os.path.join(os.path.expanduser(home), ".local", "share", "depeg-monitor")
    return os.path.join(data, DIRECTORY)


def problem(folder: str, explicit: bool) -> str | None:
    """Why the build in ``folder`` cannot be used; None when it can, "" when there is
    none (no manifest) and it was not asked for by name (the usual case, said nowhere)."""
    return _inspect(folder, explicit)[0]


def _inspect(folder: str, explicit: bool) -> tuple[str | None, Manifest | None]:
    """:func:`problem`'s answer, and the build's manifest when it can be used."""
    try:
        with open(os.path.join(folder, MANIFEST), encoding="utf-8") as fh:
            manifest = Manifest.parse(fh.read())
    except FileNotFoundError:
        return (f"it has no {MANIFEST} (not a build)" if explicit else ""), None
    except (OSError, ValueError) as exc:
        return f"its {MANIFEST} is unreadable ({exc})", None
    if manifest is None:
        return f"its {MANIFEST} is not a build manifest", None
    if manifest.interpreter != interpreter_tag():
        return f"it was built for {manifest.interpreter}, this is {interpreter_tag()}", None
    try:
        same = manifest.matches_sources()
    except OSError as exc:
        return f"the sources could not be read ({exc})", None
    if not same:
        return "the sources changed since it was built", None
    if not manifest.modules:
        return f"its {MANIFEST} lists no modules", None
    missing = [m for m in manifest.modules if not os.path.isfile(os.path.join(folder, m))]
    if missing:
        return f"it is incomplete ({', '.join(missing[:3])} missing)", None
    return None, manifest


def _warn(message: str, stacklevel: int) -> None:
    """One warning; never an exception (``-W error`` must not break start-up)."""
    import warnings

    try:
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)
    except Exception:
        sys.stderr.write(f"RuntimeWarning: {message}\n")


def started_as_command(argv: list[str] | None = None,
                       orig_argv: list[str] | None = None) -> bool:
    """Whether this is the ``depeg-monitor`` command (console script, ``python -m monitor``),
    whose packages choose their modules before its command line is parsed: its warning
    waits for :func:`release_warning` (``compile`` replaces that build, so it does not)."""
    argv = sys.argv if argv is None else argv
    orig_argv = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
    first = argv[0] if argv else ""
    name = os.path.basename(first)
    for launcher in ("-script.pyw", "-script.py", ".exe"):  # pip's Windows launchers
        name = name.removesuffix(launcher)
    if name == "depeg-monitor":
        return True
    if first != "-m":  # while ``python -m X`` imports X's package, argv[0] is "-m"
        return False
    for i, arg in enumerate(orig_argv[1:], 1):
        if arg.startswith("-m"):
            module = arg[2:] or (orig_argv[i + 1] if i + 1 < len(orig_argv) else "")
            return module in ("monitor", "monitor.cli")
    return False


#: A build's directory (None: pure Python), why, and the warning to give ("": none).
Decision = tuple[str | None, str, str]
#: What :func:`decide` found, per (variable, default location).
_decided: dict[tuple[str, str], Decision] = {}
#: Whether warnings wait for :func:`release_warning`; set at the first decision.
_holding: list[bool] = []


def _held() -> bool:
    if not _holding:
        _holding.append(started_as_command())
    return _holding[0]


def _decision() -> Decision:
    wanted = os.environ.get(ENV, "").strip()
    key = (wanted, "" if wanted else default_location())
    if key in _decided:
        return _decided[key]
    found: Decision
    if wanted.lower() == OFF:
        found = (None, f"{ENV}={wanted}", "")
    elif wanted:
        found = _choose(os.path.abspath(wanted), f"{ENV}={wanted}", explicit=True)
    else:
        found = _choose(key[1], "the default location", explicit=False)
    _decided[key] = found
    if found[2] and not _held():
        _warn(found[2], stacklevel=3)  # the package import (search_first, _decision)
    return found


def decide() -> tuple[str | None, str]:
    """The build this process uses (its directory, or None for the pure-Python modules)
    and a short reason why; the first call per environment warns about an unusable build
    (in the ``depeg-monitor`` command: :func:`release_warning` does)."""
    folder, why, _ = _decision()
    return folder, why


def _choose(folder: str, named: str, explicit: bool) -> Decision:
    """The build in ``folder`` if it can be used (its runtime library made importable by
    :class:`_RuntimeFinder`), else None, why, and the warning when there is a build and it
    is not used."""
    why_not, manifest = _inspect(folder, explicit)
    if why_not:
        return (None, f"the build in {folder} is not used: {why_not}",
                f"depeg-monitor: the compiled build in {folder} ({named}) is not used: "
                f"{why_not}. Running the pure-Python modules; {REBUILD}"
                f"{' with --out ' + folder if explicit else ''}, or set {ENV}={OFF}.")
    if manifest is None:
        return (None, f"no build in {folder}", "")
    _RUNTIME.add(folder, manifest.modules)
    return (folder, named, "")


class _RuntimeFinder:
    """Finds mypyc's shared runtime library of a build (``<hash>__mypyc``, a top-level
    module in the build's directory) for the compiled modules that import it.

    The build's directory is not put on ``sys.path``: its ``monitor/`` folder would then
    be a namespace package that the path finder offers for ``import monitor`` before an
    editable install's finder is asked. A child started by ``multiprocessing`` (spawn)
    inherits the parent's ``sys.path`` before the package is imported, so it imported the
    build's folder as ``monitor`` and failed on the first module not compiled."""

    def __init__(self) -> None:
        self._files: dict[str, str] = {}

    def add(self, folder: str, modules: list[str]) -> None:
        """Make the top-level modules of the build in ``folder`` (its manifest's
        ``modules``: the runtime library) importable; the latest build chosen wins
        (``use_data_dir`` moves the choice before any compiled module is loaded, and two
        builds of the same modules share the library's name)."""
        suffix = interpreter_tag()
        for file in modules:
            if not os.path.dirname(file):  # at the top of the build
                self._files[file.removesuffix(suffix)] = os.path.join(folder, file)
        if self not in sys.meta_path:
            sys.meta_path.append(self)

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        file = self._files.get(name)
        if file is None:
            return None
        from importlib.machinery import ExtensionFileLoader, ModuleSpec

        spec = ModuleSpec(name, ExtensionFileLoader(name, file), origin=file)
        spec.has_location = True
        return spec


_RUNTIME = _RuntimeFinder()


def release_warning(quiet: bool = False) -> None:
    """The ``depeg-monitor`` command, its command line parsed (and the data directory it
    names followed): give the held warning about the build the process does not use,
    unless ``quiet`` (``compile``: it replaces that build, or reports it with --status)."""
    if not _held():
        return
    _holding[0] = False
    if _applied and _applied[0][2] and not quiet:
        _warn(_applied[0][2], stacklevel=2)


def build_dir() -> str | None:
    """The compiled build to use, or None (off, none built, or not usable: warned)."""
    return decide()[0]


#: The decision the packages were set up with (the first :func:`search_first`): what
#: :func:`in_use` reports even if the environment changed since.
_applied: list[Decision] = []


def search_first(package: str, path: list[str]) -> None:
    """Put the build's directory for ``package`` before the sources in its ``__path__``."""
    if not _applied:
        _applied.append(_decision())
    folder = _applied[0][0]
    if folder is not None:
        compiled = os.path.join(folder, *package.split("."))
        if os.path.isdir(compiled) and compiled not in path:
            path.insert(0, compiled)


def use_data_dir(data_dir: str) -> None:
    """Follow a data directory named by ``--data-dir`` or a config file, known only after
    the packages chose from the environment: use the build in ``compiled/`` there instead.
    Nothing changes when the variable names a build (or ``off``), when that is the
    directory already chosen, or once a compiled module is loaded (a process never mixes
    two builds)."""
    if os.environ.get(ENV, "").strip() or not _applied:
        return
    folder = os.path.join(os.path.realpath(os.path.expanduser(data_dir)), DIRECTORY)
    if folder == os.path.realpath(default_location()):
        return
    names = [m[:-3].replace("/", ".") for m in MODULES]
    if any(name in sys.modules for name in names):
        return
    before = _applied[0][0]
    _applied[0] = _choose(folder, "the data directory", explicit=False)
    if _applied[0][2] and not _held():
        _warn(_applied[0][2], stacklevel=3)
    for package in PACKAGES:
        loaded = sys.modules.get(package)
        path = getattr(loaded, "__path__", None)
        if not isinstance(path, list):
            continue
        if before is not None:
            stale = os.path.join(before, *package.split("."))
            if stale in path:
                path.remove(stale)
        search_first(package, path)


def in_use() -> dict[str, str]:
    """Which modules this process runs, for start-up logs and ``compile --status``:
    ``{"modules": "compiled", "build": DIR}`` or ``{"modules": "python", "why": ...}``.
    Judged by the engine module actually loaded, when it is."""
    folder, why = _applied[0][:2] if _applied else decide()
    engine = sys.modules.get("monitor.engine.engine")
    loaded = getattr(engine, "__file__", None) or ""
    if folder is not None and (engine is None or not loaded.endswith(".py")):
        return {"modules": "compiled", "build": folder}
    if folder is not None:
        why = f"the build in {folder} was not loaded (the engine was imported before)"
    return {"modules": "python", "why": why}


def log_fields() -> dict[str, str]:
    """:func:`in_use` as flat start-up log fields (``engine_modules``, ``engine_build`` or
    ``engine_why``)."""
    return {f"engine_{key}": value for key, value in in_use().items()}
