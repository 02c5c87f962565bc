"""The delivery benchmarks' receivers: local HTTP endpoints in a child process of their
own (the second core), so a benchmark's figures are its worker's.

    python benchmarks/delivery_receivers.py --serve N    # N ports, printed on one line

Every port answers every path: ``/ok`` (200), ``/hang`` (never), ``/fail`` (503 at once),
``/slow`` (200 after 1 s), ``/flap`` (503 and 200 in turn), ``/flaky`` (503 to a third of
requests, seeded) and ``/slowflaky?after=S&fail=P`` (after ``S`` seconds, 503 to a share
``P``, seeded). :data:`NEIGHBOURS` names the isolation runs' neighbours by these paths.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys

from aiohttp import web


async def _serve(count: int) -> None:
    async def ok(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(3600)
        return web.Response()

    async def fail(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=503, text="down")

    answers = 0

    async def flap(request: web.Request) -> web.Response:
        nonlocal answers
        await request.read()
        answers += 1
        if answers % 2:
            return web.Response(status=503, text="down")
        return web.Response(text="ok")

    draws = random.Random(15)  # the same failures in every run

    async def flaky(request: web.Request) -> web.Response:
        await request.read()
        if draws.random() < 1 / 3:
            return web.Response(status=503, text="down")
        return web.Response(text="ok")

    slow_draws = random.Random(16)  # not flaky's: its own draws, the same in every run

    async def slowflaky(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(float(request.query.get("after", "0.2")))
        if slow_draws.random() < float(request.query.get("fail", "0.2")):
            return web.Response(status=503, text="down")
        return web.Response(text="ok")

    async def slow(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(1.0)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/ok", ok)
    app.router.add_post("/hang", hang)
    app.router.add_post("/fail", fail)
    app.router.add_post("/slow", slow)
    app.router.add_post("/flap", flap)
    app.router.add_post("/flaky", flaky)
    app.router.add_post("/slowflaky", slowflaky)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    ports = []
    for _ in range(count):
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    print(" ".join(map(str, ports)), flush=True)
    await asyncio.Event().wait()


def start_receivers(count: int) -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(count)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, [int(p) for p in proc.stdout.readline().split()]


#: Neighbours of the healthy endpoint in the isolation runs: (receiver path, the
#: adjective that names it, what the row adds about it). "hang" was the only one; the
#: others are the receivers a subscriber more often has: one down behind a proxy (503 at
#: once, so every event brings retries and their history rows), and one that answers
#: after a second; "flap" one that fails every other request (a flaky proxy or a
#: deploy in progress), which moves it in and out of the dispatcher's probe, and "flaky"
#: one that fails a third of its requests at random (often two successes in a row);
#: "slowflaky" answers after two event intervals (0.2 s at ``--rate 10``, 0.04 s at the
#: default 50) and fails a fifth at random: what the probe costs a receiver that needs
#: its slots (at any rate its 1.25 attempts per event need ~2.5 sends in flight; probed
#: after a failure it has one). "busy" is the same receiver never failing: what a
#: neighbour that keeps ~2 sends in flight costs it, probe or not. Its answers come back
#: in step with the events (two intervals after its send); "offbeat" answers after 2.35
#: intervals instead, between them: the two side by side say how much of "busy"'s cost
#: is that timing (docs/performance.md, forty-second pass). ``{after}`` and
#: ``{offbeat}`` in a path or description are those delays (:func:`delays`).
NEIGHBOURS = {"hang": ("hang", "hanging", ""), "fail": ("fail", "failing", " (503 at once)"),
              "slow": ("slow", "slow", " (answers after 1 s)"),
              "flap": ("flap", "flapping", " (503 and 200 in turn)"),
              "flaky": ("flaky", "flaky", " (503 to a third of requests, at random)"),
              "slowflaky": ("slowflaky?after={after}", "slow flaky",
                            " (answers after {after} s, 503 to a fifth, at random)"),
              "busy": ("slowflaky?after={after}&fail=0", "busy",
                       " (answers after {after} s, never fails)"),
              "offbeat": ("slowflaky?after={offbeat}&fail=0", "off-beat busy",
                          " (answers after {offbeat} s, between events, never fails)")}


def delays(rate: float) -> dict[str, str]:
    """The neighbours' answer delays at ``rate`` events/s, by placeholder: ``after`` two
    event intervals, ``offbeat`` 2.35."""
    return {"after": f"{2 / rate:g}", "offbeat": f"{2.35 / rate:g}"}


def neighbour_url(port: int, kind: str, rate: float) -> str:
    """The receiver ``kind`` (a key of NEIGHBOURS) answers at, for ``rate`` events/s."""
    return f"http://127.0.0.1:{port}/" + NEIGHBOURS[kind][0].format(**delays(rate))


def neighbour_kinds(value: str) -> list[str]:
    kinds = [k for k in value.split(",") if k]
    unknown = sorted(set(kinds) - set(NEIGHBOURS))
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"unknown neighbour {', '.join(unknown) or '(none given)'}: choose from "
            + ", ".join(NEIGHBOURS))
    return list(dict.fromkeys(kinds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", type=int, required=True, metavar="N",
                        help="ports to open (start_receivers runs this in a child process)")
    asyncio.run(_serve(parser.parse_args().serve))
    return 0


if __name__ == "__main__":
    sys.exit(main())
