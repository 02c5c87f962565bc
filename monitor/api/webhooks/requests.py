"""Validation of webhook API requests: every error is 400 naming the offending field.

Request bodies use the spec's camelCase names (``webhookUrl``, ``eventTypes``,
``filters.minDeviationPct``, and ``isActive`` for PATCH); unknown fields are refused
rather than ignored, so a typo (``filter``) is not silently a subscription to everything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...chains import CHAINS, normalize_address
from ...records import EVENT_TYPE, Tier
from ...storage.deliveries import STATUSES
from ...webhooks.filters import Filters
from .. import jsonbody
from ..errors import ApiError

EVENT_TYPES = (EVENT_TYPE,)
TIERS = tuple(t.value for t in Tier)
MAX_LIST = 1000
PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_MAX = 500


def invalid(field: str, reason: str) -> ApiError:
    return ApiError(400, f"invalid {field}: {reason}", field=field, reason=reason)


def parse_object(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        raise invalid("body", "a JSON object is required")
    try:
        value = jsonbody.decode(raw)
    except jsonbody.JsonError as exc:
        raise invalid("body", str(exc)) from None
    if not isinstance(value, dict):
        raise invalid("body", "must be a JSON object")
    return value


def _unknown(body: dict[str, Any], allowed: set[str], prefix: str = "") -> None:
    for key in body:
        if key not in allowed:
            raise invalid(f"{prefix}{key}", "unknown field")


def _string_list(value: Any, field: str, allowed: tuple[str, ...] | None = None,
                 allow_empty: bool = True) -> list[str]:
    if not isinstance(value, list):
        raise invalid(field, "must be an array of strings")
    if not value and not allow_empty:
        raise invalid(field, "must not be empty")
    if len(value) > MAX_LIST:
        raise invalid(field, f"at most {MAX_LIST} entries")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item:
            raise invalid(field, "must be an array of non-empty strings")
        if allowed is not None and item not in allowed:
            raise invalid(field, f"{item!r} is not one of {', '.join(allowed)}")
        if item not in out:
            out.append(item)
    return out


def event_types(value: Any, field: str = "eventTypes") -> list[str]:
    return _string_list(value, field, EVENT_TYPES, allow_empty=False)


def filters(value: Any, field: str = "filters") -> Filters:
    if value is None:
        return Filters()
    if not isinstance(value, dict):
        raise invalid(field, "must be an object")
    _unknown(value, {"tiers", "chains", "tokens", "minDeviationPct"}, f"{field}.")
    tiers = chains = tokens = None
    if value.get("tiers") is not None:
        tiers = _string_list(value["tiers"], f"{field}.tiers", TIERS)
    if value.get("chains") is not None:
        chains = _string_list(value["chains"], f"{field}.chains", CHAINS)
    if value.get("tokens") is not None:
        tokens = []
        for token in _string_list(value["tokens"], f"{field}.tokens"):
            address = normalize_address(token)
            if address is None:
                raise invalid(f"{field}.tokens", f"{token!r} is not a 0x + 40 hex address")
            tokens.append(address)
    minimum = value.get("minDeviationPct")
    if minimum is not None:
        if isinstance(minimum, bool) or not isinstance(minimum, int | float):
            raise invalid(f"{field}.minDeviationPct", "must be a number")
        if not math.isfinite(minimum) or minimum < 0 or minimum > 100:
            raise invalid(f"{field}.minDeviationPct", "must be between 0 and 100")
        minimum = float(minimum)
    return Filters(tiers=tiers, chains=chains, tokens=tokens, min_deviation_pct=minimum)


def webhook_url(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise invalid("webhookUrl", "must be a non-empty string")
    return value


@dataclass(frozen=True)
class CreateRequest:
    webhook_url: str
    event_types: list[str]
    filters: Filters


def create_request(raw: bytes) -> CreateRequest:
    body = parse_object(raw)
    _unknown(body, {"webhookUrl", "eventTypes", "filters"})
    if "webhookUrl" not in body:
        raise invalid("webhookUrl", "is required")
    if "eventTypes" not in body:
        raise invalid("eventTypes", "is required")
    return CreateRequest(webhook_url(body["webhookUrl"]), event_types(body["eventTypes"]),
                         filters(body.get("filters")))


def patch_request(raw: bytes) -> dict[str, Any]:
    """Validated changes keyed by what they change: webhook_url, event_types, filters,
    is_active. An empty object is refused (nothing to change is a client mistake)."""
    body = parse_object(raw)
    _unknown(body, {"webhookUrl", "eventTypes", "filters", "isActive"})
    if not body:
        raise invalid("body", "give at least one of webhookUrl, eventTypes, filters, isActive")
    changes: dict[str, Any] = {}
    if "webhookUrl" in body:
        changes["webhook_url"] = webhook_url(body["webhookUrl"])
    if "eventTypes" in body:
        changes["event_types"] = event_types(body["eventTypes"])
    if "filters" in body:
        changes["filters"] = filters(body["filters"])
    if "isActive" in body:
        if not isinstance(body["isActive"], bool):
            raise invalid("isActive", "must be a boolean")
        changes["is_active"] = body["isActive"]
    return changes


@dataclass(frozen=True)
class DeliveryQuery:
    status: str | None
    event_type: str | None
    subscription_id: str | None
    page: int
    page_size: int


#: The last page anyone can ask for: page * pageSize must fit SQLite's 64-bit integers.
PAGE_MAX = 1_000_000


def _positive_int(text: str, field: str, maximum: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise invalid(field, "must be an integer") from None
    if value < 1 or (maximum is not None and value > maximum):
        raise invalid(field, f"must be between 1 and {maximum}" if maximum else "must be >= 1")
    return value


def delivery_query(query: Any) -> DeliveryQuery:
    allowed = {"status", "eventType", "subscriptionId", "page", "pageSize"}
    for key in query:
        if key not in allowed:
            raise invalid(key, "unknown query parameter")
    status = query.get("status")
    if status is not None and status not in STATUSES:
        raise invalid("status", f"must be one of {', '.join(STATUSES)}")
    event_type = query.get("eventType")
    if event_type is not None and event_type not in EVENT_TYPES:
        raise invalid("eventType", f"must be one of {', '.join(EVENT_TYPES)}")
    # Bounded so the offset always fits a 64-bit integer in both databases.
    page = _positive_int(query.get("page", "1"), "page", PAGE_MAX)
    size = _positive_int(query.get("pageSize", str(PAGE_SIZE_DEFAULT)), "pageSize",
                         PAGE_SIZE_MAX)
    return DeliveryQuery(status, event_type, query.get("subscriptionId"), page, size)
