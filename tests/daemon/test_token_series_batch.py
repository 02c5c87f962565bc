"""``TokenSeries.observe_all`` (the daemon's one call per batch of snapshots) against the
truth, ``observe`` called once per snapshot: the same per-token series, labels and values
on ``/metrics`` and the same count of snapshots dropped over the cap, for any sequence of
snapshots (tokens over the cap, snapshots lacking a deviation, a price or a signal, a token
forgotten and seen again) cut into batches anywhere."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor import metrics
from monitor.metrics import SIGNALS, TOKEN_SERIES_DROPPED
from monitor.records import RatingSnapshot, SignalValue
from monitor.token_series import TokenSeries

TOKENS = [(chain, f"0x{i:040x}") for i in range(7) for chain in ("eth", "arb")][:9]


def _snapshot(token: int, n: int, missing: int) -> RatingSnapshot:
    chain, address = TOKENS[token]
    names = list(SIGNALS) if missing != 3 else list(SIGNALS)[1:]  # a signal missing
    return RatingSnapshot(
        chain=chain, token_address=address, symbol=f"T{token}",
        timestamp="2026-01-01T00:00:00Z", rating=float(n % 100), tier="watch",
        band_tier="watch", price_usd=None if missing == 1 else f"0.{990 + n % 9}",
        peg_usd="1", deviation_pct=None if missing == 2 else -0.1 * (n % 7),
        staleness_seconds=float(n % 5), metrics={"stale": float(n % 2)},
        signals=[SignalValue(name=s, value=0.1, score=(n % 10) / 10, weight=10,
                             contribution=1.0, observed=True) for s in names])


def _exposition(series: TokenSeries) -> list[tuple[str, list[tuple[str, dict[str, str], float]]]]:
    return [(f.name, [(s.name, s.labels, s.value) for s in f.samples])
            for f in series.collect()]


def _dropped() -> float:
    value = metrics.registry.get_sample_value("depeg_token_series_dropped_total")
    assert value is not None
    return value


# A step: (token, missing-value kind 0-3, cut the batch after it, forget the token first).
step = st.tuples(st.integers(0, len(TOKENS) - 1), st.integers(0, 3), st.booleans(),
                 st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.lists(step, max_size=60), st.integers(0, 6))
def test_observe_all_matches_observe(steps: list[tuple[int, int, bool, bool]],
                                     cap: int) -> None:
    one = TokenSeries(cap, dropped=TOKEN_SERIES_DROPPED)
    batched = TokenSeries(cap, dropped=TOKEN_SERIES_DROPPED)
    before = _dropped()
    dropped_one = 0
    batch: list[RatingSnapshot] = []
    for n, (token, missing, cut, forget) in enumerate(steps):
        if forget:
            batched.observe_all(batch)
            batch = []
            one.forget(*TOKENS[token])
            batched.forget(*TOKENS[token])
        snap = _snapshot(token, n, missing)
        dropped_one += not one.observe(snap)
        batch.append(snap)
        if cut:
            batched.observe_all(batch)
            batch = []
    batched.observe_all(batch)
    assert _exposition(batched) == _exposition(one)
    # ``observe`` counted its drops one by one, ``observe_all`` as many again in bulk.
    assert _dropped() - before == 2 * dropped_one


def test_a_batch_over_the_cap_counts_each_dropped_snapshot() -> None:
    series = TokenSeries(2, dropped=TOKEN_SERIES_DROPPED)
    before = _dropped()
    series.observe_all([_snapshot(t, n, 0) for n, t in enumerate([0, 1, 2, 3, 2, 0, 4])])
    assert _dropped() - before == 4  # tokens 2, 3, 2 again and 4; 0 and 1 have series
    assert [s.labels["token"] for s in series.collect()[0].samples] == [
        TOKENS[0][1], TOKENS[1][1]]
