"""Where runtime files live: one data directory, outside the checkout by default.

The SQLite database, the key that encrypts webhook secrets, the ``run`` state file and
replay outputs all go into the *data directory*, so nothing a process writes ever lands in
the directory it was started from (a repository checkout, in the quick start). It is,
first match wins:

1. ``storage.data_dir`` (``--data-dir``, ``DEPEG_STORAGE__DATA_DIR``, the config file);
2. ``$XDG_DATA_HOME/depeg-monitor``;
3. ``~/.local/share/depeg-monitor`` (the XDG default; ``%LOCALAPPDATA%`` on Windows).

An empty ``storage.url`` means ``sqlite:///<data dir>/depeg-monitor.db`` and an empty
``delivery.secret_key_file`` means ``<data dir>/secret-key``; :func:`resolve_paths` fills
them in once, when the configuration is loaded, so every process agrees on them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import Config

APP_NAME = "depeg-monitor"
DATABASE_NAME = "depeg-monitor.db"
SECRET_KEY_NAME = "secret-key"


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """The platform's per-user data directory for this application (not created here)."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_DATA_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # the XDG spec says relative values are ignored
        return Path(xdg) / APP_NAME
    if sys.platform == "win32" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / APP_NAME
    return Path(env.get("HOME") or Path.home()).expanduser() / ".local" / "share" / APP_NAME


def data_dir(config: Config | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The configured data directory (absolute), else :func:`default_data_dir`."""
    configured = config.storage.data_dir if config is not None else ""
    if configured:
        return Path(configured).expanduser().resolve()
    return default_data_dir(env)


def ensure_data_dir(path: Path) -> Path:
    """Create the data directory (mode 0700: it holds the secret key) if missing."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def sqlite_url(path: Path) -> str:
    """``sqlite:///`` + an absolute path (four slashes in all)."""
    return f"sqlite:///{path.resolve()}"


def default_storage_url(env: Mapping[str, str] | None = None) -> str:
    return sqlite_url(default_data_dir(env) / DATABASE_NAME)


def default_secret_key_file(env: Mapping[str, str] | None = None) -> Path:
    return default_data_dir(env) / SECRET_KEY_NAME


def resolve_paths(config: Config, env: Mapping[str, str] | None = None) -> Config:
    """``config`` with the data directory made absolute and the empty defaults filled."""
    import msgspec

    directory = data_dir(config, env)
    storage = msgspec.structs.replace(
        config.storage, data_dir=str(directory),
        url=config.storage.url or sqlite_url(directory / DATABASE_NAME))
    key_file = config.delivery.secret_key_file
    key_path = Path(key_file).expanduser() if key_file else directory / SECRET_KEY_NAME
    delivery = msgspec.structs.replace(config.delivery, secret_key_file=str(key_path))
    return msgspec.structs.replace(config, storage=storage, delivery=delivery)
