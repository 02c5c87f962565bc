"""Storage: one small async interface, two real backends (SQLite file, PostgreSQL)."""

from .db import Database, Migration, connect, migrate

__all__ = ["Database", "Migration", "connect", "migrate"]
