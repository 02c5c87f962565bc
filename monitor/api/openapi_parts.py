"""Builders for the route modules' OpenAPI fragments (references, query parameters,
objects), so every resource describes itself the same way."""

from __future__ import annotations

from typing import Any


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def resp(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/responses/{name}"}


def query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


def obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}
