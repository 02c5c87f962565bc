"""The example webhook receiver of docs/webhooks.md (kept identical by a test)."""

import os

from aiohttp import web

from monitor.webhooks.signing import SignatureError, verify

seen_event_ids: set[str] = set()  # use your database in production


def make_app(secret: str, previous_secret: str | None = None) -> web.Application:
    async def hook(request: web.Request) -> web.Response:
        body = await request.read()  # the raw bytes: verify before parsing
        try:
            verify(body, request.headers, secret, previous_secret)
        except SignatureError as exc:
            return web.json_response({"error": str(exc)}, status=401)
        event_id = request.headers["X-Event-ID"]
        if event_id in seen_event_ids:
            return web.json_response({"duplicate": True})  # 2xx: stop the retries
        seen_event_ids.add(event_id)
        delivery = await request.json()
        data = delivery["event"]["data"]
        print(f"{data['symbol']} on {data['chain']}: {data['old_tier']} -> {data['new_tier']}",
              flush=True)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/hook", hook)
    return app


if __name__ == "__main__":
    import sys

    # python examples/webhook_receiver.py PORT, with WEBHOOK_SECRET set to the
    # subscription's secret_key (and WEBHOOK_PREVIOUS_SECRET during a rotation).
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    web.run_app(make_app(os.environ["WEBHOOK_SECRET"],
                         os.environ.get("WEBHOOK_PREVIOUS_SECRET")),
                host="127.0.0.1", port=port)
