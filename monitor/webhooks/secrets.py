"""Subscription secrets at rest: AES-256-GCM, so a database dump alone does not leak them.

The service must sign with the plain secret, so it cannot store only a hash (as it does
for API keys); it stores ``v1:<base64(nonce || ciphertext)>`` instead, with the
subscription id as associated data (a ciphertext copied onto another row does not
decrypt). The key lives outside the database:

* ``delivery.secret_encryption_key`` (env ``DEPEG_DELIVERY__SECRET_ENCRYPTION_KEY``):
  32 random bytes, base64 (``python -c "import secrets,base64;
  print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())"``); production sets it.
* otherwise ``delivery.secret_key_file``: read, or created once with mode 0600 — the
  single-machine default, ``secret-key`` in the data directory (monitor/paths.py), beside
  (never inside) the SQLite file and never in the current directory.

``depeg-monitor keys rotate-encryption-key`` re-encrypts every stored secret under a new
key (monitor/webhooks/rekey.py).

Every process that signs or rotates (``deliver``, ``api``) must see the same key.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..config import DeliveryConfig
from ..paths import default_secret_key_file

_PREFIX = "v1:"
_NONCE = 12


class SecretStoreError(ValueError):
    pass


def new_secret() -> str:
    """A subscription's signing secret: 32 random bytes, hex (what receivers copy)."""
    return "whsec_" + secrets.token_hex(32)


def decode_key(text: str) -> bytes:
    text = text.strip()
    try:
        key = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise SecretStoreError("secret encryption key is not base64") from None
    if len(key) != 32:
        raise SecretStoreError("secret encryption key must be 32 bytes (base64-encoded)")
    return key


def key_file(config: DeliveryConfig) -> Path:
    """The key file in use: the configured one, else ``secret-key`` in the data directory."""
    return Path(config.secret_key_file) if config.secret_key_file else default_secret_key_file()


def encode_key(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode()


def write_key_file(path: Path, key: bytes) -> None:
    """Create ``path`` holding ``key``, mode 0600 from the first byte (never world-readable
    for an instant); fails if it exists."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(encode_key(key) + "\n")
        out.flush()
        os.fsync(out.fileno())


def load_key(config: DeliveryConfig) -> bytes:
    """The configured key, else the key file (created with 0600 on first use)."""
    if config.secret_encryption_key:
        return decode_key(config.secret_encryption_key)
    path = key_file(config)
    if path.exists():
        return decode_key(path.read_text(encoding="ascii"))
    key = secrets.token_bytes(32)
    try:
        write_key_file(path, key)
    except FileExistsError:  # another process (run starts several) created it first
        return decode_key(path.read_text(encoding="ascii"))
    return key


class SecretBox:
    """Encrypts and decrypts subscription secrets bound to their subscription id."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    @classmethod
    def from_config(cls, config: DeliveryConfig) -> SecretBox:
        return cls(load_key(config))

    def seal(self, secret: str, subscription_id: str) -> str:
        nonce = secrets.token_bytes(_NONCE)
        sealed = self._aead.encrypt(nonce, secret.encode(), subscription_id.encode())
        return _PREFIX + base64.b64encode(nonce + sealed).decode()

    def open(self, stored: str, subscription_id: str) -> str:
        if not stored.startswith(_PREFIX):
            raise SecretStoreError("unknown secret format")
        blob = base64.b64decode(stored[len(_PREFIX):])
        try:
            plain = self._aead.decrypt(blob[:_NONCE], blob[_NONCE:], subscription_id.encode())
        except InvalidTag:
            raise SecretStoreError(
                "cannot decrypt a subscription secret: wrong secret_encryption_key?") from None
        return plain.decode()
