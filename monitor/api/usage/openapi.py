"""OpenAPI path item and schema of ``GET /usage``."""

from __future__ import annotations

from typing import Any

_ERR = {"$ref": "#/components/schemas/Error"}

OPENAPI_SCHEMAS: dict[str, Any] = {
    "Usage": {
        "type": "object", "required": ["from", "to", "total_cu"],
        "properties": {
            "from": {"type": "string", "format": "date-time"},
            "to": {"type": "string", "format": "date-time"},
            "total_cu": {"type": "integer", "minimum": 0},
            "groupBy": {"enum": ["day", "endpoint"]},
            "items": {"type": "array", "items": {
                "type": "object", "required": ["cu"],
                "properties": {"day": {"type": "string", "format": "date"},
                               "endpoint": {"type": "string",
                                            "description": "E3, E8, E10-E15 or delivery"},
                               "cu": {"type": "integer", "minimum": 0}}}},
        },
    },
}

_TIME = {"type": "string", "description": "YYYY-MM-DD (a whole UTC day) or ISO 8601 UTC"}

OPENAPI_PATHS: dict[str, Any] = {
    "/usage": {"get": {
        "summary": "Compute units charged to this API key (free; never another key's)",
        "operationId": "getUsage", "tags": ["billing"],
        "parameters": [
            {"name": "from", "in": "query", "schema": _TIME,
             "description": "Inclusive start; default 30 days before `to`"},
            {"name": "to", "in": "query", "schema": _TIME,
             "description": "Exclusive end (a date includes that day); default now"},
            {"name": "groupBy", "in": "query", "schema": {"enum": ["day", "endpoint"]}},
        ],
        "responses": {
            "200": {"description": "Totals for the period",
                    "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/Usage"}}}},
            "400": {"description": "Invalid period or grouping",
                    "content": {"application/json": {"schema": _ERR}}},
            "401": {"description": "Missing or invalid x-api-key",
                    "content": {"application/json": {"schema": _ERR}}},
        },
    }},
}
