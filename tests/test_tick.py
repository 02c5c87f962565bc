"""The two tick classes hold one shape: the pure build's msgspec struct
(``monitor.ticks.TickStruct``) and the class the compiled build compiles natively
(``monitor.tick.Tick``, run here as Python). What either build's code may rely on: the
fields and their order, the defaults, positional and keyword construction, equality by
value, a hash that agrees with it, ``key`` and ``repr``."""

from __future__ import annotations

import inspect
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from monitor import tick as native
from monitor.config import ModelConfig
from monitor.engine import Engine
from monitor.ticks import Tick, TickStruct, make_tick, replace_tick, tick_class

_floats = st.none() | st.floats(allow_nan=False, allow_infinity=False)
_texts = st.none() | st.text(max_size=8)
_values = st.tuples(
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["eth", "base"]),
    st.text(max_size=6), st.text(max_size=6), _floats, _texts, _floats, _texts, _floats,
    _floats, st.text(max_size=6), _texts, _floats, st.none() | st.integers(0, 64))


def test_the_fields_and_defaults_are_the_structs() -> None:
    assert native.FIELDS == TickStruct.__struct_fields__
    params = list(inspect.signature(native.Tick).parameters.values())
    assert [p.name for p in params] == list(native.FIELDS)
    required = len(TickStruct.__struct_fields__) - len(TickStruct.__struct_defaults__)
    assert all(p.default is inspect.Parameter.empty for p in params[:required])
    assert tuple(p.default for p in params[required:]) == TickStruct.__struct_defaults__


@given(_values, _values, st.integers(0, len(native.FIELDS) - 1))
def test_both_classes_compare_hash_and_print_alike(a: tuple[Any, ...], other: tuple[Any, ...],
                                                   field: int) -> None:
    b = a[:field] + other[field:field + 1] + a[field + 1:]  # at most one field differs
    sa, sb = TickStruct(*a), TickStruct(*b)
    na, nb = native.Tick(*a), native.Tick(*b)
    assert (na == nb) == (sa == sb)
    assert na == native.Tick(*a) and hash(na) == hash(native.Tick(*a))
    assert na.key == sa.key
    # The same text after the class name (the struct's is TickStruct).
    assert repr(na).partition("(")[1:] == repr(sa).partition("(")[1:]
    assert tuple(getattr(na, name) for name in native.FIELDS) == msgspec.structs.astuple(sa)


def test_keyword_construction_and_replace_agree() -> None:
    fields: dict[str, Any] = dict(ts=1.0, chain="eth", token="0xab", symbol="USDC",
                                  price=0.99, price_text="0.99", oracle_price=1.0)
    made = native.Tick(**fields)
    assert msgspec.structs.asdict(TickStruct(**fields)) == {
        name: getattr(made, name) for name in native.FIELDS}
    moved = replace_tick(Tick(**fields), token="0xcd", symbol="X")
    assert (moved.token, moved.symbol, moved.price_text) == ("0xcd", "X", "0.99")


def test_a_pure_process_makes_structs_and_the_engine_saves_them_as_before() -> None:
    """Run from the sources (tests do), ticks are the struct, and a held tick saved with
    a state is the struct's encoding in either build (tests/test_compiled_build.py
    compares the compiled build's saved bytes with these)."""
    assert tick_class() is TickStruct
    assert Tick is tick_class()
    tick = make_tick(100, "eth", "0x" + "a" * 40, "USDC", "0.99", "1")
    engine = Engine(ModelConfig())
    engine.process(tick)
    restored = Engine(ModelConfig())
    key = restored.restore_state(engine.export_state(tick.key))
    assert restored.pending(key) == [tick]
