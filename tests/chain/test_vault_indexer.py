"""The vault indexer follows a real ERC-4626 vault through ownership, pause and upgrade.

The vault is OpenZeppelin's upgradeable ERC4626 behind OpenZeppelin's TransparentUpgradeableProxy;
ownership moves from an EOA to OpenZeppelin's TimelockController. The truth each step is
checked against is what the test itself did on chain.
"""

from __future__ import annotations

import json

from monitor.config import Config
from monitor.vaults.engine import VaultEngine
from monitor.vaults.facts import decode_facts
from producers.rpc import RpcClient
from producers.vault_indexer import VaultIndexer

from .evm import Chain, calldata

TWO_DAYS = 2 * 86_400


class Tags:
    """The vault engine fed with every fact record the indexer produces (as the daemon is)."""

    def __init__(self) -> None:
        self.engine = VaultEngine(Config().vaults)
        self.now: set[str] = set()

    def feed(self, facts: dict[str, object]) -> None:
        for rating in self.engine.process(decode_facts(json.dumps(facts).encode())):
            self.now = set(rating.tags)



async def facts_now(chain: Chain, indexer: VaultIndexer, tags: Tags) -> dict[str, object]:
    async with RpcClient("eth", [chain.url]) as client:
        await client.pin_block()
        facts = await indexer.facts(client)
    tags.feed(facts)
    return facts


async def test_facts_follow_owner_pause_and_upgrade(chain: Chain) -> None:
    c = chain
    deployer, user, admin = c.accounts[0], c.accounts[3], c.accounts[4]
    asset = c.deploy("TestToken", ["string", "string", "uint8"], ["USD Coin", "USDC", 6])
    impl = c.deploy("TestVault")
    init = calldata("initialize(address,string,string)", asset, "Vault USDC", "vUSDC")
    proxy = c.deploy("TransparentUpgradeableProxy", ["address", "address", "bytes"],
                     [impl, admin, bytes.fromhex(init[2:])], sender=deployer)
    deployed_block = c.block_number()
    indexer = VaultIndexer("eth", proxy.lower(), offchain={"audit_count": 2, "whitelisted": True})
    tags = Tags()

    facts = await facts_now(c, indexer, tags)
    assert facts["owner_kind"] == "eoa" and facts["owner"] == deployer.lower()
    assert facts["timelock_seconds"] == 0
    assert facts["upgradeable"] is True and facts["implementation"] == impl.lower()
    assert facts["proxy_admin"] == admin.lower()
    assert facts["pausable"] is True and facts["emergency_shutdown"] is False
    assert facts["deployed_block"] == deployed_block
    assert facts["underlying_address"] == asset.lower() and facts["underlying_symbol"] == "USDC"
    assert facts["symbol"] == "vUSDC" and facts["total_supply"] == 0.0
    assert facts["audit_count"] == 2 and facts["whitelisted"] is True  # off-chain, merged
    events_before = facts["event_count"]
    assert isinstance(events_before, int)
    assert {"vault-eoa-owner", "vault-no-timelock", "vault-upgradeable",
            "vault-pause-capable", "vault-new"} <= tags.now
    assert "vault-emergency-shutdown" not in tags.now and "vault-no-audits" not in tags.now

    # Deposits mint shares; a donation to the vault raises the share price.
    c.transact(user, asset, "mint(address,uint256)", user, 3_000_000 * 10**6)
    c.transact(user, asset, "approve(address,uint256)", proxy, 2**256 - 1)
    c.transact(user, proxy, "deposit(uint256,address)", 1_000_000 * 10**6, user)
    c.transact(user, asset, "transfer(address,uint256)", proxy, 50_000 * 10**6)
    facts = await facts_now(c, indexer, tags)
    assert facts["total_supply"] == 1_000_000.0 and facts["minted_24h"] == 1_000_000.0
    assert facts["total_assets"] == 1_050_000.0
    # OpenZeppelin's ERC4626 rounds convertToAssets down (virtual share offset): 1.049999.
    assert abs(float(facts["share_price"]) - 1.05) < 2e-6  # type: ignore[arg-type]
    assert facts["event_count"] == events_before + 2  # Transfer (mint) + Deposit
    # Minted more than a day ago no longer counts as minted in 24 h.
    c.increase_time(86_400 + 60)
    facts = await facts_now(c, indexer, tags)
    assert facts["minted_24h"] == 0.0 and facts["total_supply"] == 1_000_000.0

    # Paused by its owner.
    c.transact(deployer, proxy, "pause()")
    assert (await facts_now(c, indexer, tags))["emergency_shutdown"] is True
    assert "vault-emergency-shutdown" in tags.now
    c.transact(deployer, proxy, "unpause()")
    assert (await facts_now(c, indexer, tags))["emergency_shutdown"] is False
    assert "vault-emergency-shutdown" not in tags.now

    # Ownership moves to a two-day timelock.
    timelock = c.deploy("TimelockController", ["uint256", "address[]", "address[]", "address"],
                        [TWO_DAYS, [deployer], [deployer], deployer])
    c.transact(deployer, proxy, "transferOwnership(address)", timelock)
    facts = await facts_now(c, indexer, tags)
    assert facts["owner_kind"] == "timelock" and facts["owner"] == timelock.lower()
    assert facts["timelock_seconds"] == TWO_DAYS
    assert "vault-eoa-owner" not in tags.now and "vault-no-timelock" not in tags.now

    # Pausing now goes through the timelock: schedule, wait the delay, execute.
    pause = bytes.fromhex(calldata("pause()")[2:])
    salt = b"\x00" * 32
    c.transact(deployer, timelock, "schedule(address,uint256,bytes,bytes32,bytes32,uint256)",
               proxy, 0, pause, salt, salt, TWO_DAYS)
    assert (await facts_now(c, indexer, tags))["emergency_shutdown"] is False
    c.increase_time(TWO_DAYS + 1)
    c.transact(deployer, timelock, "execute(address,uint256,bytes,bytes32,bytes32)",
               proxy, 0, pause, salt, salt)
    assert (await facts_now(c, indexer, tags))["emergency_shutdown"] is True
    assert "vault-emergency-shutdown" in tags.now

    # Upgraded behind the proxy by its admin: the implementation slot follows.
    v2 = c.deploy("TestVaultV2")
    c.transact(admin, proxy, "upgradeTo(address)", v2)
    facts = await facts_now(c, indexer, tags)
    assert facts["implementation"] == v2.lower() and facts["upgradeable"] is True
    assert c.call(proxy, "version()", ["uint256"], sender=user)[0] == 2
    assert facts["total_supply"] == 1_000_000.0  # state survived the upgrade
