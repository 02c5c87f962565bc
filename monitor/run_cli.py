"""``depeg-monitor run``: its command line; the supervisor itself is monitor/run.py.

Apart from it so that ``depeg-monitor run --help`` does not import aiokafka, the embedded
broker and every service: monitor/run.py is imported when the command runs
(benchmarks/bench_cli.py).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .commands import Command, add_bootstrap_servers

if TYPE_CHECKING:
    from .config import Config

DESCRIPTION = """\
Run the whole system in one process. Without a broker configured (kafka.bootstrap_servers
or --bootstrap-servers) an embedded Tansu broker is started on 127.0.0.1 (port
kafka.embedded_port, 19092 by default, 0 = any free port); it keeps data in memory only, so
it is for one machine, demos and tests. Topics are created if missing ([kafka] partitions,
replication_factor and topic names). Then every registered service starts: the monitor,
and as installed the delivery worker, the store writer ([storage] url) and the HTTP API
([api] host/port, or --port). Under run, /metrics, /healthz and /readyz are served on the
API port (metrics.port is for the processes started alone). Runtime files (SQLite database,
secret key, the run.json state file other commands use to find this broker) are in the
data directory (--data-dir, storage.data_dir). `depeg-monitor config --defaults` lists
every setting; each can also be set as DEPEG_<SECTION>__<FIELD>.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_bootstrap_servers(parser, "use this Kafka cluster instead of the embedded broker")
    parser.add_argument("--only", metavar="NAME[,NAME]",
                        help="run only these services (default: all registered)")
    parser.add_argument("--port", type=int, metavar="PORT",
                        help="HTTP API port, also serving /metrics (api.port, default 8080)")


def _run(args: argparse.Namespace, config: Config) -> int:
    from .run import run_command

    return run_command(args, config)


command = Command(
    name="run",
    help="run everything in one process (embedded broker unless one is configured)",
    add_arguments=add_arguments,
    run=_run,
    description=DESCRIPTION,
)
