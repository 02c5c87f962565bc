"""The shipped sample configuration is generated from the config model and cannot drift."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import msgspec

from monitor.config import Config, load_config
from monitor.config_doc import example, render
from tests.conftest import REPO

EXAMPLE = REPO / "depeg-monitor.example.toml"


def test_example_file_is_what_the_model_generates() -> None:
    assert EXAMPLE.read_text(encoding="utf-8") == example(), (
        "depeg-monitor.example.toml is stale: regenerate it with "
        "`depeg-monitor config --example > depeg-monitor.example.toml`")


def test_example_loads_as_the_defaults_and_names_every_setting() -> None:
    assert load_config(EXAMPLE, env={"HOME": "/h"}) == load_config(env={"HOME": "/h"})
    text = EXAMPLE.read_text(encoding="utf-8")
    for section, struct in msgspec.structs.asdict(Config()).items():
        assert f"[{section}]" in text
        for name in (struct if isinstance(struct, dict) else {}):
            assert re.search(rf"^# {name} = |^\[{section}\.{name}\]", text, re.M), name


def test_config_defaults_prints_comments_and_round_trips() -> None:
    out = subprocess.run([sys.executable, "-m", "monitor", "config", "--defaults"],
                         capture_output=True, text=True, check=True).stdout
    assert out == render()
    assert "# Port of the embedded broker" in out and "\nport = 8080\n" in out
    parsed = tomllib.loads(out)
    assert msgspec.convert(parsed, Config) == Config()  # every value written as it is
