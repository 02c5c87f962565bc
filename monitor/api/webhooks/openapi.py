"""OpenAPI 3.1 path items and schemas of the webhook routes (assembled into /openapi.json)."""

from __future__ import annotations

from typing import Any

from ...chains import CHAINS
from ...records import Tier
from ...storage.deliveries import STATUSES
from ..openapi_parts import json_response as _json

_ERR = {"$ref": "#/components/schemas/Error"}


def _errors(*codes: int) -> dict[str, Any]:
    text = {400: "Invalid request; `field` names the offending field",
            401: "Missing or invalid x-api-key", 404: "Not found (or owned by another key)",
            409: "Not in a state that allows this", 429: "Rate limited; see Retry-After"}
    return {str(c): _json(_ERR, text[c]) for c in codes}


_SUB = {"$ref": "#/components/schemas/WebhookSubscription"}
_ID = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
_SEC: list[dict[str, list[str]]] = [{"ApiKey": []}]

#: The security scheme the path items refer to (components.securitySchemes).
OPENAPI_SECURITY_SCHEMES: dict[str, Any] = {
    "ApiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
}

OPENAPI_SCHEMAS: dict[str, Any] = {
    # No "Error" here: this module's 400 details (field, reason) are part of the shared
    # schema in monitor/api/openapi.py; a second "Error" replaced it in the document.
    "WebhookFilters": {
        "type": "object", "additionalProperties": False,
        "properties": {
            "tiers": {"type": "array", "items": {"enum": [t.value for t in Tier]}},
            "chains": {"type": "array", "items": {"enum": list(CHAINS)}},
            "tokens": {"type": "array",
                       "items": {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$"}},
            "minDeviationPct": {"type": "number", "minimum": 0, "maximum": 100},
        },
    },
    "WebhookSubscriptionCreate": {
        "type": "object", "required": ["webhookUrl", "eventTypes"],
        "additionalProperties": False,
        "properties": {
            "webhookUrl": {"type": "string", "format": "uri",
                           "description": "Public HTTPS URL; private/loopback refused"},
            "eventTypes": {"type": "array", "minItems": 1,
                           "items": {"enum": ["DEPEG_TIER_CHANGE"]}},
            "filters": {"$ref": "#/components/schemas/WebhookFilters"},
        },
    },
    "WebhookSubscriptionPatch": {
        "type": "object", "additionalProperties": False, "minProperties": 1,
        "properties": {
            "webhookUrl": {"type": "string", "format": "uri"},
            "eventTypes": {"type": "array", "minItems": 1,
                           "items": {"enum": ["DEPEG_TIER_CHANGE"]}},
            "filters": {"$ref": "#/components/schemas/WebhookFilters"},
            "isActive": {"type": "boolean"},
        },
    },
    "WebhookSubscription": {
        "type": "object",
        "required": ["id", "webhook_url", "event_types", "filters", "is_active", "created_at"],
        "properties": {
            "id": {"type": "string"}, "webhook_url": {"type": "string"},
            "event_types": {"type": "array", "items": {"type": "string"}},
            "filters": {"$ref": "#/components/schemas/WebhookFilters"},
            "secret_key": {"type": "string",
                           "description": "Only on creation and rotate-secret"},
            "is_active": {"type": "boolean"},
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": {"type": "string", "format": "date-time"},
            "secret_rotated_at": {"type": "string", "format": "date-time"},
            "previous_secret_expires_at": {"type": "string", "format": "date-time"},
        },
    },
    "WebhookTestResult": {
        "type": "object", "required": ["delivered", "event_id"],
        "properties": {
            "delivered": {"type": "boolean"}, "event_id": {"type": "string"},
            "status_code": {"type": ["integer", "null"]}, "latency_ms": {"type": "number"},
            "error": {"type": ["string", "null"]},
        },
    },
    "WebhookAttempt": {
        "type": "object",
        "properties": {
            "attempt": {"type": "integer"}, "manual": {"type": "boolean"},
            "started_at": {"type": "string", "format": "date-time"},
            "status_code": {"type": ["integer", "null"]}, "latency_ms": {"type": "number"},
            "error": {"type": ["string", "null"]},
        },
    },
    "WebhookDelivery": {
        "type": "object",
        "required": ["id", "subscription_id", "event_id", "event_type", "status", "attempts"],
        "properties": {
            "id": {"type": "string"}, "subscription_id": {"type": "string"},
            "event_id": {"type": "string"}, "event_type": {"type": "string"},
            "status": {"enum": list(STATUSES)}, "attempts": {"type": "integer"},
            "next_attempt_at": {"type": ["string", "null"]},
            "last_status_code": {"type": ["integer", "null"]},
            "last_error": {"type": ["string", "null"]},
            "last_manual_retry_at": {"type": ["string", "null"]},
            "created_at": {"type": "string"}, "updated_at": {"type": "string"},
            "completed_at": {"type": ["string", "null"]},
            "attempt_history": {"type": "array",
                                "items": {"$ref": "#/components/schemas/WebhookAttempt"}},
        },
    },
    "WebhookDeliveryPage": {
        "type": "object", "required": ["deliveries", "page", "pageSize", "total", "hasMore"],
        "properties": {
            "deliveries": {"type": "array",
                           "items": {"$ref": "#/components/schemas/WebhookDelivery"}},
            "page": {"type": "integer"}, "pageSize": {"type": "integer"},
            "total": {"type": "integer"}, "hasMore": {"type": "boolean"},
        },
    },
}

OPENAPI_PATHS: dict[str, Any] = {
    "/webhooks/subscriptions": {
        "post": {
            "summary": "E10: create a webhook subscription (1 CU)", "security": _SEC,
            "operationId": "createWebhookSubscription",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/WebhookSubscriptionCreate"}}}},
            "responses": {"201": _json(_SUB, "Created; includes secret_key (shown once)"),
                          **_errors(400, 401)},
        },
        "get": {
            "summary": "List this key's subscriptions (1 CU)", "security": _SEC,
            "operationId": "listWebhookSubscriptions",
            "responses": {"200": _json({"type": "object", "required": ["subscriptions"],
                                        "properties": {"subscriptions": {
                                            "type": "array", "items": _SUB}}},
                                       "This key's subscriptions"), **_errors(401)},
        },
    },
    "/webhooks/subscriptions/{id}": {
        "parameters": _ID,
        "get": {"summary": "E11: read a subscription (1 CU)", "security": _SEC,
                "operationId": "getWebhookSubscription",
                "responses": {"200": _json(_SUB, "The subscription"), **_errors(401, 404)}},
        "patch": {
            "summary": "E11: update a subscription (1 CU)", "security": _SEC,
            "operationId": "updateWebhookSubscription",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/WebhookSubscriptionPatch"}}}},
            "responses": {"200": _json(_SUB, "Updated"), **_errors(400, 401, 404)},
        },
        "delete": {"summary": "E11: delete a subscription (1 CU)", "security": _SEC,
                   "operationId": "deleteWebhookSubscription",
                   "responses": {"204": {"description": "Deleted"}, **_errors(401, 404)}},
    },
    "/webhooks/subscriptions/{id}/test": {
        "parameters": _ID,
        "post": {"summary": "E12: send a synthetic DEPEG_TIER_CHANGE (1 CU)", "security": _SEC,
                 "operationId": "testWebhookSubscription",
                 "responses": {"200": _json({"$ref": "#/components/schemas/WebhookTestResult"},
                                            "Outcome of the test delivery"),
                               **_errors(401, 404)}},
    },
    "/webhooks/subscriptions/{id}/rotate-secret": {
        "parameters": _ID,
        "post": {"summary": "E13: rotate the secret; the old one signs for 24 h (1 CU)",
                 "security": _SEC, "operationId": "rotateWebhookSecret",
                 "responses": {"200": _json(_SUB, "Includes the new secret_key"),
                               **_errors(401, 404)}},
    },
    "/webhooks/deliveries": {
        "get": {
            "summary": "E14: delivery history, newest first (1 CU)", "security": _SEC,
            "operationId": "listWebhookDeliveries",
            "parameters": [
                {"name": "status", "in": "query", "schema": {"enum": list(STATUSES)}},
                {"name": "eventType", "in": "query", "schema": {"enum": ["DEPEG_TIER_CHANGE"]}},
                {"name": "subscriptionId", "in": "query", "schema": {"type": "string"}},
                {"name": "page", "in": "query",
                 "schema": {"type": "integer", "minimum": 1, "maximum": 1_000_000, "default": 1}},
                {"name": "pageSize", "in": "query",
                 "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}},
            ],
            "responses": {"200": _json({"$ref": "#/components/schemas/WebhookDeliveryPage"},
                                       "One page of deliveries"), **_errors(400, 401)},
        },
    },
    "/webhooks/deliveries/{id}/retry": {
        "parameters": _ID,
        "post": {"summary": "E15: re-send a failed delivery, once per 5 minutes (1 CU)",
                 "security": _SEC, "operationId": "retryWebhookDelivery",
                 "responses": {"200": _json({"$ref": "#/components/schemas/WebhookDelivery"},
                                            "The delivery after the re-send"),
                               **_errors(401, 404, 409, 429)}},
    },
}
