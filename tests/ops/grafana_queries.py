"""Reading the dashboards and alert rules as data: queries, variables, metric selectors.

Shared by the static checks (tests/ops/test_dashboards.py) and the live Prometheus check
(tests/ops/test_live.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"

#: Grafana's built-in interval variables, replaced by windows a short test scrape can fill
#: (the live check scrapes every second).
BUILTINS = {"$__rate_interval": "15s", "$__interval": "5s", "$__range": "5m"}
_SELECTOR = re.compile(r"\b(depeg_[a-z0-9_]+|up)\b\s*(\{[^}]*\})?")
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
_LABEL_VALUES = re.compile(r"^label_values\((?:(?P<sel>.+),\s*)?(?P<label>[A-Za-z_]\w*)\)$")


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    ref: str
    expr: str


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def panels(dash: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])  # collapsed rows hold their panels


def queries(path: Path) -> list[Query]:
    dash = load(path)
    out = []
    for p in panels(dash):
        for i, t in enumerate(p.get("targets", [])):
            out.append(Query(path.name, p["title"], t.get("refId") or f"#{i}", t["expr"]))
    return out


def variables(dash: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(dash.get("templating", {}).get("list", []))


def variable_query(var: Mapping[str, Any]) -> str:
    q = var.get("query")
    return str(q.get("query", "")) if isinstance(q, dict) else str(q or "")


def parse_label_values(query: str) -> tuple[str | None, str]:
    m = _LABEL_VALUES.match(query.strip())
    if not m:
        raise ValueError(f"unsupported variable query {query!r}")
    return m.group("sel"), m.group("label")


def referenced_variables(expr: str) -> set[str]:
    return {name for name in _VARIABLE.findall(expr) if not name.startswith("__")}


def substitute(expr: str, values: Mapping[str, str]) -> str:
    for builtin, window in BUILTINS.items():
        expr = expr.replace(builtin, window)
    return _VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), expr)


def selectors(expr: str) -> list[str]:
    """Every metric selector (``name{matchers}``) of a PromQL expression."""
    return [name + (matchers or "") for name, matchers in _SELECTOR.findall(expr)]


def metric_names(expr: str) -> set[str]:
    return {name for name, _ in _SELECTOR.findall(expr)}


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]
