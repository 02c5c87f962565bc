"""One JSON error shape for every failure: ``{"error": "...", ...details}``."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web


def error_response(status: int, message: str, headers: dict[str, str] | None = None,
                   **details: Any) -> web.Response:
    body = msgspec.json.encode({"error": message, **details})
    return web.Response(status=status, body=body, content_type="application/json",
                        headers=headers)


class ApiError(Exception):
    """Raise from a handler; the middleware turns it into :func:`error_response`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None,
                 **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers
        self.details = details

    def response(self) -> web.Response:
        return error_response(self.status, self.message, self.headers, **self.details)
