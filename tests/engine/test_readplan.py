"""The pure build's planned reads (``readplan.read_plan``) give ``read_fields``' very floats.

Compared by ``repr`` (-0.0 and 0.0 differ, a last bit differs): the replay's and the
daemon's outputs are compared byte for byte, so a last-bit difference is a failure.
Windows filled by random ticks (dense, sparse, long gaps: a ring that wraps, rolls over and
is empty; deviations below both persistence lines, so LOW and HIGH hold time), read at
random times with random specs, the engine's own specs (with and without detail) and
their picks.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import ModelConfig
from monitor.engine.params import params
from monitor.engine.readings import read_fields
from monitor.engine.readplan import make_plan, read_plan
from monitor.engine.windows import COV, DEV, HIGH, LOW, MAX, MIN, R2, TICKS, Windows

ALL_FIELDS = (DEV, COV, LOW, HIGH, R2, TICKS, MIN, MAX)

deviations = st.one_of(
    st.floats(-0.2, 0.05, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, -0.005, -0.01, -0.02, -0.05, 0.005, 0.0025]),
)
ticks_strategy = st.lists(
    st.tuples(st.floats(0, 6 * 3600, allow_nan=False), deviations), min_size=0, max_size=300,
).map(lambda xs: sorted(xs, key=lambda x: x[0]))
specs = st.lists(
    st.tuples(st.sampled_from([60.0, 300.0, 900.0, 3600.0, 4000.0, 30.0, 90.0]),
              st.lists(st.sampled_from(ALL_FIELDS), min_size=1, max_size=8, unique=True)
              .map(tuple)),
    min_size=1, max_size=5)
nows = st.one_of(st.integers(0, 200).map(lambda n: n * 60.0),
                 st.floats(0, 12000, allow_nan=False))


def filled(ticks: list[tuple[float, float]], size: int,
           lines: tuple[float, float] = (0.005, 0.01)) -> Windows:
    w = Windows(60, size, *lines, 21600.0)
    for ts, dev in ticks:
        w.add_price(ts, dev)
    return w


def same(a: object, b: object) -> bool:
    return [repr(x) for x in a] == [repr(x) for x in b]  # type: ignore[attr-defined]


@settings(max_examples=400, deadline=None)
@given(ticks=ticks_strategy, size=st.sampled_from([61, 60, 7]), after=nows, spec=specs,
       lines=st.sampled_from([(0.005, 0.01), (0.01, 0.005)]))
def test_plan_equals_read_fields(ticks: list[tuple[float, float]], size: int, after: float,
                                 spec: list[tuple[float, tuple[int, ...]]],
                                 lines: tuple[float, float]) -> None:
    """Also with the high line above the low one (HIGH then holds time LOW lacks)."""
    w = filled(ticks, size, lines)
    now = (ticks[-1][0] if ticks else 0.0) + after
    reference = read_fields(w, now, spec)
    assert same(read_plan(w, now, make_plan(spec)), reference)
    # Picks of some positions, in another order.
    wanted = list(reversed(range(len(reference))))[::2]
    assert same(read_plan(w, now, make_plan(spec, wanted)), [reference[k] for k in wanted])


@settings(max_examples=300, deadline=None)
@given(ticks=ticks_strategy, after=nows)
def test_the_engine_plans_equal_its_reads(ticks: list[tuple[float, float]],
                                          after: float) -> None:
    p = params(ModelConfig())
    w = filled(ticks, 61)
    now = (ticks[-1][0] if ticks else 0.0) + after
    assert same(read_plan(w, now, p.reads_plan), read_fields(w, now, p.reads))
    spec, picks = p.detail_reads
    assert same(read_plan(w, now, p.detail_plan), picks(read_fields(w, now, spec)))


def test_low_and_high_with_time_are_summed() -> None:
    """A window with time below both lines: LOW and HIGH are summed, not taken as zeros
    (fails if the all-zero short-cut ignores ``low_b``/``high_b``)."""
    w = filled([(0.0, -0.05), (150.0, -0.02), (290.0, 0.0), (400.0, -0.03)], 61)
    spec = [(3600.0, (LOW, HIGH, DEV)), (300.0, (HIGH, MIN, MAX, LOW))]
    for now in (420.0, 480.0, 600.0, 3700.0):
        got = read_plan(w, now, make_plan(spec))
        assert same(got, read_fields(w, now, spec))
    assert read_plan(w, 420.0, make_plan(spec))[0] > 0.0
