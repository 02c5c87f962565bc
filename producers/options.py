"""The options several producers share, apart from the machinery that runs them.

Each producer's ``--help`` builds its parser from these: they must stay importable without
the Kafka client, asyncio or the logging stack (tests/test_cli_startup.py checks it).
"""

from __future__ import annotations

import argparse

from monitor.commands import add_bootstrap_servers


def parse_speed(text: str) -> float | None:
    """``60x`` -> 60.0 (event time runs 60 times faster than wall time); ``max`` -> None."""
    value = text.strip().lower()
    if value == "max":
        return None
    try:
        factor = float(value.removesuffix("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"speed must look like 60x (times real time) or max, not {text!r}"
        ) from None
    if not factor > 0:
        raise argparse.ArgumentTypeError(f"speed must be positive, not {text!r}")
    return factor


def add_kafka_arguments(parser: argparse.ArgumentParser,
                        topic: str = "kafka.ticks_topic") -> None:
    add_bootstrap_servers(parser, "Kafka brokers (default: kafka.bootstrap_servers / "
                                  "DEPEG_KAFKA__BOOTSTRAP_SERVERS, else the broker of "
                                  f"a `depeg-monitor run` on this machine); publishes to "
                                  f"{topic}; missing topics are created with "
                                  "kafka.partitions")
