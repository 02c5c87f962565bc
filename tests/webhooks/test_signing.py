"""Signing and the receiver helper ``verify`` (spec: Authentication 5)."""

from __future__ import annotations

import hashlib
import hmac

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.records import encode
from monitor.webhooks.signing import SignatureError, delivery_body, sign, verify
from tests.webhook_support import tier_change

SECRET = "whsec_" + "ab" * 32


def _delivery(secret: str = SECRET, previous: str | None = None) -> tuple[bytes, dict[str, str]]:
    event = tier_change(symbol="USDé")  # non-ASCII stays unescaped
    raw = encode(event)
    sig = sign(raw, secret)
    headers = {"X-Webhook-Signature": sig, "X-Event-ID": event.event_id}
    if previous:
        headers["X-Webhook-Previous-Signature"] = sign(raw, previous)
    return delivery_body(raw, sig, "2024-01-01T00:00:00Z"), headers


def test_body_carries_the_exact_signed_bytes() -> None:
    event = tier_change(symbol="USDé")
    raw = encode(event)
    assert "é".encode() in raw and b"\\u" not in raw
    body = delivery_body(raw, sign(raw, SECRET), "2024-01-01T00:00:00Z")
    assert body.startswith(b'{"event":' + raw + b',"signature":"')
    decoded = msgspec.json.decode(body)
    assert decoded["signature"] == hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    assert decoded["delivered_at"] == "2024-01-01T00:00:00Z"
    assert msgspec.json.decode(body, type=dict)["event"]["event_id"] == event.event_id


def test_verify_accepts_a_good_delivery_and_header_case() -> None:
    body, headers = _delivery()
    assert verify(body, headers, SECRET)
    assert verify(body, {k.lower(): v for k, v in headers.items()}, SECRET)


@pytest.mark.parametrize("mutate, message", [
    (lambda h: h.pop("X-Webhook-Signature"), "missing"),
    (lambda h: h.update({"X-Webhook-Signature": "abc"}), "64 hex"),
    (lambda h: h.update({"X-Webhook-Signature": "g" * 64}), "64 hex"),
    (lambda h: h.update({"X-Webhook-Signature": "0" * 64}), "does not match"),
])
def test_verify_rejects_bad_signatures(mutate, message) -> None:  # type: ignore[no-untyped-def]
    body, headers = _delivery()
    mutate(headers)
    with pytest.raises(SignatureError, match=message):
        verify(body, headers, SECRET)


def test_verify_rejects_wrong_secret_and_tampered_body() -> None:
    body, headers = _delivery()
    with pytest.raises(SignatureError):
        verify(body, headers, "whsec_other")
    tampered = body.replace(b'"new_tier":"warning"', b'"new_tier":"ok"')
    assert tampered != body
    with pytest.raises(SignatureError):
        verify(tampered, headers, SECRET)
    with pytest.raises(SignatureError, match="not a delivery body"):
        verify(b"not json", headers, SECRET)


def test_rotation_either_secret_verifies() -> None:
    old, new = SECRET, "whsec_" + "cd" * 32
    body, headers = _delivery(secret=new, previous=old)
    assert verify(body, headers, new)
    assert verify(body, headers, old)            # receiver not yet updated
    assert verify(body, headers, new, previous_secret=old)
    del headers["X-Webhook-Previous-Signature"]
    with pytest.raises(SignatureError):
        verify(body, headers, old)               # after 24 h only the new one signs


@settings(max_examples=200, deadline=None)
@given(symbol=st.text(min_size=1, max_size=20), secret=st.text(min_size=1, max_size=80),
       deviation=st.floats(-100, 100, allow_nan=False), flip=st.integers(0, 10_000))
def test_any_event_round_trips_and_any_byte_flip_is_caught(symbol: str, secret: str,
                                                           deviation: float, flip: int) -> None:
    raw = encode(tier_change(symbol=symbol, deviation_pct=deviation))
    sig = sign(raw, secret)
    body = delivery_body(raw, sig, "2024-01-01T00:00:00Z")
    headers = {"X-Webhook-Signature": sig}
    assert verify(body, headers, secret)
    start = len(b'{"event":')
    i = start + flip % len(raw)
    tampered = body[:i] + bytes([body[i] ^ 0x01]) + body[i + 1:]
    try:
        verify(tampered, headers, secret)
    except SignatureError:
        return
    raise AssertionError("a modified event verified")
