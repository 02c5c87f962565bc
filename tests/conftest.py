"""Shared fixtures: real parts only (a Tansu broker, PostgreSQL, SQLite files, data)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from monitor.kafka.embedded import EmbeddedBroker

REPO = Path(__file__).resolve().parent.parent
#: Real depeg data lives beside the repository (never copied into it).
DATA_DIR = Path(os.environ.get("DEPEG_DATA_DIR", REPO.parent / "shared" / "data"))
PG_ADMIN_URL = os.environ.get("DEPEG_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


#: Files a test run may create in the checkout: interpreter and tool caches, nothing a
#: process of ours writes.
_DEV_NOISE = ("__pycache__/", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/",
              ".hypothesis/", ".venv/", ".egg-info/", ".coverage")


def checkout_status() -> set[str] | None:
    """``git status`` of the checkout, ignored files included (a stray ``*.db`` is ignored
    by .gitignore and must still count), minus tool caches; None when not a git checkout."""
    if not (REPO / ".git").exists():
        return None
    git = shutil.which("git")
    assert git, "this is a git checkout but git is not installed: cannot check it"
    out = subprocess.run(
        [git, "-C", str(REPO), "status", "--porcelain", "--untracked-files=all",
         "--ignored=matching"], capture_output=True, text=True, check=True).stdout
    return {line for line in out.splitlines()
            if line and not any(noise in line for noise in _DEV_NOISE)}


@pytest.fixture(scope="session", autouse=True)
def checkout_untouched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The whole suite runs from a temporary working directory, with a temporary data
    directory (XDG_DATA_HOME) and any free port for the embedded broker, and fails if the
    checkout changed: no test or server it starts may write runtime files (a database, a
    secret key, replay outputs) into the repository."""
    before = checkout_status()
    saved_cwd = os.getcwd()
    saved_env = {k: os.environ.get(k) for k in ("XDG_DATA_HOME", "DEPEG_KAFKA__EMBEDDED_PORT")}
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
    os.environ.setdefault("DEPEG_KAFKA__EMBEDDED_PORT", "0")  # never the fixed 19092
    os.chdir(tmp_path_factory.mktemp("cwd"))
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if before is not None:
        after = checkout_status()
        assert after is not None
        changed = sorted(line for line in after - before if not _edited_source(line))
        assert not changed, f"the test run left files in the checkout {REPO}: {changed}"


def _edited_source(status_line: str) -> bool:
    """Someone editing the worktree while the suite runs, not a test writing into it:
    changes to tracked files, and new Python or Markdown sources. Anything else new --
    a database, a key, a replay output, run.json -- fails the run."""
    code, path = status_line[:2], status_line[3:]
    return ("?" not in code and "!" not in code) or path.endswith((".py", ".md"))


def data_file(relative: str) -> Path:
    """A file under ../shared/data, or a clean skip that says why."""
    path = DATA_DIR / relative
    if not path.exists():
        pytest.skip(f"real data not available: {path} (see ../shared/data/SOURCES.md)")
    return path


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A fresh Tansu broker per test on a free loopback port."""
    b = EmbeddedBroker(log_path=tmp_path / "tansu.log")
    b.start()
    try:
        yield b
    finally:
        b.stop()


@asynccontextmanager
async def fresh_pg_database() -> AsyncIterator[str]:
    """A throw-away PostgreSQL database (created and dropped around the block)."""
    import asyncpg

    name = f"depeg_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = await asyncpg.connect(PG_ADMIN_URL)
    except (OSError, asyncpg.PostgresError) as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL}: {exc}")
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        admin = await asyncpg.connect(PG_ADMIN_URL)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_pg_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
async def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Runs a test once on a SQLite file and once on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
    else:
        async with fresh_pg_database() as url:
            yield url
