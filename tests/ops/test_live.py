"""The live operability check: a real Prometheus scrapes a running ``depeg-monitor run`` fed
by ``depeg-monitor produce simulate`` with a webhook subscription on a loopback receiver.

Then every dashboard query, evaluated through Prometheus' HTTP API, must return data; every
alert rule must evaluate without error and every metric selector in it must match existing
series; ingest, tier changes and deliveries must be non-zero; and neither the API key nor
the webhook secret may appear anywhere in the service's logs.

Skips (with the reason) only while a needed command is not installed; under CI a missing
``prometheus`` binary fails instead.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from monitor.kafka.embedded import free_port

from .grafana_queries import (
    ALERTS,
    DASHBOARDS,
    Query,
    alert_rules,
    load,
    parse_label_values,
    queries,
    selectors,
    substitute,
    variable_query,
    variables,
)

pytestmark = [pytest.mark.ops, pytest.mark.live, pytest.mark.broker]

CLI = str(Path(sys.executable).parent / "depeg-monitor")
SCRAPE = "1s"
#: Long enough for simulated depegs to produce tier changes and deliveries on a busy CI box.
FLOW_TIMEOUT = float(os.environ.get("DEPEG_LIVE_TIMEOUT", "150"))


def require_prometheus() -> str:
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is required in CI: apt-get install -y prometheus")
        pytest.skip("Debian package 'prometheus' not installed")
    return prometheus


def require_tools() -> str:
    prometheus = require_prometheus()
    if not Path(CLI).exists():
        pytest.skip(f"{CLI} not installed (pip install -e .)")
    helptext = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=60).stdout
    listed = set(re.findall(r"^ {4}([a-z][a-z-]*)\b", helptext, flags=re.M))  # COMMAND rows
    missing = [c for c in ("run", "produce", "keys") if c not in listed]
    if missing:
        pytest.skip(f"depeg-monitor has no {', '.join(missing)} command yet (see --help)")
    from monitor.services import discover_services

    names = {s.name for s in discover_services()}
    assert {"monitor", "api"} <= names, (
        f"`run` would start only {sorted(names)}: the monitor and the HTTP API must be "
        "registered in the depeg_monitor.services entry-point group")
    return prometheus


@dataclass
class Receiver:
    port: int = 0
    bodies: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver(port=free_port())

    async def hook(request: web.Request) -> web.Response:
        rec.bodies.append(await request.read())
        rec.headers.append(dict(request.headers))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", rec.port).start()
    try:
        yield rec
    finally:
        await runner.cleanup()


async def wait_for(what: str, probe: Callable[[], Awaitable[bool]], limit: float,
                   context: Callable[[], str] = lambda: "") -> None:
    """Poll ``probe`` until true; fail with ``what`` (and ``context()``) after ``limit`` s."""
    deadline = time.monotonic() + limit
    while True:
        try:
            if await probe():
                return
        except (aiohttp.ClientError, OSError, KeyError, ValueError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {limit:g}s waiting for {what}\n{context()}")
        await asyncio.sleep(0.5)


class Prom:
    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session, self.url = session, url

    async def get(self, path: str, **params: Any) -> Any:
        async with self.session.get(f"{self.url}{path}", params=params) as r:
            body = await r.json()
            if body.get("status") != "success":
                raise AssertionError(f"{path} {params}: {body}")
            return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        data = await self.get("/api/v1/query", query=expr)
        return list(data["result"]) if data["resultType"] == "vector" else [data["result"]]

    async def value(self, expr: str) -> float:
        result = await self.query(expr)
        return float(result[0]["value"][1]) if result else 0.0

    async def series(self, selector: str) -> list[dict[str, str]]:
        start = time.time() - 600
        return list(await self.get("/api/v1/series", **{"match[]": selector, "start": start}))


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            return None
    return proc.returncode


def start_prometheus(binary: str, workdir: Path, target: int, port: int,
                     env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A real Prometheus (job depeg-monitor, 1 s scrapes and rule evaluation, our rules)."""
    workdir.mkdir()
    shutil.copy(ALERTS, workdir / "alerts.yml")
    (workdir / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": SCRAPE, "evaluation_interval": SCRAPE},
        "rule_files": ["alerts.yml"],
        "scrape_configs": [{"job_name": "depeg-monitor", "static_configs": [
            {"targets": [f"127.0.0.1:{target}"]}]}],
    }))
    return spawn([
        binary, f"--config.file={workdir / 'prometheus.yml'}",
        f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
    ], env, workdir / "prometheus.log")


async def resolve_variables(prom: Prom, dash: dict[str, Any]) -> dict[str, str]:
    """Pick the first value of each query variable, as Grafana would, in dependency order."""
    values: dict[str, str] = {}
    for var in variables(dash):
        if var["type"] != "query":
            continue
        selector, label = parse_label_values(substitute(variable_query(var), values))
        found = sorted({s[label] for s in await prom.series(selector or f'{{{label}!=""}}')
                        if label in s})
        assert found, f"variable {var['name']}: {variable_query(var)} has no values"
        values[var["name"]] = found[0]
    return values


async def test_live_prometheus_sees_every_panel_and_alert(
    tmp_path: Path, receiver: Receiver
) -> None:
    prometheus = require_tools()
    broker_port, api_port, ops_port, prom_port = (free_port() for _ in range(4))
    env = {
        **os.environ,
        "DEPEG_KAFKA__EMBEDDED_PORT": str(broker_port),
        "DEPEG_KAFKA__PARTITIONS": "4",
        "DEPEG_STORAGE__URL": f"sqlite:///{tmp_path / 'store.db'}",
        # Its own data directory: run's broker journal must not seed another test's run.
        "DEPEG_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "DEPEG_API__PORT": str(api_port),
        "DEPEG_METRICS__PORT": str(ops_port),
        "DEPEG_DELIVERY__ALLOW_LOOPBACK": "true",
        "DEPEG_LOGGING__FORMAT": "json",
        "DEPEG_LOGGING__LEVEL": "info",
    }
    env.pop("DEPEG_CONFIG", None)
    env.pop("DEPEG_KAFKA__BOOTSTRAP_SERVERS", None)
    service_log = tmp_path / "service.log"

    created = await asyncio.to_thread(
        subprocess.run, [CLI, "keys", "create", "--name", "live-check"], env=env,
        capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stderr
    api_key = created.stdout.split()[0]
    service_log.write_text(created.stderr)

    procs: list[subprocess.Popen[bytes]] = []
    run = spawn([CLI, "run"], env, service_log)
    procs.append(run)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            api = f"http://127.0.0.1:{api_port}"

            async def api_up() -> bool:
                assert run.poll() is None, f"run exited: {service_log.read_text()[-3000:]}"
                async with http.get(f"{api}/healthz") as r:
                    return r.status == 200

            def tail() -> str:
                return (f"seen in Prometheus: {seen}\nservice log:\n"
                        + service_log.read_text()[-4000:])

            seen: dict[str, float] = {}
            await wait_for("the API of depeg-monitor run", api_up, 60, tail)
            async with http.post(f"{api}/webhooks/subscriptions", headers={"x-api-key": api_key},
                                 json={"webhookUrl": f"http://127.0.0.1:{receiver.port}/hook",
                                       "eventTypes": ["DEPEG_TIER_CHANGE"]}) as r:
                assert r.status == 201, await r.text()
                secret = (await r.json())["secret_key"]

            # Scrape the ops listener if `run` serves one, else the API port: one target per
            # process, so sums do not double count the shared registry.
            target = api_port
            try:
                async with http.get(f"http://127.0.0.1:{ops_port}/metrics") as r:
                    target = ops_port if r.status == 200 else api_port
            except aiohttp.ClientError:
                pass
            procs.append(start_prometheus(prometheus, tmp_path / "prometheus", target,
                                          prom_port, env))
            prom = Prom(http, f"http://127.0.0.1:{prom_port}")
            procs.append(spawn([
                CLI, "produce", "simulate", "--tokens", "8", "--rate", "200",
                "--time-scale", "600", "--bootstrap-servers", f"127.0.0.1:{broker_port}",
            ], env, tmp_path / "producer.log"))
            procs.append(spawn([
                CLI, "produce", "vaults", "simulate", "--vaults", "12", "--tokens", "8",
                "--rate", "20", "--time-scale", "600",
                "--bootstrap-servers", f"127.0.0.1:{broker_port}",
            ], env, tmp_path / "vault-producer.log"))

            async def flowing() -> bool:
                # Some API traffic too, so the API panels have series.
                async with http.get(f"{api}/rwa", headers={"x-api-key": api_key}) as r:
                    await r.read()
                async with http.get(f"{api}/vaults", headers={"x-api-key": api_key}) as r:
                    await r.read()
                for name, expr in (("up", 'sum(up{job="depeg-monitor"})'),
                                   ("ticks", "sum(depeg_ticks_consumed_total)"),
                                   ("tier_changes", "sum(depeg_tier_changes_total)"),
                                   ("vault_ratings", "sum(depeg_vault_ratings_total)"),
                                   ("vaults_stored", "sum(depeg_store_vaults)"),
                                   ("delivered", 'sum(depeg_deliveries_total{status="success"})')):
                    seen[name] = await prom.value(expr)
                seen["received"] = len(receiver.bodies)
                return all(v > 0 for v in seen.values())

            await wait_for("ticks, tier changes and deliveries in Prometheus", flowing,
                           FLOW_TIMEOUT, tail)
            await asyncio.sleep(3)  # a few more scrapes, so rate() windows hold 2+ samples
            async with http.get(f"{api}/readyz") as r:
                assert r.status == 200, f"not ready while flowing: {await r.text()}"

            failures = await check_dashboards(prom)
            failures += await check_alerts(prom)
            assert not failures, "\n".join(failures)
    finally:
        # Not blocking the loop: the receiver must keep answering while `run` drains.
        codes = [await asyncio.to_thread(stop, p) for p in reversed(procs)]
    assert codes[-1] == 0, f"run exit {codes[-1]}: {service_log.read_text()[-3000:]}"
    logs = service_log.read_text() + (tmp_path / "producer.log").read_text()
    assert api_key not in logs and api_key[12:] not in logs, "API key in the logs"
    assert secret not in logs, "webhook secret in the logs"


async def check_dashboards(prom: Prom) -> list[str]:
    failures = []
    for path in DASHBOARDS:
        dash = load(path)
        values = await resolve_variables(prom, dash)
        for q in queries(path):
            expr = substitute(q.expr, values)
            try:
                result = await prom.query(expr)
            except AssertionError as exc:
                failures.append(f"{where(q)}: error {exc}")
                continue
            if not result:
                failures.append(f"{where(q)}: no data for {expr}")
    return failures


async def check_alerts(prom: Prom) -> list[str]:
    failures = []
    groups = (await prom.get("/api/v1/rules", type="alert"))["groups"]
    loaded = {r["name"]: r for g in groups for r in g["rules"]}
    for rule in alert_rules():
        name = rule["alert"]
        state = loaded.get(name)
        if state is None:
            failures.append(f"alert {name}: not loaded by Prometheus")
            continue
        if state.get("health") != "ok" or state.get("lastError"):
            failures.append(f"alert {name}: health {state.get('health')} {state.get('lastError')}")
        try:
            await prom.query(rule["expr"])
        except AssertionError as exc:
            failures.append(f"alert {name}: does not evaluate: {exc}")
        for selector in selectors(rule["expr"]):
            if not await prom.series(selector):
                failures.append(f"alert {name}: selector {selector} matches no series (blind)")
    return failures


def where(q: Query) -> str:
    return f"{q.dashboard} / {q.panel} / {q.ref}"


# ---- the same checks against an in-process exporter ---------------------------------------
def update_like_every_component(step: int) -> None:
    """What the monitor, delivery worker, store writer and API do to the metrics (see
    docs/metrics.md), so the checks can be proved before or without the full service."""
    from monitor import metrics as m
    from monitor.records import RatingSnapshot, SignalValue

    m.TICKS_CONSUMED.inc(50)
    m.TICKS_DECODED.inc(49)
    m.dead_lettered("bad_json")
    m.TICKS_LATE.inc()
    m.LAST_TICK_TIME.set(time.time())
    for consumer in (*m.CONSUMERS, "vaults"):
        m.ASSIGNED_PARTITIONS.labels(consumer).set(2)
        for partition in ("0", "1"):
            m.CONSUMER_LAG.labels(consumer, partition).set(step % 5)
        m.BATCH_SECONDS.labels(consumer).observe(0.004 * (1 + step % 3))
    for client in m.CLIENTS:
        m.BROKER_CONNECTED.labels(client).set(1)
    m.REFRESH_SECONDS.observe(0.02)
    m.TOKENS_TRACKED.set(2)
    m.TOKENS_STALE.set(0)
    tier = "critical" if step % 2 else "warning"
    m.set_tier_counts({"ok": 1, tier: 1})
    m.tier_changed("critical" if tier == "warning" else "warning", tier)
    m.EVENTS_PUBLISHED.labels("rating").inc(2)
    m.EVENTS_PUBLISHED.labels("tier_change").inc()
    for chain, token, rating in (("ethereum", "0x" + "a" * 40, 12.0), ("base", "0x" + "b" * 40,
                                                                        70.0 + step % 20)):
        m.token_series.observe(RatingSnapshot(
            chain=chain, token_address=token, symbol="USDX", timestamp="2026-01-01T00:00:00Z",
            rating=rating, tier=tier, band_tier=tier, price_usd="0.97", peg_usd="1",
            deviation_pct=-3.0, staleness_seconds=5.0, metrics={},
            signals=[SignalValue(name=s, value=0.1, score=0.5, weight=10, contribution=5,
                                 observed=True) for s in m.SIGNALS]))
    m.DELIVERIES.labels("pending").inc()
    m.DELIVERIES.labels("success").inc()
    m.DELIVERY_ATTEMPTS.labels("success").inc()
    m.DELIVERY_ATTEMPTS.labels("http_5xx").inc()
    m.RETRIES_SCHEDULED.inc()
    m.RETRY_BACKLOG.set(1)
    m.ATTEMPT_SECONDS.observe(0.05)
    m.DELIVERY_LATENCY.observe(0.3)
    m.FAILING_ENDPOINTS.set(0)
    m.CU_CONSUMED.labels("delivery").inc()
    for kind in m.STORE_KINDS:
        m.STORE_WRITES.labels(kind).inc(3)
        m.STORE_WRITE_SECONDS.labels(kind).observe(0.002)
    m.api_request("/rwa", "GET", 200, 0.003)
    m.api_request("/vaults", "GET", 200, 0.004)
    m.set_stored_vaults([("low", "safe_to_list", 3), ("critical", "do_not_list", step % 2),
                         ("unknown", "caution", 1)])
    m.VAULT_FACTS.labels("decoded").inc(5)
    m.VAULT_FACTS.labels("dead_lettered").inc()
    m.VAULT_FACTS_DEAD_LETTERED.labels("bad_json").inc()
    m.VAULT_RATINGS.inc(2)
    m.VAULT_DEPEG_CHANGES.labels("applied").inc()
    m.set_vault_counts({"low": 3, "critical": step % 2}, {"safe_to_list": 3}, 1)
    m.api_request("/webhooks/subscriptions", "POST", 201, 0.01)


async def test_checks_against_in_process_exporter(tmp_path: Path) -> None:
    """The dashboard and alert checks themselves, against the metrics as documented."""
    from monitor.ops_server import OpsServer

    prometheus = require_prometheus()
    server = OpsServer("127.0.0.1", 0)
    await server.start()
    prom_port = free_port()
    proc = start_prometheus(prometheus, tmp_path / "prometheus", server.port, prom_port,
                            dict(os.environ))
    step = 0

    async def feed() -> None:
        nonlocal step
        while True:
            update_like_every_component(step)
            step += 1
            await asyncio.sleep(0.25)

    feeder = asyncio.create_task(feed())
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            prom = Prom(http, f"http://127.0.0.1:{prom_port}")

            async def scraped() -> bool:
                assert proc.poll() is None, (tmp_path / "prometheus/prometheus.log").read_text()
                samples = await prom.value("count(depeg_ticks_consumed_total)")
                rules = (await prom.get("/api/v1/rules", type="alert"))["groups"]
                evaluated = all(r.get("health") == "ok" for g in rules for r in g["rules"])
                return samples > 0 and bool(rules) and evaluated

            await wait_for("Prometheus scraping the ops listener", scraped, 60)
            await asyncio.sleep(4)  # enough samples for rate() over the test window
            failures = await check_dashboards(prom) + await check_alerts(prom)
            assert not failures, "\n".join(failures)
            # ... and the check can fail: a query on a metric nobody exports has no data.
            assert not await prom.query("sum(rate(depeg_no_such_metric_total[15s]))")
    finally:
        feeder.cancel()
        await asyncio.to_thread(stop, proc)
        await server.stop()
