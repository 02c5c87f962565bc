"""The vault read API: E4 ``GET /vaults`` and E5 ``GET /vaults/{address}``."""

from .openapi import OPENAPI_PATHS, OPENAPI_SCHEMAS
from .routes import add_routes

__all__ = ["OPENAPI_PATHS", "OPENAPI_SCHEMAS", "add_routes"]
