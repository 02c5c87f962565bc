"""An Ethereum JSON-RPC client for the on-chain adapters: batches, failover, one block per poll.

One :class:`RpcClient` per chain holds several endpoint URLs in priority order. Each poll of
an adapter:

1. :meth:`RpcClient.pin_block` asks every endpoint for ``eth_blockNumber`` at once, drops
   endpoints that fail or lag more than ``max_lag_blocks`` behind the best head, and pins
   the poll to ``best head - confirmations`` on the first endpoint left;
2. every read of that poll (:meth:`RpcClient.batch`) carries that block number as its block
   tag, so the price, the liquidity and the oracle answer of one tick describe one state of
   the chain even when a request fails over to another endpoint mid-poll.

A request that times out, gets an HTTP error, an unparsable reply, or a node-side error
that is not about the call itself (everything but an execution revert) counts against the
endpoint: it is retried on the next endpoint, and an endpoint that keeps failing is put in
a cooldown that grows with each failure (exponential backoff with jitter) before it is
tried again. A per-endpoint token bucket keeps us under the provider's rate limit. Metrics
are per ``{chain}#{index}``, never per URL (URLs often carry an API key).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from monitor import metrics
from monitor.logs import get_logger

log = get_logger(__name__)

#: A JSON-RPC call: method and params.
Call = tuple[str, list[Any]]


class RpcError(Exception):
    """The node answered the call with an error about the call itself (e.g. a revert)."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method}: {code} {message}")
        self.code = code
        self.message = message


class EndpointFailure(Exception):
    """One endpoint could not serve a request (timeout, HTTP error, bad reply, lag)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


class NoEndpointAvailable(Exception):
    """Every endpoint of the chain failed or is cooling down."""


def _is_call_error(code: int, message: str) -> bool:
    """A revert or a bad argument is the call's fault: another endpoint would say the same."""
    text = message.lower()
    return code == 3 or "revert" in text or "invalid opcode" in text or code == -32602


@dataclass
class _Bucket:
    """Token bucket: ``rate`` requests per second, bursts up to ``rate`` (at least 1)."""

    rate: float
    tokens: float = 0.0
    stamp: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.tokens = max(1.0, self.rate)

    async def take(self) -> None:
        if self.rate <= 0:
            return
        while True:
            now = time.monotonic()
            self.tokens = min(max(1.0, self.rate), self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / self.rate)  # rate limiting, by design


@dataclass
class Endpoint:
    url: str
    label: str
    bucket: _Bucket
    failures: int = 0
    cooldown_until: float = 0.0
    head: int | None = None

    def available(self, now: float) -> bool:
        return now >= self.cooldown_until


@dataclass(frozen=True)
class RpcSettings:
    timeout_seconds: float = 10.0
    #: Rounds over all endpoints before a request gives up.
    retries: int = 3
    backoff_base_seconds: float = 0.5
    backoff_max_seconds: float = 60.0
    #: Requests per second per endpoint (0 = unlimited).
    rate_limit: float = 25.0
    #: An endpoint whose head is this many blocks behind the best one is not used.
    max_lag_blocks: int = 5
    #: Calls per JSON-RPC batch request (providers cap batches, often at 100).
    max_batch: int = 100


class RpcClient:
    """Failover JSON-RPC over aiohttp for one chain (see module doc)."""

    def __init__(self, chain: str, urls: Sequence[str], settings: RpcSettings | None = None,
                 session: aiohttp.ClientSession | None = None) -> None:
        if not urls:
            raise ValueError(f"chain {chain}: no RPC URLs configured")
        self.chain = chain
        self.settings = settings or RpcSettings()
        self.endpoints = [
            Endpoint(url, f"{chain}#{i}", _Bucket(self.settings.rate_limit))
            for i, url in enumerate(urls)
        ]
        self._session = session
        self._own_session = session is None
        self._ids = itertools.count(1)
        self._preferred = 0
        #: Block number the current poll reads at (set by pin_block).
        self.block: int | None = None

    async def __aenter__(self) -> RpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    # ---- one HTTP request to one endpoint ---------------------------------------------
    async def _post(self, ep: Endpoint, calls: Sequence[Call]) -> list[Any]:
        """Send ``calls`` as one batch to ``ep``; results in order, RpcError per failed call."""
        await ep.bucket.take()
        ids = [next(self._ids) for _ in calls]
        body = [{"jsonrpc": "2.0", "id": i, "method": m, "params": p}
                for i, (m, p) in zip(ids, calls, strict=True)]
        metrics.RPC_CALLS.labels(self.chain, ep.label).inc(len(calls))
        started = time.monotonic()
        try:
            timeout = aiohttp.ClientTimeout(total=self.settings.timeout_seconds)
            async with self._http().post(ep.url, json=body, timeout=timeout) as resp:
                if resp.status != 200:
                    raise EndpointFailure("http", f"HTTP {resp.status}")
                reply = await resp.json(content_type=None)
        except TimeoutError as exc:
            raise EndpointFailure("timeout", f"no reply in {self.settings.timeout_seconds}s") \
                from exc
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise EndpointFailure("transport", f"{type(exc).__name__}: {str(exc)[:200]}") \
                from exc
        finally:
            metrics.RPC_SECONDS.labels(self.chain, ep.label).observe(time.monotonic() - started)
        if isinstance(reply, dict) and "error" in reply:  # whole batch refused
            err = reply["error"] or {}
            raise EndpointFailure("rpc", f"{err.get('code')} {str(err.get('message'))[:200]}")
        if not isinstance(reply, list):
            raise EndpointFailure("transport", f"reply is not a JSON-RPC batch: {str(reply)[:200]}")
        by_id = {item.get("id"): item for item in reply if isinstance(item, dict)}
        results: list[Any] = []
        for i, (method, _) in zip(ids, calls, strict=True):
            item = by_id.get(i)
            if item is None:
                raise EndpointFailure("transport", f"batch reply lacks id {i} ({method})")
            if "error" in item:
                err = item["error"] or {}
                code, message = int(err.get("code", 0)), str(err.get("message", ""))
                if not _is_call_error(code, message):
                    raise EndpointFailure("rpc", f"{method}: {code} {message[:200]}")
                results.append(RpcError(method, code, message))
            else:
                results.append(item.get("result"))
        return results

    def _order(self) -> list[Endpoint]:
        """Endpoints to try: the preferred one first, then by priority; cooling ones last."""
        now = time.monotonic()
        eps = self.endpoints[self._preferred:] + self.endpoints[:self._preferred]
        return sorted(eps, key=lambda e: not e.available(now))

    def _failed(self, ep: Endpoint, failure: EndpointFailure) -> None:
        ep.failures += 1
        metrics.RPC_ERRORS.labels(self.chain, ep.label, failure.kind).inc()
        s = self.settings
        delay = min(s.backoff_max_seconds, s.backoff_base_seconds * 2 ** (ep.failures - 1))
        ep.cooldown_until = time.monotonic() + delay * random.uniform(0.5, 1.0)
        log.warning("rpc.endpoint_failed", chain=self.chain, endpoint=ep.label,
                    kind=failure.kind, detail=str(failure)[:300], failures=ep.failures)

    def _succeeded(self, ep: Endpoint) -> None:
        if ep.failures:
            log.info("rpc.endpoint_recovered", chain=self.chain, endpoint=ep.label)
        ep.failures = 0
        ep.cooldown_until = 0.0

    async def _request(self, calls: Sequence[Call], *, min_head: int | None = None) -> list[Any]:
        """Send one batch with failover and retries; endpoints behind ``min_head`` are skipped."""
        last: Exception | None = None
        for attempt in range(max(1, self.settings.retries)):
            for ep in self._order():
                if min_head is not None and ep.head is not None and ep.head < min_head:
                    continue
                try:
                    results = await self._post(ep, calls)
                except EndpointFailure as exc:
                    self._failed(ep, exc)
                    metrics.RPC_FAILOVERS.labels(self.chain).inc()
                    last = exc
                    continue
                self._succeeded(ep)
                self._preferred = self.endpoints.index(ep)
                return results
            if attempt + 1 < self.settings.retries:
                await asyncio.sleep(min(self.settings.backoff_max_seconds,
                                        self.settings.backoff_base_seconds * 2 ** attempt))
        raise NoEndpointAvailable(f"chain {self.chain}: every RPC endpoint failed ({last})")

    # ---- the API the adapters use -------------------------------------------------------
    async def pin_block(self, confirmations: int = 0) -> int:
        """Fix the block this poll reads at (see module doc); returns it."""

        async def head(ep: Endpoint) -> int | None:
            if not ep.available(time.monotonic()):
                return None
            try:
                [value] = await self._post(ep, [("eth_blockNumber", [])])
                number = int(value, 16)
            except EndpointFailure as exc:
                self._failed(ep, exc)
                return None
            except (TypeError, ValueError):
                self._failed(ep, EndpointFailure("transport", "bad eth_blockNumber reply"))
                return None
            ep.head = number
            metrics.RPC_HEAD_BLOCK.labels(self.chain, ep.label).set(number)
            return number

        heads = await asyncio.gather(*(head(ep) for ep in self.endpoints))
        known = [h for h in heads if h is not None]
        if not known:
            raise NoEndpointAvailable(f"chain {self.chain}: no endpoint reports a head block")
        best = max(known)
        for ep, h in zip(self.endpoints, heads, strict=True):
            if h is not None and best - h > self.settings.max_lag_blocks:
                self._failed(ep, EndpointFailure("lagging", f"head {h} is {best - h} blocks "
                                                            f"behind {best}"))
                ep.head = None
        fresh = [i for i, (ep, h) in enumerate(zip(self.endpoints, heads, strict=True))
                 if h is not None and ep.head is not None]
        if self._preferred not in fresh:
            metrics.RPC_FAILOVERS.labels(self.chain).inc()
            self._preferred = fresh[0]
        self.block = max(0, best - confirmations)
        return self.block

    def tag(self) -> str:
        """The block tag of the pinned block (``latest`` before any pin)."""
        return hex(self.block) if self.block is not None else "latest"

    async def batch(self, calls: Sequence[Call]) -> list[Any]:
        """Results of ``calls`` in order (an :class:`RpcError` in place of a reverted call)."""
        out: list[Any] = []
        for start in range(0, len(calls), self.settings.max_batch):
            chunk = calls[start:start + self.settings.max_batch]
            out.extend(await self._request(chunk, min_head=self.block))
        return out

    async def call(self, method: str, *params: Any) -> Any:
        [result] = await self.batch([(method, list(params))])
        if isinstance(result, RpcError):
            raise result
        return result

    def eth_call(self, to: str, data: str) -> Call:
        """An ``eth_call`` at the pinned block, for :meth:`batch`."""
        return ("eth_call", [{"to": to, "data": data}, self.tag()])
