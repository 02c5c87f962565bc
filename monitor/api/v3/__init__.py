"""The versioned V3 surface: E9 ``/v3/framework``, E8 ``/v3/vaults/{address}``, E3
``/v3/rwa/{address}``.

``pins`` parses and echoes the framework/grading pins and the spec's V3 errors, ``body``
renders the graded shape, ``framework``/``vaults``/``rwa`` are the routes, ``openapi``
describes them.
"""

from aiohttp import web

from . import framework, rwa, vaults
from .openapi import OPENAPI_PATHS, OPENAPI_SCHEMAS

__all__ = ["OPENAPI_PATHS", "OPENAPI_SCHEMAS", "add_routes"]


def add_routes(app: web.Application) -> None:
    framework.add_routes(app)
    vaults.add_routes(app)
    rwa.add_routes(app)
