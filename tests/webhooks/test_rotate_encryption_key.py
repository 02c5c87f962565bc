"""``depeg-monitor keys rotate-encryption-key`` as a real subprocess, on both databases.

The key that seals webhook secrets was once committed to the repository; an operator
whose database was sealed with it must be able to move every secret to a new key.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
import uuid
from pathlib import Path

import pytest

from monitor.config import DeliveryConfig
from monitor.storage import Database, connect
from monitor.storage.webhooks import WebhookStore
from monitor.webhooks.filters import Filters
from monitor.webhooks.rekey import pending_key_path, reseal_all
from monitor.webhooks.secrets import SecretBox, SecretStoreError, decode_key, load_key
from tests.webhook_support import cli_command, new_key


async def _cli(storage_url: str, data_dir: Path, *args: str,
               extra: dict[str, str] | None = None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEPEG_")}
    env |= {"DEPEG_STORAGE__URL": storage_url, **(extra or {})}
    proc = await asyncio.create_subprocess_exec(
        *cli_command(), "--data-dir", str(data_dir), "keys", "rotate-encryption-key", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


async def _subscriptions(db: Database, box: SecretBox) -> dict[str, tuple[str, str | None]]:
    """Three subscriptions, one with a rotated (previous) secret; returns the plain secrets."""
    _, key_id = await new_key(db)
    store = WebhookStore(db)
    plain: dict[str, tuple[str, str | None]] = {}
    for i in range(3):
        sub_id = str(uuid.uuid4())
        secret = f"whsec_{i}{uuid.uuid4().hex}"
        await store.create_subscription(
            sub_id=sub_id, api_key_id=key_id, webhook_url="https://example.com/h",
            endpoint="https://example.com:443", event_types=["DEPEG_TIER_CHANGE"],
            filters=Filters(), secret_sealed=box.seal(secret, sub_id), now=time.time())
        previous = None
        if i == 0:
            previous, secret = secret, f"whsec_new{uuid.uuid4().hex}"
            await store.rotate_secret(key_id, sub_id, box.seal(secret, sub_id),
                                      box.seal(previous, sub_id), time.time())
        plain[sub_id] = (secret, previous)
    return plain


async def _opened(db: Database, box: SecretBox) -> dict[str, tuple[str, str | None]]:
    rows = await db.fetch("SELECT id, secret_sealed, previous_secret_sealed"
                          " FROM webhook_subscriptions")
    return {r["id"]: (box.open(r["secret_sealed"], r["id"]),
                      box.open(r["previous_secret_sealed"], r["id"])
                      if r["previous_secret_sealed"] else None) for r in rows}


async def test_rotation_reseals_every_secret_and_replaces_the_key_file(
        storage_url: str, tmp_path: Path) -> None:
    key_path = tmp_path / "secret-key"
    old_key = load_key(DeliveryConfig(secret_key_file=str(key_path)))  # created, as on 1st use
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    db = await connect(storage_url)
    try:
        plain = await _subscriptions(db, SecretBox(old_key))
        code, out = await _cli(storage_url, tmp_path)
        assert code == 0, out
        assert "re-encrypted 4 secret(s)" in out
        new = decode_key(key_path.read_text())
        assert new != old_key and stat.S_IMODE(key_path.stat().st_mode) == 0o600
        assert not pending_key_path(key_path).exists()
        assert await _opened(db, SecretBox(new)) == plain
        with pytest.raises(SecretStoreError):
            await _opened(db, SecretBox(old_key))
    finally:
        await db.close()


async def test_an_interrupted_rotation_is_finished_by_running_it_again(tmp_path: Path) -> None:
    """Crash after the database commit, before the key file was replaced. (SQLite only:
    the SQL is the same as above, which runs on both databases.)"""
    storage_url = f"sqlite:///{tmp_path / 'store.db'}"
    key_path = tmp_path / "secret-key"
    old_key = load_key(DeliveryConfig(secret_key_file=str(key_path)))
    db = await connect(storage_url)
    try:
        plain = await _subscriptions(db, SecretBox(old_key))
        pending = os.urandom(32)
        from monitor.webhooks.secrets import write_key_file

        write_key_file(pending_key_path(key_path), pending)
        await reseal_all(db, SecretBox(old_key), SecretBox(pending))
        code, out = await _cli(storage_url, tmp_path)
        assert code == 0, out
        assert "4 already under the new key" in out
        assert decode_key(key_path.read_text()) == pending
        assert await _opened(db, SecretBox(pending)) == plain
    finally:
        await db.close()


async def test_configured_key_needs_a_new_key_file_and_wrong_key_changes_nothing(
        tmp_path: Path) -> None:
    storage_url = f"sqlite:///{tmp_path / 'store.db'}"
    from monitor.webhooks.secrets import encode_key, write_key_file

    old_key, new, wrong = os.urandom(32), os.urandom(32), os.urandom(32)
    db = await connect(storage_url)
    try:
        plain = await _subscriptions(db, SecretBox(old_key))
        env = {"DEPEG_DELIVERY__SECRET_ENCRYPTION_KEY": encode_key(old_key)}
        code, out = await _cli(storage_url, tmp_path, extra=env)
        assert code == 2 and "--new-key-file" in out
        new_file = tmp_path / "new.key"
        write_key_file(new_file, new)
        bad = {"DEPEG_DELIVERY__SECRET_ENCRYPTION_KEY": encode_key(wrong)}
        code, out = await _cli(storage_url, tmp_path, "--new-key-file", str(new_file),
                               extra=bad)
        assert code == 1 and "neither" in out
        assert await _opened(db, SecretBox(old_key)) == plain  # all or nothing
        code, out = await _cli(storage_url, tmp_path, "--new-key-file", str(new_file),
                               extra=env)
        assert code == 0, out
        assert await _opened(db, SecretBox(new)) == plain
        assert not (tmp_path / "secret-key").exists()  # the configured key wins; no file
    finally:
        await db.close()
