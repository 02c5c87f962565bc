"""The webhook resource: subscriptions and deliveries (spec E10-E15).

``routes`` has the handlers, ``requests`` validates request bodies and queries,
``openapi`` describes the routes.
"""

from ..context import CLOCK
from .openapi import OPENAPI_PATHS, OPENAPI_SCHEMAS, OPENAPI_SECURITY_SCHEMES
from .routes import add_routes

__all__ = ["CLOCK", "OPENAPI_PATHS", "OPENAPI_SCHEMAS", "OPENAPI_SECURITY_SCHEMES",
           "add_routes"]
