"""``depeg-monitor keys create|list|revoke`` as a real subprocess, on both databases."""

from __future__ import annotations

import asyncio
import os

from monitor.storage import connect
from monitor.storage.webhooks import WebhookStore
from tests.webhook_support import cli_command


async def _cli(storage_url: str, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEPEG_")}
    env["DEPEG_STORAGE__URL"] = storage_url
    proc = await asyncio.create_subprocess_exec(
        *cli_command(), "--log-format", "json", "keys", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_create_list_revoke(storage_url: str) -> None:
    code, out, _ = await _cli(storage_url, "create", "--name", "team-a")
    assert code == 0
    key = out.strip()
    assert key.startswith("dpm_") and len(key) > 40
    code, listing, _ = await _cli(storage_url, "list")
    assert code == 0 and "team-a" in listing and key[:12] in listing
    assert key not in listing  # never shown again
    db = await connect(storage_url)
    try:
        assert await WebhookStore(db).authenticate(key) is not None
        assert key not in repr(await db.fetch("SELECT * FROM api_keys"))
        code, _, err = await _cli(storage_url, "revoke", key[:12])
        assert code == 0, err
        assert await WebhookStore(db).authenticate(key) is None
    finally:
        await db.close()
    code, _, err = await _cli(storage_url, "revoke", key[:12])
    assert code == 1 and "no active key" in err
    code, _, err = await _cli(storage_url, "create")
    assert code == 2 and "--name" in err


async def test_usage_shows_one_keys_own_units(tmp_path: object) -> None:
    import time
    import uuid

    from monitor.storage.usage import charge

    url = f"sqlite:///{tmp_path}/usage.db"
    code, out, _ = await _cli(url, "create", "--name", "mine")
    mine = out.strip()
    db = await connect(url)
    try:
        await WebhookStore(db).create_api_key("other", "dpm_other_key_for_the_test", 0.0)
        keys = {k.name: k for k in await WebhookStore(db).list_api_keys()}
        now = time.time()
        for kind, n in (("E8", 3), ("delivery", 2)):
            for _ in range(n):
                await charge(db, keys["mine"].id, kind, uuid.uuid4().hex, now)
        await charge(db, keys["other"].id, "E8", uuid.uuid4().hex, now)
    finally:
        await db.close()
    code, out, err = await _cli(url, "usage", mine[:12])
    assert code == 0, err
    rows = dict(line.split("\t") for line in out.splitlines() if not line.startswith("#"))
    assert rows == {"endpoint": "cu", "E8": "3", "delivery": "2", "total": "5"}
    code, _, err = await _cli(url, "usage", "dpm_nothing")
    assert code == 1 and "no single key" in err
