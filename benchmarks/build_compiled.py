"""Build the optional mypyc-compiled hot modules (``monitor/compiled.py``) into DIR.

    python benchmarks/build_compiled.py [--out DIR]
    export DEPEG_MONITOR_COMPILED=DIR     # then depeg-monitor runs the compiled modules

Opt-in and outside the install: a default ``pip install`` needs no compiler, and the
pure-Python modules stay the reference (tests run them unless the variable is set). The
build works on a copy of the ``monitor`` package in a temporary directory, so the checkout
never gains a file, and writes a manifest of the sources' digests: an edited source makes
the build ignored (with a warning) until it is rebuilt. Needs mypy (the ``test`` extra
ships it, mypyc with it), setuptools, gcc and the Python headers.
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

from monitor.compiled import ENV, MANIFEST, MODULES, SOURCE_ROOT, interpreter_tag, source_digests

DEFAULT_OUT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) \
    / "depeg-monitor" / "compiled"


def build(out: Path) -> list[Path]:
    """Compile :data:`MODULES` and install the extension modules in ``out``."""
    root = Path(SOURCE_ROOT)
    with tempfile.TemporaryDirectory(prefix="depeg-mypyc-") as tmp:
        work = Path(tmp)
        shutil.copytree(root / "monitor", work / "monitor",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        shutil.copy2(root / "pyproject.toml", work / "pyproject.toml")  # mypy's settings
        done = subprocess.run([sys.executable, "-m", "mypyc", *MODULES], cwd=work,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
            raise SystemExit(f"mypyc failed (exit {done.returncode})")
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
                "modules": [str(p.relative_to(out)) for p in installed]}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return installed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"where to put the build (default: {DEFAULT_OUT})")
    args = parser.parse_args()
    out = args.out.resolve()
    if out == Path(SOURCE_ROOT) or Path(SOURCE_ROOT) in out.parents:
        raise SystemExit("--out must be outside the source tree (it would shadow sources)")
    installed = build(out)
    for path in installed:
        print(path)
    print(f"export {ENV}={out}")


if __name__ == "__main__":
    main()
