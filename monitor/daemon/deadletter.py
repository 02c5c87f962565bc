"""Dead letters: a bad tick record becomes a small record on ``depeg.ticks.dlq``.

The record says why (``x-dlq-reason`` is the BadTick code, fit for a metric label;
``x-dlq-detail`` the human explanation) and where it came from (source topic, partition,
offset), and keeps only a bounded prefix of the original value: a 10 MB garbage record must
not become a 10 MB dead letter (real Kafka refuses records over ``message.max.bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass

Headers = list[tuple[str, bytes]]

#: Record keys are short ("chain:0x..." is 46 bytes); a longer key is garbage, cut it.
MAX_KEY_BYTES = 256


@dataclass(frozen=True, slots=True)
class DeadLetter:
    key: bytes | None
    value: bytes
    headers: Headers


def dead_letter(
    *, reason: str, detail: str, topic: str, partition: int, offset: int,
    key: bytes | None, value: bytes | None, prefix_bytes: int,
) -> DeadLetter:
    original = value or b""
    headers: Headers = [
        ("x-dlq-reason", reason.encode()),
        ("x-dlq-detail", detail[:500].encode("utf-8", "replace")),
        ("x-dlq-source-topic", topic.encode()),
        ("x-dlq-source-partition", str(partition).encode()),
        ("x-dlq-source-offset", str(offset).encode()),
        ("x-dlq-original-bytes", str(len(original)).encode()),
        ("x-dlq-truncated", b"true" if len(original) > prefix_bytes else b"false"),
    ]
    return DeadLetter(
        key=key[:MAX_KEY_BYTES] if key is not None else None,
        value=original[:prefix_bytes],
        headers=headers,
    )
