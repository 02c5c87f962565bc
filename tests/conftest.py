"""Shared fixtures: real parts only (a Tansu broker, PostgreSQL, SQLite files, data)."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

# The suite tests the pure-Python modules, the reference, unless told otherwise: a compiled
# build in the user's own data directory (docs/compiled.md) must not change what runs here.
os.environ.setdefault("DEPEG_MONITOR_COMPILED", "off")

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


@pytest.fixture(autouse=True)
def gc_policy_undone() -> Iterator[None]:
    """A service started by a test applies the [gc] policy to the whole pytest process
    (monitor/gcpolicy.py): undo it after the test, so the next one starts from CPython's
    collector and nothing one test froze outlives it."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        gc.enable()


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


def _distributed(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker (``-n 3``): the workers collect and run the tests (the
    controller only hands them out), and xdist gives each one ``workerinput``."""
    return getattr(config, "workerinput", None) is not None


def _slow(item: pytest.Item) -> bool:
    """Tests that start servers or child processes and wait on them (a broker, the whole
    service, a ganache node): the long ones, best started first."""
    return any(item.get_closest_marker(name) for name in ("broker", "live")) or \
        item.path.parent.name == "chain"


def _unique_node_ids(items: list[pytest.Item]) -> None:
    """xdist knows a test by its node id and runs each id once; schemathesis gives every
    operation it fuzzes the same id (the test function's), with the operation only in the
    name -- so under xdist 21 of its 22 operations would silently not run. Those items get
    their name as the last part of the id, as parametrized tests have anyway."""
    from _pytest.nodeid import NodeId  # pytest >= 9 keeps the id in ``_id``

    seen: dict[str, int] = {}
    for item in items:
        seen[item.nodeid] = seen.get(item.nodeid, 0) + 1
    for item in items:
        if seen[item.nodeid] > 1:
            item._id = NodeId.parse(f"{item.nodeid.rpartition('::')[0]}::{item.name}")
    ids = [item.nodeid for item in items]
    assert len(set(ids)) == len(ids), "test ids still repeat: xdist would drop some tests"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``.ci/run`` uses ``-n 3 --dist loadfile``, so the tests of one
    file share one worker, its module fixtures and its order): every test has its own id,
    and the files with slow tests are handed out first (with ``--no-loadscope-reorder``),
    so no worker is left with a 100 s test at the end while the other has nothing to do.
    Without xdist the order is pytest's own."""
    if not _distributed(config):
        return
    _unique_node_ids(items)
    items.sort(key=lambda item: not _slow(item))  # stable: file order within each half


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
