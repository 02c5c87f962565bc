"""E4/E5 query parsing: every parameter checked against its set, one 400 shape.

Decisions where the spec is silent: ``riskFlagsMode`` defaults to ``any``; the default
sort is ``score_desc`` (riskiest first); ``attentionNeeded=false`` means "no filter" (the
spec describes it as "only vaults needing attention"); ``underlying`` matches the
underlying symbol exactly, case-insensitively; ``q`` is a case-insensitive substring of the
name, symbol or address. Offset and cursor parameters cannot be mixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...storage import vaults_read as reads
from .. import paging, params
from ..cursor import decode_cursor
from .catalogue import (
    CONTRACT_TYPES,
    PROTOCOLS,
    TAG_KEYS,
    UNDERLYING_RISKS,
    VAULT_CHAINS,
    VAULT_TIERS,
)

SORTS = tuple(reads.SORTS)
LIST_PARAMS = ("chain", "tier", "protocol", "contractType", "underlying", "underlyingRisk",
               "minTvl", "minScore", "maxScore", "attentionNeeded", "riskFlags",
               "riskFlagsMode", "q", "sort", "page", "pageSize", "cursor", "limit")


@dataclass(frozen=True)
class ListRequest:
    filter: reads.VaultFilter
    page: reads.VaultPage
    mode: str  # "offset" or "cursor"


def _score(query: Mapping[str, str], name: str) -> float | None:
    value = params.number(query, name)
    if value is not None and value > 100:
        raise params.bad(name, f"{name} must be between 0 and 100", minimum=0, maximum=100)
    return value


def parse_list(query: Mapping[str, str]) -> ListRequest:
    params.known(query, LIST_PARAMS)
    flt = reads.VaultFilter(
        chain=params.enum(query, "chain", VAULT_CHAINS),
        tier=params.enum(query, "tier", VAULT_TIERS),
        protocol=params.enum(query, "protocol", PROTOCOLS),
        contract_type=params.enum(query, "contractType", CONTRACT_TYPES),
        underlying=params.text(query, "underlying", 40),
        underlying_risk=params.enum(query, "underlyingRisk", UNDERLYING_RISKS),
        min_tvl=params.number(query, "minTvl"),
        min_score=_score(query, "minScore"),
        max_score=_score(query, "maxScore"),
        attention_needed=True if params.boolean(query, "attentionNeeded") else None,
        risk_flags=params.enum_list(query, "riskFlags", TAG_KEYS),
        risk_flags_mode=params.enum(query, "riskFlagsMode", ("any", "all"), "any") or "any",
        q=params.text(query, "q", 100),
    )
    sort = params.enum(query, "sort", SORTS, "score_desc") or "score_desc"
    asked = paging.parse(query)
    after = decode_cursor(asked.cursor, sort, sort == "name_asc") if asked.cursor else None
    return ListRequest(flt, reads.VaultPage(sort, asked.size, asked.offset, after), asked.mode)
