"""schemathesis over /openapi.json against the real server on a loopback port.

``depeg-monitor api`` runs in a child process on a SQLite store seeded with a few tokens,
one of them with a depeg episode, and 20 vaults; a real API key made with ``depeg-monitor
keys create`` is sent on every call. Checks: no 5xx, documented status codes, content
types and headers, and bodies matching the response schemas.

A child process, not a thread of the test process: CPython before 3.11.8 keeps the AST
builder's recursion counter in state shared by every thread (gh-106905), and Hypothesis
parses a strategy's source (``ast.parse``) while the server may be formatting a traceback
(which parses too): one CI run failed with "AST constructor recursion depth mismatch".
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from monitor.api.openapi import build_document
from monitor.kafka.embedded import free_port
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from monitor.storage.vaults import VaultStore
from tests.readapi_support import population, story
from tests.vaults_support import load as load_vaults
from tests.vaults_support import population as vault_population

USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]

schema = schemathesis.openapi.from_dict(build_document())


async def seed(db_path: Path) -> None:
    db = await connect(f"sqlite:///{db_path}")
    try:
        store = RatingsStore(db)
        await store.migrate()
        snaps, _ = population(20)
        ep_snaps, ep_events = story("eth", USDC, [("ok", 10, 1.0), ("critical", 90, 0.88),
                                                  ("ok", 10, 1.0)])
        await store.write_batch(snaps + ep_snaps, ep_events)
        vaults = VaultStore(db)
        await vaults.migrate()
        await load_vaults(vaults, vault_population(20))  # E5's example vault is the first
    finally:
        await db.close()


class LiveServer:
    """``depeg-monitor api`` in a child process, and a key made through the CLI."""

    def __init__(self, root: Path, registry: Path) -> None:
        self.port = free_port()
        # No rate limit: the fuzzer sends hundreds of calls with one key (and some without
        # one), and a 429 answer reaches no data (the limiters have their own tests in
        # test_rate_limit.py).
        self.env = {**os.environ, "DEPEG_STORAGE__URL": f"sqlite:///{root / 'store.db'}",
                    "DEPEG_REGISTRY__PATH": str(registry),
                    "DEPEG_API__RATE_LIMIT_PER_SECOND": "0",
                    "DEPEG_API__FAILED_AUTH_PER_SECOND": "0",
                    "DEPEG_LOGGING__FORMAT": "json"}
        self.cli = [sys.executable, "-m", "monitor", "--data-dir", str(root / "data")]
        self.log = (root / "api.log").open("wb")
        self.process: subprocess.Popen[bytes] | None = None
        self.key = ""

    def start(self) -> None:
        self.process = subprocess.Popen(
            [*self.cli, "api", "--host", "127.0.0.1", "--port", str(self.port)],
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not self._healthy():
            assert self.process.poll() is None, "the API server exited at start"
            assert time.monotonic() < deadline, "the API server did not answer /healthz"
            time.sleep(0.05)  # polling the child's health endpoint, not a timed wait
        made = subprocess.run([*self.cli, "keys", "create", "--name", "tests"], env=self.env,
                              capture_output=True, text=True, check=True, timeout=60)
        self.key = made.stdout.strip()

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz",
                                        timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)
        self.log.close()


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("schemathesis")
    registry = root / "tokens.toml"
    registry.write_text(population(20)[1])
    asyncio.run(seed(root / "store.db"))
    server = LiveServer(root, registry)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@schema.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_api_matches_its_openapi_document(case: Any, live_server: LiveServer) -> None:
    headers = {"x-api-key": live_server.key} if live_server.key else None
    # /readyz answers a documented 503 while the broker and consumers it checks are not
    # running (this test starts only the HTTP app): that is its job, not a server error.
    checks = [c for c in CHECKS if c is not not_a_server_error] if case.path == "/readyz" \
        else CHECKS
    response = case.call_and_validate(base_url=f"http://127.0.0.1:{live_server.port}",
                                      headers=headers, checks=checks)
    STATUSES.setdefault(case.operation.label, set()).add(response.status_code)


STATUSES: dict[str, set[int]] = {}


def test_the_fuzzing_reached_real_data(live_server: LiveServer) -> None:
    """Runs after the fuzzing: the detail route answered 200 at least once (the explicit
    example), so its response schema was checked against a real token, not only 404s."""
    if not STATUSES:
        pytest.skip("run together with test_api_matches_its_openapi_document")
    assert 200 in STATUSES["GET /rwa/{address}"], STATUSES
    assert 200 in STATUSES["GET /rwa"], STATUSES
    assert 200 in STATUSES["GET /v3/rwa/{address}"], STATUSES
    assert 200 in STATUSES["GET /v3/vaults/{address}"], STATUSES
    assert 200 in STATUSES["GET /v3/framework"], STATUSES
    assert 200 in STATUSES["GET /usage"], STATUSES
    assert 200 in STATUSES["GET /vaults/{address}"], STATUSES
    assert 200 in STATUSES["GET /vaults"], STATUSES
