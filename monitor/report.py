"""The model report of ``depeg-monitor replay --report``: what the model did, per token.

For each token one figure: the price against its peg (top), the rating with the tier bands
shaded and the published tier as a coloured strip (bottom), every transition marked as a
vertical line on both. The report is HTML with the figures embedded (one self-contained
file to mail around) or Markdown with PNG files in ``<name>_files/`` beside it. Each token
also gets a table of its transitions (time, old -> new, rating, price, event id), so the
figure and the exact events can be read side by side.

matplotlib (the ``report`` extra) is imported here only, and this module only when a
report is asked for, so the CLI starts fast without it.
"""

from __future__ import annotations

import base64
import html
import importlib.util
import io
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .config import ModelConfig
from .records import RatingSnapshot, TierChangeEvent
from .timefmt import parse_ts

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TIER_COLOURS = {"ok": "#2e7d32", "watch": "#f9a825", "warning": "#ef6c00",
                "critical": "#c62828", "premium": "#1565c0"}
#: Tiers top to bottom in the tier strip.
TIER_ORDER = ("critical", "warning", "watch", "ok", "premium")


class ReportError(RuntimeError):
    """The report cannot be written (plotting library missing, unknown file type)."""


@dataclass
class TokenSeries:
    key: str
    symbol: str
    times: list[datetime] = field(default_factory=list)
    prices: list[float | None] = field(default_factory=list)
    pegs: list[float | None] = field(default_factory=list)
    ratings: list[float | None] = field(default_factory=list)
    tiers: list[str] = field(default_factory=list)
    events: list[TierChangeEvent] = field(default_factory=list)


def _when(stamp: str) -> datetime:
    return datetime.fromtimestamp(parse_ts(stamp), UTC)


def _number(text: str | None) -> float | None:
    return float(text) if text else None


def collect(snapshots: Iterable[RatingSnapshot],
            events: Iterable[TierChangeEvent]) -> list[TokenSeries]:
    """Per token (sorted by chain:address): the snapshots' series and its events."""
    series: dict[str, TokenSeries] = {}
    for s in snapshots:
        key = f"{s.chain}:{s.token_address}"
        t = series.get(key) or series.setdefault(key, TokenSeries(key, s.symbol))
        t.symbol = s.symbol or t.symbol
        t.times.append(_when(s.timestamp))
        t.prices.append(_number(s.price_usd))
        t.pegs.append(_number(s.peg_usd))
        t.ratings.append(s.rating)
        t.tiers.append(s.tier)
    by_key: dict[str, list[TierChangeEvent]] = defaultdict(list)
    for e in events:
        by_key[f"{e.data.chain}:{e.data.token_address}"].append(e)
    for key, evs in by_key.items():
        t = series.get(key) or series.setdefault(key, TokenSeries(key, evs[0].data.symbol))
        t.events = evs
    return [series[k] for k in sorted(series)]


def _figure(t: TokenSeries, model: ModelConfig) -> Figure:
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    fig = Figure(figsize=(11, 5.2), dpi=90, layout="constrained")
    price_ax, rating_ax = fig.subplots(2, 1, sharex=True, height_ratios=(1, 1.15))
    fig.suptitle(f"{t.symbol}  {t.key}", fontsize=11)

    price_ax.plot(t.times, [p if p is not None else float("nan") for p in t.prices],
                  color="#263238", lw=1.0, label="price (USD)")
    price_ax.plot(t.times, [p if p is not None else float("nan") for p in t.pegs],
                  color="#78909c", lw=0.9, ls="--", label="peg (USD)")
    price_ax.set_ylabel("USD")
    price_ax.legend(loc="lower left", fontsize=8)
    price_ax.grid(alpha=0.3)

    bands = (("ok", 0, model.watch_at), ("watch", model.watch_at, model.warning_at),
             ("warning", model.warning_at, model.critical_at),
             ("critical", model.critical_at, 100))
    for tier, low, high in bands:
        rating_ax.axhspan(low, high, color=TIER_COLOURS[tier], alpha=0.08, lw=0)
    rating_ax.plot(t.times, [r if r is not None else float("nan") for r in t.ratings],
                   color="#263238", lw=1.0, label="rating")
    # The published tier as a strip of coloured marks just above the band area.
    for tier in TIER_ORDER:
        xs = [x for x, tt in zip(t.times, t.tiers, strict=True) if tt == tier]
        if xs:
            rating_ax.scatter(xs, [104] * len(xs), s=9, marker="s", lw=0,
                              color=TIER_COLOURS[tier], label=f"tier {tier}")
    rating_ax.set_ylim(0, 108)
    rating_ax.set_ylabel("rating (0-100)")
    rating_ax.grid(alpha=0.3)
    handles, labels = rating_ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", fontsize=8, ncol=6, frameon=False)

    # Transitions: a line in the new tier's colour and its number (the table's "#");
    # numbers step down through four heights so close transitions stay readable.
    for n, e in enumerate(t.events, start=1):
        when = _when(e.timestamp)
        colour = TIER_COLOURS.get(e.data.new_tier, "black")
        for ax in (price_ax, rating_ax):
            ax.axvline(when, color=colour, lw=1.0, alpha=0.85)
        rating_ax.annotate(str(n), (when, 96 - 9 * ((n - 1) % 4)), fontsize=8, ha="center",
                           va="center", color=colour, fontweight="bold",
                           bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": colour,
                                 "lw": 0.8})
    locator = AutoDateLocator()  # type: ignore[no-untyped-call]  # untyped in matplotlib
    rating_ax.xaxis.set_major_locator(locator)
    rating_ax.xaxis.set_major_formatter(
        ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    rating_ax.set_xlabel("event time (UTC)")
    return fig


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _rows(t: TokenSeries) -> list[tuple[str, str, str, str, str, str, str]]:
    return [(str(n), e.timestamp, e.data.old_tier, e.data.new_tier,
             f"{e.data.risk_score:.1f}", e.data.price_usd or "", e.event_id)
            for n, e in enumerate(t.events, start=1)]


def _summary(t: TokenSeries) -> str:
    rated = [r for r in t.ratings if r is not None]
    worst = max(rated) if rated else None
    span = f"{t.times[0]:%Y-%m-%d %H:%M} → {t.times[-1]:%Y-%m-%d %H:%M} UTC" if t.times else ""
    return (f"{len(t.times)} ratings {span}; {len(t.events)} transitions; highest rating "
            f"{worst:.1f}" if worst is not None else f"{len(t.events)} transitions")


def _html(tokens: list[TokenSeries], model: ModelConfig) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>depeg-monitor model "
             "report</title><style>body{font-family:sans-serif;max-width:1050px;margin:auto}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
             "padding:2px 6px}img{max-width:100%}</style></head><body>",
             "<h1>Model report</h1>",
             f"<p>{len(tokens)} tokens, {sum(len(t.events) for t in tokens)} transitions. "
             "Top: price and peg. Bottom: rating with the tier bands shaded, the published "
             "tier as coloured marks; vertical lines are transitions in the colour of the "
             "new tier, numbered as in the tables.</p>"]
    for t in tokens:
        img = base64.b64encode(_render(t, model)).decode()
        parts.append(f"<section class='token' id='{html.escape(t.key)}'>"
                     f"<h2>{html.escape(t.symbol)} <small>{html.escape(t.key)}</small></h2>"
                     f"<p>{html.escape(_summary(t))}</p>"
                     f"<img alt='{html.escape(t.symbol)} price, rating and tier' "
                     f"src='data:image/png;base64,{img}'>")
        parts.append("<table class='transitions'><tr><th>#</th><th>time</th><th>from</th>"
                     "<th>to</th><th>rating</th><th>price</th><th>event id</th></tr>")
        for n, ts, old, new, rating, price, eid in _rows(t):
            parts.append(f"<tr data-event-id='{eid}'><td>{n}</td><td>{ts}</td><td>{old}</td>"
                         f"<td>{new}</td><td>{rating}</td><td>{html.escape(price)}</td>"
                         f"<td>{eid}</td></tr>")
        parts.append("</table></section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _markdown(tokens: list[TokenSeries], model: ModelConfig, path: Path) -> str:
    files = path.with_name(f"{path.stem}_files")
    files.mkdir(parents=True, exist_ok=True)
    lines = ["# Model report", "",
             f"{len(tokens)} tokens, {sum(len(t.events) for t in tokens)} transitions. Top: "
             "price and peg. Bottom: rating with the tier bands shaded, the published tier as "
             "coloured marks; vertical lines are transitions, numbered as in the tables.", ""]
    for t in tokens:
        png = files / f"{t.key.replace(':', '_')}.png"
        png.write_bytes(_render(t, model))
        lines += [f"## {t.symbol} `{t.key}`", "", _summary(t), "",
                  f"![{t.symbol} price, rating and tier]({files.name}/{png.name})", "",
                  "| # | time | from | to | rating | price | event id |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {' | '.join(row)} |" for row in _rows(t)]
        lines.append("")
    return "\n".join(lines)


def _render(t: TokenSeries, model: ModelConfig) -> bytes:
    return _png(_figure(t, model))


def check_report_path(path: Path) -> None:
    """Refuse a report that cannot be written, before the replay does its work."""
    if path.suffix.lower() not in (".html", ".htm", ".md"):
        raise ReportError(f"report must end in .html or .md, not {path.name!r}")
    if importlib.util.find_spec("matplotlib") is None:
        raise ReportError("the report needs matplotlib: pip install 'depeg-monitor[report]'")


def write_report(path: Path, snapshots: Iterable[RatingSnapshot],
                 events: Iterable[TierChangeEvent], model: ModelConfig | None = None) -> None:
    """Write the report to ``path`` (``.html``/``.htm``, or ``.md`` with PNGs beside it)."""
    check_report_path(path)
    suffix = path.suffix.lower()
    import matplotlib

    matplotlib.use("Agg")
    # Its first run logs "generated new fontManager" at INFO through our handler: a line
    # with no component.event name in the middle of the replay output.
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    model = model or ModelConfig()
    tokens = collect(snapshots, events)
    text = _html(tokens, model) if suffix != ".md" else _markdown(tokens, model, path)
    path.write_text(text, encoding="utf-8")
