"""TPC-H benchmark runner: ``make bench`` / ``python -m benchmarks.tpch_suite``.

    python -m benchmarks.tpch_suite --scale 1 --out bench-out \\
        [--configs spark-parquet-local,tiered-hive-s3] [--queries 1,6] \\
        [--repetitions 3] [--warmup 1] [--latency-ms 20] [--throughput-mbps 90] \\
        [--work-dir DIR] \\
        [--property fragment-result-cache.max-cache-size=8GB] [--parameter-seed 1]

What it does, in order:

1. Generates TPC-H at the scale factor into ``<work>/tpch/sf<scale>`` (cached between runs by
   the generator's completion marker; ``<work>`` defaults to ``work-data/`` next to the
   output directory, which .gitignore excludes).
1b. Publishes a durable copy for the user's own queries (``--no-publish`` skips it): copies
   the generation to ``<hive.metastore.warehouse.dir>/tpch.db/`` (``~/.raptorx/warehouse``
   by default) and registers its eight tables as ``tpch.*`` in the metastore that
   ``tiered_session()`` reads from this directory (``hive.metastore.url``, by default
   ``~/.raptorx/metastore.db``), with the configuration ``load_settings()`` finds here. Only
   those eight tables are replaced, and only when an earlier publish registered them (their
   location is that directory); a table of the same name elsewhere is left alone and the
   publish is skipped with a line saying why. Other tables are never touched.
2. Starts the emulated S3 endpoint (``devservers.s3_endpoint.S3Endpoint``; per-request
   latency ``--latency-ms`` and throughput per connection ``--throughput-mbps``, 0 turns
   either off), creates a bucket, and loads the generation to ``s3://<bucket>/warehouse``
   with ``load_tpch`` into a fresh SQLite metastore under the work directory (loading runs
   with the emulation off; it is switched on after).
3. Measures the endpoint's own per-request cost (its probe, with latency 0) for the report.
4. Opens one SparkSession (``tiered_session``, ``local[2]``, with what each configuration
   asks of the session's start: ``Configuration.spark_conf``, e.g. hadoop-aws for s3a) for
   all configurations and,
   for each query, runs every configuration's warm-ups and then the timed repetitions
   interleaved (``rep 1: A B, rep 2: A B, ...``) so drift hits all configurations alike.
   With ``--parameter-seed S`` the warm-ups run the validation texts and timed run ``k``
   (from 0) runs the queries with TPC-H substitution parameters drawn from seed ``S + k``
   (``raptorx_py.tpch.parameters``): every timed run is a query run for the first time, over
   caches the standard texts warmed, as a user exploring data meets them.
   Each run is ``spark.sql(query).collect()``, timed with a monotonic clock over a heap
   collected and frozen just before (``benchmarks.harness_heap``: the harness's own objects
   are not walked by a collection the query's rows set off); the run records seconds, rows,
   the Python collector's time during the run, the deltas of the endpoint's request
   counters and of the data source's metrics sink (``metrics.directory``), and where the
   time went (``benchmarks.query_timeline``: the driver's query phases and the jobs'
   stages).
5. Writes ``<out>/results.json``, ``<out>/results.md``, ``<out>/tpch_queries.png`` and
   ``<out>/tpch_ratios.png`` (``benchmarks.report``; the report leads with each tiered_hive
   configuration's ratio to Spark's reader over s3a and on local files), after every query,
   so an interrupted run keeps what it measured; at the end, what each cached
   configuration's tiers hold on disk per byte of the tables read (``report.disk_per_tier``).

Exit status: 0 when every run succeeded and every configuration returned the same number
of rows for each query; 1 otherwise (the mismatches and errors are printed and listed in
results.md); 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import platform
import shlex
import shutil
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks import query_timeline, report
from benchmarks.configurations import (
    DEFAULT_CONFIGURATIONS,
    BenchContext,
    Configuration,
    cache_root,
    get_configurations,
)
from benchmarks.harness_heap import frozen_heap
from devservers.s3_server import DEFAULT_LATENCY_MS, DEFAULT_THROUGHPUT_MBPS

BUCKET = "raptorx-bench"
DATABASE = "tpch"
#: The database of the durable copy left for the user (``Bench.publish``).
PUBLISH_DATABASE = "tpch"
DEFAULT_SPARK_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.memory": "4g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}


# --- arguments ---------------------------------------------------------------------------


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.tpch_suite",
        description="Run TPC-H queries under several read configurations and report "
        "median latencies, remote requests and bytes.",
    )
    p.add_argument("--scale", type=_positive_float, default=1.0, help="TPC-H scale factor")
    p.add_argument("--out", default="bench-out", help="output directory for the reports")
    p.add_argument(
        "--configs",
        type=_csv,
        default=None,
        help="comma-separated configuration names; the first is the baseline "
        f"(default: {','.join(DEFAULT_CONFIGURATIONS)}; --list-configs lists all)",
    )
    p.add_argument(
        "--queries", type=_csv, default=None, help="comma-separated query numbers (default: all 22)"
    )
    p.add_argument(
        "--repetitions",
        type=_non_negative_int,
        default=3,
        help="timed runs per query and configuration",
    )
    p.add_argument(
        "--warmup",
        type=_non_negative_int,
        default=1,
        help="untimed runs per query and configuration before the timed ones",
    )
    p.add_argument(
        "--latency-ms",
        type=float,
        default=DEFAULT_LATENCY_MS,
        help=f"emulated latency before every S3 request's first byte in ms (0: none; "
        f"default {DEFAULT_LATENCY_MS:g})",
    )
    p.add_argument(
        "--throughput-mbps",
        type=float,
        default=DEFAULT_THROUGHPUT_MBPS,
        help="emulated S3 throughput per connection in MB/s (0: unlimited; default "
        f"{DEFAULT_THROUGHPUT_MBPS:g}, AWS's guideline of one connection per 85-90 MB/s)",
    )
    p.add_argument(
        "--work-dir",
        default=None,
        help="where generated data, the metastore and metrics live "
        "(default: work-data/ next to --out; data is reused between runs)",
    )
    p.add_argument("--master", default="local[2]", help="Spark master")
    p.add_argument(
        "--no-publish",
        action="store_true",
        help="do not leave the TPC-H copy registered as tpch.* in the default "
        "metastore for your own queries",
    )
    p.add_argument(
        "--spark-log-level",
        default=None,
        type=str.upper,
        choices=("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"),
        help="Spark's own log level on the console (default: ERROR, which also "
        "silences Spark's start-up messages)",
    )
    p.add_argument(
        "--property",
        dest="properties",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a raptorx property for the session, under every configuration's own "
        "(repeatable), e.g. fragment-result-cache.max-cache-size=8GB",
    )
    p.add_argument(
        "--parameter-seed",
        type=_non_negative_int,
        default=None,
        metavar="S",
        help="timed run k runs the queries with TPC-H substitution parameters drawn from seed "
        "S+k (first-time queries over caches the validation texts warmed); default: the "
        "validation parameters throughout",
    )
    p.add_argument(
        "--idle-seconds",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="pause N seconds before each timed run, as a user whose queries come minutes "
        "apart; past pyspark's idle-worker timeout (60 s) every Python worker has exited "
        "(default 0: none)",
    )
    p.add_argument(
        "--format",
        choices=["parquet", "orc"],
        default="parquet",
        help="the tables' file format (default: parquet). orc rewrites the generated files "
        "as ORC (raptorx tpch load --format orc): every configuration reads those, Spark's "
        "own configurations through its ORC reader, whatever their names say",
    )
    p.add_argument(
        "--idle-configs",
        type=_csv,
        default=None,
        metavar="NAMES",
        help="with --idle-seconds: pause before these configurations' timed runs only "
        "(comma-separated, each one of --configs; default: every configuration). The others "
        "run right after the query before them, as without --idle-seconds; pausing one "
        "configuration of three cuts the pauses to a third",
    )
    p.add_argument(
        "--list-configs", action="store_true", help="print the registered configurations and exit"
    )
    args = p.parse_args(argv)
    try:
        args.properties = parse_properties(args.properties)
    except ValueError as exc:
        p.error(str(exc))
    if args.repetitions < 1 and not args.list_configs:
        p.error("--repetitions must be at least 1")
    if args.latency_ms < 0:
        p.error("--latency-ms must be >= 0")
    if args.throughput_mbps < 0:
        p.error("--throughput-mbps must be >= 0")
    return args


def check_idle_configs(names: Sequence[str] | None, configs: Sequence[Configuration]) -> None:
    """ValueError when ``--idle-configs`` names a configuration the run does not have."""
    known = [c.name for c in configs]
    unknown = [n for n in names or () if n not in known]
    if unknown:
        raise ValueError(
            f"--idle-configs: {', '.join(unknown)} not among this run's configurations "
            f"({', '.join(known)})"
        )


def pauses_before(args: argparse.Namespace, config: str, phase: str) -> bool:
    """Whether the run of ``config`` in ``phase`` waits ``--idle-seconds`` first: timed
    runs only, of the ``--idle-configs`` (every configuration when none is named)."""
    if phase != "timed" or not args.idle_seconds:
        return False
    return args.idle_configs is None or config in args.idle_configs


def parse_properties(items: Sequence[str]) -> dict[str, str]:
    """``--property`` values as a mapping; ValueError naming a malformed item, or the
    configuration's own error for an unknown property (``ConfigError``, a ValueError, with
    the closest name)."""
    from raptorx_py.config import PROPERTIES_BY_NAME
    from raptorx_py.config.loader import unknown_property_error

    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--property {item!r}: expected NAME=VALUE")
        if name not in PROPERTIES_BY_NAME:
            raise unknown_property_error(name, source="--property", line=None)
        out[name] = value.strip()
    return out


def default_work_dir(out_dir: str) -> str:
    """``work-data/`` next to the output directory (``bench-out`` -> ``./work-data``)."""
    return os.path.join(os.path.dirname(os.path.abspath(out_dir)), "work-data")


def resolve_queries(names: list[str] | None) -> list[int]:
    from raptorx_py.tpch.queries import QUERY_NUMBERS

    if not names:
        return list(QUERY_NUMBERS)
    out = []
    for n in names:
        text = n.upper().removeprefix("Q")
        if not text.isdigit() or int(text) not in QUERY_NUMBERS:
            raise ValueError(
                f"unknown TPC-H query {n!r}; known: {', '.join(str(q) for q in QUERY_NUMBERS)}"
            )
        out.append(int(text))
    return out


# --- machine and endpoint facts ----------------------------------------------------------


def machine_info(spark: Any = None) -> dict[str, Any]:
    """CPU count and model, memory, platform, Python, PySpark (and Java from the JVM)."""
    import pyspark

    info: dict[str, Any] = {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_bytes": _memory_bytes(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
    }
    if spark is not None:
        try:
            info["java"] = spark.sparkContext._jvm.java.lang.System.getProperty("java.version")
        except Exception as exc:  # the report says why the field is missing
            info["java"] = f"unknown ({type(exc).__name__})"
    return info


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return platform.processor() or None
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def numeric_delta(after: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    """``after - before`` for every numeric entry (recursing into nested dicts); entries
    that did not change are left out."""
    out: dict[str, Any] = {}
    for key in set(after) | set(before):
        a, b = after.get(key, 0), before.get(key, 0)
        if isinstance(a, Mapping) or isinstance(b, Mapping):
            sub = numeric_delta(
                a if isinstance(a, Mapping) else {}, b if isinstance(b, Mapping) else {}
            )
            if sub:
                out[key] = sub
        elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and a != b:
            out[key] = a - b
    return out


#: Entries of ``S3Endpoint.stats()`` that are counters (their deltas are what a run cost).
STORE_COUNTERS = (
    "requests",
    "bytes",
    "service_seconds",
    "status",
    "delayed_requests",
    "injected_delay_seconds",
)


def store_delta(after: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    """What the endpoint counted between two ``stats()`` readings (counters only)."""
    return numeric_delta(
        {k: after.get(k, 0) for k in STORE_COUNTERS}, {k: before.get(k, 0) for k in STORE_COUNTERS}
    )


def split_store_stats(delta: Mapping[str, Any]) -> tuple[dict[str, int], int]:
    """Request counts by kind (``LIST``, ``GET``, ``RANGED_GET`` ...) and the response bytes
    the store sent, from a ``store_delta``."""
    requests = {k: int(v) for k, v in (delta.get("requests") or {}).items() if v}
    nbytes = int(sum((delta.get("bytes") or {}).values()))
    return requests, nbytes


def table_object_bytes(objects: Mapping[str, Any], warehouse: str) -> dict[str, int]:
    """Per table, the bytes of the objects under its directory in ``warehouse`` (``objects``:
    ``fs.find(warehouse, detail=True)``, path to details with ``size``), the table being the
    first directory under the warehouse, or under a ``<database>.db`` directory there."""
    sizes: dict[str, int] = {}
    for path, detail in objects.items():
        parts = path[len(warehouse) :].strip("/").split("/")
        if parts and parts[0].endswith(".db"):
            parts = parts[1:]
        if len(parts) < 2:
            continue  # not under a table's directory
        sizes[parts[0]] = sizes.get(parts[0], 0) + int(detail.get("size") or 0)
    return sizes


def configurations_spark_conf(configs: Sequence[Configuration], endpoint: Any) -> dict[str, str]:
    """What the configurations ask of the session's start, merged: ``spark.jars`` entries
    joined, any other key set once (two configurations asking different values of one key
    is a ``ValueError``: the shared session cannot serve both)."""
    merged: dict[str, str] = {}
    for config in configs:
        for key, value in (config.spark_conf(endpoint) if config.spark_conf else {}).items():
            if key == "spark.jars":  # joined, each jar once
                jars = [j for j in (merged.get(key, "") + "," + value).split(",") if j]
                merged[key] = ",".join(dict.fromkeys(jars))
            elif merged.setdefault(key, value) != value:
                raise ValueError(
                    f"configuration {config.name} needs {key}={value}, another "
                    f"{key}={merged[key]}: they cannot share one session"
                )
    return merged


# --- the run -----------------------------------------------------------------------------


class Bench:
    """One benchmark invocation: data, endpoint, session, runs, reports."""

    def __init__(
        self,
        args: argparse.Namespace,
        configs: list[Configuration],
        query_numbers: list[int],
        console: Any,
        argv: Sequence[str] = (),
        sleep: Any = time.sleep,
    ) -> None:
        self.args = args
        #: How ``--idle-seconds`` waits (a test injects its own clock).
        self.sleep = sleep
        self.configs = configs
        self.query_numbers = query_numbers
        self.console = console
        self.out_dir = os.path.abspath(args.out)
        self.work_dir = os.path.abspath(args.work_dir or default_work_dir(args.out))
        self.tpch_dir = os.path.join(self.work_dir, "tpch")
        self.started = time.monotonic()
        #: Each table's Parquet bytes in the store (``probe``).
        self.table_bytes: dict[str, int] = {}
        self.results: dict[str, Any] = {
            "schema_version": report.SCHEMA_VERSION,
            "command": " ".join(
                shlex.quote(a)
                for a in [os.path.basename(sys.executable), "-m", "benchmarks.tpch_suite", *argv]
            ),
            "started_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "complete": False,
            "scale": int(args.scale) if float(args.scale).is_integer() else args.scale,
            "latency_ms": args.latency_ms,
            "throughput_mbps": args.throughput_mbps,
            "parameter_seed": args.parameter_seed,
            "warmup": args.warmup,
            "repetitions": args.repetitions,
            "idle_seconds": args.idle_seconds,
            "format": args.format,
            "idle_configs": args.idle_configs,
            "work_dir": self.work_dir,
            "configurations": [
                {
                    "name": c.name,
                    "description": c.description,
                    **({"details": dict(c.details)} if c.details else {}),
                }
                for c in configs
            ],
            "queries": {},
        }

    # -- set-up --

    def say(self, message: str) -> None:
        self.console.print(f"[dim]{_dt.datetime.now():%H:%M:%S}[/dim] {message}")

    @contextlib.contextmanager
    def phase(self, what: str):
        """One line when a phase starts and one when it ends (with its seconds), so a log
        file shows where a 40-minute run is."""
        self.say(f"start: {what}")
        t0 = time.monotonic()
        yield
        self.say(f"done:  {what} ({time.monotonic() - t0:.0f} s)")

    def publish(self) -> None:
        """The durable copy for the user's own queries (module docstring, step 1b)."""
        from raptorx_py.config import load_settings
        from raptorx_py.errors import RaptorxError
        from raptorx_py.tpch.load import load_tpch

        try:
            settings = load_settings()  # what tiered_session() run from here reads
            with self.phase(
                f"publishing TPC-H SF {self.results['scale']} as {PUBLISH_DATABASE}.* "
                f"in {describe_metastore(settings.metastore_url)}, files under "
                f"{settings.warehouse_dir}/{PUBLISH_DATABASE}.db"
            ):
                load_tpch(
                    self.args.scale,
                    settings.warehouse_dir,
                    settings,
                    database=PUBLISH_DATABASE,
                    work_dir=self.tpch_dir,
                    progress=True,
                    only_own_tables=True,
                    storage_format=self.args.format.upper(),
                )
        except RaptorxError as e:  # the benchmark itself does not need the copy
            self.say(f"[yellow]not published:[/yellow] {e}")
            self.results["published"] = {"error": str(e)}
            return
        self.results["published"] = {
            "database": PUBLISH_DATABASE,
            "metastore": describe_metastore(settings.metastore_url),
            "warehouse": settings.warehouse_dir,
        }

    def generate(self) -> str:
        from raptorx_py.tpch.generate import format_scale, generate_tpch

        # load_tpch(work_dir=<work>/tpch) finds this generation in <work>/tpch/sf<scale>
        local_dir = os.path.join(self.tpch_dir, f"sf{format_scale(self.args.scale)}")
        t0 = time.monotonic()
        generate_tpch(self.args.scale, local_dir, progress=self.say)
        if self.args.format == "orc":  # as load_tpch(storage_format=ORC) makes it
            from raptorx_py.tpch.generate import read_marker
            from raptorx_py.tpch.orc_copy import orc_copy

            marker = read_marker(local_dir) or {}
            described = {k: marker.get(k) for k in ("scale", "layout_version", "generator")}
            orc_dir = f"{local_dir}-orc"
            orc_copy(local_dir, orc_dir, described, progress=self.say)
            local_dir = orc_dir
        self.results["generate_seconds"] = round(time.monotonic() - t0, 3)
        return local_dir

    def fresh_state_paths(self) -> tuple[str, str]:
        """The metastore file and the metrics directory of this run, emptied: the endpoint
        is in memory and new, so tables registered by an earlier run would point nowhere."""
        os.makedirs(self.work_dir, exist_ok=True)
        metastore = os.path.join(self.work_dir, "metastore.db")
        for suffix in ("", "-wal", "-shm", "-journal"):
            if os.path.exists(metastore + suffix):
                os.remove(metastore + suffix)
        metrics_dir = os.path.join(self.work_dir, "metrics")
        if os.path.isdir(metrics_dir):
            shutil.rmtree(metrics_dir)
        os.makedirs(metrics_dir)
        return metastore, metrics_dir

    def load(self, properties: dict[str, str]) -> str:
        from raptorx_py.config import load_settings
        from raptorx_py.tpch.load import load_tpch

        warehouse = f"s3://{BUCKET}/warehouse"
        settings = load_settings(None, properties)
        t0 = time.monotonic()
        load_tpch(
            self.args.scale,
            warehouse,
            settings,
            database=DATABASE,
            work_dir=self.tpch_dir,
            progress=True,
            storage_format=self.args.format.upper(),
        )
        self.results["load_seconds"] = round(time.monotonic() - t0, 3)
        return warehouse

    def probe(self, endpoint: Any) -> Any:
        """The endpoint's own per-request cost, probed on the largest lineitem object."""
        import s3fs

        fs = s3fs.S3FileSystem(**endpoint.storage_options())
        files = fs.find(f"{BUCKET}/warehouse", detail=True)
        suffix = f".{self.args.format}"
        lineitem = {k: v for k, v in files.items() if "/lineitem" in k and k.endswith(suffix)}
        if not lineitem:
            raise RuntimeError(
                f"no lineitem {suffix} object under s3://{BUCKET}/warehouse after "
                f"loading; found {len(files)} objects"
            )
        # Each table's Parquet bytes: what the disk each cache tier holds is measured against.
        self.table_bytes = table_object_bytes(files, f"{BUCKET}/warehouse")
        path = max(lineitem, key=lambda k: lineitem[k].get("size", 0))
        key = path.split("/", 1)[1]
        return {
            "key": key,
            "size": lineitem[path].get("size"),
            "cost": endpoint.probe_request_cost(BUCKET, key),
        }

    # -- runs --

    def run(self) -> int:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from devservers.s3_endpoint import S3Endpoint
        from raptorx_py.config import TIERS_OFF
        from raptorx_py.metrics import MetricsSink
        from raptorx_py.session import tiered_session

        with self.phase(f"generating TPC-H SF {self.results['scale']}"):
            local_dir = self.generate()
        if not self.args.no_publish:
            self.publish()
        metastore, metrics_dir = self.fresh_state_paths()
        with contextlib.ExitStack() as stack:
            with self.phase("starting the local S3 endpoint"):
                endpoint = stack.enter_context(S3Endpoint(latency_ms=0.0, throughput_mbps=0.0))
            endpoint.create_bucket(BUCKET)
            properties = {
                "hive.metastore.url": f"sqlite:///{metastore}",
                "metrics.directory": metrics_dir,
                # Each configuration turns on the tiers it measures (configurations.py).
                **TIERS_OFF,
                "cache.base-directory": os.path.join(self.work_dir, "cache", "default"),
                "fragment-result-cache.base-directory": os.path.join(
                    self.work_dir, "cache", "default-fragments"
                ),
                **endpoint.s3_properties(),
                # The user's, last: under each configuration's own read options.
                **self.args.properties,
            }
            with self.phase(
                f"loading TPC-H SF {self.results['scale']} into "
                f"s3://{BUCKET}/warehouse (the benchmark's own metastore {metastore})"
            ):
                warehouse = self.load(properties)
                probe = self.probe(endpoint)
            self.say(
                f"S3 from now on: {self.args.latency_ms:g} ms per request, "
                + (
                    f"{self.args.throughput_mbps:g} MB/s per connection"
                    if self.args.throughput_mbps
                    else "unlimited throughput"
                )
            )
            endpoint.set_latency(self.args.latency_ms)
            endpoint.set_throughput(self.args.throughput_mbps)
            endpoint.reset_stats()
            self.results["endpoint"] = {
                "kind": type(endpoint).__name__,
                "url": endpoint.url,
                "request_cost": probe["cost"],
                "request_cost_probe": {"key": probe["key"], "size": probe["size"]},
            }
            self.results["properties"] = properties
            spark_conf = {**DEFAULT_SPARK_CONF, **configurations_spark_conf(self.configs, endpoint)}
            self.results["spark_conf"] = spark_conf
            with self.phase("starting Spark"):
                spark = tiered_session(
                    master=self.args.master,
                    app_name="raptorx-tpch-bench",
                    spark_conf={**spark_conf, **self.log_conf()},
                    properties=properties,
                )
            try:
                spark.sparkContext.setLogLevel(self.args.spark_log_level or "ERROR")
                self.results["machine"] = machine_info(spark)
                ctx = BenchContext(
                    spark=spark,
                    database=DATABASE,
                    local_data_dir=local_dir,
                    properties=properties,
                    work_dir=self.work_dir,
                    endpoint=endpoint,
                    warehouse_url=warehouse,
                    file_format=self.args.format,
                )
                sink = MetricsSink(metrics_dir)
                runs_per_pair = self.args.warmup + self.args.repetitions
                total = len(self.query_numbers) * len(self.configs) * runs_per_pair
                columns = (
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    TextColumn("eta"),
                    TimeRemainingColumn(),
                )
                # A bar only on a terminal: in a log file it would be drawn once, at the end.
                bar = (
                    Progress(*columns, console=self.console, transient=True)
                    if self.console.is_terminal
                    else NoProgress(self.console)
                )
                baseline = self.configs[0].name
                what = (
                    f"running {len(self.query_numbers)} "
                    f"{'query' if len(self.query_numbers) == 1 else 'queries'} x "
                    f"{len(self.configs)} "
                    f"{'configuration' if len(self.configs) == 1 else 'configurations'} x "
                    f"{runs_per_pair} "
                    f"{'run' if runs_per_pair == 1 else 'runs'} "
                    f"({self.args.warmup} warm-up)"
                )
                with self.phase(what):
                    self.say(
                        f"a line per query: median seconds per configuration; "
                        f"'x of baseline' = time / {baseline}'s time (lower is faster)"
                    )
                    with bar as progress:
                        task = progress.add_task("TPC-H", total=total)
                        for n in self.query_numbers:
                            self.run_query(n, ctx, endpoint, sink, progress, task)
                            self.write(partial=True)
                self.results["disk"] = self.disk_held(ctx)
            finally:
                with self.phase("stopping Spark"):
                    spark.stop()
        return self.finish()

    def disk_held(self, ctx: BenchContext) -> dict[str, Any]:
        """What each cache tier of each configuration that cached on disk holds now, per
        byte of the tables the run's queries read (``report.disk_per_tier``)."""
        from raptorx_py.tpch.queries import query_text, tables_read

        tables = sorted(
            set().union(*(tables_read(query_text(n, self.args.scale)) for n in self.query_numbers))
        )
        table_bytes = sum(self.table_bytes.get(t, 0) for t in tables)
        configs = {}
        for config in self.configs:
            root = cache_root(ctx, config.name)
            if os.path.isdir(root):
                configs[config.name] = report.disk_per_tier(root, table_bytes)
        return {"table_bytes": table_bytes, "tables": tables, "configs": configs}

    def log_conf(self) -> dict[str, str]:
        """Spark conf giving the driver JVM a log4j2 file at ``--spark-log-level`` (ERROR by
        default): Spark's start-up messages are printed before ``setLogLevel`` can run."""
        level = self.args.spark_log_level or "ERROR"
        os.makedirs(self.work_dir, exist_ok=True)
        path = os.path.join(self.work_dir, "log4j2.properties")
        with open(path, "w", encoding="utf-8") as f:
            f.write(LOG4J2_TEMPLATE.format(level=level.lower()))
        return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{path}"}

    def run_query(
        self, n: int, ctx: BenchContext, endpoint: Any, sink: Any, progress: Any, task: Any
    ) -> None:
        from raptorx_py.tpch.parameters import parameter_set
        from raptorx_py.tpch.queries import query_text

        seed = self.args.parameter_seed

        def text(phase: str, i: int) -> tuple[str, dict[str, str] | None]:
            if seed is None or phase == "warmup":
                return query_text(n, self.args.scale, engine="spark"), None
            chosen = dict(parameter_set(seed + i)[n])
            return query_text(n, self.args.scale, "spark", chosen), chosen

        entries = {c.name: {"runs": [], "warmup_seconds": [], "error": None} for c in self.configs}
        self.results["queries"][str(n)] = {"configs": entries}
        first_rows: dict[str, list] = {}  # each configuration's first timed result
        plan = [("warmup", i) for i in range(self.args.warmup)] + [
            ("timed", i) for i in range(self.args.repetitions)
        ]
        for phase, i in plan:
            sql, chosen = text(phase, i)
            for config in self.configs:
                entry = entries[config.name]
                label = f"Q{n:<2} {config.name} " + (
                    f"warm-up {i + 1}/{self.args.warmup}"
                    if phase == "warmup"
                    else f"run {i + 1}/{self.args.repetitions}"
                )
                progress.update(task, description=label)
                if entry["error"] is None:
                    if pauses_before(self.args, config.name, phase):
                        progress.update(
                            task, description=f"{label} (idle {self.args.idle_seconds} s)"
                        )
                        self.sleep(self.args.idle_seconds)
                    try:
                        run = self.run_once(sql, config, ctx, endpoint, sink)
                    except Exception as exc:  # recorded, reported, and fails the exit status
                        entry["error"] = (
                            f"{phase} run {i + 1}: {type(exc).__name__}: {_first_lines(str(exc))}"
                        )
                        entry["traceback"] = traceback.format_exc()
                        progress.console.print(
                            f"[red]Q{n} {config.name} failed:[/red] {entry['error']}"
                        )
                    else:
                        rows = run.pop("_rows")
                        if phase == "timed":
                            first_rows.setdefault(config.name, rows)
                        if phase == "warmup":
                            entry["warmup_seconds"].append(run["seconds"])
                            entry["warmup_rows"] = run["rows"]
                        else:
                            if chosen is not None:
                                run["parameters"] = chosen
                            entry["runs"].append(run)
                progress.advance(task)
        self.compare_results(n, entries, first_rows)
        self.print_query_line(n, progress.console)

    def compare_results(self, n: int, entries: dict, first_rows: dict[str, list]) -> None:
        """Every configuration's rows against the baseline's, value by value."""
        from raptorx_py.tpch import oracle, queries

        baseline = self.configs[0].name
        if baseline not in first_rows or len(first_rows) < 2:
            return
        for name, rows in first_rows.items():
            if name == baseline:
                continue
            diff = oracle.compare_results(
                first_rows[baseline],
                rows,
                ordered=queries.ordered(n),
                sort_key=queries.ORDER_BY_COLUMNS[n],
            )
            if diff:
                entries[name]["result_difference"] = diff
        self.results["queries"][str(n)]["results_compared"] = len(first_rows)

    def run_once(
        self, sql: str, config: Configuration, ctx: BenchContext, endpoint: Any, sink: Any
    ) -> dict[str, Any]:
        """One run: register the views, prepare, then time ``collect()`` and take deltas."""
        from raptorx_py.metrics import flush
        from raptorx_py.tpch.oracle import plain_value

        t_setup = time.perf_counter()
        config.register_views(ctx)
        if config.prepare is not None:
            config.prepare(ctx)
        setup_seconds = time.perf_counter() - t_setup
        # This process's own counts first: the driver's planner counts here and leaves its
        # counts in the process (metrics.deferring_flushes).
        flush(sink.directory)
        stats_before, metrics_before = endpoint.stats(), sink.totals()
        with frozen_heap() as python_gc:
            group = query_timeline.new_group(ctx.spark)
            started_ms = query_timeline.wall_millis()
            t0 = time.perf_counter()
            df = ctx.spark.sql(sql)
            rows = df.collect()
            seconds = time.perf_counter() - t0
        stats_delta = store_delta(endpoint.stats(), stats_before)
        flush(sink.directory)
        metrics_delta = numeric_delta(sink.totals(), metrics_before)
        requests, nbytes = split_store_stats(stats_delta)
        return {
            "_rows": [plain_value(r) for r in rows],
            "seconds": round(seconds, 6),
            "rows": len(rows),
            "requests": requests,
            "bytes": nbytes,
            "metrics": metrics_delta,
            # Python on the data plane: tasks a Python worker read, and workers started for
            # them (0 and 0 when the JVM served every split).
            "python_tasks": int(metrics_delta.get("reader.python_tasks", 0)),
            "python_worker_starts": int(metrics_delta.get("reader.python_worker_starts", 0)),
            "store_stats": stats_delta,
            "setup_seconds": round(setup_seconds, 6),
            # The wall clock (epoch ms) the timing started at: places the run among other
            # records of the process, e.g. a JFR recording's samples.
            "started_ms": started_ms,
            # The benchmark process's collector during the run (harness_heap).
            "python_gc": python_gc,
            # Where the time went (query_timeline): the driver's phases, then the stages.
            "phases_ms": query_timeline.phases_ms(df, started_ms),
            "stages": query_timeline.stages_of(ctx.spark, group, started_ms),
        }

    def print_query_line(self, n: int, console: Any) -> None:
        per = report.summarize(
            {
                "configurations": self.results["configurations"],
                "queries": {str(n): self.results["queries"][str(n)]},
            }
        )
        q = per["queries"][str(n)]
        parts = []
        for c in per["configs"]:
            s = q[c]
            if s["median_s"] is None:
                parts.append(f"{c} [red]error[/red]")
                continue
            text = f"{c} {s['median_s']:.3f}s"
            r = per["ratios"][str(n)][c]
            if c != per["baseline"] and r is not None:
                text += f" ([bold]{r:.2f}x[/bold] of baseline)"
            if s["requests_total"]:
                text += f" {report.format_count(s['requests_total'])} req"
            parts.append(text)
        rows = {q[c]["rows"] for c in per["configs"] if q[c]["rows"] is not None}
        rows_text = (
            f"{next(iter(rows))} rows"
            if len(rows) == 1
            else "[red]ROW COUNTS DIFFER[/red]"
            if rows
            else ""
        )
        console.print(
            f"[dim]{_dt.datetime.now():%H:%M:%S}[/dim] Q{n:<2} {rows_text:>10}  " + "  ".join(parts)
        )
        for problem in report.row_count_mismatches(
            {
                "configurations": self.results["configurations"],
                "queries": {str(n): self.results["queries"][str(n)]},
            }
        ):
            console.print(f"[red]{problem}[/red]")

    # -- reports --

    def write(self, partial: bool) -> dict[str, str]:
        self.results["finished_at"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self.results["wall_seconds"] = round(time.monotonic() - self.started, 1)
        self.results["complete"] = not partial
        return report.write_reports(self.results, self.out_dir)

    def finish(self) -> int:
        paths = self.write(partial=False)
        s = report.summarize(self.results)
        if s["geomean_queries"]:
            geo = ", ".join(
                f"{c} {s['geomean'][c]:.3f}s"
                + (f" ({s['geomean_ratio'][c]:.2f}x of baseline)" if c != s["baseline"] else "")
                for c in s["configs"]
            )
            n = len(s["geomean_queries"])
            label = f"geomean over {n} queries" if n > 1 else "over the one query"
            self.console.print(f"[bold]{label}:[/bold] {geo} (lower is faster)")
        self.console.print(
            f"wrote {', '.join(p for p in paths.values() if p)} "
            f"(wall time {self.results['wall_seconds']:.0f} s)"
        )
        problems = report.row_count_mismatches(self.results) + report.result_differences(
            self.results
        )
        errors = [
            (q, c, e["error"])
            for q, per in self.results["queries"].items()
            for c, e in per["configs"].items()
            if e["error"]
        ]
        for p in problems:
            self.console.print(f"[bold red]FAILED:[/bold red] {p}")
        for q, c, e in errors:
            self.console.print(f"[bold red]FAILED:[/bold red] Q{q} {c}: {e}")
        published = self.results.get("published") or {}
        if published.get("database"):
            self.console.print(
                f'your copy of the data: spark.read.format("tiered_hive").load('
                f'"{published["database"]}.lineitem") after tiered_session() '
                f"(metastore {published['metastore']}; see README.md, 'Your own queries')"
            )
        return 1 if problems or errors else 0


#: The driver's log4j2 configuration (``Bench.log_conf``): Spark's pattern, on stderr.
LOG4J2_TEMPLATE = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
# pyspark's driver counts as a shell: Spark prints "Setting default log level" unless the
# logger of the class that starts the JVM's logging is configured at the root's level.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""


class NoProgress:
    """What ``run_query`` uses of a rich ``Progress`` when the console is not a terminal: no
    bar, since each query prints its own line as it finishes."""

    def __init__(self, console: Any) -> None:
        self.console = console

    def __enter__(self) -> NoProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def add_task(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def update(self, *args: Any, **kwargs: Any) -> None:
        return None

    def advance(self, *args: Any, **kwargs: Any) -> None:
        return None


def describe_metastore(url: str) -> str:
    """The metastore URL with any password masked (``postgresql://u:***@h/db``)."""
    from raptorx_py.cli.common import masked_url

    return masked_url(url)


def _first_lines(text: str, limit: int = 3) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[:limit]) + (" ..." if len(lines) > limit else "")


def main(argv: Sequence[str] | None = None) -> int:
    from rich.console import Console

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    # A log file gets each line when it is printed, not 8 KiB later.
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    console = Console(highlight=False, soft_wrap=True)
    if args.list_configs:
        from benchmarks.configurations import all_configurations

        for c in all_configurations():
            console.print(f"[bold]{c.name}[/bold]: {c.description}")
        return 0
    try:
        configs = get_configurations(args.configs)
        query_numbers = resolve_queries(args.queries)
        check_idle_configs(args.idle_configs, configs)
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    bench = Bench(args, configs, query_numbers, console, argv)
    try:
        return bench.run()
    except KeyboardInterrupt:
        if bench.results["queries"]:
            paths = bench.write(partial=True)
            console.print(f"[yellow]interrupted; partial results in {paths['markdown']}[/yellow]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
