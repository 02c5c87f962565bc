"""Fixtures for the on-chain adapter tests: one ganache node and one compile per session.

Each test deploys its own contracts (fresh addresses), so tests share the node without
sharing state they assert on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .evm import Chain, Ganache, compile_contracts


@pytest.fixture(scope="session")
def evm_artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return compile_contracts(tmp_path_factory.mktemp("solc") / "artifacts.json")


@pytest.fixture(scope="session")
def ganache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ganache]:
    node = Ganache(tmp_path_factory.mktemp("ganache") / "ganache.log")
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def chain(ganache: Ganache, evm_artifacts: dict[str, dict[str, Any]]) -> Chain:
    return Chain(ganache.url, evm_artifacts)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path
