"""Re-encrypt every stored webhook secret under a new key (``keys rotate-encryption-key``).

Why: the key that seals subscription secrets may have leaked (a copy of the key file, or
the key that was once committed to this repository: treat it as public). Rotating it
re-seals each ``secret_sealed`` and ``previous_secret_sealed`` in one transaction, so a
reader sees either every secret under the old key or every one under the new.

Crash safety with a key file: the new key is first written to ``<key file>.new`` (0600),
then the database is re-sealed and committed, then the new file replaces the old one. A
crash at any point is finished by running the command again: it reuses ``.new``, and rows
that already open with the new key are left as they are.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..storage.db import Database
from .secrets import SecretBox, SecretStoreError


class RekeyError(RuntimeError):
    pass


@dataclass(frozen=True)
class RekeyResult:
    resealed: int  # secrets re-encrypted now (current and previous ones)
    already_new: int  # secrets already under the new key (an interrupted earlier run)


def _reseal(stored: str, sub_id: str, old: SecretBox, new: SecretBox) -> tuple[str, bool]:
    """(value under the new key, whether it was re-encrypted now)."""
    try:
        return new.seal(old.open(stored, sub_id), sub_id), True
    except SecretStoreError:
        try:
            new.open(stored, sub_id)
        except SecretStoreError:
            raise RekeyError(
                f"subscription {sub_id}: its secret opens with neither the current nor the "
                "new key; nothing was changed (is delivery.secret_encryption_key right?)"
            ) from None
        return stored, False


async def reseal_all(db: Database, old: SecretBox, new: SecretBox) -> RekeyResult:
    """Re-seal every subscription's secrets (deleted ones too: their rows keep them)."""
    resealed = already = 0
    async with db.transaction() as tx:
        rows = await tx.fetch(
            "SELECT id, secret_sealed, previous_secret_sealed FROM webhook_subscriptions"
            " ORDER BY id")
        for row in rows:
            sealed, changed = _reseal(row["secret_sealed"], row["id"], old, new)
            resealed, already = resealed + changed, already + (not changed)
            previous = row["previous_secret_sealed"]
            if previous:
                previous, changed = _reseal(previous, row["id"], old, new)
                resealed, already = resealed + changed, already + (not changed)
            await tx.execute(
                "UPDATE webhook_subscriptions SET secret_sealed = $2,"
                " previous_secret_sealed = $3 WHERE id = $1", row["id"], sealed, previous)
    return RekeyResult(resealed, already)


def pending_key_path(key_file: Path) -> Path:
    return key_file.with_name(key_file.name + ".new")


def prepare_new_key(key_file: Path, given: bytes | None = None) -> bytes:
    """The new key, written to ``<key file>.new`` (0600): an interrupted run's, else
    ``given``, else a fresh one."""
    from .secrets import decode_key, write_key_file

    pending = pending_key_path(key_file)
    if pending.exists():
        return decode_key(pending.read_text(encoding="ascii"))
    key = given if given is not None else secrets.token_bytes(32)
    write_key_file(pending, key)
    return key


def install_new_key(key_file: Path) -> None:
    """Atomically replace the key file with the prepared ``.new`` one."""
    os.replace(pending_key_path(key_file), key_file)
    fd = os.open(key_file.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself is durable before we say "done"
    finally:
        os.close(fd)
