"""The ``run`` state file: how ``produce``, ``deliver``, ``status`` and friends find a
``depeg-monitor run`` on this machine without being told where its broker listens.

``run`` writes ``<data dir>/run.json`` once its broker is up (pid, broker address, API
URL, storage URL) and removes it when it stops. A reader trusts the file only while that
pid is alive and the broker port answers, so a ``run`` killed with -9 leaves a file that is
simply ignored (and replaced by the next ``run``). Nothing secret is in it.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
from pathlib import Path

import msgspec

from .config import Config
from .paths import data_dir, ensure_data_dir

FILE_NAME = "run.json"


class RunState(msgspec.Struct, frozen=True):
    pid: int
    bootstrap_servers: str
    api_url: str
    storage_url: str
    started_at: float
    #: True when ``run`` started the embedded broker (memory-only) itself.
    embedded_broker: bool = True


def state_path(config: Config) -> Path:
    return data_dir(config) / FILE_NAME


def write_state(config: Config, state: RunState) -> Path:
    """Atomically (write + rename) record ``state``; readers never see half a file."""
    path = state_path(config)
    ensure_data_dir(path.parent)
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(state)) + b"\n")
    os.replace(tmp, path)
    return path


def remove_state(config: Config, pid: int | None = None) -> None:
    """Remove the file if it is ours (``pid``), so a newer ``run``'s file survives."""
    path = state_path(config)
    with contextlib.suppress(OSError, msgspec.DecodeError, msgspec.ValidationError):
        if pid is None or read_state(path).pid == pid:
            path.unlink()


def read_state(path: Path) -> RunState:
    return msgspec.json.decode(path.read_bytes(), type=RunState)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _answers(servers: str, timeout: float = 0.5) -> bool:
    host, _, port = servers.split(",")[0].rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout):
            return True
    except (OSError, ValueError):
        return False


def live_state(config: Config) -> RunState | None:
    """The running ``run``'s state, or None (no file, a dead pid, a silent broker)."""
    try:
        state = read_state(state_path(config))
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not _alive(state.pid) or not _answers(state.bootstrap_servers):
        return None
    return state


def discover_bootstrap(config: Config) -> str | None:
    """Where a running ``run`` on this machine has its broker, if there is one."""
    state = live_state(config)
    return state.bootstrap_servers if state is not None else None


def new_state(config: Config, embedded: bool) -> RunState:
    return RunState(
        pid=os.getpid(), bootstrap_servers=config.kafka.bootstrap_servers,
        api_url=f"http://{config.api.host}:{config.api.port}",
        storage_url=_without_password(config.storage.url), started_at=time.time(),
        embedded_broker=embedded)


def _without_password(url: str) -> str:
    """The file is readable by the user's other processes: no database password in it."""
    return re.sub(r"(://[^:/@]+:)[^@]+@", r"\1[redacted]@", url)
