"""What the monitor writes per byte of ticks in: its topics' records read back, their size
in batches as the producer compresses them, and the estimate for real time, where the
checkpoint interval and the state due policy (not the replay speed) decide how many state
records a tick costs. bench_monitor.py's bytes rows; imported, not run.
"""

from __future__ import annotations

import functools
import random
import statistics
from collections.abc import Callable
from typing import Any

from aiokafka import TopicPartition
from common import emit

from monitor.config import Config


async def topic_records(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every record of ``topic`` (key + value, as a consumer sees them), to its true end."""
    from monitor.kafka.readall import read_whole_topic

    records: list[bytes] = []

    def keep(tp: TopicPartition, batch: list[Any]) -> None:
        records.extend((rec.key or b"") + (rec.value or b"") for rec in batch)

    await read_whole_topic(bootstrap, topic, partitions, keep)
    return records


def batched_size(records: list[bytes], per_batch: int, codec: str) -> float:
    """Estimated bytes per record on the broker when the producer sends ``per_batch``
    records per batch with ``codec``: each group compressed with the codec library aiokafka
    uses (cramjam), plus a v2 batch header (61 B) and ~8 B of per-record framing."""
    import cramjam

    codecs: dict[str, Callable[[bytes], Any]] = {
        "zstd": cramjam.zstd.compress, "lz4": cramjam.lz4.compress,
        "snappy": cramjam.snappy.compress, "gzip": cramjam.gzip.compress}
    compress = codecs.get(codec, bytes)  # "none": the records as they are
    per_batch = max(per_batch, 1)
    total = 0
    for i in range(0, len(records), per_batch):
        group = records[i:i + per_batch]
        total += len(bytes(compress(b"".join(group)))) + 61 + 8 * len(group)
    return total / max(len(records), 1)


def simulate_states(tokens: int, spacing: float, partitions: int, interval: float,
                    every_ticks: int, max_age: float, seed: int = 1) -> tuple[float, float]:
    """(ticks per state record, state records per partition batch) in real time, from the
    daemon's own due policy (``monitor/daemon/coverage.py``) driven by a simulated clock:
    each token ticks every ``spacing`` seconds at its own random phase, a checkpoint every
    ``interval`` seconds writes the due tokens' states, one batch per partition.
    ``every_ticks=1, max_age=0`` is the policy before it (every token that ticked, at
    every checkpoint)."""
    from monitor.daemon.coverage import Uncovered

    rng = random.Random(seed)
    phases = sorted((rng.uniform(0, spacing), j) for j in range(tokens))
    # Warm up for one full cycle of the slowest rule, then count over several.
    cycle = min(max_age + interval, every_ticks * spacing, 1e12) + interval + spacing
    warm, end = 2 * cycle, 8 * cycle
    parts = [Uncovered() for _ in range(partitions)]
    offsets = [0] * partitions
    # Start mid-cycle, each token at its own point: tokens that all started together would
    # stay due together, in bursts that compress better than a long-running service's.
    span = min(max_age, (every_ticks - 1) * spacing)
    for _, j in phases:
        age = rng.uniform(0, span)
        held = int(age // spacing)
        if held:
            p = j % partitions
            parts[p].took(str(j), offsets[p], -age)
            parts[p].count[str(j)] = held
    ticks = states = batches = 0
    next_checkpoint = interval
    period = 0
    while next_checkpoint < end:
        for phase, j in phases:
            t = period * spacing + phase
            while t >= next_checkpoint:
                for part in parts:
                    due = part.due(next_checkpoint, every_ticks, max_age)
                    part.written(due)
                    if due and next_checkpoint >= warm:
                        states += len(due)
                        batches += 1
                next_checkpoint += interval
            p = j % partitions
            parts[p].took(str(j), offsets[p], t)
            offsets[p] += 1
            ticks += t >= warm
        period += 1
    return ticks / max(states, 1), states / max(batches, 1)


def real_time_bytes(state_records: list[bytes], rating_share: float, *, interval: float,
                    every_ticks: int, max_age: float, spacing: int, tokens: int,
                    partitions: int, tick_size: float, codec: str) -> tuple[float, float, float]:
    """(bytes out per byte of ticks in, state bytes per record, ticks per state record) in
    real time with this checkpoint interval and due policy (``simulate_states``): this
    run's state records recompressed in batches of the simulated size."""
    per_state, per_batch = simulate_states(tokens, spacing, partitions, interval,
                                           every_ticks, max_age)
    state_each = batched_size(state_records, round(per_batch), codec)
    return state_each / (per_state * tick_size) + rating_share, state_each, per_state


def bytes_row(name: str, total: int, spacing: int, n_tokens: int, partitions: int,
              config: Config, ticks_bytes: int, states: list[bytes], ratings: list[bytes],
              ratios: list[float], full_states: list[bytes]) -> None:
    """Print and emit a row's bytes per byte of ticks in: ``ratios`` as stored in this
    replay-speed run, and the estimate for real time from its last round's ``states`` and
    ``ratings`` (with ``full_states``, an earlier row's fuller records, when this run's
    tokens are young)."""
    # Real time (not this replay-speed run): each checkpoint interval the tokens that
    # are due write one state record each, in one batch per partition (simulated with
    # the daemon's own policy); rating snapshots trickle out a few per monitor batch.
    # Batches that small compress less, so the estimate recompresses this run's
    # records in groups of the real-time batch size.
    tick_size = ticks_bytes / total
    codec = config.kafka.compression
    rating_batch = round(n_tokens / config.model.refresh_seconds
                         * config.kafka.batch_timeout_ms / 1000 / partitions)
    rating_share = (len(ratings) / total
                    * batched_size(ratings, rating_batch, codec) / tick_size)

    real_time = functools.partial(real_time_bytes, states, rating_share,
                                  spacing=spacing, tokens=n_tokens,
                                  partitions=partitions, tick_size=tick_size, codec=codec)
    interval = config.kafka.checkpoint_interval_seconds
    # Code before the due policy has neither key: it wrote at every checkpoint.
    every = getattr(config.kafka, "state_every_ticks", 1)
    max_age = getattr(config.kafka, "state_max_age_seconds", 0.0)
    policy = (f"checkpoint_interval_seconds={interval:g}, state_every_ticks={every}, "
              f"state_max_age_seconds={max_age:g}")
    live, state_each, per_state = real_time(interval=interval, every_ticks=every,
                                            max_age=max_age)
    print(f"bytes to state + ratings per byte of ticks in: median "
          f"{statistics.median(ratios):.3f} in this run; in real time with {policy}, "
          f"compression {codec}: ~{live:.2f} (a token's state record ~{state_each:,.0f} "
          f"B on the broker per {per_state:.1f} ticks of {tick_size:.0f} B; ratings "
          f"{rating_share:.2f})", flush=True)
    variants = {"every checkpoint (before the due policy)": (1, 0.0)}
    variants.update({f"max age {age:g} s": (every, age) for age in (300.0, 600.0, 1800.0)
                     if age != max_age})
    others = "; ".join(
        f"{variant}: ~{real_time(interval=interval, every_ticks=n, max_age=age)[0]:.2f}"
        for variant, (n, age) in variants.items() if (n, age) != (every, max_age))
    print(f"  real time with other policies: {others}", flush=True)
    young = bool(full_states) and (statistics.median(map(len, states))
                                   < 0.8 * statistics.median(map(len, full_states)))
    if young:
        fuller = functools.partial(real_time_bytes, full_states, rating_share,
                                   spacing=spacing, tokens=n_tokens,
                                   partitions=partitions, tick_size=tick_size, codec=codec)
        now_full = fuller(interval=interval, every_ticks=every, max_age=max_age)
        before_full = fuller(interval=interval, every_ticks=1, max_age=0.0)
        print(f"  with the fuller state records of the previous row (~{now_full[1]:,.0f} "
              f"B each; this run's tokens are young): ~{now_full[0]:.2f}; every "
              f"checkpoint (before the due policy): ~{before_full[0]:.2f}", flush=True)
        others += (f"; with full-ring states ~{now_full[0]:.2f}, every checkpoint "
                   f"~{before_full[0]:.2f}")
    emit(f"bytes to state + ratings topics per byte of ticks in, 1 tick per token per "
         f"{name}", unit="B/B", limit_name="", limit=None, project=ratios,
         ratio=statistics.median(ratios), target="<= 1", met=max(ratios) <= 1.0,
         note=f"on the broker, compression {codec}; real time with {policy}: "
              f"~{live:.2f} ({others})")
