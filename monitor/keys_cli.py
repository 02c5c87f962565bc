"""``depeg-monitor keys create|list|revoke|usage``: API keys for the HTTP API.

A key is printed once, at creation; the database keeps only its SHA-256 hash and a short
display prefix (``dpm_xxxxxxxx``) that ``keys list`` shows and ``keys revoke`` accepts.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from .api.errors import ApiError
from .commands import Command
from .config import Config
from .storage import Database, connect
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
    usage = sub.add_parser("usage", help="compute units a key was charged (what GET /usage "
                                         "shows that key)")
    usage.add_argument("key", metavar="ID_OR_PREFIX")
    usage.add_argument("--from", dest="start", metavar="DATE",
                       help="YYYY-MM-DD or ISO 8601 (inclusive; default 30 days before --to)")
    usage.add_argument("--to", dest="end", metavar="DATE",
                       help="YYYY-MM-DD (the whole day) or ISO 8601 (exclusive; default now)")
    usage.add_argument("--group-by", choices=("day", "endpoint"), default="endpoint")


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
        if args.keys_action == "usage":
            return await _usage(store, db, args)
        count = await store.revoke_api_key(args.key, time.time())
        if not count:
            print(f"keys revoke: no active key with id or prefix {args.key!r}", file=sys.stderr)
            return 1
        print(f"revoked {count} key(s)", file=sys.stderr)
        return 0
    finally:
        await db.close()


async def _usage(store: WebhookStore, db: Database, args: argparse.Namespace) -> int:
    from .api.usage.routes import period
    from .storage.usage import DAY, UsageStore

    found = [k for k in await store.list_api_keys() if args.key in (k.id, k.prefix)]
    if len(found) != 1:
        print(f"keys usage: no single key with id or prefix {args.key!r}", file=sys.stderr)
        return 1
    query = {n: v for n, v in (("from", args.start), ("to", args.end)) if v is not None}
    try:
        start, end = period(query, time.time())
    except ApiError as exc:
        print(f"keys usage: {exc.message}", file=sys.stderr)
        return 2
    totals = await UsageStore(db).totals(found[0].id, start, end, args.group_by)
    print(f"# key {found[0].id} ({found[0].prefix}, {found[0].name}) "
          f"from {format_ts(start)} to {format_ts(end)}")
    print(f"{args.group_by}\tcu")
    for group, units in totals.groups:
        label = format_ts(int(group) * DAY)[:10] if args.group_by == "day" else group
        print(f"{label}\t{units}")
    print(f"total\t{totals.total}")
    return 0


def _run(args: argparse.Namespace, config: Config) -> int:
    return asyncio.run(_main(args, config))


command = Command(
    name="keys",
    help="create, list and revoke API keys",
    add_arguments=_add_arguments,
    run=_run,
    description=(
        "API keys authenticate every HTTP API call (header x-api-key). `keys create --name N` "
        "prints a new key once; only its SHA-256 hash is stored in storage.url. "
        "`keys usage ID` prints the compute units a key was charged, by endpoint or day."
    ),
)
