"""Build the optional compiled hot modules (``monitor/compiled.py``) into DIR.

    python benchmarks/build_compiled.py [--out DIR]
    export DEPEG_MONITOR_COMPILED=DIR     # then depeg-monitor runs the compiled modules

Opt-in and outside the install: a default ``pip install`` needs no compiler, and the
pure-Python modules stay the reference (tests run them unless the variable is set). The
build works on a copy of the ``monitor`` package in a temporary directory, so the checkout
never gains a file, and writes a manifest of the sources' digests: an edited source makes
the build ignored (with a warning) until it is rebuilt. Needs mypy (the ``test`` extra
ships it, mypyc with it), setuptools, gcc and the Python headers; with Cython installed
(the ``test`` extra has it too) the window ring's modules are compiled with Cython
(:data:`~monitor.compiled.CYTHON_MODULES`), else with mypyc like the rest. ``--no-cython``
builds the mypyc-only variant (benchmarks compare the two).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from monitor.compiled import (
    CYTHON_MODULES,
    ENV,
    MANIFEST,
    MODULES,
    SOURCE_ROOT,
    interpreter_tag,
    source_digests,
)

DEFAULT_OUT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) \
    / "depeg-monitor" / "compiled"


#: Run in the work directory: Cython over the ring's modules, in place. Directives: the
#: ``.py`` annotations are left to mypy (the ``.pxd`` files say what is C); compiled
#: without floating-point contraction (no fused multiply-add: each ``*`` and ``+``
#: rounds as in Python), never with -ffast-math.
_CYTHON_SETUP = """
import sys
from Cython.Build import cythonize
from setuptools import Extension, setup
modules = sys.argv[1:]
setup(script_args=["build_ext", "--inplace", "-q"], ext_modules=cythonize(
    [Extension(m[:-3].replace("/", "."), [m], extra_compile_args=["-ffp-contract=off"])
     for m in modules],
    compiler_directives={"language_level": 3, "annotation_typing": False,
                         "infer_types": False},
    quiet=True))
"""


def cython_usable() -> bool:
    """Cython installed, and an interpreter whose float ``sum`` the C loops reproduce."""
    if sys.version_info >= (3, 12):
        return False
    try:
        import Cython  # noqa: F401
    except ImportError:
        return False
    return True


def _run(argv: list[str], cwd: Path, what: str) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"{what} failed (exit {done.returncode})")


def build(out: Path, *, cython: bool | None = None) -> list[Path]:
    """Compile :data:`MODULES` and install the extension modules in ``out``: the ring's
    modules with Cython when ``cython`` (default: when :func:`cython_usable`)."""
    if cython is None:
        cython = cython_usable()
    root = Path(SOURCE_ROOT)
    with tempfile.TemporaryDirectory(prefix="depeg-mypyc-") as tmp:
        work = Path(tmp)
        shutil.copytree(root / "monitor", work / "monitor",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        shutil.copy2(root / "pyproject.toml", work / "pyproject.toml")  # mypy's settings
        by_mypyc = [m for m in MODULES if not (cython and m in CYTHON_MODULES)]
        _run([sys.executable, "-m", "mypyc", *by_mypyc], work, "mypyc")
        if cython:
            _run([sys.executable, "-c", _CYTHON_SETUP, *CYTHON_MODULES], work, "Cython")
        built = sorted(p for p in work.rglob("*.so") if "build" not in p.relative_to(work).parts)
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        installed = []
        for path in built:
            target = out / path.relative_to(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            installed.append(target)
    manifest = {"interpreter": interpreter_tag(), "sources": source_digests(),
                "cython": sorted(CYTHON_MODULES) if cython else [],
                "modules": [str(p.relative_to(out)) for p in installed]}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return installed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"where to put the build (default: {DEFAULT_OUT})")
    parser.add_argument("--no-cython", action="store_true",
                        help="compile every module with mypyc, even with Cython installed")
    args = parser.parse_args()
    out = args.out.resolve()
    if out == Path(SOURCE_ROOT) or Path(SOURCE_ROOT) in out.parents:
        raise SystemExit("--out must be outside the source tree (it would shadow sources)")
    installed = build(out, cython=False if args.no_cython else None)
    for path in installed:
        print(path)
    print(f"export {ENV}={out}")


if __name__ == "__main__":
    main()
