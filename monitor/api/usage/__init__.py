"""The usage resource: ``GET /usage``, the caller's compute units (ledger in storage/usage)."""

from .openapi import OPENAPI_PATHS, OPENAPI_SCHEMAS
from .routes import add_routes

__all__ = ["OPENAPI_PATHS", "OPENAPI_SCHEMAS", "add_routes"]
