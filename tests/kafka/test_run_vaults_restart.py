"""A restart of ``depeg-monitor run`` on its embedded broker keeps the vault daemon's
topics and offsets, as it keeps the monitor's (found by QA: the journal copied only the
monitor's topics, so after a restart ``vaults.facts`` was empty, no vault was restored and
the ``depeg-vaults`` group had no committed offset).

The truth is the fact file the user published: after SIGTERM and a new start on the same
data directory, ``vaults.facts`` holds exactly its records again, the daemon restores every
vault the file names, and the group resumes after the last fact (nothing re-processed)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import ClassVar

import pytest

from .kafkatools import TopicReader, group_caught_up, wait_for
from .test_run_restart import Run

pytestmark = pytest.mark.broker

BIN = Path(sys.executable).parent / "depeg-monitor"


class VaultsRun(Run):
    """``run --only vaults``: the vault daemon alone on the embedded broker."""

    ONLY = "vaults"
    EXTRA_ENV: ClassVar[dict[str, str]] = {}


async def _cli(cwd: Path, *args: str) -> None:
    """The command as a user types it (in a thread: the event loop keeps running)."""
    await asyncio.to_thread(subprocess.run, [str(BIN), *args], check=True,
                            capture_output=True, timeout=120, cwd=cwd)


async def _facts_on_topic(bootstrap: str) -> Counter[bytes]:
    async with TopicReader(bootstrap, "vaults.facts") as reader:
        while await reader.poll(1000):
            pass
        return Counter(rec.value for rec in reader.records)


async def test_vault_facts_and_offsets_survive_a_restart_of_run(tmp_path: Path) -> None:
    facts = tmp_path / "facts.jsonl"
    await _cli(tmp_path, "produce", "vaults", "simulate", "--vaults", "6", "--seed", "3",
               "--duration", "2", "--time-scale", "600", "--out", str(facts))
    lines = [line for line in facts.read_bytes().splitlines() if line.strip()]
    vaults = {(json.loads(line)["chain"], json.loads(line)["vault"]) for line in lines}
    data = tmp_path / "data"

    run = VaultsRun(data, tmp_path / "run1.log")
    try:
        await wait_for(lambda: run.has("vaults.partitions_assigned"), 90, "run 1 assigned")
        await _cli(tmp_path, "produce", "vaults", str(facts), "--bootstrap-servers",
                   run.bootstrap)
        await wait_for(lambda: group_caught_up(run.bootstrap, "depeg-vaults", "vaults.facts"),
                       120, "run 1 to commit every fact")
        assert run.sigterm() == 0, run.log.read_text()[-3000:]
    finally:
        if run.proc.poll() is None:
            run.kill9()

    run = VaultsRun(data, tmp_path / "run2.log")
    try:
        await wait_for(lambda: run.has("vaults.partitions_assigned"), 90, "run 2 assigned")
        assert await _facts_on_topic(run.bootstrap) == Counter(lines)
        assert await group_caught_up(run.bootstrap, "depeg-vaults", "vaults.facts")
        restored = sum(int(e["restored_vaults"])  # type: ignore[call-overload]
                       for e in run.events("vaults.partitions_assigned"))
        assert restored == len(vaults), run.log.read_text()[-3000:]
        assert run.sigterm() == 0
    finally:
        if run.proc.poll() is None:
            run.kill9()
