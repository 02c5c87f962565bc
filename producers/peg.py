"""What one token should be worth in USD (``peg_usd``), read on chain; never 1.0 by default.

=========== ================================================================================
peg type    peg_usd
=========== ================================================================================
usd         1 (the unit itself: a USD stablecoin's target is one dollar by definition)
fiat, gold  the peg's USD feed (``sources.pegFeed``: EUR/USD, XAU/USD, ...); no feed or a
            stale feed: unknown (no peg published, the monitor keeps the last one it had)
nav         ``convertToAssets(one share)`` of ``sources.navVault`` (an ERC-4626) in asset
            units, times the asset's USD feed (``sources.pegFeed``) when one is named; without
            one the asset is taken at its own USD peg (the NAV of sDAI counts DAI as the
            dollar DAI is pegged to, so sDAI does not look depegged because DAI is)
other       unknown
=========== ================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from monitor.registry import FIAT_PEGS

from .evmcalls import call_data, decode_result
from .oracle import FeedReading
from .rpc import Call, RpcClient

FEED_PEGS = (FIAT_PEGS - {"usd"}) | {"gold", "silver"}


@dataclass(frozen=True)
class NavReading:
    vault: str
    assets_per_share: Decimal  # asset units per whole share


def nav_calls(client: RpcClient, vault: str, share_decimals: int) -> list[Call]:
    return [client.eth_call(vault, call_data("convertToAssets(uint256)", 10**share_decimals)),
            client.eth_call(vault, call_data("asset()"))]


async def read_nav(client: RpcClient, vault: str) -> NavReading:
    (dec_raw,) = await client.batch([client.eth_call(vault, call_data("decimals()"))])
    (share_dec,) = decode_result(["uint8"], dec_raw, f"{vault} decimals")
    conv, asset_raw = await client.batch(nav_calls(client, vault, int(share_dec)))
    (assets,) = decode_result(["uint256"], conv, f"{vault} convertToAssets")
    (asset,) = decode_result(["address"], asset_raw, f"{vault} asset")
    (asset_dec_raw,) = await client.batch([client.eth_call(asset, call_data("decimals()"))])
    (asset_dec,) = decode_result(["uint8"], asset_dec_raw, f"{asset} decimals")
    return NavReading(vault, Decimal(int(assets)).scaleb(-int(asset_dec)))


def peg_usd(peg_type: str, *, peg_feed: FeedReading | None = None,
            nav: NavReading | None = None) -> Decimal | None:
    """The peg in USD from what was read (see the module table); None when unknown."""
    if peg_type == "usd":
        return Decimal(1)
    if peg_type in FEED_PEGS:
        if peg_feed is None or peg_feed.stale:
            return None
        return peg_feed.answer
    if peg_type == "nav":
        if nav is None:
            return None
        if peg_feed is None:
            return nav.assets_per_share
        return None if peg_feed.stale else nav.assets_per_share * peg_feed.answer
    return None


def describe(value: Any) -> str:
    return format(Decimal(value).normalize(), "f")
