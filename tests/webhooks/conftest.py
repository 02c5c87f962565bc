"""Fixtures for the webhook tests.

This directory is a package (``__init__.py``) so that this module is ``webhooks.conftest``:
a second top-level ``conftest`` module would replace the root one that tests import by
name (``from conftest import REPO``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from monitor.storage import Database, connect
from monitor.storage.webhooks import migrate_webhooks


@pytest.fixture
async def webhook_db(storage_url: str) -> AsyncIterator[Database]:
    """A fresh database with the webhook tables, on each backend ``storage_url`` gives."""
    database = await connect(storage_url)
    await migrate_webhooks(database)
    try:
        yield database
    finally:
        await database.close()
