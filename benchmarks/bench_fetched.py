"""aiokafka's fetcher, record by record: its ``ConsumerRecord`` next to the daemons'
``FetchedRecord`` (monitor/kafka/fetched.py).

    python benchmarks/bench_fetched.py [--records 2000] [--batches 200] [--rounds 5]

One record batch of ``--records`` tick records (real tick JSON, ``chain:token`` keys) is
built once with aiokafka's own batch builder. Then, alternately for ``--rounds`` rounds,
aiokafka's ``PartitionRecords`` unpacks it ``--batches`` times: with no value
deserializer (aiokafka's records, the limit) and with ``fetched_value`` (the daemons'
records). Every step of a fetch is included (CRC check, batch and record parsing, offsets),
but not the network or decompression, which both sides share. Prints CPU µs per record,
min/median/max, and the difference. Every record of both sides is compared field by field
once; a mismatch fails the run.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from aiokafka.consumer import fetcher
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition
from common import fail_on_errors, machine_line, show, spread

from monitor.kafka.fetched import FetchedRecord, fetched_value, install
from monitor.ticks import encode_tick, make_tick

#: aiokafka's isolation level for a plain consumer (``read_uncommitted``).
READ_UNCOMMITTED = 0


def batch_bytes(records: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for n in range(records):
        token = f"0x{n % 1000 + 1:040x}"
        tick = make_tick(1_700_000_000 + n // 1000, "eth", token, f"T{n % 1000}",
                         f"{1 + (n % 7 - 3) / 1e4:.6f}", "1")
        builder.append(n, timestamp=1_700_000_000_000 + n, key=f"eth:{token}".encode(),
                       value=encode_tick(tick), headers=[])
    return bytes(builder.build())


def unpack(raw: bytes, deserializer: Any) -> list[Any]:
    """One fetch's records, as the consumer's ``getmany`` gets them."""
    tp = TopicPartition("depeg.ticks", 0)
    return list(fetcher.PartitionRecords(tp, MemoryRecords(raw), [], 0, None, deserializer,
                                         True, READ_UNCOMMITTED))


def timed(raw: bytes, deserializer: Any, batches: int, records: int) -> float:
    """CPU µs per record over ``batches`` unpacks."""
    started = time.process_time()
    for _ in range(batches):
        unpack(raw, deserializer)
    return (time.process_time() - started) / (batches * records) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2000, help="records in the batch")
    parser.add_argument("--batches", type=int, default=200, help="unpacks per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(machine_line())
    if not install():
        print("the installed aiokafka's PartitionRecords changed shape: nothing to compare")
        return 1
    raw = batch_bytes(args.records)
    fields = FetchedRecord.__struct_fields__
    theirs, ours = unpack(raw, None), unpack(raw, fetched_value)
    errors = sum(type(r) is not FetchedRecord for r in ours) + abs(len(theirs) - len(ours))
    errors += sum(tuple(getattr(a, f) for f in fields) != tuple(getattr(b, f) for f in fields)
                  for a, b in zip(theirs, ours, strict=False))
    aiokafka_us: list[float] = []
    fetched_us: list[float] = []
    for _ in range(args.rounds):
        aiokafka_us.append(timed(raw, None, args.batches, args.records))
        fetched_us.append(timed(raw, fetched_value, args.batches, args.records))
    print(show("aiokafka ConsumerRecord", aiokafka_us, "CPU us/record"))
    print(show("FetchedRecord", fetched_us, "CPU us/record"))
    a, f = spread(aiokafka_us)["median"], spread(fetched_us)["median"]
    print(f"FetchedRecord saves {a - f:.2f} us a record (medians; {f / a:.2f} of aiokafka's)")
    fail_on_errors(errors, "records that differ between the two")
    return 0


if __name__ == "__main__":
    sys.exit(main())
