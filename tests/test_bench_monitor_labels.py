"""``bench_monitor.py``'s rows name the monitor's settings when they are not the table's.

The README's table is pasted from the scripts' ``BENCH-RESULT`` lines, so a row taken
with a rating snapshot every 15 minutes (which the 1 tick/min row does not allow: its
refresh and snapshot come every 5 minutes) must carry that in its name, or it would read
as the table's row.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_monitor import settings_variant

from monitor.config import Config, GcConfig, KafkaConfig, ModelConfig


def test_the_tables_settings_add_nothing_to_a_rows_name() -> None:
    assert settings_variant(Config()) == ""
    # The defaults passed explicitly are still the defaults.
    assert settings_variant(Config(model=ModelConfig(snapshot_seconds=0),
                                   kafka=KafkaConfig(compression="zstd"))) == ""


def test_each_setting_that_changes_the_monitors_work_is_named() -> None:
    config = Config(model=ModelConfig(snapshot_seconds=900),
                    kafka=KafkaConfig(checkpoint_interval_seconds=60, compression="lz4"),
                    gc=msgspec.structs.replace(GcConfig(), enabled=False))
    variant = settings_variant(config)
    assert "a rating snapshot every 900 s" in variant
    assert "kafka.checkpoint_interval_seconds 60" in variant
    assert "kafka.compression lz4" in variant
    assert "gc policy off" in variant
