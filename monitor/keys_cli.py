"""``depeg-monitor keys create|list|revoke|usage``: API keys for the HTTP API.

A key is printed once, at creation; the database keeps only its SHA-256 hash and a short
display prefix (``dpm_xxxxxxxx``) that ``keys list`` shows and ``keys revoke`` accepts.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .commands import Command
from .runstate import live_state
from .timefmt import format_ts

if TYPE_CHECKING:  # the store, aiohttp and cryptography: imported when a keys action runs
    from .config import Config
    from .storage import Database
    from .storage.webhooks import WebhookStore


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
    rotate = sub.add_parser(
        "rotate-encryption-key",
        help="re-encrypt every stored webhook secret under a new encryption key",
        description=(
            "Re-encrypts every subscription's signing secret (current and previous) under a "
            "new key in one transaction. With the key file (delivery.secret_key_file, the "
            "default) a new key is generated and replaces the file once the database is "
            "committed; with delivery.secret_encryption_key set, pass --new-key-file and then "
            "set the setting to that key. Stop run/api/deliver first: they hold the key in "
            "memory. Safe to run again after an interruption."))
    rotate.add_argument("--new-key-file", metavar="FILE",
                        help="the new key (32 bytes, base64, as in the key file) instead of a "
                             "generated one")
    rotate.add_argument("--force", action="store_true",
                        help="rotate even though a `depeg-monitor run` is using this data "
                             "directory")


async def _main(args: argparse.Namespace, config: Config) -> int:
    from .storage import connect
    from .storage.webhooks import WebhookStore, migrate_webhooks
    from .webhooks.apikeys import new_api_key

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
        if args.keys_action == "rotate-encryption-key":
            return await rotate_encryption_key(db, config, args.new_key_file, args.force)
        count = await store.revoke_api_key(args.key, time.time())
        if not count:
            print(f"keys revoke: no active key with id or prefix {args.key!r}", file=sys.stderr)
            return 1
        print(f"revoked {count} key(s)", file=sys.stderr)
        return 0
    finally:
        await db.close()


async def _usage(store: WebhookStore, db: Database, args: argparse.Namespace) -> int:
    from .api.errors import ApiError
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


def _read_key(path: str) -> bytes:
    from .webhooks.secrets import decode_key

    return decode_key(Path(path).read_text(encoding="ascii"))


async def rotate_encryption_key(db: Database, config: Config, new_key_file: str | None,
                                force: bool) -> int:
    from .webhooks.rekey import RekeyError, install_new_key, prepare_new_key, reseal_all
    from .webhooks.secrets import SecretBox, SecretStoreError, key_file, load_key

    running = live_state(config)
    if running is not None and not force:
        print(f"keys rotate-encryption-key: a depeg-monitor run (pid {running.pid}) uses this "
              "data directory and holds the current key in memory; stop it first (or --force)",
              file=sys.stderr)
        return 1
    delivery = config.delivery
    path = key_file(delivery)
    if not delivery.secret_encryption_key and not path.exists():
        print(f"keys rotate-encryption-key: no key file at {path}: nothing was encrypted "
              "with it", file=sys.stderr)
        return 1
    try:
        old = SecretBox(load_key(delivery))
        given = _read_key(new_key_file) if new_key_file else None
        if delivery.secret_encryption_key:
            if given is None:
                print("keys rotate-encryption-key: the key comes from "
                      "delivery.secret_encryption_key; write a new one to a file (mode 0600) "
                      "and pass --new-key-file FILE", file=sys.stderr)
                return 2
            new_key = given
        else:
            new_key = prepare_new_key(path, given)
        result = await reseal_all(db, old, SecretBox(new_key))
        if delivery.secret_encryption_key:
            where = ("now set delivery.secret_encryption_key to the key in "
                     f"{new_key_file} for every process")
        else:
            install_new_key(path)
            where = f"the key file {path} now holds the new key"
    except (OSError, SecretStoreError, RekeyError) as exc:
        print(f"keys rotate-encryption-key: {exc}", file=sys.stderr)
        return 1
    print(f"re-encrypted {result.resealed} secret(s)"
          + (f" ({result.already_new} already under the new key)" if result.already_new else "")
          + f"; {where}. The old key no longer opens anything stored.", file=sys.stderr)
    return 0


def _run(args: argparse.Namespace, config: Config) -> int:
    return asyncio.run(_main(args, config))


command = Command(
    name="keys",
    help="create, list and revoke API keys; rotate the webhook-secret encryption key",
    add_arguments=_add_arguments,
    run=_run,
    description=(
        "API keys authenticate every HTTP API call (header x-api-key). `keys create --name N` "
        "prints a new key once; only its SHA-256 hash is stored in storage.url. "
        "`keys usage ID` prints the compute units a key was charged, by endpoint or day."
    ),
)
