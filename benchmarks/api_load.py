"""The read-API benchmarks' load: ``concurrency`` connections cycling through paths for a
while, from ``wrk`` when it is installed (a Lua script counting every non-200 answer) or
from an aiohttp client in a process of its own, as :class:`Load` figures.

Imported by bench_api.py and bench_vaults_api.py; not a command itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import shutil
import statistics
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from common import quantile


async def hammer(base: str, paths: list[str], seconds: float, concurrency: int,
                 key: str) -> tuple[float, float, float, int, int]:
    """``concurrency`` aiohttp clients cycling through ``paths`` for ``seconds``: requests
    per second, median and p99 latency (seconds), requests, non-200 or failed requests."""
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def client(n: int, session: aiohttp.ClientSession) -> None:
        nonlocal errors
        k = n
        while time.perf_counter() < deadline:
            path = paths[k % len(paths)]
            k += concurrency
            t = time.perf_counter()
            try:
                async with session.get(base + path) as resp:
                    await resp.read()
                    if resp.status != 200:
                        errors += 1
            except aiohttp.ClientError:
                errors += 1
            latencies.append(time.perf_counter() - t)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency),
                                     headers={"x-api-key": key}) as s:
        start = time.perf_counter()
        await asyncio.gather(*(client(n, s) for n in range(concurrency)))
        elapsed = time.perf_counter() - start
    latencies.sort()
    p99 = quantile(latencies, 0.99)
    return (len(latencies) / elapsed, statistics.median(latencies), p99, len(latencies),
            errors)


@dataclass(frozen=True)
class Load:
    """One measurement: throughput, latency percentiles (seconds), failed answers."""

    rps: float
    p50: float
    p99: float
    requests: int
    errors: int  # non-200 answers and socket errors

    def line(self) -> str:
        return (f"{self.rps:8.1f} req/s  p50 {self.p50 * 1000:6.2f} ms  p99 "
                f"{self.p99 * 1000:6.2f} ms  ({self.requests:,} requests, non-200 or "
                f"socket errors {self.errors})")


#: wrk's Lua side: cycles through the paths, sends the key, counts non-200 answers in
#: every thread and prints one JSON line at the end. (wrk's own "Non-2xx or 3xx" count
#: would miss a 2xx other than 200.)
WRK_SCRIPT = """
local paths = %(paths)s
local key = %(key)s
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) non200 = 0; n = 0; wrk.headers["x-api-key"] = key end
function request()
  n = n + 1
  return wrk.format("GET", paths[(n %% #paths) + 1])
end
function response(status, headers, body)
  if status ~= 200 then non200 = non200 + 1 end
end
function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + t:get("non200") end
  local e = summary.errors
  io.write(string.format(
    'WRK-RESULT {"requests": %%d, "duration_us": %%d, "non200": %%d, "socket_errors": %%d,'
    .. ' "p50_us": %%d, "p99_us": %%d}\\n', summary.requests, summary.duration, bad,
    e.connect + e.read + e.write + e.timeout, latency:percentile(50),
    latency:percentile(99)))
end
"""


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII is a valid Lua string literal


async def load_wrk(base: str, paths: list[str], seconds: float, concurrency: int,
                   key: str, tmp: Path) -> Load:
    script = tmp / f"load-{uuid.uuid4().hex}.lua"
    script.write_text(WRK_SCRIPT % {
        "paths": "{" + ", ".join(_lua_string(p) for p in paths) + "}",
        "key": _lua_string(key)})
    proc = await asyncio.create_subprocess_exec(
        "wrk", "-t1", f"-c{concurrency}", f"-d{seconds:g}s", "--latency", "-s", str(script),
        base, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    script.unlink()
    found = [line for line in out.decode().splitlines() if line.startswith("WRK-RESULT ")]
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {out.decode()} {err.decode()}")
    r = json.loads(found[-1].split(" ", 1)[1])
    return Load(rps=r["requests"] / (r["duration_us"] / 1e6), p50=r["p50_us"] / 1e6,
                p99=r["p99_us"] / 1e6, requests=r["requests"],
                errors=r["non200"] + r["socket_errors"])


def _aiohttp_load_process(base: str, paths: list[str], seconds: float, concurrency: int,
                          key: str) -> tuple[float, float, float, int, int]:
    """The fallback load (``hammer``), run in its own (spawned) process, so it does not
    share a core's event loop with anything else of the benchmark."""
    return asyncio.run(hammer(base, paths, seconds, concurrency, key))


async def load_aiohttp(pool: ProcessPoolExecutor, base: str, paths: list[str],
                       seconds: float, concurrency: int, key: str) -> Load:
    rps, p50, p99, requests, errors = await asyncio.get_running_loop().run_in_executor(
        pool, _aiohttp_load_process, base, paths, seconds, concurrency, key)
    return Load(rps, p50, p99, requests, errors)


class LoadTool:
    """wrk when installed (and not overridden), else aiohttp in a separate process."""

    def __init__(self, choice: str, tmp: Path) -> None:
        self.name = "wrk" if choice == "wrk" or (choice == "auto" and shutil.which("wrk")) \
            else "aiohttp"
        if self.name == "wrk" and not shutil.which("wrk"):
            raise SystemExit("--client wrk: wrk is not installed (apt-get install wrk)")
        self.tmp = tmp
        self.pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))

    def describe(self) -> str:
        return ("wrk (one thread, Lua script counting non-200s), its own process"
                if self.name == "wrk" else "aiohttp client in its own process (wrk not found)")

    async def run(self, base: str, paths: list[str], seconds: float, concurrency: int,
                  key: str) -> Load:
        if self.name == "wrk":
            return await load_wrk(base, paths, seconds, concurrency, key, self.tmp)
        return await load_aiohttp(self.pool, base, paths, seconds, concurrency, key)

    def close(self) -> None:
        self.pool.shutdown()


def add_load_args(parser: argparse.ArgumentParser) -> None:
    """``--seconds`` (of load per case) and ``--concurrency`` (connections at once)."""
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
