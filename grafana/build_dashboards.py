#!/usr/bin/env python3
"""Writes grafana/dashboards/*.json from the panel lists below (stdlib only).

Edit the panels here and run ``python grafana/build_dashboards.py``; the JSON files are
committed so Grafana's file provisioning can read them, and tests/ops checks that they are
current (``--check``), that every query is valid and, against a live service, that every
query returns data. Queries use ``$__rate_interval`` so they follow the scrape interval.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"
TOKEN_SEL = 'chain="$chain", token="$token"'


def q(expr: str, legend: str = "", instant: bool = False) -> dict[str, Any]:
    target: dict[str, Any] = {"expr": expr, "legendFormat": legend or "__auto", "datasource": DS}
    if instant:
        target.update(instant=True, range=False, format="table")
    return target


def panel(title: str, kind: str, targets: list[dict[str, Any]], *, w: int = 12, h: int = 8,
          unit: str = "short", desc: str = "", stack: bool = False,
          extra: dict[str, Any] | None = None) -> dict[str, Any]:
    p: dict[str, Any] = {
        "type": kind, "title": title, "description": desc, "datasource": DS,
        "gridPos": {"w": w, "h": h},
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
    }
    if kind == "timeseries":
        p["fieldConfig"]["defaults"]["custom"] = {
            "fillOpacity": 60 if stack else 10,
            "stacking": {"mode": "normal" if stack else "none", "group": "A"},
        }
        p["options"] = {"legend": {"displayMode": "table", "placement": "right",
                                   "calcs": ["lastNotNull"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}
    if kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "value",
                        "graphMode": "area"}
    if extra:
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(p.get(key), dict):
                p[key] = {**p[key], **value}
            else:
                p[key] = value
    return p


def row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": [],
            "gridPos": {"w": 24, "h": 1}}


def thresholds(*steps: tuple[float | None, str]) -> dict[str, Any]:
    return {"fieldConfig": {"defaults": {"unit": "short", "thresholds": {
        "mode": "absolute", "steps": [{"value": v, "color": c} for v, c in steps]}}}}


TIER_MAPPING = [{"type": "value", "options": {
    "-1": {"text": "premium", "color": "blue"}, "0": {"text": "ok", "color": "green"},
    "1": {"text": "watch", "color": "yellow"}, "2": {"text": "warning", "color": "orange"},
    "3": {"text": "critical", "color": "red"}}}]
TIER_COLORS = {"ok": "green", "watch": "yellow", "warning": "orange", "critical": "red",
               "premium": "blue"}
TIER_OVERRIDES = [{"matcher": {"id": "byName", "options": t},
                   "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": c}}]}
                  for t, c in TIER_COLORS.items()]


def layout(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flow panels left to right, top to bottom; number them (ids unique per dashboard)."""
    x = y = row_h = 0
    for i, p in enumerate(panels, start=1):
        gp = p["gridPos"]
        if x + gp["w"] > 24 or p["type"] == "row":
            x, y, row_h = 0, y + row_h, 0
        gp.update(x=x, y=y)
        p["id"] = i
        x += gp["w"]
        row_h = max(row_h, gp["h"])
    return panels


def datasource_var() -> dict[str, Any]:
    return {"type": "datasource", "name": "datasource", "label": "Data source",
            "query": "prometheus", "current": {}, "hide": 0, "refresh": 1}


def query_var(name: str, label: str, query: str) -> dict[str, Any]:
    return {"type": "query", "name": name, "label": label, "datasource": DS,
            "query": {"query": query, "refId": f"{name}-var"}, "definition": query,
            "refresh": 2, "sort": 1, "includeAll": False, "multi": False, "current": {},
            "hide": 0}


def dashboard(uid: str, title: str, desc: str, panels: list[dict[str, Any]],
              variables: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "uid": uid, "title": title, "description": desc, "tags": ["depeg-monitor"],
        "timezone": "utc", "schemaVersion": 39, "version": 1, "editable": True,
        "refresh": "30s", "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [datasource_var(), *variables]},
        "annotations": {"list": []}, "links": [
            {"type": "dashboards", "tags": ["depeg-monitor"], "title": "depeg-monitor",
             "asDropdown": True}],
        "panels": layout(panels),
    }


def overview() -> dict[str, Any]:
    p = [
        row("Is data flowing?"),
        panel("Targets up", "stat", [q('sum(up{job="depeg-monitor"})', "up")], w=4, h=4,
              desc="Scraped depeg-monitor processes that answer.", extra=thresholds(
                  (None, "red"), (1, "green"))),
        panel("Ticks consumed /s", "stat",
              [q(f"sum(rate(depeg_ticks_consumed_total[{RI}]))", "ticks/s")], w=4, h=4),
        panel("Tokens tracked", "stat", [q("sum(depeg_tokens_tracked)", "tracked")], w=4, h=4),
        panel("Stale tokens", "stat", [q("sum(depeg_tokens_stale)", "stale")], w=4, h=4,
              desc="Tokens with no tick for model.stale_after_seconds.",
              extra=thresholds((None, "green"), (1, "orange"))),
        panel("Broker connected", "stat",
              [q("min by (client) (depeg_broker_connected)", "{{client}}")], w=4, h=4,
              extra=thresholds((None, "red"), (1, "green"))),
        panel("Version", "stat", [q("max by (version) (depeg_build_info)", "{{version}}")],
              w=4, h=4, extra={"options": {"textMode": "name", "graphMode": "none"}}),
        panel("Ingest rate", "timeseries", [
            q(f"sum(rate(depeg_ticks_consumed_total[{RI}]))", "consumed"),
            q(f"sum(rate(depeg_ticks_decoded_total[{RI}]))", "decoded"),
            q(f"sum(rate(depeg_ticks_late_total[{RI}]))", "late"),
        ], unit="ops", desc="Tick records per second read from depeg.ticks."),
        panel("Dead-lettered ticks by reason", "timeseries", [
            q(f"sum by (reason) (rate(depeg_ticks_dead_lettered_total[{RI}]))", "{{reason}}")],
            unit="ops", stack=True),
        row("Is anything lagging?"),
        panel("Consumer lag per partition", "timeseries", [
            q("sum by (consumer, partition) (depeg_consumer_lag_records)",
              "{{consumer}} p{{partition}}")], unit="short"),
        panel("Batch processing p95", "timeseries", [
            q("histogram_quantile(0.95, sum by (le, consumer) "
              f"(rate(depeg_batch_processing_seconds_bucket[{RI}])))", "{{consumer}}"),
            q("histogram_quantile(0.95, sum by (le) "
              f"(rate(depeg_refresh_duration_seconds_bucket[{RI}])))", "refresh sweep"),
        ], unit="s"),
        panel("Assigned partitions", "timeseries", [
            q("sum by (consumer) (depeg_consumer_assigned_partitions)", "{{consumer}}")], w=8),
        panel("Records published /s", "timeseries", [
            q(f"sum by (kind) (rate(depeg_events_published_total[{RI}]))", "{{kind}}"),
            q(f"sum by (kind) (rate(depeg_publish_errors_total[{RI}]))", "errors {{kind}}"),
        ], w=8, unit="ops"),
        panel("Store writes /s", "timeseries", [
            q(f"sum by (kind) (rate(depeg_store_writes_total[{RI}]))", "{{kind}}"),
            q(f"sum by (kind) (rate(depeg_store_write_errors_total[{RI}]))", "errors {{kind}}"),
            q(f"sum by (consumer) (rate(depeg_records_undecodable_total[{RI}]))",
              "undecodable ({{consumer}})"),
        ], w=8, unit="ops"),
        row("Which tokens are in which tier?"),
        panel("Tier distribution", "timeseries", [
            q("sum by (tier) (depeg_tokens_by_tier)", "{{tier}}")], stack=True,
            extra={"fieldConfig": {"overrides": TIER_OVERRIDES}}),
        panel("Tier changes by new tier", "timeseries", [
            q(f"sum by (new_tier) (increase(depeg_tier_changes_total[{RI}]))", "{{new_tier}}")],
            stack=True, extra={"fieldConfig": {"overrides": TIER_OVERRIDES}}),
        panel("Tokens and tiers", "table", [
            q("max by (chain, symbol, token) (depeg_token_tier_level)", instant=True),
        ], w=16, h=10, desc="Current tier of every tracked token (per-token series are capped).",
            extra={"fieldConfig": {"defaults": {"mappings": TIER_MAPPING},
                                   "overrides": []},
                   "transformations": [{"id": "organize", "options": {
                       "excludeByName": {"Time": True},
                       "renameByName": {"Value": "tier"}}}]}),
        panel("Tier changes (window)", "table", [
            q("sum by (old_tier, new_tier) (increase(depeg_tier_changes_total[$__range]))",
              instant=True)], w=8, h=10, desc="Tier changes over the selected time range."),
        row("Are webhooks getting through?"),
        panel("Deliveries by status /s", "timeseries", [
            q(f"sum by (status) (rate(depeg_deliveries_total[{RI}]))", "{{status}}")],
            unit="ops"),
        panel("Delivery attempts by outcome /s", "timeseries", [
            q(f"sum by (outcome) (rate(depeg_delivery_attempts_total[{RI}]))", "{{outcome}}")],
            unit="ops", stack=True),
        row("HTTP API"),
        panel("API requests by route and status /s", "timeseries", [
            q(f"sum by (route, status) (rate(depeg_api_requests_total[{RI}]))",
              "{{route}} {{status}}")], unit="reqps"),
        panel("API latency p95 by route", "timeseries", [
            q("histogram_quantile(0.95, sum by (le, route) "
              f"(rate(depeg_api_request_duration_seconds_bucket[{RI}])))", "{{route}}")],
            unit="s"),
        panel("Compute units /s", "timeseries", [
            q(f"sum by (kind) (rate(depeg_cu_consumed_total[{RI}]))", "{{kind}}")], w=24,
            h=6, unit="ops"),
    ]
    return dashboard("depeg-overview", "depeg-monitor / Overview",
                     "Is data flowing, is anything lagging, which tokens are in which tier, "
                     "are webhooks getting through.", p, [])


def token() -> dict[str, Any]:
    p = [
        panel("Rating", "timeseries", [q(f"max(depeg_token_rating{{{TOKEN_SEL}}})", "rating")],
              w=16, extra={"fieldConfig": {"defaults": {"min": 0, "max": 100, "thresholds": {
                  "mode": "absolute", "steps": [
                      {"value": None, "color": "green"}, {"value": 40, "color": "yellow"},
                      {"value": 60, "color": "orange"}, {"value": 80, "color": "red"}]},
                  "custom": {"thresholdsStyle": {"mode": "line+area"}}}}}),
        panel("Current tier", "stat", [q(f"max(depeg_token_tier_level{{{TOKEN_SEL}}})", "tier")],
              w=8, extra={"fieldConfig": {"defaults": {"mappings": TIER_MAPPING}},
                          "options": {"colorMode": "background", "graphMode": "none"}}),
        panel("Tier over time", "state-timeline",
              [q(f"max(depeg_token_tier_level{{{TOKEN_SEL}}})", "tier")], w=24, h=5,
              extra={"fieldConfig": {"defaults": {"mappings": TIER_MAPPING}}}),
        panel("Signal scores (0-1)", "timeseries", [
            q(f"max by (signal) (depeg_token_signal_score{{{TOKEN_SEL}}})", "{{signal}}")],
            unit="percentunit", desc="Each signal's score before weighting."),
        panel("Deviation from peg (5 min)", "timeseries", [
            q(f"max(depeg_token_deviation_ratio{{{TOKEN_SEL}}})", "deviation")],
            unit="percentunit"),
        panel("Price (USD)", "timeseries", [
            q(f"max(depeg_token_price_usd{{{TOKEN_SEL}}})", "price")], unit="currencyUSD"),
        panel("Staleness", "timeseries", [
            q(f"max(depeg_token_staleness_seconds{{{TOKEN_SEL}}})", "since last tick")],
            unit="s"),
        panel("Tokens on this chain", "table", [
            q('max by (symbol, token) (depeg_token_rating{chain="$chain"})', instant=True)],
            w=24, desc="Symbol and address of every tracked token on the chain, by rating.",
            extra={"transformations": [
                {"id": "organize", "options": {"excludeByName": {"Time": True},
                                               "renameByName": {"Value": "rating"}}},
                {"id": "sortBy", "options": {"sort": [{"field": "rating", "desc": True}]}}]}),
    ]
    variables = [
        query_var("chain", "Chain", "label_values(depeg_token_rating, chain)"),
        query_var("token", "Token",
                  'label_values(depeg_token_rating{chain="$chain"}, token)'),
    ]
    return dashboard("depeg-token", "depeg-monitor / Token drill-down",
                     "Rating, tier and signals of one token (chain and token address).",
                     p, variables)


def delivery() -> dict[str, Any]:
    failed = f'sum(rate(depeg_delivery_attempts_total{{outcome!="success"}}[{RI}]))'
    attempts = f"sum(rate(depeg_delivery_attempts_total[{RI}]))"
    p = [
        panel("Failure ratio", "stat", [q(f"{failed} / clamp_min({attempts}, 1e-9)", "failed")],
              w=6, h=5, unit="percentunit",
              extra=thresholds((None, "green"), (0.05, "orange"), (0.2, "red"))),
        panel("Retry backlog", "stat", [q("sum(depeg_delivery_retry_backlog)", "waiting")],
              w=6, h=5, extra=thresholds((None, "green"), (100, "orange"))),
        panel("Failing endpoints", "stat",
              [q("sum(depeg_delivery_failing_endpoints)", "endpoints")], w=6, h=5,
              desc="Subscriptions whose latest attempt failed.",
              extra=thresholds((None, "green"), (1, "orange"))),
        panel("Exhausted (5 attempts)", "stat", [
            q(f'sum(increase(depeg_deliveries_total{{status="max_retries_exceeded"}}[{RI}]))',
              "exhausted")], w=6, h=5, extra=thresholds((None, "green"), (1, "red"))),
        panel("Deliveries by status /s", "timeseries", [
            q(f"sum by (status) (rate(depeg_deliveries_total[{RI}]))", "{{status}}")],
            unit="ops"),
        panel("Attempts by outcome /s", "timeseries", [
            q(f"sum by (outcome) (rate(depeg_delivery_attempts_total[{RI}]))", "{{outcome}}")],
            unit="ops", stack=True, desc="Every outcome but success is an endpoint failure."),
        panel("Delivery latency (event consumed to delivered)", "timeseries", [
            q("histogram_quantile(0.5, sum by (le) "
              f"(rate(depeg_delivery_latency_seconds_bucket[{RI}])))", "p50"),
            q("histogram_quantile(0.95, sum by (le) "
              f"(rate(depeg_delivery_latency_seconds_bucket[{RI}])))", "p95"),
            q("histogram_quantile(0.99, sum by (le) "
              f"(rate(depeg_delivery_latency_seconds_bucket[{RI}])))", "p99"),
        ], unit="s"),
        panel("Attempt duration", "timeseries", [
            q("histogram_quantile(0.5, sum by (le) "
              f"(rate(depeg_delivery_attempt_duration_seconds_bucket[{RI}])))", "p50"),
            q("histogram_quantile(0.95, sum by (le) "
              f"(rate(depeg_delivery_attempt_duration_seconds_bucket[{RI}])))", "p95"),
        ], unit="s"),
        panel("Retries scheduled /s, backlog, in flight", "timeseries", [
            q(f"sum(rate(depeg_delivery_retries_scheduled_total[{RI}]))", "scheduled /s"),
            q("sum(depeg_delivery_retry_backlog)", "backlog"),
            q("sum(depeg_delivery_in_flight)", "in flight"),
        ]),
        panel("Failing endpoints and failures by reason", "timeseries", [
            q("sum(depeg_delivery_failing_endpoints)", "failing endpoints"),
            q("sum(depeg_delivery_probed_endpoints)", "probed receivers"),
            q(f'sum by (outcome) (rate(depeg_delivery_attempts_total{{outcome!="success"}}[{RI}]))',
              "{{outcome}} /s"),
        ]),
        panel("Delivery consumer lag", "timeseries", [
            q('sum by (partition) (depeg_consumer_lag_records{consumer="deliver"})',
              "p{{partition}}")]),
        panel("Delivery CU /s", "timeseries", [
            q(f'sum(rate(depeg_cu_consumed_total{{kind="delivery"}}[{RI}]))', "CU/s")],
            unit="ops"),
    ]
    return dashboard("depeg-delivery", "depeg-monitor / Delivery health",
                     "Webhook deliveries: statuses, latency, retries, failing endpoints.", p, [])


def vaults() -> dict[str, Any]:
    """The vault side as stored and served. Every store writer reports the whole store's
    counts, so replicas are combined with ``max``, never summed."""
    def stored_where(label: str = "", value: str = "") -> str:
        selector = f'{{{label}="{value}"}}' if label else ""
        return f"max by (tier, verdict) (depeg_store_vaults{selector})"

    stored = stored_where()
    vault_api = 'route=~"/vaults.*"'
    p = [
        row("Vaults in the store (what E4 lists)"),
        panel("Rated vaults", "stat", [q(f"sum({stored})", "vaults")], w=6, h=5),
        panel("do_not_list", "stat", [
            q(f"sum({stored_where('verdict', 'do_not_list')})", "do_not_list")],
            w=6, h=5, extra=thresholds((None, "green"), (1, "red"))),
        panel("Critical tier", "stat", [
            q(f"sum({stored_where('tier', 'critical')})", "critical")],
            w=6, h=5, extra=thresholds((None, "green"), (1, "red"))),
        panel("Unrated (tier unknown)", "stat", [
            q(f"sum({stored_where('tier', 'unknown')})", "unknown")],
            w=6, h=5, desc="Too few facts known to rate."),
        panel("Vaults by tier", "timeseries", [q(f"sum by (tier) ({stored})", "{{tier}}")],
              stack=True),
        panel("Vaults by listing verdict", "timeseries",
              [q(f"sum by (verdict) ({stored})", "{{verdict}}")], stack=True),
        row("Vault daemon (vaults.facts in, vaults.ratings out)"),
        panel("Fact records /s by result", "timeseries", [
            q(f"sum by (result) (rate(depeg_vault_facts_total[{RI}]))", "{{result}}")],
            unit="ops", desc="decoded: given to the engine; dead_lettered: sent to "
                             "vaults.facts.dlq with the reason."),
        panel("Facts dead-lettered /s by reason", "timeseries", [
            q(f"sum by (reason) (rate(depeg_vault_facts_dead_lettered_total[{RI}]))",
              "{{reason}}")], unit="ops"),
        panel("Rating changes published /s", "timeseries", [
            q(f"sum(rate(depeg_vault_ratings_total[{RI}]))", "vaults.ratings"),
            q(f"sum by (result) (rate(depeg_vault_depeg_changes_total[{RI}]))",
              "depeg changes {{result}}")], unit="ops",
            desc="Every record is a change of a vault's rating, tier, verdict or tags; depeg "
                 "tier changes re-rate the vaults holding the token."),
        panel("Rated by the daemons, by tier", "timeseries", [
            q("sum by (tier) (depeg_vaults_by_tier)", "{{tier}}"),
            q("sum(depeg_vaults_attention_needed)", "attention needed")],
            desc="Each daemon counts the vaults of its partitions: summed."),
        panel("Vault consumer lag", "timeseries", [
            q('sum by (partition) (depeg_consumer_lag_records{consumer="vaults"})',
              "p{{partition}}")]),
        row("Store writer (vaults.facts, vaults.ratings)"),
        panel("Vault rows written /s", "timeseries", [
            q(f'sum by (kind) (rate(depeg_store_writes_total{{kind=~"vault_.*"}}[{RI}]))',
              "{{kind}}")], unit="ops",
            desc="vault_facts: fact records merged; vault_rating: rating records stored."),
        panel("Vault records skipped or failed /s", "timeseries", [
            q(f'sum by (kind) (rate(depeg_store_write_errors_total{{kind=~"vault_.*"}}[{RI}]))',
              "{{kind}}")], unit="ops",
            desc="Undecodable records (skipped, logged with topic/partition/offset) and "
                 "failed writes (retried)."),
        panel("Vault write duration p95", "timeseries", [
            q("histogram_quantile(0.95, sum by (le, kind) (rate("
              f'depeg_store_write_duration_seconds_bucket{{kind=~"vault_.*"}}[{RI}])))',
              "{{kind}}")], unit="s"),
        panel("Store consumer lag", "timeseries", [
            q('sum by (partition) (depeg_consumer_lag_records{consumer="store"})',
              "p{{partition}}")], desc="Records behind, summed over the topics the store "
                                       "writer reads (depeg and vault topics)."),
        row("Read API (E4 /vaults, E5 /vaults/{address})"),
        panel("Vault API requests /s", "timeseries", [
            q(f"sum by (route, status) (rate(depeg_api_requests_total{{{vault_api}}}[{RI}]))",
              "{{route}} {{status}}")], unit="ops"),
        panel("Vault API latency p95", "timeseries", [
            q("histogram_quantile(0.95, sum by (le, route) (rate("
              f"depeg_api_request_duration_seconds_bucket{{{vault_api}}}[{RI}])))",
              "{{route}}")], unit="s"),
    ]
    return dashboard("depeg-vaults", "depeg-monitor / Vaults",
                     "Vault ratings as stored and served: tiers, verdicts, store writes, "
                     "the vault read API.", p, [])


DASHBOARDS = {"overview.json": overview, "token.json": token, "delivery.json": delivery,
              "vaults.json": vaults}


def render(build: Any) -> str:
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    OUT.mkdir(exist_ok=True)
    for name, build in DASHBOARDS.items():
        text, path = render(build), OUT / name
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"out of date, run grafana/build_dashboards.py: {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
