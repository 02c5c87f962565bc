"""``depeg-monitor replay --report``: every token and every transition, from real files."""

from __future__ import annotations

import argparse
import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from monitor.config import Config, RegistryConfig
from monitor.replay import command
from tests.conftest import data_file
from tests.spread import multichain

pytestmark = pytest.mark.data
PNG = b"\x89PNG\r\n\x1a\n"


def replay(argv: list[str], config: Config) -> int:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.run(parser.parse_args(argv), config)


def transitions(path: Path) -> dict[str, list[str]]:
    """token key -> event ids, from the --out file (the report's independent truth)."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        e = json.loads(line)
        out.setdefault(f"{e['data']['chain']}:{e['data']['token_address']}", []).append(
            e["event_id"])
    return out


class _Report(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, dict[str, list[str]]] = {}
        self._current: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and a.get("class") == "token":
            self._current = a["id"]
            self.sections[self._current or ""] = {"images": [], "events": []}
        elif self._current and tag == "img":
            src = a["src"]
            assert src is not None, "an image without a source"
            self.sections[self._current]["images"].append(src)
        elif self._current and tag == "tr" and (event_id := a.get("data-event-id")):
            self.sections[self._current]["events"].append(event_id)


def test_html_report_shows_every_token_and_transition(tmp_path: Path) -> None:
    registry, files = multichain.build(tmp_path)
    config = Config(registry=RegistryConfig(path=str(registry)))
    out, report = tmp_path / "t.jsonl", tmp_path / "report.html"
    assert replay([*map(str, files), "--out", str(out), "--report", str(report)], config) == 0
    parsed = _Report()
    parsed.feed(report.read_text())
    expected = transitions(out)
    assert set(parsed.sections) == set(multichain.KEYS)
    assert sum(map(len, expected.values())) >= 6
    for key, section in parsed.sections.items():
        assert section["events"] == expected.get(key, [])  # every transition, in order
        (src,) = section["images"]
        png = base64.b64decode(src.removeprefix("data:image/png;base64,"))
        assert png.startswith(PNG) and len(png) > 20_000


def test_markdown_report_writes_pngs_beside_it(tmp_path: Path) -> None:
    source = data_file("ticks/usdc_2023-03_binanceus_1m.csv")
    out, report = tmp_path / "t.jsonl", tmp_path / "usdc.md"
    assert replay([str(source), "--out", str(out), "--report", str(report)], Config()) == 0
    text = report.read_text()
    (key, ids), = transitions(out).items()
    assert re.findall(r"^## USDC `([^`]+)`$", text, re.M) == [key]
    row = r"^\| \d+ (?:\| [^|]+ ){5}\| ([0-9a-f-]{36}) \|$"
    assert re.findall(row, text, re.M) == ids
    (image,) = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    assert (report.parent / image).read_bytes().startswith(PNG)


def test_a_report_with_an_unknown_suffix_is_refused_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = data_file("ticks/usdc_2022-11_to_2023-03_chainlink.csv")
    code = replay([str(source), "--out", str(tmp_path / "t.jsonl"), "--report",
                   str(tmp_path / "r.pdf")], Config())
    assert code == 2 and "report must end in .html or .md" in capsys.readouterr().err
