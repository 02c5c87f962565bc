"""The tick: one observation of one token, validated in exactly one place.

Ticks arrive as JSON (one per Kafka record on ``depeg.ticks``) or as rows of the canonical
CSV (``ts,chain,token,symbol,price_usd,peg_usd,slippage_bps``, optionally followed by
``oracle_price_usd``). Both go through
:func:`make_tick`, so a value the daemon refuses is refused by ``replay`` too, for the
same reason.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Final

import msgspec

from . import tick as _tick
from .chains import is_chain, normalize_address
from .timefmt import parse_ts

#: Largest tick record the monitor accepts. Real Kafka refuses records over 1 MB by
#: default; a tick is a few hundred bytes, so anything near this is garbage.
MAX_TICK_BYTES: Final = 64 * 1024

CSV_HEADER: Final = ("ts", "chain", "token", "symbol", "price_usd", "peg_usd", "slippage_bps")
#: The canonical header plus the optional oracle column (what the producers write).
CSV_HEADER_WITH_ORACLE: Final = (*CSV_HEADER, "oracle_price_usd")
#: ``source`` of the observations the cross-chain spread stage publishes (monitor.spread).
SPREAD_SOURCE: Final = "spread"


#: Every reason a tick is refused: the dead-letter header and the metric label.
BAD_TICK_REASONS: Final = (
    "empty", "too_large", "bad_json", "bad_schema", "bad_ts", "unknown_chain", "bad_address",
    "no_observation", "bad_price", "bad_peg", "bad_slippage", "bad_oracle_price",
    "bad_spread",
    "bad_key",  # a record whose Kafka key is not its own chain:token (monitor daemon)
    "future_ts",  # dated past model.future_tolerance_seconds ahead (monitor.timesanity)
    "late",  # older than model.lateness_seconds behind its token's newest tick (daemon)
)


class BadTick(ValueError):
    """A tick that cannot be used; ``reason`` is a short code fit for a metric label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class TickStruct(msgspec.Struct, frozen=True, gc=False):
    """A validated observation. Prices keep their original decimal text for the events.

    The pure-Python build's :data:`Tick`, and the form a held tick takes in a saved
    state in both builds (``engine/saved.py``). The compiled build's is
    :class:`monitor.tick.Tick`, the same fields in the same order."""

    ts: float
    chain: str
    token: str
    symbol: str
    price: float | None = None
    price_text: str | None = None
    peg: float | None = None
    peg_text: str | None = None
    slippage_bps: float | None = None
    oracle_price: float | None = None
    source: str = ""
    oracle_text: str | None = None
    #: Cross-chain spread of the token's asset, in bp of peg (published by the spread
    #: stage, never by a market producer; see docs/cross-chain-spread.md).
    cross_chain_spread_bps: float | None = None
    #: How many chains that spread covered (under two the spread is None); set on every
    #: spread observation, so a spread tick is recognisable even when it has no spread.
    cross_chain_chains: int | None = None

    @property
    def key(self) -> str:
        return f"{self.chain}:{self.token}"


def tick_class() -> type[TickStruct] | type[_tick.Tick]:
    """The class this process makes its ticks of: :class:`monitor.tick.Tick` when that
    module runs compiled (the engine reads its fields natively), else
    :class:`TickStruct` (made in C). One per process, never both: the compiled engine
    refuses any other class where it expects its native one."""
    # An extension module's file (a sourceless install's .pyc is not compiled).
    compiled = getattr(_tick, "__file__", "").endswith((".so", ".pyd"))
    return _tick.Tick if compiled else TickStruct


if TYPE_CHECKING:
    # Checked as the class the compiled modules are built against; the struct is held to
    # the same shape by tests/test_tick.py.
    from .tick import Tick as Tick
else:
    Tick = tick_class()


def replace_tick(tick: Tick, **changes: object) -> Tick:
    """A copy of ``tick`` with ``changes`` (``msgspec.structs.replace`` for either build's
    class)."""
    fields: dict[str, Any] = {name: getattr(tick, name) for name in _tick.FIELDS}
    fields.update(changes)
    return Tick(**fields)


Number = str | float | int | None


class TickMessage(msgspec.Struct, forbid_unknown_fields=False):
    """The wire shape of a tick on ``depeg.ticks`` (DESIGN.md, "Fixed contracts")."""

    ts: str | float | int
    chain: str
    token: str
    symbol: str = ""
    price_usd: Number = None
    peg_usd: Number = None
    slippage_bps: Number = None
    oracle_price_usd: Number = None
    source: str = ""
    cross_chain_spread_bps: Number = None
    cross_chain_chains: int | None = None


#: Decodes a record value (one JSON line) into a :class:`TickMessage`; what it cannot
#: decode, :func:`decode_tick` words as a :class:`BadTick`.
tick_decoder = msgspec.json.Decoder(TickMessage)


def _number(value: Number, field: str, *, positive: bool) -> tuple[float | None, str | None]:
    """A price-like value -> (float, decimal text); None/"" means not observed."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        raise BadTick(f"bad_{field}", f"{field} must be a number, not a boolean")
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None, None
        try:
            number = float(text)
        except ValueError:
            raise BadTick(f"bad_{field}", f"{field} is not a number: {value[:40]!r}") from None
    else:
        try:
            number = float(value)
        except OverflowError:
            # A JSON integer past a float's range: msgspec hands it over as an int of any
            # size, and the OverflowError escaped as a crash of the daemon's loop (the
            # record, never committed, crashed every restart). Its digits are not quoted:
            # past 4,300 of them ``str`` itself refuses.
            raise BadTick(f"bad_{field}", f"{field} is out of a float's range "
                          f"({int(value).bit_length()}-bit integer)") from None
        text = repr(number) if isinstance(value, float) else str(value)
    if not math.isfinite(number):
        raise BadTick(f"bad_{field}", f"{field} is not finite: {text[:40]!r}")
    if number < 0 or (positive and number == 0):
        rule = "positive" if positive else ">= 0"
        raise BadTick(f"bad_{field}", f"{field} must be {rule}: {text}")
    return number, text


@functools.lru_cache(maxsize=65536)
def _token_key(chain: str, token: str) -> tuple[str, str]:
    """(chain, address) checked and normalised, or :class:`BadTick`. Cached: a feed repeats
    the same few thousand pairs, and normalising each (strip, lower, a regex) cost ~4 % of
    the live monitor's CPU at 1 tick/s. A refusal raises, so it is never cached."""
    chain = chain.strip().lower()
    if not is_chain(chain):
        raise BadTick("unknown_chain", f"unknown chain {chain[:20]!r}")
    address = normalize_address(token)
    if address is None:
        raise BadTick("bad_address", f"malformed token address {token[:60]!r}")
    return chain, address


def make_tick(
    ts: str | float | int,
    chain: str,
    token: str,
    symbol: str,
    price_usd: Number = None,
    peg_usd: Number = None,
    slippage_bps: Number = None,
    oracle_price_usd: Number = None,
    source: str = "",
    cross_chain_spread_bps: Number = None,
    cross_chain_chains: int | None = None,
) -> Tick:
    """Validate raw fields into a :class:`Tick` or raise :class:`BadTick`."""
    try:
        seconds = parse_ts(ts)
    except (ValueError, TypeError, OverflowError) as exc:
        raise BadTick("bad_ts", f"unparseable time {str(ts)[:40]!r}: {exc}") from None
    chain, address = _token_key(chain, token)
    price, price_text = _number(price_usd, "price", positive=True)
    peg, peg_text = _number(peg_usd, "peg", positive=True)
    slippage, _ = _number(slippage_bps, "slippage", positive=False)
    oracle, oracle_text = _number(oracle_price_usd, "oracle_price", positive=True)
    spread, _ = _number(cross_chain_spread_bps, "spread", positive=False)
    if cross_chain_chains is not None and (
            isinstance(cross_chain_chains, bool) or not 0 <= cross_chain_chains <= 64):
        raise BadTick("bad_spread", f"cross_chain_chains must be 0-64: {cross_chain_chains}")
    if spread is not None and (cross_chain_chains is None or cross_chain_chains < 2):
        raise BadTick("bad_spread", "cross_chain_spread_bps needs cross_chain_chains >= 2")
    if (price is None and slippage is None and oracle is None
            and cross_chain_chains is None):
        raise BadTick("no_observation",
                      "tick carries no price, slippage, oracle price or cross-chain spread")
    # Positional: the compiled build's native class parses 14 keywords in ~1.6 µs from
    # here, against ~0.28 µs for the same arguments by position (the struct: 0.21, 0.15).
    return Tick(seconds, chain, address, symbol.strip()[:32], price, price_text, peg,
                peg_text, slippage, oracle, source[:64], oracle_text, spread,
                cross_chain_chains)


def decode_tick(value: bytes | None) -> Tick:
    """A Kafka record value -> Tick, or :class:`BadTick` with the reason."""
    if value is None:
        raise BadTick("empty", "record has no value")
    if len(value) > MAX_TICK_BYTES:
        raise BadTick("too_large", f"record is {len(value)} bytes, limit {MAX_TICK_BYTES}")
    try:
        msg = tick_decoder.decode(value)
    except msgspec.DecodeError as exc:
        reason = "bad_json" if "malformed" in str(exc).lower() else "bad_schema"
        raise BadTick(reason, str(exc)[:200]) from None
    # tick_of(msg), inlined: the live monitor and its bare consumer decode every record.
    return make_tick(
        msg.ts, msg.chain, msg.token, msg.symbol, msg.price_usd, msg.peg_usd,
        msg.slippage_bps, msg.oracle_price_usd, msg.source, msg.cross_chain_spread_bps,
        msg.cross_chain_chains,
    )


def tick_of(msg: TickMessage) -> Tick:
    """A decoded wire message -> Tick, or :class:`BadTick` with the reason (what
    :func:`decode_tick` does after decoding)."""
    return make_tick(msg.ts, msg.chain, msg.token, msg.symbol, msg.price_usd, msg.peg_usd,
                     msg.slippage_bps, msg.oracle_price_usd, msg.source,
                     msg.cross_chain_spread_bps, msg.cross_chain_chains)


def encode_tick(tick: Tick) -> bytes:
    """A Tick -> its wire JSON (what producers publish)."""
    from .timefmt import format_ts

    msg = TickMessage(
        ts=format_ts(tick.ts),
        chain=tick.chain,
        token=tick.token,
        symbol=tick.symbol,
        price_usd=tick.price_text,
        peg_usd=tick.peg_text,
        slippage_bps=tick.slippage_bps,
        oracle_price_usd=tick.oracle_text,
        source=tick.source,
        cross_chain_spread_bps=tick.cross_chain_spread_bps,
        cross_chain_chains=tick.cross_chain_chains,
    )
    return msgspec.json.encode(msg)
