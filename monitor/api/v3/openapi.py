"""OpenAPI path items and schemas of the V3 routes (E3, E8, E9)."""

from __future__ import annotations

from typing import Any

from ...chains import CHAINS
from ...framework.grading import SUPPORTED_SCHEMES
from ...framework.model import SUPPORTED_VERSIONS
from ..openapi_parts import json_response as _json
from .pins import V3_VAULT_CHAINS

_ERR = {"$ref": "#/components/schemas/Error"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_STR_HEADER = {"schema": {"type": "string"}}


V3_HEADERS: dict[str, Any] = {
    "Service-Api-Version": {**_STR_HEADER, "required": True,
                            "description": "The API version, 3.0"},
    "Service-Framework-Version": {**_STR_HEADER, "required": True,
                                  "description": "The framework version used (the pin)"},
    "Service-Grading-Scheme": {**_STR_HEADER, "required": True,
                               "description": "The grading scheme used (the pin)"},
}

_PINS = [
    {"name": "framework_version", "in": "query",
     "schema": {"type": "string", "default": "v1"},
     "description": f"Framework pin; supported: {', '.join(SUPPORTED_VERSIONS)}"},
    {"name": "grading_scheme", "in": "query",
     "schema": {"type": "string", "default": "v2"},
     "description": f"Grading pin; supported: {', '.join(SUPPORTED_SCHEMES)}"},
]


def _errors(*codes: int) -> dict[str, Any]:
    text = {400: "Invalid parameter: unknown framework_version (with supported_versions), "
                 "unknown grading_scheme (with supported_schemes), `Invalid chain`, a bad "
                 "address or an unknown parameter",
            401: "Missing or invalid x-api-key", 404: "Not rated by this monitor"}
    return {str(c): _json(_ERR, text[c]) for c in codes}


_CRITERION_RESULT = {
    "type": "object", "required": ["key", "name", "status", "result", "evidence"],
    "properties": {
        "key": {"type": "string"}, "name": {"type": "string"},
        "status": {"enum": ["live", "planned"]},
        "result": {"enum": ["pass", "warn", "fail", "not_evaluated"]},
        "evidence": {"type": "object", "required": ["tags", "facts"], "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "facts": {"type": "object"}}},
    },
}

OPENAPI_SCHEMAS: dict[str, Any] = {
    "V3Graded": {
        "type": "object",
        "required": ["schema_version", "framework_version", "risk", "metadata", "composite",
                     "categories", "coverage"],
        "properties": {
            "schema_version": {"const": "3.0"},
            "framework_version": {"type": "string"},
            "risk": {"type": "object", "description": "The v2 risk envelope, verbatim"},
            "metadata": {"type": "object", "description": "The v2 record, verbatim"},
            "composite": {
                "type": "object",
                "required": ["score", "clamped_by_upstream", "grade", "stars",
                             "grading_scheme", "upstream_risk", "contributors"],
                "properties": {
                    "score": {**_NUM_OR_NULL, "description": "max(framework, upstream)"},
                    "clamped_by_upstream": {"type": "boolean"},
                    "grade": {"type": ["string", "null"]},
                    "stars": {"type": ["integer", "null"], "minimum": 1, "maximum": 5},
                    "grading_scheme": {"enum": list(SUPPORTED_SCHEMES)},
                    "framework_score": _NUM_OR_NULL,
                    "upstream_risk": _NUM_OR_NULL,
                    "caps_applied": {"type": "array", "items": {"type": "string"}},
                    "contributors": {"type": "object", "additionalProperties": {
                        "type": "object", "required": ["score", "weight"],
                        "properties": {"score": _NUM_OR_NULL, "weight": {"type": "number"}}}},
                },
            },
            "categories": {"type": "array", "items": {
                "type": "object", "required": ["key", "name", "weight", "score", "criteria"],
                "properties": {"key": {"type": "string"}, "name": {"type": "string"},
                               "weight": {"type": "number"}, "score": _NUM_OR_NULL,
                               "criteria": {"type": "array", "items": _CRITERION_RESULT}}}},
            "coverage": {"type": "object", "required": [
                "criteria_total", "criteria_live", "criteria_planned", "criteria_evaluated"],
                "additionalProperties": {"type": "integer", "minimum": 0}},
        },
    },
    "V3Framework": {
        "type": "object",
        "required": ["framework_version", "supported_versions", "supported_schemes",
                     "categories", "coverage", "grading_schemes"],
        "properties": {
            "framework_version": {"type": "string"},
            "supported_versions": {"type": "array", "items": {"type": "string"}},
            "supported_schemes": {"type": "array", "items": {"type": "string"}},
            "grading_schemes": {"type": "object"},
            "categories": {"type": "array", "items": {
                "type": "object", "required": ["key", "weight", "criteria"],
                "properties": {"key": {"type": "string"}, "weight": {"type": "number"},
                               "criteria": {"type": "array", "items": {
                                   "type": "object", "required": ["key", "status"],
                                   "properties": {"status": {"enum": ["live", "planned"]}}}}}}},
            "coverage": {"type": "object"},
            "rwa_framework": {"type": "object"},
        },
    },
}

_GRADED = {"$ref": "#/components/schemas/V3Graded"}
_ADDRESS = {"name": "address", "in": "path", "required": True, "schema": {"type": "string"}}
_TOKEN = {**_ADDRESS, "schema": {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$"},
          "example": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"}

OPENAPI_PATHS: dict[str, Any] = {
    "/v3/framework": {"get": {
        "summary": "E9: the framework taxonomy (public, no key, no CU; cacheable 5 minutes)",
        "operationId": "getV3Framework", "tags": ["v3"], "security": [],
        "parameters": [_PINS[0]],
        "responses": {
            "200": _json({"$ref": "#/components/schemas/V3Framework"}, "The taxonomy", {
                "ETag": {**_STR_HEADER, "required": True},
                "Cache-Control": {**_STR_HEADER, "required": True},
                "Service-Api-Version": V3_HEADERS["Service-Api-Version"],
                "Service-Framework-Version": V3_HEADERS["Service-Framework-Version"]}),
            "304": {"description": "Not modified (If-None-Match matched the ETag)"},
            "400": _json({**_ERR}, "Unknown framework_version (with supported_versions) or "
                                   "parameter"),
        },
    }},
    "/v3/rwa/{address}": {"get": {
        "summary": "E3: a pegged token in the V3 graded shape (1 CU)",
        "operationId": "getV3Rwa", "tags": ["v3"],
        "parameters": [_TOKEN,
                       {"name": "chain", "in": "query", "schema": {"enum": list(CHAINS)},
                        "description": "Needed when the address is rated on several chains",
                        "example": "eth"},
                       *_PINS],
        "responses": {"200": _json(_GRADED, "The graded token", V3_HEADERS),
                      **_errors(400, 401, 404)},
    }},
}

OPENAPI_PATHS["/v3/vaults/{address}"] = {"get": {
    "summary": "E8: a vault in the V3 graded shape (1 CU)",
    "operationId": "getV3Vault", "tags": ["v3"],
    "parameters": [
        {**_ADDRESS, "example": "0x0000000000000000000000000000000000000a01",
         "description": "0x + 40 hex digits; on sol a base58 account"},
        {"name": "chain", "in": "query", "required": True, "schema": {"type": "string"},
         "example": "eth",
         "description": f"One of {', '.join(V3_VAULT_CHAINS)}; anything else is 400 "
                        "`Invalid chain`"},
        *_PINS],
    "responses": {"200": _json(_GRADED, "The graded vault", V3_HEADERS),
                  **_errors(400, 401, 404)},
}}
