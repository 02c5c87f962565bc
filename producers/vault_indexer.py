"""ERC-4626 vaults read over JSON-RPC -> ``vaults.facts`` records (DESIGN.md, "Vault facts").

What is read at the poll's pinned block, and the fact it becomes:

- ``asset()``, ``totalAssets()``, ``totalSupply()``, ``decimals()``, ``name()``, ``symbol()``
  -> underlying_address/_symbol, total_supply (shares); ``convertToAssets(1 share)`` ->
  share_price in asset units;
- ``paused()`` -> emergency_shutdown (and pausable: the function exists);
- ``owner()`` and ``eth_getCode(owner)``: no code -> owner_kind ``eoa``; a contract answering
  ``getMinDelay()`` (OpenZeppelin TimelockController) -> ``timelock`` with timelock_seconds;
  one answering ``getThreshold()`` (Safe) -> ``multisig``; another contract -> ``unknown``;
- EIP-1967 implementation and admin slots (``eth_getStorageAt``) -> upgradeable, plus
  ``implementation`` and ``proxy_admin`` (extra fields; consumers ignore unknown fields);
- deployment block by binary search on ``eth_getCode`` history -> deployed_at (its time);
- logs emitted by the vault since deployment -> event_count; ``Transfer`` from the zero
  address in the last 24 h -> minted_24h.

Facts that need off-chain sources (audits, exploit history, whitelist, protocol label, ...)
come from the vault's entry in the sources file and are merged in unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .evmcalls import BadReply, call_data, decode_result, event_topic, word_to_address
from .rpc import RpcClient, RpcError

IMPLEMENTATION_SLOT = "0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc"
ADMIN_SLOT = "0xb53127684a568b3173ae13b9f8a6016e243e63b6e8ee1178d6a717850b5d6103"
TRANSFER = event_topic("Transfer(address,address,uint256)")
ZERO_TOPIC = "0x" + "0" * 64
DAY = 86_400


def _ok(result: Any) -> bool:
    return not isinstance(result, RpcError) and isinstance(result, str) and len(result) > 2


@dataclass
class VaultIndexer:
    """Facts of one vault; keeps what never changes (deployment) between polls."""

    chain: str
    vault: str
    #: Off-chain facts from the sources file, merged into every record.
    offchain: dict[str, Any] = field(default_factory=dict)
    log_chunk_blocks: int = 10_000
    _deployed_block: int | None = None
    _deployed_at: int | None = None
    #: Events counted up to this block (counting resumes from there on the next poll).
    _counted_to: int | None = None
    _event_count: int = 0

    async def facts(self, client: RpcClient) -> dict[str, Any]:
        """One ``vaults.facts`` record at the client's pinned block."""
        v = self.vault
        block = client.block if client.block is not None else int(
            await client.call("eth_blockNumber"), 16)
        tag = hex(block)
        header = await client.call("eth_getBlockByNumber", tag, False)
        now = int(header["timestamp"], 16)
        names = ("asset()", "totalAssets()", "totalSupply()", "decimals()", "name()",
                 "symbol()", "paused()", "owner()")
        replies = await client.batch([
            *(client.eth_call(v, call_data(n)) for n in names),
            ("eth_getStorageAt", [v, IMPLEMENTATION_SLOT, tag]),
            ("eth_getStorageAt", [v, ADMIN_SLOT, tag]),
        ])
        got = dict(zip(names, replies[:len(names)], strict=True))
        impl_word, admin_word = replies[len(names):]
        (asset,) = decode_result(["address"], got["asset()"], f"{v} asset")
        (total_assets,) = decode_result(["uint256"], got["totalAssets()"], f"{v} totalAssets")
        (supply,) = decode_result(["uint256"], got["totalSupply()"], f"{v} totalSupply")
        (decimals,) = decode_result(["uint8"], got["decimals()"], f"{v} decimals")
        asset = asset.lower()
        one_share = 10 ** int(decimals)
        conv, asset_dec, asset_sym = await client.batch([
            client.eth_call(v, call_data("convertToAssets(uint256)", one_share)),
            client.eth_call(asset, call_data("decimals()")),
            client.eth_call(asset, call_data("symbol()")),
        ])
        (assets_per_share,) = decode_result(["uint256"], conv, f"{v} convertToAssets")
        (adec,) = decode_result(["uint8"], asset_dec, f"{asset} decimals")
        record: dict[str, Any] = {
            "ts": now, "chain": self.chain, "vault": v.lower(),
            "contract_type": "erc4626_vault",
            "underlying_address": asset,
            "total_supply": _units(supply, int(decimals)),
            "total_assets": _units(total_assets, int(adec)),
            "share_price": _units(assets_per_share, int(adec)),
            "block": block,
        }
        for key, sig in (("name", "name()"), ("symbol", "symbol()")):
            if _ok(got[sig]):
                record[key] = decode_result(["string"], got[sig], sig)[0]
        if _ok(asset_sym):
            record["underlying_symbol"] = decode_result(["string"], asset_sym, "symbol")[0]
        record["pausable"] = _ok(got["paused()"])
        if record["pausable"]:
            record["emergency_shutdown"] = bool(decode_result(["bool"], got["paused()"])[0])
        record.update(await self._ownership(client, got["owner()"], tag))
        implementation = word_to_address(impl_word) if _ok(impl_word) else None
        admin = word_to_address(admin_word) if _ok(admin_word) else None
        record["upgradeable"] = implementation is not None and int(implementation, 16) != 0
        record["implementation"] = implementation if record["upgradeable"] else None
        record["proxy_admin"] = admin if admin and int(admin, 16) else None
        await self._deployment(client, block)
        record["deployed_at"] = self._deployed_at
        record["deployed_block"] = self._deployed_block
        record.update(await self._activity(client, block, now, int(decimals)))
        record.update(self.offchain)
        return record

    async def _ownership(self, client: RpcClient, owner_reply: Any, tag: str) -> dict[str, Any]:
        if not _ok(owner_reply):
            return {"owner_kind": "unknown", "owner": None}
        owner = decode_result(["address"], owner_reply, "owner")[0].lower()
        if int(owner, 16) == 0:
            return {"owner_kind": "unknown", "owner": None}  # renounced
        code, delay, threshold = await client.batch([
            ("eth_getCode", [owner, tag]),
            client.eth_call(owner, call_data("getMinDelay()")),
            client.eth_call(owner, call_data("getThreshold()")),
        ])
        if code in ("0x", "0x0", None):
            return {"owner_kind": "eoa", "owner": owner, "timelock_seconds": 0}
        if _ok(delay):
            return {"owner_kind": "timelock", "owner": owner,
                    "timelock_seconds": int(decode_result(["uint256"], delay)[0])}
        if _ok(threshold):
            return {"owner_kind": "multisig", "owner": owner, "timelock_seconds": None}
        return {"owner_kind": "unknown", "owner": owner, "timelock_seconds": None}

    async def _deployment(self, client: RpcClient, head: int) -> None:
        """Binary search for the first block where the vault has code (done once)."""
        if self._deployed_block is not None:
            return
        lo, hi = 0, head
        while lo < hi:
            mid = (lo + hi) // 2
            code = await client.call("eth_getCode", self.vault, hex(mid))
            if code in ("0x", "0x0", None):
                lo = mid + 1
            else:
                hi = mid
        header = await client.call("eth_getBlockByNumber", hex(lo), False)
        self._deployed_block, self._deployed_at = lo, int(header["timestamp"], 16)

    async def _logs(self, client: RpcClient, start: int, end: int,
                    topics: list[Any] | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while start <= end:
            stop = min(end, start + self.log_chunk_blocks - 1)
            query: dict[str, Any] = {"address": self.vault, "fromBlock": hex(start),
                                     "toBlock": hex(stop)}
            if topics:
                query["topics"] = topics
            logs = await client.call("eth_getLogs", query)
            if not isinstance(logs, list):
                raise BadReply(f"{self.vault}: eth_getLogs answered {str(logs)[:200]}")
            out.extend(logs)
            start = stop + 1
        return out

    async def _block_at(self, client: RpcClient, ts: int, lo: int, hi: int) -> int:
        """First block with timestamp >= ts (binary search)."""
        while lo < hi:
            mid = (lo + hi) // 2
            header = await client.call("eth_getBlockByNumber", hex(mid), False)
            if int(header["timestamp"], 16) < ts:
                lo = mid + 1
            else:
                hi = mid
        return lo

    async def _activity(self, client: RpcClient, block: int, now: int,
                        decimals: int) -> dict[str, Any]:
        assert self._deployed_block is not None
        start = self._deployed_block if self._counted_to is None else self._counted_to + 1
        if start <= block:
            self._event_count += len(await self._logs(client, start, block))
            self._counted_to = block
        since = await self._block_at(client, now - DAY, self._deployed_block, block)
        mints = await self._logs(client, since, block, [TRANSFER, ZERO_TOPIC])
        minted = sum(int(e["data"], 16) for e in mints)
        return {"event_count": self._event_count, "minted_24h": _units(minted, decimals)}


def _units(raw: int, decimals: int) -> float:
    return float(Decimal(raw).scaleb(-decimals))
