"""The sections of where tokens and prices come from: the registry and the chains' RPC."""

from __future__ import annotations

import msgspec


class RegistryConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    #: TOML file listing tracked tokens; empty for none.
    path: str = ""


class ChainConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One chain's RPC access for the on-chain adapters (producers/chainsvc.py)."""

    #: Endpoints in priority order; a TOML list, or one string of comma-separated URLs (env).
    #: Empty: the chain is not polled.
    rpc_urls: list[str] | str = []
    poll_interval_seconds: float = 30.0
    #: Reads happen this many blocks behind the best head (reorg safety).
    confirmations: int = 2
    timeout_seconds: float = 10.0
    #: Rounds over all endpoints before a poll's request fails.
    retries: int = 2
    #: Requests per second per endpoint (0 = unlimited).
    rate_limit: float = 25.0
    #: An endpoint this many blocks behind the best head is skipped (lagging node).
    max_lag_blocks: int = 5

    @property
    def urls(self) -> list[str]:
        raw = self.rpc_urls.split(",") if isinstance(self.rpc_urls, str) else self.rpc_urls
        return [u.strip() for u in raw if u.strip()]


class ChainsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The on-chain adapters: a section per chain plus what to watch (docs/chain-adapters.md)."""

    eth: ChainConfig = ChainConfig()
    arb: ChainConfig = ChainConfig()
    pol: ChainConfig = ChainConfig()
    opt: ChainConfig = ChainConfig()
    base: ChainConfig = ChainConfig()
    bsc: ChainConfig = ChainConfig()
    linea: ChainConfig = ChainConfig()
    #: Token List whose extensions.sources name feeds, pools and vaults to poll; empty: the
    #: registry file (registry.path) when it is a .json Token List.
    tokens_file: str = ""
    #: JSON array of vaults to index: {"chain", "vault", ...off-chain facts}; empty: none.
    vaults_file: str = ""
    #: A feed whose last update is older than this is stale: no oracle price is published.
    oracle_heartbeat_seconds: float = 90000.0
    #: /readyz fails for a chain whose last successful poll is this many intervals old.
    stale_after_polls: float = 3.0

    def chain(self, name: str) -> ChainConfig:
        value: ChainConfig = getattr(self, name)
        return value
