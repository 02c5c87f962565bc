"""The on-chain sources as a service: poll every configured chain, publish ticks and vault facts.

Per chain with ``chains.<chain>.rpc_urls``, every ``poll_interval_seconds``:

1. pin the poll to one block (``best head - confirmations``, see producers/rpc.py);
2. for every token of the watch list (a Token List whose ``extensions.sources`` name its
   feeds, pool and NAV vault) read the oracle, the peg reference and the pool, and publish one
   tick ``{ts: block time, price_usd, peg_usd, slippage_bps, oracle_price_usd}`` keyed
   ``chain:token`` on ``kafka.ticks_topic``;
3. for every vault of ``chains.vaults_file`` on the chain, publish its facts keyed
   ``chain:vault`` on ``vaults.facts_topic``.

A token whose reads fail is skipped for that poll (logged, counted) and the others go on; a
poll that finds no working endpoint is retried next interval. A stalled chain shows in
``depeg_source_last_success_timestamp_seconds``, in ``/readyz`` (check ``chain:<chain>``, with
each endpoint's state in the detail) and, downstream, as the tokens' staleness in the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from monitor import health, metrics
from monitor.config import ChainConfig, ChainsConfig, Config
from monitor.kafka.closing import close_bounded
from monitor.logs import get_logger
from monitor.ticks import BadTick, Tick, make_tick
from monitor.tokenlist import CHAIN_BY_ID, check_tokenlist

from . import dex, oracle, peg
from .evmcalls import BadReply
from .rpc import NoEndpointAvailable, RpcClient, RpcError, RpcSettings
from .vault_indexer import VaultIndexer

log = get_logger(__name__)


class SourcesError(ValueError):
    """The watch list or the vaults file is unusable (message says which and why)."""


@dataclass(frozen=True)
class WatchedToken:
    chain: str
    address: str  # lowercase
    symbol: str
    peg_type: str
    price_feed: str | None = None
    peg_feed: str | None = None
    pool: str | None = None
    quote_feed: str | None = None
    nav_vault: str | None = None


def load_watchlist(path: str | Path) -> list[WatchedToken]:
    """Tokens of a Token List that name at least one on-chain source."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SourcesError(f"cannot read token list {path}: {exc}") from None
    report = check_tokenlist(doc, max_errors=5)
    if not report.ok:
        raise SourcesError(f"{path}: " + "; ".join(report.errors))
    out = []
    for tok in doc["tokens"]:
        ext = tok.get("extensions") or {}
        src = ext.get("sources") or {}
        if not src:
            continue

        def addr(key: str, src: dict[str, str] = src) -> str | None:
            value = src.get(key)
            return value.lower() if value else None

        out.append(WatchedToken(CHAIN_BY_ID[tok["chainId"]], tok["address"].lower(),
                                tok["symbol"], ext.get("pegType", "usd"), addr("priceFeed"),
                                addr("pegFeed"), addr("pool"), addr("quoteFeed"),
                                addr("navVault")))
    return out


def load_vaults(path: str | Path) -> list[dict[str, Any]]:
    """``[{"chain", "vault", ...off-chain facts}]``."""
    try:
        items = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SourcesError(f"cannot read vaults file {path}: {exc}") from None
    if not isinstance(items, list) or not all(
            isinstance(v, dict) and isinstance(v.get("chain"), str)
            and isinstance(v.get("vault"), str) for v in items):
        raise SourcesError(f"{path}: expected a JSON array of {{\"chain\", \"vault\", ...}}")
    return items


def _num(value: Decimal | float | None) -> str | None:
    if value is None:
        return None
    return format(Decimal(value).normalize(), "f") if isinstance(value, Decimal) \
        else format(value, ".10g")


@dataclass
class ChainPoller:
    """Polls one chain (see module doc)."""

    chain: str
    settings: ChainConfig
    chains: ChainsConfig
    tokens: list[WatchedToken]
    vaults: list[VaultIndexer]
    client: RpcClient
    last_success: float | None = None
    last_error: str = ""
    stale_feeds: set[str] = field(default_factory=set)
    _pools: dict[str, dex.PoolInfo] = field(default_factory=dict)

    @classmethod
    def create(cls, chain: str, config: Config, tokens: list[WatchedToken],
               vaults: list[dict[str, Any]]) -> ChainPoller:
        s = config.chains.chain(chain)
        client = RpcClient(chain, s.urls, RpcSettings(
            timeout_seconds=s.timeout_seconds, retries=s.retries, rate_limit=s.rate_limit,
            max_lag_blocks=s.max_lag_blocks,
            backoff_base_seconds=min(1.0, s.poll_interval_seconds / 4)))
        indexers = [VaultIndexer(chain, v["vault"].lower(),
                                 {k: x for k, x in v.items() if k not in ("chain", "vault")})
                    for v in vaults if v["chain"] == chain]
        return cls(chain, s, config.chains, [t for t in tokens if t.chain == chain], indexers,
                   client)

    async def _feed(self, address: str, block_time: int) -> oracle.FeedReading | None:
        reading = await oracle.read_feed(self.client, address, block_time=block_time,
                                         heartbeat_seconds=self.chains.oracle_heartbeat_seconds)
        if reading.stale and address not in self.stale_feeds:
            log.warning("chain.oracle_stale", chain=self.chain, feed=address,
                        age_seconds=reading.age_seconds, updated_at=reading.updated_at)
        elif not reading.stale and address in self.stale_feeds:
            log.info("chain.oracle_fresh", chain=self.chain, feed=address)
        (self.stale_feeds.add if reading.stale else self.stale_feeds.discard)(address)
        return reading

    async def token_tick(self, tok: WatchedToken, block_time: int) -> Tick | None:
        own = await self._feed(tok.price_feed, block_time) if tok.price_feed else None
        oracle_price = own.answer if own is not None and not own.stale else None
        peg_feed = await self._feed(tok.peg_feed, block_time) if tok.peg_feed else None
        nav = await peg.read_nav(self.client, tok.nav_vault) if tok.nav_vault else None
        peg_usd = peg.peg_usd(tok.peg_type, peg_feed=peg_feed, nav=nav)
        price_usd: float | None = None
        slippage: float | None = None
        if tok.pool:
            info = self._pools.get(tok.pool) or await dex.read_info(self.client, tok.pool)
            self._pools[tok.pool] = info
            reading = await dex.read_pool(self.client, info)
            quote = await self._feed(tok.quote_feed, block_time) if tok.quote_feed else None
            if quote is not None and not quote.stale:
                price_usd = reading.price_in_quote(tok.address) * float(quote.answer)
            sizing = price_usd or (float(oracle_price) if oracle_price else None) or \
                (float(peg_usd) if peg_usd else None)
            if sizing:
                slippage = round(reading.sell_slippage_bps(tok.address, sizing), 4)
        if price_usd is None and slippage is None and oracle_price is None:
            return None
        return make_tick(block_time, tok.chain, tok.address, tok.symbol,
                         price_usd=_num(price_usd), peg_usd=_num(peg_usd),
                         slippage_bps=slippage, oracle_price_usd=_num(oracle_price),
                         source=f"onchain:{self.chain}")

    async def backfill_ticks(self, blocks: int) -> list[Tick]:
        """Oracle history: one ``oracle_price_usd`` tick per ``AnswerUpdated`` of each token's
        feed in the last ``blocks`` blocks (dated by the round's ``updatedAt``), oldest first."""
        head = await self.client.pin_block(self.settings.confirmations)
        ticks: list[Tick] = []
        for tok in self.tokens:
            if not tok.price_feed:
                continue
            try:
                updates = await oracle.backfill(self.client, tok.price_feed,
                                                max(0, head - blocks), head)
            except (BadReply, RpcError) as exc:
                log.warning("chain.backfill_failed", chain=self.chain, token=tok.address,
                            error=str(exc)[:300])
                continue
            ticks += [make_tick(u.updated_at, tok.chain, tok.address, tok.symbol,
                                oracle_price_usd=_num(u.answer),
                                source=f"onchain:{self.chain}:backfill") for u in updates]
        ticks.sort(key=lambda t: t.ts)
        return ticks

    async def poll(self) -> tuple[list[Tick], list[dict[str, Any]]]:
        """One poll: ticks and vault facts at one block. Raises NoEndpointAvailable."""
        block = await self.client.pin_block(self.settings.confirmations)
        header = await self.client.call("eth_getBlockByNumber", hex(block), False)
        block_time = int(header["timestamp"], 16)
        ticks: list[Tick] = []
        for tok in self.tokens:
            try:
                tick = await self.token_tick(tok, block_time)
            except (BadReply, RpcError, BadTick, ArithmeticError, ValueError) as exc:
                metrics.PRODUCER_ERRORS.labels("onchain").inc()
                log.warning("chain.token_failed", chain=self.chain, token=tok.address,
                            symbol=tok.symbol, error=str(exc)[:300])
                continue
            if tick is not None:
                ticks.append(tick)
        facts: list[dict[str, Any]] = []
        for indexer in self.vaults:
            try:
                facts.append(await indexer.facts(self.client))
            except (BadReply, RpcError, ValueError) as exc:
                metrics.PRODUCER_ERRORS.labels("vault-indexer").inc()
                log.warning("chain.vault_failed", chain=self.chain, vault=indexer.vault,
                            error=str(exc)[:300])
        metrics.ORACLE_STALE_FEEDS.labels(self.chain).set(len(self.stale_feeds))
        self.last_success = time.time()
        self.last_error = ""
        metrics.SOURCE_LAST_POLL.labels(f"{self.chain}:onchain").set(self.last_success)
        return ticks, facts

    def readiness(self) -> tuple[bool, str]:
        """``chain:<chain>`` readiness: recent successful poll; endpoint states as detail."""
        limit = self.chains.stale_after_polls * self.settings.poll_interval_seconds
        endpoints = ", ".join(
            f"{e.label} head={e.head} failures={e.failures}" for e in self.client.endpoints)
        if self.last_success is None:
            return False, f"no successful poll yet ({self.last_error or 'starting'}); {endpoints}"
        age = time.time() - self.last_success
        if age > limit:
            return False, (f"last successful poll {age:.0f}s ago (limit {limit:.0f}s): "
                           f"{self.last_error}; {endpoints}")
        stale = f", {len(self.stale_feeds)} stale oracle feed(s)" if self.stale_feeds else ""
        return True, f"block {self.client.block}, polled {age:.0f}s ago{stale}; {endpoints}"


def build_pollers(config: Config, only: str | None = None) -> list[ChainPoller]:
    path = config.chains.tokens_file or (
        config.registry.path if config.registry.path.endswith(".json") else "")
    tokens = load_watchlist(path) if path else []
    vaults = load_vaults(config.chains.vaults_file) if config.chains.vaults_file else []
    pollers = []
    for chain in (only,) if only else tuple(CHAIN_BY_ID.values()):
        if config.chains.chain(chain).urls:
            pollers.append(ChainPoller.create(chain, config, tokens, vaults))
    return pollers


class Publisher:
    """Where polls go: ticks to the ticks topic, facts to the vault facts topic."""

    def __init__(self, config: Config, bootstrap: str) -> None:
        self.config = config
        self.bootstrap = bootstrap
        self._ticks: Any = None
        self._facts: Any = None

    async def start(self) -> None:
        from aiokafka.admin import NewTopic

        from monitor.kafka.topics import admin_client, make_producer

        from .kafka_out import open_sender

        self._ticks = await open_sender(self.bootstrap, self.config.kafka)
        kafka = self.config.kafka
        admin = admin_client(kafka, self.bootstrap)
        await admin.start()
        try:
            topic = self.config.vaults.facts_topic
            if topic not in set(await admin.list_topics()):
                await admin.create_topics([NewTopic(topic, kafka.partitions,
                                                    kafka.replication_factor)])
        finally:
            await admin.close()
        self._facts = make_producer(kafka, self.bootstrap,
                                    client_id=f"{kafka.client_id}-vault-indexer")
        await self._facts.start()

    async def publish(self, ticks: list[Tick], facts: list[dict[str, Any]]) -> None:
        for tick in ticks:
            await self._ticks.send(tick)
            metrics.PRODUCER_TICKS.labels("onchain").inc()
        for record in facts:
            key = f"{record['chain']}:{record['vault']}".encode()
            await self._facts.send(self.config.vaults.facts_topic,
                                   json.dumps(record, separators=(",", ":")).encode(), key=key)
        await self._ticks.flush()
        if facts:
            await self._facts.flush()

    async def close(self) -> None:
        if self._facts is not None:
            await close_bounded(self._facts.stop(), "producer_stop", "chain.close_failed")
        if self._ticks is not None:
            await self._ticks.close()


async def run_pollers(pollers: list[ChainPoller], publisher: Publisher, stop: asyncio.Event,
                      *, once: bool = False, backfill_blocks: int = 0) -> int:
    """Poll every chain on its own interval until ``stop``; returns polls that failed.

    ``backfill_blocks``: first publish the oracle history of that many recent blocks."""
    failures = 0

    async def loop(p: ChainPoller) -> None:
        nonlocal failures
        name = f"chain:{p.chain}"
        health.register_check(name, _check(p))
        try:
            if backfill_blocks > 0:
                try:
                    history = await p.backfill_ticks(backfill_blocks)
                    await publisher.publish(history, [])
                    log.info("chain.backfilled", chain=p.chain, ticks=len(history))
                except NoEndpointAvailable as exc:
                    failures += 1
                    log.error("chain.backfill_failed", chain=p.chain, error=str(exc)[:300])
            while not stop.is_set():
                started = time.monotonic()
                try:
                    ticks, facts = await p.poll()
                    await publisher.publish(ticks, facts)
                    log.info("chain.polled", chain=p.chain, block=p.client.block,
                             ticks=len(ticks), facts=len(facts))
                except NoEndpointAvailable as exc:
                    failures += 1
                    p.last_error = str(exc)[:300]
                    metrics.SOURCE_POLL_FAILURES.labels(f"{p.chain}:onchain").inc()
                    log.error("chain.poll_failed", chain=p.chain, error=p.last_error)
                if once:
                    return
                wait = max(0.0, p.settings.poll_interval_seconds - (time.monotonic() - started))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)  # the poll interval, not a sync
        finally:
            health.unregister_check(name)
            await p.client.close()

    await asyncio.gather(*(loop(p) for p in pollers))
    return failures


def _check(p: ChainPoller) -> health.Check:
    async def check() -> tuple[bool, str]:
        return p.readiness()

    return check
