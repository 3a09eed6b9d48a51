"""raptorx: register and inspect metastore tables, show the configuration, load TPC-H.

    raptorx table register <db.table> <url> [--replace [--no-keep-seals]] [--seal]
                           [--partition-type k=type ...] [--no-partition-type-inference]
    raptorx table list [<db>] [--json]
    raptorx table show <db.table> [--partitions] [--json]
    raptorx table analyze <db.table> [--partition k=v[/k2=v2]]
    raptorx table repair <db.table> [--seal]
    raptorx table clean <db.table>
    raptorx config show [--sources] [--json]
    raptorx cache stats [--json]
    raptorx cache clear [--tier T ...]
    raptorx cache invalidate <db.table> [--partition k=v[/k2=v2]]
    raptorx cache warm <db.table> [--columns a,b] [--where "..."] [--no-progress]
    raptorx partition seal|unseal <db.table> <k=v[/k2=v2]>
    raptorx partition add <db.table> <k=v[/k2=v2]> [--location URL] [--seal]
    raptorx tpch load --scale S --warehouse URL
    raptorx locks show [<db>[.<table>]] [--partition k=v ...] [--extended]
    raptorx connect-server [--port N] [--host H]   (Spark Connect server with the jar)
    raptorx jar [--path | --flags]   (the native jar, and the flags that start Spark with it)
    raptorx --version   (the package, its jar's version and build, the pyspark it needs)

Every command but connect-server and jar takes ``--conf-dir DIR`` and ``-p/--property name=value``
(repeatable). An error raptorx_py raises on purpose is printed as one line naming what was
wrong, exit code 2.

One module per command group (``table``, ``config``, ``partition``, ``cache``, ``tpch``,
``locks``, ``jar``; ``connect-server`` lives with its server in ``raptorx_py.connect``), each
with ``add_parser(subparsers)`` and its ``cmd_*`` functions; ``common`` holds what they share,
``progress`` the progress bar and byte sizes.
"""

from __future__ import annotations

import argparse
import os
import sys

from raptorx_py.cli import cache, config, jar, locks, partition, table, tpch
from raptorx_py.errors import RaptorxError

EXAMPLES = """\
examples:
  raptorx table list                                    tables in the metastore
  raptorx table show tpch.lineitem --partitions         columns, partitions, rows
  raptorx table register sales.events s3://bucket/warehouse/events
  raptorx config show --sources                         which files and metastore are used
  raptorx config show -p cache.enabled=true             every property, with one overridden
  raptorx tpch load --scale 0.1 --warehouse ~/tpch-data
  raptorx cache stats                                   each cache tier on this node
  raptorx cache invalidate sales.events --partition day=2024-01-01

every command takes --conf-dir DIR and -p NAME=VALUE; `raptorx <command> --help` for more.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raptorx",
        description=__doc__.split("\n\n")[0],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action=jar.VersionAction,
        help="show the package's version, its jar's version and build, and the pyspark it "
        "was built against, then exit",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    for add_parser in (
        table.add_parser,
        config.add_parser,
        partition.add_parser,
        cache.add_parser,
        tpch.add_parser,
        locks.add_parser,
        add_connect_parser,
        jar.add_parser,
    ):
        add_parser(sub)
    return parser


def add_connect_parser(sub) -> None:
    """``raptorx connect-server``, kept with the server it starts (``raptorx_py.connect``)."""
    from raptorx_py.connect import add_cli

    add_cli(sub)


#: The exit status of a command whose reader went away (128 + SIGPIPE, as a shell reports
#: ``seq 1 100000 | head``'s).
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()  # here, so a closed pipe is seen here and not at exit
        return status
    except RaptorxError as e:
        print(f"raptorx: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader stopped reading (``raptorx table show db.t --partitions | head``): stop
        # quietly, as Unix tools do. stdout goes to /dev/null so that Python's own flush at
        # exit does not fail on the closed pipe again.
        quiet_stdout()
        return EXIT_BROKEN_PIPE


def quiet_stdout() -> None:
    """Point stdout at /dev/null (at the file descriptor; a stdout with none is left)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture): nothing will flush to a pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
