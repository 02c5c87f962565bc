"""``depeg-monitor keys create|list|revoke``: API keys for the HTTP API.

A key is printed once, at creation; the database keeps only its SHA-256 hash and a short
display prefix (``dpm_xxxxxxxx``) that ``keys list`` shows and ``keys revoke`` accepts.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from .commands import Command
from .config import Config
from .storage import connect
from .storage.webhooks import WebhookStore, migrate_webhooks
from .timefmt import format_ts
from .webhooks.apikeys import new_api_key


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="keys_action", metavar="ACTION", required=True)
    create = sub.add_parser("create", help="create a key and print it (shown only once)")
    create.add_argument("--name", required=True, help="who or what the key is for")
    sub.add_parser("list", help="list keys (prefix, name, created, revoked; never the key)")
    revoke = sub.add_parser("revoke", help="revoke a key by id or display prefix")
    revoke.add_argument("key", metavar="ID_OR_PREFIX")


async def _main(args: argparse.Namespace, config: Config) -> int:
    db = await connect(config.storage.url)
    try:
        await migrate_webhooks(db)
        store = WebhookStore(db)
        if args.keys_action == "create":
            name = args.name.strip()
            if not name:
                print("keys create: --name must not be empty", file=sys.stderr)
                return 2
            key = new_api_key()
            record = await store.create_api_key(name, key, time.time())
            print(key)
            print(f"id={record.id} prefix={record.prefix} name={record.name} "
                  "(the key is not stored and cannot be shown again)", file=sys.stderr)
            return 0
        if args.keys_action == "list":
            print("id\tprefix\tname\tcreated_at\trevoked_at")
            for k in await store.list_api_keys():
                revoked = format_ts(k.revoked_at) if k.revoked_at is not None else "-"
                print(f"{k.id}\t{k.prefix}\t{k.name}\t{format_ts(k.created_at)}\t{revoked}")
            return 0
        count = await store.revoke_api_key(args.key, time.time())
        if not count:
            print(f"keys revoke: no active key with id or prefix {args.key!r}", file=sys.stderr)
            return 1
        print(f"revoked {count} key(s)", file=sys.stderr)
        return 0
    finally:
        await db.close()


def _run(args: argparse.Namespace, config: Config) -> int:
    return asyncio.run(_main(args, config))


command = Command(
    name="keys",
    help="create, list and revoke API keys",
    add_arguments=_add_arguments,
    run=_run,
    description=(
        "API keys authenticate every HTTP API call (header x-api-key). `keys create --name N` "
        "prints a new key once; only its SHA-256 hash is stored in storage.url."
    ),
)
