"""The resource modules of the API, in registration order.

Each module (or subpackage) has ``add_routes(app)`` and describes its routes in
``OPENAPI_PATHS`` / ``OPENAPI_SCHEMAS``. ``app.create_app`` registers them and
``openapi.build_document`` assembles their descriptions; adding a resource is one line here.
"""

from __future__ import annotations

from types import ModuleType

from . import health, rwa, usage, v3, vaults, webhooks

ROUTE_MODULES: tuple[ModuleType, ...] = (health, webhooks, rwa, vaults, v3, usage)
