"""What the webhook suites share: a migrated webhook database on each backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from monitor.storage import Database, connect
from monitor.storage.webhooks import migrate_webhooks


@pytest.fixture
async def db(storage_url: str) -> AsyncIterator[Database]:
    """A database with the webhook tables, on the backend ``storage_url`` names."""
    database = await connect(storage_url)
    await migrate_webhooks(database)
    try:
        yield database
    finally:
        await database.close()
