"""How a stored vault becomes JSON: the list item (E4) and the detail blocks (E5).

Field names are snake_case like the rest of the v2 read API; the ``risk`` envelope, the
``explanation`` and (E5) the per-category ``contributions`` are the engine's, passed
through from the published ``vaults.ratings`` record so the API can never disagree with the
topic. List items leave out the contributions (each carries the facts it was read from, a
few KB per vault): E5 has them.
"""

from __future__ import annotations

from typing import Any

from ...storage.db import Row
from ...storage.vaults_read import HistoryPoint, StoredVault, record_summary
from ..rwa.view import iso


def _rating(value: float | None) -> float | int | None:
    """Ratings are whole numbers on the topic; the store keeps doubles: 78.0 -> 78."""
    return int(value) if value is not None and float(value).is_integer() else value


_EMPTY_RISK: dict[str, Any] = {"score": 0, "count": 0, "medium": 0, "high": 0,
                               "overallRisk": 0, "issues": []}


def item(v: StoredVault) -> dict[str, Any]:
    summary = record_summary(v)  # the envelope passes through as the published bytes
    return {
        "address": v.vault,
        "chain": v.chain,
        "name": v.name,
        "symbol": v.symbol,
        "protocol": v.protocol,
        "contract_type": v.contract_type,
        "underlying": {"symbol": v.underlying_symbol, "address": v.underlying_address,
                       "risk": v.underlying_risk},
        "tvl_usd": v.tvl_usd,
        "apy_pct": v.apy_pct,
        "looping_rate": v.looping_rate,
        "rating": _rating(v.rating),
        "tier": v.tier,
        "verdict": v.verdict,
        "tags": list(v.tags),
        "attention_needed": v.attention_needed,
        "updated_at": iso(v.rating_ts),
        "facts_updated_at": iso(v.facts_ts),
        "risk": summary.risk if len(summary.risk) else dict(_EMPTY_RISK),
        "explanation": summary.explanation,
    }


def _objects(value: Any) -> list[Any]:
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def composition_entries(v: StoredVault) -> list[dict[str, Any]]:
    """The facts' ``composition``; without one, the single underlying at 100 %."""
    entries = [e for e in _objects(v.facts.get("composition"))]
    if not entries and v.underlying_address:
        entries = [{"symbol": v.underlying_symbol, "address": v.underlying_address,
                    "share_pct": 100.0}]
    return entries


def composition(v: StoredVault, depeg: dict[str, Row]) -> list[dict[str, Any]]:
    """Each underlying with the depeg monitor's current rating and tier for it (null when
    the monitor does not rate that token on the vault's chain)."""
    out = []
    for e in composition_entries(v):
        address = e.get("address")
        address = address.lower() if isinstance(address, str) else None
        rated = depeg.get(address) if address else None
        out.append({
            "symbol": e.get("symbol") if isinstance(e.get("symbol"), str) else None,
            "address": address,
            "share_pct": e.get("share_pct"),
            "depeg": {"rating": rated["rating"], "tier": rated["tier"],
                      "updated_at": iso(rated["ts"])} if rated else None,
        })
    return out


def detail(v: StoredVault, depeg: dict[str, Row], history: list[HistoryPoint],
           start: float, end: float, days: int, truncated: bool) -> dict[str, Any]:
    body = item(v)
    lending = v.facts.get("lending_market")
    body.update({
        "contributions": v.record.get("contributions") or [],
        "floor": v.record.get("floor"),
        "known_facts": v.record.get("known_facts"),
        "underlying_depeg_tier": v.record.get("underlying_depeg_tier"),
        "looping_markets": _objects(v.facts.get("looping_markets")),
        "composition": composition(v, depeg),
        "lending_market": lending if isinstance(lending, dict) else None,
        "code_findings": _objects(v.facts.get("code_findings")),
        "lst_collateral_markets": _objects(v.facts.get("lst_collateral_markets")),
        "facts": v.facts,
        "history": {
            "days": days, "from": iso(start), "to": iso(end), "truncated": truncated,
            "points": [{"timestamp": iso(p.ts), "rating": _rating(p.rating), "tier": p.tier,
                        "verdict": p.verdict, "tags": list(p.tags),
                        "attention_needed": p.attention_needed} for p in history],
        },
    })
    return body
