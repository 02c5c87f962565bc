"""The README's first hour, run as a new user would: its shell blocks, verbatim but for
ports and paths, against a real ``depeg-monitor run`` (issue 10, item 6).

Substitutions, and only these: ``.venv/bin/`` is this interpreter's bin directory,
``examples/`` the checkout's, the fixed ports (API 8080, receiver 9000) free ones, and the
simulation's ``--time-scale 60 --duration 20`` becomes ``--time-scale 600 --duration 3``
(the same ticks in event time, in 3 s instead of 20). Everything runs from a temporary
working directory with its own data directory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitor.kafka.embedded import free_port
from tests.conftest import REPO

pytestmark = pytest.mark.broker

README = REPO / "README.md"
BIN = Path(sys.executable).parent


def blocks() -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    found = re.findall(r"<!-- first-hour: ([\w-]+) -->\n```bash\n(.*?)```", text, re.S)
    return dict(found)


@dataclass
class Machine:
    """One user's machine: a working directory, a data directory, free ports."""

    cwd: Path
    env: dict[str, str]
    api_port: int
    broker_port: int
    receiver_port: int

    def script(self, block: str) -> str:
        text = blocks()[block]
        text = text.replace(".venv/bin/", f"{BIN}/").replace("examples/", f"{REPO}/examples/")
        text = text.replace("127.0.0.1:8080", f"127.0.0.1:{self.api_port}")
        text = text.replace("127.0.0.1:9000", f"127.0.0.1:{self.receiver_port}")
        text = text.replace("webhook_receiver.py 9000", f"webhook_receiver.py "
                                                        f"{self.receiver_port}")
        return text.replace("--time-scale 60 --duration 20", "--time-scale 600 --duration 3")

    def bash(self, block: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A block as a script, in its own session: what it leaves running in the
        background (the receiver) is stopped once the script is done."""
        out_path, err_path = self.cwd.parent / "out.txt", self.cwd.parent / "err.txt"
        with out_path.open("w") as out, err_path.open("w") as err:
            proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", self.script(block)],
                                    cwd=self.cwd, env=self.env, start_new_session=True,
                                    stdout=out, stderr=err)
            try:
                proc.wait(timeout)
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        return subprocess.CompletedProcess(proc.args, proc.returncode, out_path.read_text(),
                                           err_path.read_text())

    def cli(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "depeg-monitor"), *args], cwd=self.cwd,
                              env=self.env | env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Machine:
    home = tmp_path_factory.mktemp("user")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEPEG_")}
    env |= {"XDG_DATA_HOME": str(home / "xdg"), "HOME": str(home)}
    api, broker = free_port(), free_port()
    # The README's ports are fixed (8080, 19092); a shared test machine needs free ones.
    env |= {"DEPEG_API__PORT": str(api), "DEPEG_KAFKA__EMBEDDED_PORT": str(broker),
            "DEPEG_KAFKA__PARTITIONS": "2", "DEPEG_METRICS__TOKEN_SERIES_CAP": "50"}
    work = home / "work"
    work.mkdir()
    return Machine(work, env, api, broker, free_port())


@pytest.fixture(scope="module")
def running(machine: Machine) -> Iterator[subprocess.Popen[bytes]]:
    """The README's webhook ``run`` line: DEPEG_DELIVERY__ALLOW_LOOPBACK=true … run."""
    line = blocks()["webhook-run"].strip()
    assert line == "DEPEG_DELIVERY__ALLOW_LOOPBACK=true " + blocks()["run"].split("#")[0].strip()
    log = machine.cwd.parent / "run.log"
    proc = subprocess.Popen(
        [str(BIN / "depeg-monitor"), "--log-format", "json", "run"], cwd=machine.cwd,
        env=machine.env | {"DEPEG_DELIVERY__ALLOW_LOOPBACK": "true"},
        stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while "run.state_written" not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "run did not come up"
        time.sleep(0.2)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        code = proc.wait(60)
        assert code == 0, log.read_text()[-3000:]
        text = log.read_text()
        assert "Traceback" not in text
        # run.json is gone with it; nothing was written into the working directory.
        assert not (Path(machine.env["XDG_DATA_HOME"]) / "depeg-monitor" / "run.json").exists()
        assert list(machine.cwd.iterdir()) == []


def _wait_rated(machine: Machine, want: int, within: float = 90) -> str:
    deadline = time.monotonic() + within
    while True:
        out = machine.cli("status", "--no-color").stdout
        match = re.search(r"tokens: (\d+) rated", out)
        if match and int(match.group(1)) >= want:
            return out
        assert time.monotonic() < deadline, out
        time.sleep(1)


def test_demo_block_finds_run_and_shows_ratings_metrics_and_status(
        machine: Machine, running: subprocess.Popen[bytes]) -> None:
    result = machine.bash("demo")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "published 600 ticks" in result.stdout  # no --bootstrap-servers: found run.json
    assert '"items":' in result.stdout            # the curl with $KEY got an answer
    assert "depeg_ticks_consumed_total" in result.stdout  # /metrics on the API port
    assert "tokens:" in result.stdout and "Traceback" not in result.stderr
    status = _wait_rated(machine, 20)
    assert "running (pid" in status and "consumer lag (records" in status
    assert re.search(r"monitor \d+, store \d+, delivery \d+", status), status
    assert re.search(r"deliveries: \d+ pending", status)
    # On a terminal status is coloured; in a pipe (above) it is not.
    coloured = _in_pty([str(BIN / "depeg-monitor"), "status"], machine)
    assert "\x1b[" in coloured and "tokens: 20 rated" in coloured
    assert "\x1b[" not in status


def _in_pty(argv: list[str], machine: Machine) -> str:
    master, slave = os.openpty()
    proc = subprocess.Popen(argv, cwd=machine.cwd, env=machine.env, stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(60) == 0
    return b"".join(chunks).decode(errors="replace")


def test_webhook_quick_start_creates_tests_and_lists(
        machine: Machine, running: subprocess.Popen[bytes]) -> None:
    result = machine.bash("webhooks")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    # The first document of each line: the receiver in the background shares the
    # script's stdout and may print between curl's body and the newline of its -w '\n'.
    created, tested, listed, deliveries = (json.JSONDecoder().raw_decode(line)[0]
                                           for line in lines[:4])
    assert created["secret_key"].startswith("whsec_")
    assert tested["delivered"] is True and tested["status_code"] == 200, tested
    assert [s["id"] for s in listed["subscriptions"]] == [created["id"]]
    assert "deliveries" in deliveries
    assert "TEST on eth: ok -> watch" in result.stdout  # the receiver verified and printed


def test_replay_block_writes_to_the_data_directory_and_guards_names(machine: Machine) -> None:
    first = machine.bash("replay")
    assert first.returncode == 0, first.stderr
    replays = Path(machine.env["XDG_DATA_HOME"]) / "depeg-monitor" / "replays"
    out, ratings = replays / "depeg-demo.transitions.jsonl", replays / "depeg-demo.ratings.jsonl"
    assert f"transitions written to {out}" in first.stderr
    assert re.search(rf"rating snapshots: [1-9]\d* written to {re.escape(str(ratings))}",
                     first.stderr)
    assert out.read_bytes().count(b"\n") >= 1
    again = machine.bash("replay")
    assert again.returncode == 2 and "already exists; pass --overwrite" in again.stderr
    fresh = machine.cli("replay", str(REPO / "examples" / "depeg-demo.csv"), "--out", "t.jsonl")
    assert fresh.returncode == 0 and "rating snapshots: not written" in fresh.stderr
    clash = machine.cli("replay", "t.jsonl", "--out", "t.jsonl", "--overwrite")
    assert clash.returncode == 2 and "is one of the input files" in clash.stderr
    (machine.cwd / "t.jsonl").unlink()  # the user asked for it in the working directory


def test_pasted_placeholder_port_is_a_usage_error(machine: Machine) -> None:
    result = machine.cli("produce", "simulate", "--tokens", "2",
                         "--bootstrap-servers", "127.0.0.1:PORT")
    assert result.returncode == 2
    assert "usage:" in result.stderr and "'127.0.0.1:PORT' is not HOST:PORT" in result.stderr
    assert "Traceback" not in result.stderr


def test_taken_api_port_names_the_setting_and_the_option(
        machine: Machine, running: subprocess.Popen[bytes]) -> None:
    other = {"XDG_DATA_HOME": str(machine.cwd.parent / "other"),
             "DEPEG_KAFKA__EMBEDDED_PORT": "0", "DEPEG_LOGGING__FORMAT": "console"}
    taken = str(machine.api_port)
    for argv in (("run", "--port", taken), ("api", "--port", taken)):
        result = machine.cli(*argv, **other)
        assert result.returncode == 2, (argv, result.stderr[-2000:])
        assert "api.port" in result.stderr and "run --port" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_ci_run_says_what_it_changes_on_the_machine() -> None:
    help_text = subprocess.run(["bash", str(REPO / ".ci" / "run"), "--help"],
                               capture_output=True, text=True, check=True).stdout
    for words in (".venv", "PostgreSQL", "prometheus", "SYSTEM-WIDE", "apt-get"):
        assert words in help_text, words
    readme = README.read_text(encoding="utf-8")
    assert "system-wide" in readme and "bash .ci/run --help" in readme


def test_the_documented_receiver_is_the_shipped_example() -> None:
    doc = (REPO / "docs" / "webhooks.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", doc, re.S)
    assert code is not None
    shipped = (REPO / "examples" / "webhook_receiver.py").read_text(encoding="utf-8")
    assert shipped.endswith(code.group(1)) and "sys.argv[1]" in shipped


def test_fixed_default_ports() -> None:
    from monitor.config import ApiConfig, KafkaConfig

    assert KafkaConfig().embedded_port == 19092 and ApiConfig().port == 8080
    readme = README.read_text(encoding="utf-8")
    assert "127.0.0.1:19092" in blocks()["run"] and ":8080" in blocks()["run"]
    assert "KEY=$(.venv/bin/depeg-monitor keys create --name me)" in readme


async def test_loopback_url_refused_with_the_development_setting_named(tmp_path: Path) -> None:
    from tests.webhook_support import api_client, make_config, new_key

    config = make_config(f"sqlite:///{tmp_path / 'store.db'}", allow_loopback=False)
    async with api_client(config) as (client, db):
        key, _ = await new_key(db)
        for url in ("http://127.0.0.1:9000/hook", "https://127.0.0.1:9000/hook",
                    "http://localhost:9000/hook"):
            resp = await client.post("/webhooks/subscriptions", headers={"x-api-key": key},
                                     json={"webhookUrl": url, "eventTypes": ["DEPEG_TIER_CHANGE"]})
            assert resp.status == 400
            error = (await resp.json())["error"]
            assert "delivery.allow_loopback" in error and "DEPEG_DELIVERY__ALLOW_LOOPBACK" in error


async def test_failed_attempts_are_warnings(tmp_path: Path) -> None:
    """An operator filtering on warnings sees a receiver in trouble."""
    import io
    import logging

    from monitor.logs import configure_logging
    from monitor.records import encode
    from monitor.storage import connect
    from monitor.storage.deliveries import DeliveryStore, NewEvent
    from monitor.storage.webhooks import WebhookStore
    from monitor.webhooks.dispatcher import DeliveryAttempts
    from monitor.webhooks.filters import Filters
    from monitor.webhooks.secrets import SecretBox
    from monitor.webhooks.sender import Sender
    from tests.webhook_support import make_config, new_key, receiver, tier_change

    config = make_config(f"sqlite:///{tmp_path / 'store.db'}")
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    configure_logging(level="info", fmt="json", stream=stream)
    db = await connect(config.storage.url)
    sender = Sender(config.delivery)
    try:
        async with receiver([500, 200]) as rec:
            _, key_id = await new_key(db)
            box = SecretBox.from_config(config.delivery)
            await WebhookStore(db).create_subscription(
                sub_id="s1", api_key_id=key_id, webhook_url=rec.url, endpoint="e",
                event_types=["DEPEG_TIER_CHANGE"], filters=Filters(),
                secret_sealed=box.seal("whsec_" + "1" * 64, "s1"), now=time.time())
            event = tier_change()
            store = DeliveryStore(db)
            await store.record_events([NewEvent(event.event_id, event.event_type, encode(event),
                                                await WebhookStore(db).active_subscriptions())],
                                      time.time())
            attempts = DeliveryAttempts(store, sender, box, config.delivery)
            for _ in range(2):
                now = time.time() + 60
                (due,) = await store.due(now, 10)
                assert await store.claim(due.id, "t", now, now + 60)
                await attempts.attempt(due, "t")
            attempts.log_summaries(time.time(), closing=True)  # as a stopping worker does
    finally:
        await sender.close()
        await db.close()
        root.handlers[:], level = saved
        root.setLevel(level)
    records = [json.loads(line) for line in stream.getvalue().splitlines()
               if '"webhook.' in line]
    # The failure in full at warning; the success in the worker's summary at info.
    assert [(r["event"], r.get("outcome"), r["level"]) for r in records] == [
        ("webhook.attempt", "failed", "warning"), ("webhook.delivered", None, "info")]
    assert records[1]["delivered"] == 1
