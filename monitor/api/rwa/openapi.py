"""OpenAPI 3.1 description of ``GET /rwa`` and ``GET /rwa/{address}`` (assembled by
:mod:`monitor.api.openapi`). Shared responses (``#/components/responses/...``) and the
``Error`` schema are defined there."""

from __future__ import annotations

from typing import Any

from ...chains import CHAINS
from ...records import Tier
from ...registry import TAGS
from ..openapi_parts import (
    NUM_OR_NULL,
    PAGINATION,
    PAGINATION_MODES,
    PAGINATION_PARAMS,
    READ_ERRORS,
    STR_OR_NULL,
    TIME,
    TIME_OR_NULL,
    address_param,
    json_response,
)
from ..openapi_parts import obj as _obj
from ..openapi_parts import query as _q
from ..openapi_parts import ref as _ref
from ..openapi_parts import resp as _resp

_TIERS = [t.value for t in Tier]
_TAG_ALT = "|".join(TAGS)

OPENAPI_SCHEMAS: dict[str, Any] = {
    "RiskTag": _obj(
        ["key", "name", "type", "severity", "description"],
        key={"type": "string"}, name={"type": "string"},
        type={"type": "string", "enum": ["depegRisk"]},
        severity={"type": "number", "minimum": 0, "maximum": 10},
        description={"type": "string"},
        context={"type": "object",
                 "properties": {"detected_at": {"type": "string", "format": "date-time"}}}),
    "RiskCategory": _obj(
        ["name", "tags"], key={"type": "string"}, name={"type": "string"},
        description={"type": "string"},
        tags={"type": "object", "additionalProperties": {"const": True}}),
    "RiskIssue": _obj(
        ["score", "tags", "categories"], score={"type": "number"},
        tags={"type": "array", "items": _ref("RiskTag")},
        categories={"type": "object", "additionalProperties": _ref("RiskCategory")}),
    "RiskEnvelope": _obj(
        ["score", "count", "medium", "high", "overallRisk", "issues"],
        score={"type": "number", "minimum": 0, "maximum": 100},
        count={"type": "integer", "minimum": 0}, medium={"type": "integer", "minimum": 0},
        high={"type": "integer", "minimum": 0},
        overallRisk={"type": "number", "minimum": 0, "maximum": 100},
        issues={"type": "array", "items": _ref("RiskIssue")}),
    "RwaToken": {
        "description": "A pegged token's latest rating. `registered` is false for tokens "
                       "seen in ticks but missing from the registry file.",
        **_obj(
            ["address", "chain", "symbol", "registered", "tags", "rating", "tier",
             "band_tier", "updated_at", "stale", "collapsed", "risk"],
            address={"type": "string", "pattern": "^0x[0-9a-f]{40}$"},
            chain={"type": "string", "enum": list(CHAINS)},
            symbol={"type": "string"}, name=STR_OR_NULL, registered={"type": "boolean"},
            peg_type=STR_OR_NULL, peg_reference=STR_OR_NULL, market_cap_usd=NUM_OR_NULL,
            tags={"type": "array", "items": {"type": "string", "enum": list(TAGS)}},
            rating={"type": "number", "minimum": 0, "maximum": 100},
            tier={"type": "string", "enum": _TIERS},
            band_tier={"type": "string", "enum": _TIERS,
                       "description": "band(rating): the tier itself, or ok when the "
                                      "tier is premium (docs/model.md)"},
            deviation_pct=NUM_OR_NULL, price_usd=STR_OR_NULL, peg_usd=STR_OR_NULL,
            updated_at=TIME, tier_since=TIME,
            staleness_seconds={"type": "number", "minimum": 0},
            stale={"type": "boolean",
                   "description": "No tick for model.stale_after_seconds, or the price "
                                  "behind the rating is that old: the last known rating, "
                                  "not a fresh one"},
            collapsed={"type": "boolean",
                       "description": "Critical for 7+ days, or critical below half its "
                                      "peg (see collapsedOnly)"},
            risk=_ref("RiskEnvelope")),
    },
    "RwaList": _obj(
        ["items", "pagination", "aggregates", "sort", "order"],
        items={"type": "array", "items": _ref("RwaToken")},
        pagination=PAGINATION,
        aggregates={
            "description": "Ecosystem aggregates over every token matching the filters "
                           "(not only this page).",
            **_obj(["total", "collapsed", "byTier", "byChain"],
                   total={"type": "integer"}, collapsed={"type": "integer"},
                   byTier={"type": "object", "additionalProperties": {"type": "integer"}},
                   byChain={"type": "object", "additionalProperties": {"type": "integer"}},
                   unrated={"type": "integer", "description": "Registered tokens matching "
                            "the filters that have no rating yet"})},
        sort={"type": "string"}, order={"type": "string", "enum": ["asc", "desc"]},
        unrated={"type": "array", "description": "Registered tokens matching the filters "
                 "with no rating yet (no price with a peg received): rating and tier null, "
                 "never ok/0; at most 500, outside the pagination. Empty when the filter "
                 "asks for a tier or collapsed tokens.",
                 "items": _ref("UnratedToken")}),
    "UnratedToken": _obj(
        ["address", "chain", "symbol", "rating", "tier", "unrated_reason"],
        address={"type": "string"}, chain={"type": "string", "enum": list(CHAINS)},
        symbol={"type": "string"}, name={"type": "string"},
        registered={"type": "boolean"}, peg_type={"type": "string"},
        peg_reference={"type": "string"}, market_cap_usd=NUM_OR_NULL,
        tags={"type": "array", "items": {"type": "string"}},
        rating={"type": "null"}, tier={"type": "null"},
        unrated_reason={"type": "string"}),
    "SignalValue": _obj(
        ["name", "value", "score", "weight", "contribution", "observed"],
        name={"type": "string"}, value=NUM_OR_NULL, score={"type": "number"},
        weight={"type": "number"}, contribution={"type": "number"},
        observed={"type": "boolean"}),
    "RatingPoint": _obj(
        ["timestamp", "rating", "tier"], timestamp=TIME, rating={"type": "number"},
        tier={"type": "string", "enum": _TIERS}, deviation_pct=NUM_OR_NULL,
        price_usd=STR_OR_NULL, peg_usd=STR_OR_NULL),
    "DepegEpisode": {
        "description": "From leaving ok/premium to the first return to ok/premium.",
        **_obj(
            ["started_at", "recovered_at", "ongoing", "started_tier", "worst_tier"],
            started_at=TIME, recovered_at=TIME_OR_NULL, ongoing={"type": "boolean"},
            recovery_seconds=NUM_OR_NULL, duration_seconds={"type": "number"},
            started_tier={"type": "string", "enum": _TIERS},
            worst_tier={"type": "string", "enum": _TIERS},
            peak_deviation_pct=NUM_OR_NULL, peak_at=TIME_OR_NULL,
            peak_price_usd=STR_OR_NULL, peak_rating=NUM_OR_NULL,
            start_event_id={"type": "string"}, recovery_event_id=STR_OR_NULL)},
    "TierChangeEvent": _obj(
        ["event_type", "event_id", "timestamp", "data"],
        event_type={"type": "string", "const": "DEPEG_TIER_CHANGE"},
        event_id={"type": "string"}, timestamp={"type": "string"},
        data=_obj(["token_address", "chain", "symbol", "old_tier", "new_tier", "risk_score",
                   "deviation_pct", "price_usd", "peg_usd"],
                  token_address={"type": "string"}, chain={"type": "string"},
                  symbol={"type": "string"},
                  old_tier={"type": "string", "enum": _TIERS},
                  new_tier={"type": "string", "enum": _TIERS},
                  risk_score={"type": "number"}, deviation_pct={"type": "number"},
                  price_usd={"type": "string"}, peg_usd={"type": "string"})),
    "RwaDetail": {"allOf": [_ref("RwaToken"), _obj(
        ["snapshot", "history", "tier_changes", "episodes"],
        snapshot=_obj(["timestamp", "signals", "metrics"], timestamp=TIME,
                      signals={"type": "array", "items": _ref("SignalValue")},
                      metrics={"type": "object", "additionalProperties": NUM_OR_NULL,
                               "description": "The flat metric snapshot: engine metrics, "
                                              "signal_<name>_{value,score,weight,"
                                              "contribution,observed}, window_* figures"}),
        history=_obj(["hours", "from", "to", "points", "truncated"],
                     hours={"type": "integer"}, to=TIME, truncated={"type": "boolean"},
                     points={"type": "array", "items": _ref("RatingPoint")},
                     **{"from": TIME}),
        tier_changes={"type": "array", "items": _ref("TierChangeEvent")},
        episodes={"type": "array", "items": _ref("DepegEpisode")})]},
}

OPENAPI_PATHS: dict[str, Any] = {
    "/rwa": {"get": {
        "operationId": "listRwa",
        "summary": "Pegged tokens with depeg ratings, filters, sorting and aggregates (E6)",
        "description": (
            PAGINATION_MODES + "Tokens without a value for "
            "the sort key (no market cap) sort last."),
        "tags": ["rwa"],
        "parameters": [
            _q("chain", {"type": "string", "enum": list(CHAINS)}, "Only this chain"),
            _q("tier", {"type": "string", "enum": _TIERS}, "Only this tier"),
            _q("sort", {"type": "string", "enum": ["score", "market_cap_usd", "symbol",
                                                   "deviation", "updated_at"],
                        "default": "score"},
               "score = rating; deviation = absolute deviation from peg"),
            _q("order", {"type": "string", "enum": ["asc", "desc"]},
               "Default: desc, except symbol (asc)"),
            *PAGINATION_PARAMS,
            _q("q", {"type": "string", "maxLength": 100},
               "Case-insensitive substring of symbol, name or address"),
            _q("collapsedOnly", {"type": "boolean", "default": False},
               "true: only collapsed (dead) tokens: critical for 7 days or more, or "
               "critical while trading below half the peg"),
            _q("minMcap", {"type": "number", "minimum": 0}, "Minimum market cap in USD "
               "(tokens without a known market cap are excluded)"),
            _q("tags", {"type": "string", "pattern": f"^({_TAG_ALT})(,({_TAG_ALT}))*$"},
               "Comma-separated, any of: standard (USD fiat stablecoin), stablecoin (any "
               "fiat peg), non-usd, rwa, commodity, gold, yield (NAV-priced), unregistered"),
        ],
        "responses": {"200": json_response(_ref("RwaList"), "A page of tokens"),
                      **READ_ERRORS},
    }},
    "/rwa/{address}": {"get": {
        "operationId": "getRwa",
        "summary": "One token: latest snapshot, rating history and depeg events (E7)",
        "description": (
            "The history window ends at the token's latest snapshot (event time) and spans "
            "`hours`. `episodes` lists the retained depeg episodes, newest first; "
            "`tier_changes` the tier-change events inside the window."),
        "tags": ["rwa"],
        "parameters": [
            address_param("0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"),
            {**_q("chain", {"type": "string", "enum": list(CHAINS)},
                  "Required when the address is rated on several chains"), "example": "eth"},
            _q("hours", {"type": "integer", "minimum": 1, "maximum": 720, "default": 24},
               "History window in hours"),
        ],
        "responses": {"200": json_response(_ref("RwaDetail"), "The token"),
                      "404": _resp("NotFound"), **READ_ERRORS},
    }},
}
