"""Logs: JSON lines with fields; secrets never written, by name or by shape."""

from __future__ import annotations

import io
import json
import logging
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import example, given
from hypothesis import strategies as st

from monitor.logs import (
    REDACTED,
    SECRET_VALUE_PATTERNS,
    configure_logging,
    get_logger,
    is_secret_field,
    scrub_text,
)

pytestmark = pytest.mark.ops

API_KEY = "dpm_" + secrets.token_urlsafe(32)
WEBHOOK_SECRET = "whsec_" + secrets.token_hex(32)


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    structlog.reset_defaults()
    configure_logging("debug", "json", stream=stream)
    yield stream
    structlog.reset_defaults()
    logging.getLogger().handlers[:] = []


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_lines_carry_fields(captured: io.StringIO) -> None:
    log = get_logger("test.fields")
    log.info("delivery.succeeded", event_id="e-1", token="0xabc", subscription_id="s-1")
    [record] = lines(captured)
    assert record["event"] == "delivery.succeeded"
    assert record["level"] == "info" and record["logger"] == "test.fields"
    assert record["event_id"] == "e-1" and record["subscription_id"] == "s-1"
    assert record["token"] == "0xabc"  # a token address is not a secret
    assert "timestamp" in record


def test_secret_named_fields_are_redacted(captured: io.StringIO) -> None:
    log = get_logger("test.names")
    log.info("created", secret_key=WEBHOOK_SECRET, api_key=API_KEY, password="hunter2",
             headers={"X-API-Key": API_KEY, "Content-Type": "application/json"},
             nested=[{"new_secret": "s3cr3t-value"}], api_key_prefix=API_KEY[:12])
    text = captured.getvalue()
    for leaked in (WEBHOOK_SECRET, API_KEY, "hunter2", "s3cr3t-value"):
        assert leaked not in text
    [record] = lines(captured)
    assert record["headers"] == {"X-API-Key": "[redacted]", "Content-Type": "application/json"}
    assert record["api_key_prefix"] == API_KEY[:12]  # the display prefix stays readable


def test_secret_shaped_values_are_masked_anywhere(captured: io.StringIO) -> None:
    log = get_logger("test.values")
    log.info(f"request with {API_KEY}", url=f"https://x.example/hook?api_key={API_KEY}&a=1",
             note=f"Authorization: Bearer {WEBHOOK_SECRET}", raw=WEBHOOK_SECRET.encode())
    logging.getLogger("aiohttp.access").warning("GET /rwa?secret=%s 200", "plain-secret-123")
    try:
        raise ValueError(f"bad secret {WEBHOOK_SECRET}")
    except ValueError:
        log.exception("failed")
    text = captured.getvalue()
    for leaked in (WEBHOOK_SECRET, API_KEY, API_KEY[12:], "plain-secret-123"):
        assert leaked not in text
    assert "ValueError" in text and "a=1" in text
    assert len(lines(captured)) == 3


def test_standard_library_tracebacks_and_stacks_are_masked(captured: io.StringIO) -> None:
    """A record from another library (aiohttp, aiokafka) with a traceback or a stack
    that quotes a secret: the formatted text is masked too."""
    other = logging.getLogger("aiohttp.client")
    try:
        raise ConnectionError(f"refused for {API_KEY}")
    except ConnectionError:
        other.warning("send failed", exc_info=True, stack_info=True)
    try:
        raise ValueError(f"bad secret {WEBHOOK_SECRET}")
    except ValueError:
        get_logger("test.stack").warning("failed", exc_info=True, stack_info=True)
    text = captured.getvalue()
    assert API_KEY not in text and API_KEY[12:] not in text
    assert WEBHOOK_SECRET not in text and WEBHOOK_SECRET[12:] not in text
    first, second = lines(captured)
    assert "ConnectionError" in str(first["exception"]) and "refused for" in text
    assert "ValueError" in str(second["exception"])


def _scrub_by_every_pattern(text: str) -> str:
    """scrub_text as its patterns read, every one tried on every text."""
    for pattern in SECRET_VALUE_PATTERNS:
        named = bool(pattern.groups)  # a parameter's name stays, its value goes

        def masked(match: re.Match[str], named: bool = named) -> str:
            return (match.group(1) if named else "") + REDACTED

        text = pattern.sub(masked, text)
    return text


_FRAGMENTS = st.sampled_from([
    "dpm_", "whsec_", "Bearer ", "bearer\t", "BEARER  ", "api_key=", "API-KEY=",
    "secret_key=", "password=", "token_secret=", "=", "&", "?", " ", '"', "_", "-",
    "dpm_abcd", "x" * 20, "whsec_" + "k" * 16, "dpm_" + "Q-" * 8, "Zq9-_",
    "0123456789abcdef", "bear", "er ", "dpm", "_key=",
])


@given(st.lists(st.one_of(_FRAGMENTS, st.text(max_size=6)), max_size=12).map("".join))
@example(f"key {API_KEY} used")
@example(f"signed with {WEBHOOK_SECRET}")
@example("Authorization: bEaReR abcdefgh.ijk")
@example("GET /rwa?Api-Key=abc&x=1")
def test_scrub_text_masks_what_every_pattern_would(text: str) -> None:
    """The quick search that lets most values through untouched changes no result."""
    assert scrub_text(text) == _scrub_by_every_pattern(text)


def test_classifiers() -> None:
    assert is_secret_field("X-Api-Key") and is_secret_field("previous_secret")
    assert is_secret_field("new_secret_key") and is_secret_field("Authorization")
    assert not is_secret_field("token") and not is_secret_field("subscription_id")
    assert not is_secret_field("secret_prefix") and not is_secret_field("key")
    assert scrub_text("dpm_abcd1234") == "dpm_abcd1234"  # display prefix: too short to be a key
    assert scrub_text(f"k={API_KEY}.") == "k=[redacted]."


#: In a fresh interpreter: configure logging before anything imported structlog (what the
#: CLI does), check structlog is still not imported, then log through the standard library
#: (aiohttp/aiokafka records) and through structlog; prints what was logged.
_FRESH = """
import io, json, logging, sys
from monitor.logs import configure_logging, get_logger
stream = io.StringIO()
configure_logging("info", "json", stream=stream)
before = "structlog" in sys.modules
logging.getLogger("aiohttp.access").warning("GET /hook?api_key=%s 200", sys.argv[1])
get_logger("test.fresh").info("created", password="hunter2", subscription_id="s-1")
print(json.dumps({"imported_before": before, "text": stream.getvalue()}))
"""


def test_logging_configured_before_structlog_is_imported_logs_the_same() -> None:
    """structlog is imported only once something logs (a clean replay never does); the
    records then come out as JSON lines with the secrets masked, from the standard
    library's loggers and from structlog's alike."""
    done = subprocess.run([sys.executable, "-c", _FRESH, API_KEY], capture_output=True,
                          text=True, check=True)
    result = json.loads(done.stdout)
    assert result["imported_before"] is False
    text = result["text"]
    assert API_KEY not in text and API_KEY[12:] not in text and "hunter2" not in text
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["logger"] == "aiohttp.access" and first["level"] == "warning"
    assert first["event"] == "GET /hook?api_key=[redacted] 200"
    assert second["event"] == "created" and second["logger"] == "test.fresh"
    assert second["password"] == "[redacted]" and second["subscription_id"] == "s-1"
    assert "timestamp" in first and "timestamp" in second
