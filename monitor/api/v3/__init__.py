"""The versioned V3 surface: E9 ``/v3/framework``, E3 ``/v3/rwa/{address}`` (and E8
``/v3/vaults/{address}`` once vault ratings are stored).

``pins`` parses and echoes the framework/grading pins and the spec's V3 errors, ``body``
renders the graded shape, ``framework``/``rwa`` are the routes, ``openapi`` describes them.
"""

from aiohttp import web

from . import framework, rwa
from .openapi import OPENAPI_PATHS, OPENAPI_SCHEMAS

__all__ = ["OPENAPI_PATHS", "OPENAPI_SCHEMAS", "add_routes"]


def add_routes(app: web.Application) -> None:
    framework.add_routes(app)
    rwa.add_routes(app)
