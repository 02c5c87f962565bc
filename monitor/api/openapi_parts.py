"""Builders for the route modules' OpenAPI fragments (references, query parameters,
objects), so every resource describes itself the same way."""

from __future__ import annotations

from typing import Any

from .paging import LIMIT_DEFAULT, MAX_PAGE, PAGE_MAX, PAGE_SIZE_DEFAULT


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def resp(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/responses/{name}"}


def query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


def address_param(example: str) -> dict[str, Any]:
    """The ``{address}`` path parameter of a detail route: 0x and 40 hex digits, any case."""
    return {"name": "address", "in": "path", "required": True,
            "schema": {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$"}, "example": example}


def obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


def json_response(schema: dict[str, Any], description: str,
                  headers: dict[str, Any] | None = None) -> dict[str, Any]:
    """A response whose body is JSON of ``schema``."""
    out: dict[str, Any] = {"description": description,
                           "content": {"application/json": {"schema": schema}}}
    if headers:
        out["headers"] = headers
    return out


# Property schemas every resource uses.
NUM_OR_NULL: dict[str, Any] = {"type": ["number", "null"]}
STR_OR_NULL: dict[str, Any] = {"type": ["string", "null"]}
TIME: dict[str, Any] = {"type": "string", "format": "date-time"}
TIME_OR_NULL: dict[str, Any] = {"type": ["string", "null"], "format": "date-time"}

#: What a read with a key can answer besides 200 (``ratelimit.document`` adds 429 anyway).
READ_ERRORS: dict[str, Any] = {"400": resp("BadRequest"), "401": resp("Unauthorized"),
                               "429": resp("TooManyRequests")}

# The two pagination modes of the list endpoints (monitor/api/paging.py).
PAGINATION_MODES = (
    "Two pagination modes: offset (`page`, `pageSize`) and keyset (`cursor`, "
    "`limit`; pass `nextCursor` back). Do not mix them. Ties are broken by chain "
    "and address, so pages are disjoint and complete. ")
PAGINATION_PARAMS: list[dict[str, Any]] = [
    query("page", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 1},
          "Offset mode page number"),
    query("pageSize", {"type": "integer", "minimum": 1, "maximum": PAGE_MAX,
                       "default": PAGE_SIZE_DEFAULT}, "Offset mode page size"),
    query("cursor", {"type": "string", "maxLength": 512}, "Keyset mode: nextCursor"),
    query("limit", {"type": "integer", "minimum": 1, "maximum": PAGE_MAX,
                    "default": LIMIT_DEFAULT}, "Keyset mode page size"),
]
#: The ``pagination`` object of a list answer, in either mode.
PAGINATION: dict[str, Any] = obj(
    ["mode", "total", "hasMore"], mode={"type": "string", "enum": ["offset", "cursor"]},
    total={"type": "integer", "minimum": 0}, hasMore={"type": "boolean"},
    page={"type": "integer"}, pageSize={"type": "integer"},
    totalPages={"type": "integer"}, limit={"type": "integer"},
    nextCursor={"type": ["string", "null"],
                "description": "Pass as `cursor` for the next page; null at the end"})
