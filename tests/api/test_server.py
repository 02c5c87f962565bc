"""``depeg-monitor api`` as a new user runs it: a process, a key from the CLI, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from monitor.kafka.embedded import free_port
from tests.process_support import reap


def _get(url: str, key: str | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"x-api-key": key} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_api_process_serves_with_a_cli_key_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "DEPEG_STORAGE__URL": f"sqlite:///{tmp_path / 'api.db'}",
           "DEPEG_LOGGING__FORMAT": "json"}
    key = subprocess.run(
        [sys.executable, "-m", "monitor", "keys", "create", "--name", "ops"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.split()[0]
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "api", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        status = 0
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status, _ = _get(f"{base}/openapi.json")
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)  # polling for the port to open, not synchronising on state
        assert status == 200, proc.stderr.read().decode() if proc.poll() is not None else ""
        assert _get(f"{base}/rwa")[0] == 401
        status, body = _get(f"{base}/rwa", key)
        assert status == 200, body
        assert json.loads(body)["items"] == []  # nothing rated yet
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        err = proc.stderr.read().decode()
        assert "api.listening" in err and "api.stopped" in err
        assert key not in err
    finally:
        reap(proc)
