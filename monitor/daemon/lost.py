"""Noticing that the broker lost what it had acknowledged (replaced or restarted empty).

The embedded Tansu broker is memory-only, and a real cluster can be rebuilt under a running
service. Either way the ticks topic, the state topic and the group's offsets are gone, and
aiokafka quietly carries on: the group is re-joined, missing topics are auto-created, a
position past the new end is reset to the beginning. The daemon would then start every
token from nothing, or skip every new record as "already processed", without a word.

Two symptoms give it away, and neither happens on a healthy cluster:

- the group's committed offset of a partition is *below* an offset this instance itself
  committed there (offsets never go backwards; a new owner only commits further);
- a fetch reports a high watermark *below* the next offset this instance is about to read
  (records it has read are gone from the log).

On either, the daemon logs ``monitor.broker_lost`` as an error, writes and commits nothing
more (its offsets would point into a log that no longer exists) and exits non-zero, so a
supervisor restarts it against the new cluster (topics are recreated at start).
"""

from __future__ import annotations


class BrokerLost(RuntimeError):
    """The broker no longer has records or offsets it acknowledged to this instance."""


class LossDetector:
    def __init__(self) -> None:
        #: partition -> the furthest offset this instance committed there.
        self._committed: dict[int, int] = {}

    def committed(self, partition: int, offset: int) -> None:
        if offset > self._committed.get(partition, 0):
            self._committed[partition] = offset

    def check_group_offset(self, topic: str, partition: int, group_offset: int) -> None:
        """``group_offset``: where the group resumes ``partition`` now."""
        ours = self._committed.get(partition, 0)
        if group_offset < ours:
            raise BrokerLost(
                f"{topic}[{partition}]: the group's committed offset is {group_offset}, but "
                f"this instance committed {ours} there: the broker lost its offsets "
                "(restarted empty, or the cluster was replaced)")

    @staticmethod
    def check_highwater(topic: str, partition: int, highwater: int | None,
                        next_offset: int) -> None:
        if highwater is not None and highwater < next_offset:
            raise BrokerLost(
                f"{topic}[{partition}] now ends at offset {highwater}, but this instance "
                f"already read up to {next_offset}: the broker lost records it had "
                "(restarted empty, or the cluster was replaced)")
