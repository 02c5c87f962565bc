"""Shared fixtures: real parts only (a Tansu broker, PostgreSQL, SQLite files, data)."""

from __future__ import annotations

import os
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
