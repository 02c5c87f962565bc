"""Each subcommand's one-line help, so ``depeg-monitor --help`` can list the commands
without importing them (each pulls in aiokafka, aiohttp, the engines: seconds on a busy
machine). Only the command that runs is imported. An entry point missing here is imported
for its help (correct, just slower); tests/test_cli_startup.py checks that every entry
here matches the command's own ``Command.help``, so the listing cannot drift."""

from __future__ import annotations

HELP: dict[str, str] = {
    "api": ("serve the HTTP API: /rwa, /vaults, /v3/*, /usage, /webhooks/*, /openapi.json, "
            "/metrics, /healthz, /readyz"),
    "compile": ("build the engine, CSV and replay modules with mypyc (faster replay and "
                "monitor); --status shows which modules run"),
    "deliver": "deliver tier changes to webhook subscriptions (signed, with retries)",
    "keys": "create, list and revoke API keys; rotate the webhook-secret encryption key",
    "monitor": "run the monitor daemon: ticks in, ratings and tier changes out (Kafka)",
    "produce": ("publish to Kafka: tick files, simulated tokens, Uniswap v3, on-chain adapters "
                "(chain), vault facts (vaults)"),
    "registry": ("token registry tools: `registry check [FILE]` validates a registry "
                 "(default: the configured registry.path)"),
    "replay": "run tick files through the engine and write the tier changes it would have sent",
    "run": "run everything in one process (embedded broker unless one is configured)",
    "spread": "run the cross-chain spread stage: every chain's ticks in, spread observations out",
    "status": "tokens by tier, stale tokens, consumer lag and pending deliveries (from the store)",
    "store": "write ratings, tier changes and vault facts/ratings from Kafka into the database",
    "vaults": "rate ERC-4626 vaults: the vault daemon (Kafka), or `vaults replay` over fact files",
}

#: Long-running services: a SIGTERM or Ctrl-C that arrives while one is still importing or
#: starting (before it handles signals itself) ends it with status 0, as a stop after
#: start does: nothing has been consumed or committed yet (``monitor.cli.main``).
SERVICES = frozenset({"api", "deliver", "monitor", "run", "spread", "store"})


def is_service(command: str, argv: list[str]) -> bool:
    """``vaults`` is the vault daemon unless its action is ``replay`` (a job over files)."""
    return command in SERVICES or (command == "vaults" and "replay" not in argv)
