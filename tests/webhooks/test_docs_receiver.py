"""The example receiver in docs/webhooks.md works against real deliveries."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer

from monitor.config import DeliveryConfig
from monitor.records import encode
from monitor.webhooks.sender import Sender
from tests.webhook_support import tier_change

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"


def _example() -> dict[str, Any]:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert code is not None
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(code.group(1), str(DOC), "exec"), namespace)
    return namespace


async def test_documented_receiver_accepts_signed_and_rejects_forged() -> None:
    example = _example()
    secret = "whsec_" + "12" * 32
    server = TestServer(example["make_app"](secret), host="127.0.0.1")
    await server.start_server()
    sender = Sender(DeliveryConfig(allow_loopback=True, timeout_seconds=5))
    try:
        url = str(server.make_url("/hook"))
        event = tier_change()
        kwargs: dict[str, Any] = dict(event_type=event.event_type, event_id=event.event_id)
        good = await sender.send(url, encode(event), secret=secret, **kwargs)
        again = await sender.send(url, encode(event), secret=secret, **kwargs)
        forged = await sender.send(url, encode(tier_change()), secret="whsec_wrong", **kwargs)
    finally:
        await sender.close()
        await server.close()
    assert good.status_code == 200 and again.status_code == 200
    assert forged.status_code == 401
    assert event.event_id in example["seen_event_ids"]
