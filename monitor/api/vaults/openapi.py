"""OpenAPI 3.1 description of ``GET /vaults`` (E4) and ``GET /vaults/{address}`` (E5),
assembled by :mod:`monitor.api.openapi` (shared responses and ``Error`` are defined there).
"""

from __future__ import annotations

from typing import Any

from ...storage.vaults_read import SORTS
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
    obj,
    query,
    ref,
    resp,
)
from .catalogue import (
    CONTRACT_TYPES,
    PROTOCOLS,
    TAG_KEYS,
    UNDERLYING_RISKS,
    VAULT_CHAINS,
    VAULT_TIERS,
    VERDICTS,
)

_ADDRESS: dict[str, Any] = {"type": "string", "pattern": "^0x[0-9a-f]{40}$"}
_TAG_ALT = "|".join(TAG_KEYS)
_OBJECTS: dict[str, Any] = {"type": "array", "items": {"type": "object"}}


OPENAPI_SCHEMAS: dict[str, Any] = {
    "VaultRiskTag": obj(
        ["key", "name", "type", "severity", "description"],
        key={"type": "string"}, name={"type": "string"}, type={"type": "string"},
        severity={"type": "number", "minimum": 0, "maximum": 10},
        description={"type": "string"}, context={"type": "object"}),
    "VaultRiskEnvelope": {
        "description": "The shared risk envelope, as the engine published it on "
                       "vaults.ratings.",
        **obj(["count", "medium", "high", "issues"],
               score=NUM_OR_NULL, count={"type": "integer", "minimum": 0},
               medium={"type": "integer", "minimum": 0},
               high={"type": "integer", "minimum": 0}, overallRisk=NUM_OR_NULL,
               issues={"type": "array", "items": obj(
                   ["tags", "categories"], score=NUM_OR_NULL,
                   tags={"type": "array", "items": ref("VaultRiskTag")},
                   categories={"type": "object"})})},
    "VaultContribution": obj(
        ["category", "name", "points", "tags", "facts"], category={"type": "string"},
        name={"type": "string"}, points={"type": "number"},
        tags={"type": "array", "items": {"type": "string"}}, facts={"type": "object"}),
    "Vault": {
        "description": "A rated vault: facts it is filtered on, the latest rating record.",
        **obj(
            ["address", "chain", "name", "symbol", "protocol", "contract_type", "underlying",
             "tvl_usd", "apy_pct", "looping_rate", "rating", "tier", "verdict", "tags",
             "attention_needed", "updated_at", "facts_updated_at", "risk", "explanation"],
            address=_ADDRESS, chain={"type": "string", "enum": list(VAULT_CHAINS)},
            name=STR_OR_NULL, symbol=STR_OR_NULL, protocol=STR_OR_NULL,
            contract_type=STR_OR_NULL,
            underlying=obj(["symbol", "address", "risk"], symbol=STR_OR_NULL,
                            address=STR_OR_NULL, risk=STR_OR_NULL),
            tvl_usd=NUM_OR_NULL, apy_pct=NUM_OR_NULL, looping_rate=NUM_OR_NULL,
            rating={"type": ["number", "null"], "minimum": 0, "maximum": 100,
                    "description": "0-100, higher = riskier; null when unrated"},
            tier={"type": "string", "enum": list(VAULT_TIERS)},
            verdict={"type": "string", "enum": list(VERDICTS)},
            tags={"type": "array", "items": {"type": "string"}},
            attention_needed={"type": "boolean"},
            updated_at=TIME, facts_updated_at=TIME_OR_NULL,
            risk=ref("VaultRiskEnvelope"),
            explanation={"type": ["string", "null"],
                         "description": "Why the rating is what it is, in one sentence"})},
    "VaultList": obj(
        ["items", "pagination", "aggregates", "sort"],
        items={"type": "array", "items": ref("Vault")},
        pagination=PAGINATION,
        aggregates={
            "description": "Ecosystem aggregates over every vault matching the filters "
                           "(not only this page).",
            **obj(["total", "totalTvlUsd", "attentionNeeded", "byTier", "byChain",
                    "byProtocol"],
                   total={"type": "integer"}, totalTvlUsd={"type": "number"},
                   attentionNeeded={"type": "integer"},
                   byTier={"type": "object", "additionalProperties": {"type": "integer"}},
                   byChain={"type": "object", "additionalProperties": {"type": "integer"}},
                   byProtocol={"type": "object",
                               "additionalProperties": {"type": "integer"}})},
        sort={"type": "string", "enum": list(SORTS)}),
    "VaultDetail": {"allOf": [ref("Vault"), obj(
        ["contributions", "floor", "known_facts", "underlying_depeg_tier", "looping_markets",
         "composition", "lending_market", "code_findings", "lst_collateral_markets", "facts",
         "history"],
        contributions={"type": "array", "items": ref("VaultContribution"),
                       "description": "Per-category contributions to the rating"},
        floor={"type": ["object", "null"], "description": "The hard floor that set the "
               "rating (tag and minimum), when one did",
               "properties": {"tag": {"type": "string"}, "rating": {"type": "integer"}}},
        known_facts={"type": ["integer", "null"]},
        underlying_depeg_tier={"type": ["string", "null"],
                               "description": "The underlying's depeg tier as the engine "
                                              "last saw it on depeg.tier-changes"},
        looping_markets=_OBJECTS, code_findings=_OBJECTS, lst_collateral_markets=_OBJECTS,
        lending_market={"type": ["object", "null"]},
        composition={"type": "array", "items": obj(
            ["symbol", "address", "share_pct", "depeg"], symbol=STR_OR_NULL,
            address=STR_OR_NULL, share_pct={"type": ["number", "string", "null"]},
            depeg={"type": ["object", "null"],
                   "description": "The depeg monitor's current rating of this token on the "
                                  "vault's chain; null when it does not rate it",
                   "properties": {"rating": {"type": "number"},
                                  "tier": {"type": "string"}, "updated_at": TIME}})},
        facts={"type": "object", "description": "The merged facts (DESIGN: Vault facts)"},
        history=obj(
            ["days", "from", "to", "truncated", "points"], days={"type": "integer"},
            to=TIME, truncated={"type": "boolean"},
            points={"type": "array", "items": obj(
                ["timestamp", "rating", "tier", "verdict", "tags", "attention_needed"],
                timestamp=TIME, rating=NUM_OR_NULL,
                tier={"type": "string", "enum": list(VAULT_TIERS)},
                verdict={"type": "string", "enum": list(VERDICTS)},
                tags={"type": "array", "items": {"type": "string"}},
                attention_needed={"type": "boolean"})},
            **{"from": TIME}))]},
}

OPENAPI_PATHS: dict[str, Any] = {
    "/vaults": {"get": {
        "operationId": "listVaults",
        "summary": "Rated ERC-4626 vaults with filters, sorting and aggregates (E4)",
        "description": (
            PAGINATION_MODES + "Vaults without a value for "
            "the sort key (no TVL, unrated) sort last."),
        "tags": ["vaults"],
        "parameters": [
            query("chain", {"type": "string", "enum": list(VAULT_CHAINS)}, "Only this chain"),
            query("tier", {"type": "string", "enum": list(VAULT_TIERS)}, "Only this tier"),
            query("protocol", {"type": "string", "enum": list(PROTOCOLS)}, "Only this protocol"),
            query("contractType", {"type": "string", "enum": list(CONTRACT_TYPES)},
               "Only this contract type"),
            query("underlying", {"type": "string", "maxLength": 40},
               "Underlying asset symbol (exact, case-insensitive)"),
            query("underlyingRisk", {"type": "string", "enum": list(UNDERLYING_RISKS)},
               "Only this underlying risk tier"),
            query("minTvl", {"type": "number", "minimum": 0},
               "Minimum TVL in USD (vaults without a known TVL are excluded)"),
            query("minScore", {"type": "number", "minimum": 0, "maximum": 100},
               "Minimum rating (unrated vaults are excluded)"),
            query("maxScore", {"type": "number", "minimum": 0, "maximum": 100},
               "Maximum rating (unrated vaults are excluded)"),
            query("attentionNeeded", {"type": "boolean", "default": False},
               "true: only vaults needing attention"),
            query("riskFlags", {"type": "string", "pattern": f"^({_TAG_ALT})(,({_TAG_ALT}))*$"},
               "Comma-separated risk tag keys"),
            query("riskFlagsMode", {"type": "string", "enum": ["any", "all"], "default": "any"},
               "any: a vault carries at least one of riskFlags; all: every one"),
            query("q", {"type": "string", "maxLength": 100},
               "Case-insensitive substring of name, symbol or address"),
            query("sort", {"type": "string", "enum": list(SORTS), "default": "score_desc"},
               "score = rating; looping = looping rate; name_asc falls back to symbol, "
               "then address"),
            *PAGINATION_PARAMS,
        ],
        "responses": {"200": json_response(ref("VaultList"), "A page of vaults"),
                      **READ_ERRORS},
    }},
    "/vaults/{address}": {"get": {
        "operationId": "getVault",
        "summary": "One vault: the list fields plus markets, composition, findings and a "
                   "90-day rating history (E5)",
        "description": (
            "`composition` carries the depeg monitor's current rating and tier of each "
            "underlying (the tier `/rwa` shows). The history window ends at the vault's "
            "latest rating record and spans 90 days."),
        "tags": ["vaults"],
        "parameters": [
            address_param("0x0000000000000000000000000000000000000a01"),
            {"name": "chain", "in": "query", "required": True,
             "schema": {"type": "string", "enum": list(VAULT_CHAINS)}, "example": "eth",
             "description": "The vault's chain"},
        ],
        "responses": {"200": json_response(ref("VaultDetail"), "The vault"),
                      "404": resp("NotFound"), **READ_ERRORS},
    }},
}
