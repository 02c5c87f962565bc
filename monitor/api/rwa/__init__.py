"""The pegged-token resource: ``GET /rwa`` (E6) and ``GET /rwa/{address}`` (E7).

``routes`` has the handlers and parsing, ``view`` turns stored rows into response bodies,
``openapi`` describes the routes.
"""

from .openapi import OPENAPI_PATHS, OPENAPI_SCHEMAS
from .routes import add_routes

__all__ = ["OPENAPI_PATHS", "OPENAPI_SCHEMAS", "add_routes"]
