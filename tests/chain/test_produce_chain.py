"""`depeg-monitor produce chain --once` as an operator runs it: config from the environment, a
Token List naming the sources, a vaults file; ticks and vault facts land on Kafka, keyed."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from eth_utils.address import to_checksum_address

from monitor.kafka.embedded import EmbeddedBroker
from tests.kafka.kafkatools import TopicReader

from .evm import Chain, calldata
from .uniswap_setup import deploy_uniswap, make_pool

pytestmark = [pytest.mark.broker]


async def test_produce_chain_once_publishes_ticks_and_vault_facts(
        chain: Chain, broker: EmbeddedBroker, tmp_path: Path) -> None:
    c = chain
    usdx = c.deploy("TestToken", ["string", "string", "uint8"], ["USD X", "USDX", 18])
    usdc = c.deploy("TestToken", ["string", "string", "uint8"], ["USD Coin", "USDC", 6])
    pool = make_pool(c, deploy_uniswap(c), usdx, 18, usdc, 6, fee=500, price_a_in_b=0.998)
    usdx_feed = c.deploy("TestAggregator", ["uint8", "int256", "string"], [8, 99_900_000, "X"])
    usdc_feed = c.deploy("TestAggregator", ["uint8", "int256", "string"], [8, 10**8, "C"])
    eur_feed = c.deploy("TestAggregator", ["uint8", "int256", "string"], [8, 108_000_000, "E"])
    eurx = c.deploy("TestToken", ["string", "string", "uint8"], ["Euro X", "EURX", 6])
    eurx_feed = c.deploy("TestAggregator", ["uint8", "int256", "string"], [8, 107_500_000, "X"])
    for answer in (99_950_000, 99_920_000):  # oracle history the backfill must publish
        c.transact(c.accounts[0], usdx_feed, "updateAnswer(int256)", answer)
    impl = c.deploy("TestVault")
    init = calldata("initialize(address,string,string)", usdc, "Vault USDC", "vUSDC")
    vault = c.deploy("TransparentUpgradeableProxy", ["address", "address", "bytes"],
                     [impl, c.accounts[4], bytes.fromhex(init[2:])])
    tokens = {
        "name": "Local watchlist", "timestamp": "2026-11-23T00:00:00Z",
        "version": {"major": 1, "minor": 0, "patch": 0},
        "tokens": [
            {"chainId": 1, "address": usdx, "decimals": 18, "name": "USD X", "symbol": "USDX",
             "extensions": {"pegType": "usd", "pegReference": "1 USD",
                            "sources": {"priceFeed": usdx_feed,
                                        "pool": to_checksum_address(pool.pool),
                                        "quoteFeed": usdc_feed}}},
            {"chainId": 1, "address": eurx, "decimals": 6, "name": "Euro X", "symbol": "EURX",
             "extensions": {"pegType": "eur", "pegReference": "1 EUR",
                            "sources": {"priceFeed": eurx_feed, "pegFeed": eur_feed}}},
        ]}
    (tmp_path / "tokens.json").write_text(json.dumps(tokens))
    (tmp_path / "vaults.json").write_text(json.dumps([{"chain": "eth", "vault": vault,
                                                       "audit_count": 1}]))
    env = {**os.environ, "DEPEG_CHAINS__ETH__RPC_URLS": c.url,
           "DEPEG_CHAINS__ETH__CONFIRMATIONS": "0",
           "DEPEG_CHAINS__TOKENS_FILE": str(tmp_path / "tokens.json"),
           "DEPEG_CHAINS__VAULTS_FILE": str(tmp_path / "vaults.json"),
           "DEPEG_METRICS__PORT": "0", "DEPEG_LOGGING__FORMAT": "json"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "monitor", "produce", "chain", "--once", "--backfill-blocks",
        "200", "--bootstrap-servers", broker.bootstrap_servers, env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, stderr.decode()[-3000:]
    async with TopicReader(broker.bootstrap_servers, "depeg.ticks") as reader:
        # Backfill: 3 rounds of the USDX feed and 1 of the EURX feed; then one poll of each.
        records = await reader.until(lambda r: len(r) >= 6, 30, "4 backfilled + 2 polled")
    values = [json.loads(r.value) for r in records]
    history = [v for v in values if v["source"] == "onchain:eth:backfill"]
    usdx_history = [float(h["oracle_price_usd"]) for h in history if h["token"] == usdx.lower()]
    assert usdx_history == [0.999, 0.9995, 0.9992]  # every AnswerUpdated, oldest first
    ticks = {r.key.decode(): json.loads(r.value) for r in records
             if json.loads(r.value)["source"] == "onchain:eth"}
    usdx_tick = ticks[f"eth:{usdx.lower()}"]
    assert float(usdx_tick["price_usd"]) == pytest.approx(0.998, rel=1e-3)
    assert float(usdx_tick["oracle_price_usd"]) == pytest.approx(0.9992)
    assert float(usdx_tick["peg_usd"]) == 1 and usdx_tick["slippage_bps"] > 5  # fee 5 bp + impact
    eurx_tick = ticks[f"eth:{eurx.lower()}"]
    assert float(eurx_tick["peg_usd"]) == pytest.approx(1.08)  # the EUR/USD feed, not 1.0
    assert float(eurx_tick["oracle_price_usd"]) == pytest.approx(1.075)
    async with TopicReader(broker.bootstrap_servers, "vaults.facts") as facts_reader:
        [fact] = await facts_reader.until(lambda r: len(r) >= 1, 30, "vault facts")
    assert fact.key.decode() == f"eth:{vault.lower()}"
    facts = json.loads(fact.value)
    assert facts["owner_kind"] == "eoa" and facts["upgradeable"] is True
    assert facts["audit_count"] == 1 and facts["underlying_address"] == usdc.lower()
