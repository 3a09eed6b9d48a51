"""The table of every property raptorx_py knows, and the typed ``Settings`` it fills.

One row per property: its name (RaptorX's or Presto's where one exists), the ``Settings``
field it sets, its default (as the string a user would write), its kind (how the string is
parsed), the file it belongs in (``hive`` or ``config``) and a one-line description. The
conf files, the documentation tests and the loader are all driven from this table, so a
property cannot exist in one place and be missing in another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from raptorx_py.config import units
from raptorx_py.config.tiers import (
    BlockCacheSettings,
    FooterCacheSettings,
    FragmentCacheSettings,
    ListingCacheSettings,
    MetastoreCacheSettings,
    MetastoreConnectionSettings,
)


@dataclass(frozen=True)
class Property:
    name: str
    field: str
    default: str
    kind: str  # a key of PARSERS: "str" | "bool" | "int" | "size" | "duration" | a choice
    file: str  # "hive" -> conf/hive.properties, "config" -> conf/config.properties
    doc: str
    #: The smallest accepted value, as a user would write it; None: the kind's (KIND_MINIMUM).
    minimum: str | None = None

    @property
    def lower_bound(self) -> str | None:
        return self.minimum if self.minimum is not None else KIND_MINIMUM.get(self.kind)


def _parse_connector(value: str) -> str:
    """``hive-hadoop2`` (Presto's Hive connector; ``hive`` also names it): the only one."""
    if value.strip().lower() in ("hive-hadoop2", "hive"):
        return "hive-hadoop2"
    raise ValueError(
        f"raptorx_py implements only the Hive connector: expected hive-hadoop2 "
        f"(or hive), got {value!r}"
    )


_connector = units.FormedParser(_parse_connector, "hive-hadoop2 (or hive)")

PARSERS: dict[str, Callable[[str], Any]] = {
    "str": lambda s: s,
    "bool": units.parse_bool,
    "int": units.parse_int,
    "count": units.parse_count,
    "size": units.parse_data_size,
    "duration": units.parse_duration,
    # Presto's metastore cache scope: cache tables and partitions, or partitions only.
    "cache_scope": units.choice("ALL", "PARTITION"),
    # The block cache's kind; RaptorX catalogs say ALLUXIO, which names the same thing here.
    "cache_type": units.choice("LOCAL", aliases={"ALLUXIO": "LOCAL"}),
    # Where splits should run (RaptorX's values): anywhere, or by soft affinity.
    "node_selection": units.choice("NO_PREFERENCE", "SOFT_AFFINITY"),
    # Which reader reads a split that misses the fragment result cache.
    "parquet_reader": units.choice("AUTO", "SPARK", "PYTHON"),
    # The file format of a table a write creates.
    "storage_format": units.choice("PARQUET", "ORC"),
    # A Presto catalog file names its connector; the Hive connector is the one implemented.
    "connector": _connector,
    # hive.metastore.uri: empty, or thrift://host:port[,thrift://host:port...].
    "thrift_uris": units.thrift_uris,
}

#: Every numeric kind has a lower bound, so no numeric property takes a value that fails later
#: (a negative retry count, a negative duration); a property needing more sets ``minimum``.
KIND_MINIMUM: dict[str, str] = {"int": "0", "count": "0", "size": "0B", "duration": "0s"}

PROPERTIES: tuple[Property, ...] = (
    # --- catalog -----------------------------------------------------------------------
    Property(
        name="connector.name",
        field="connector_name",
        default="hive-hadoop2",
        kind="connector",
        file="hive",
        doc=(
            "The connector of a Presto catalog file: only the Hive connector, hive-hadoop2 (or "
            "hive), is implemented, so a RaptorX catalog file can be used as it is."
        ),
    ),
    # --- metastore -------------------------------------------------------------------
    Property(
        name="hive.metastore.url",
        field="metastore_url",
        default="sqlite:///~/.raptorx/metastore.db",
        kind="str",
        file="hive",
        doc="Metastore database: sqlite:///<path> (embedded default, created on first use).",
    ),
    Property(
        name="hive.metastore.uri",
        field="metastore_uri",
        default="",
        kind="thrift_uris",
        file="hive",
        doc=(
            "A Hive Metastore over Thrift: thrift://host:9083, or a comma-separated list tried in "
            "order. Set, it is the metastore (hive.metastore.url is then not read); empty: the "
            "metastore database of hive.metastore.url."
        ),
    ),
    Property(
        name="hive.metastore-timeout",
        field="metastore_timeout",
        default="10s",
        kind="duration",
        minimum="1ms",
        file="hive",
        doc="Thrift metastore: how long one call (and one connection attempt) may take.",
    ),
    Property(
        name="hive.metastore.thrift.client.max-retries",
        field="metastore_max_retries",
        default="3",
        kind="int",
        file="hive",
        doc=(
            "Thrift metastore: how many times a call that failed on the connection (not one the "
            "server refused) is retried, on the next URI of hive.metastore.uri, before the query "
            "fails."
        ),
    ),
    Property(
        name="hive.metastore.thrift.client.min-backoff-delay",
        field="metastore_min_backoff",
        default="1s",
        kind="duration",
        file="hive",
        doc="Thrift metastore: the wait before the first retry; it doubles for each further one.",
    ),
    Property(
        name="hive.metastore.thrift.client.max-backoff-delay",
        field="metastore_max_backoff",
        default="1s",
        kind="duration",
        file="hive",
        doc="Thrift metastore: the longest wait between two retries.",
    ),
    Property(
        name="hive.metastore.partition-batch-size.max",
        field="metastore_partition_batch_size",
        default="100",
        kind="int",
        minimum="1",
        file="hive",
        doc=(
            "Thrift metastore: partitions fetched per get_partitions_by_names call when a table's "
            "partitions are read (one call per this many partitions, never one per partition)."
        ),
    ),
    Property(
        name="hive.metastore.warehouse.dir",
        field="warehouse_dir",
        default="~/.raptorx/warehouse",
        kind="str",
        file="hive",
        doc=(
            "Where a write creates a managed table whose database has no location: "
            "<dir>/<db>.db/<table> (a local path, file:// or s3:// URL)."
        ),
    ),
    Property(
        name="hive.metastore-cache-ttl",
        field="metastore_cache_ttl",
        default="1h",
        kind="duration",
        file="hive",
        doc=(
            "How long a cached metastore entry without write ids is served: an external table's, "
            "or a managed table's partitions with hive.partition-versioning-enabled=false (other "
            "managed entries are checked against each query's write ids instead). The cache "
            "follows the metastore's notification log (every hive.metastore-refresh-interval), so "
            "this only bounds how long a change the log missed can be served. 0s turns the whole "
            "metastore cache off: every query reads the database."
        ),
    ),
    Property(
        name="hive.metastore-refresh-interval",
        field="metastore_refresh_interval",
        default="1s",
        kind="duration",
        minimum="1ms",
        file="hive",
        doc=(
            "How often each process's metastore cache applies new notification-log events (a "
            "background thread; one metastore round trip each time)."
        ),
    ),
    Property(
        name="hive.metastore-cache-maximum-size",
        field="metastore_cache_maximum_size",
        default="10000",
        kind="count",
        file="hive",
        doc=(
            "Most tables, and separately most partitions (counted one by one), that each process's "
            "metastore cache holds, least recently used out first; a table with more partitions "
            "than this is not cached."
        ),
    ),
    Property(
        name="hive.metastore-cache-prewarm",
        field="metastore_cache_prewarm",
        default="false",
        kind="bool",
        file="hive",
        doc=(
            "Load every table and its partitions into a process's metastore cache when the cache "
            "is created (Hive's CachedStore prewarm: each table's ValidWriteIdList is taken first, "
            "then its entries), within hive.metastore-cache-maximum-size. Off by default because "
            "every planning process holds its own cache and a prewarm reads the whole metastore; "
            "queries then load only what they read."
        ),
    ),
    Property(
        name="hive.metastore-cache-scope",
        field="metastore_cache_scope",
        default="ALL",
        kind="cache_scope",
        file="hive",
        doc=(
            "What the metastore cache holds: ALL (tables and partitions) or PARTITION (partition "
            "lists only; every query reads its tables from the database)."
        ),
    ),
    Property(
        name="hive.partition-versioning-enabled",
        field="partition_versioning_enabled",
        default="true",
        kind="bool",
        file="hive",
        doc=(
            "Tag cached partitions of managed tables with the write ids they were read under, so "
            "they serve only snapshots they are fresh for; false: served by age "
            "(hive.metastore-cache-ttl) and dropped on notification-log events, like an external "
            "table's, so another application's commit is seen only after those."
        ),
    ),
    # --- transactions and locks ----------------------------------------------------------
    Property(
        name="hive.support.concurrency",
        field="support_concurrency",
        default="true",
        kind="bool",
        file="hive",
        doc="Take Hive's shared/exclusive locks for reads and writes; false turns locking off.",
    ),
    Property(
        name="hive.lock.numretries",
        field="lock_numretries",
        default="100",
        kind="count",
        file="hive",
        doc="Times a refused lock is retried before the operation fails naming the holder.",
    ),
    Property(
        name="hive.lock.sleep.between.retries",
        field="lock_sleep_between_retries",
        default="60s",
        kind="duration",
        file="hive",
        doc="Wait between two attempts to take a refused lock.",
    ),
    Property(
        name="hive.txn.timeout",
        field="txn_timeout",
        default="300s",
        kind="duration",
        minimum="1s",
        file="hive",
        doc=(
            "A transaction whose client has not heartbeated for this long is expired; each "
            "transaction keeps the timeout of the client that opened it (a lock taken outside a "
            "transaction: the expiring client's)."
        ),
    ),
    # --- object store (S3) -------------------------------------------------------------
    Property(
        name="hive.s3.endpoint",
        field="s3_endpoint",
        default="",
        kind="str",
        file="hive",
        doc="S3 endpoint URL; empty means AWS's own endpoint.",
    ),
    Property(
        name="hive.s3.aws-access-key",
        field="s3_access_key",
        default="",
        kind="str",
        file="hive",
        doc="S3 access key; empty means the default credential chain.",
    ),
    Property(
        name="hive.s3.aws-secret-key",
        field="s3_secret_key",
        default="",
        kind="str",
        file="hive",
        doc="S3 secret key; empty means the default credential chain.",
    ),
    Property(
        name="hive.s3.region",
        field="s3_region",
        default="",
        kind="str",
        file="hive",
        doc="S3 region name; empty means the SDK default.",
    ),
    Property(
        name="hive.s3.path-style-access",
        field="s3_path_style_access",
        default="false",
        kind="bool",
        file="hive",
        doc="Address buckets as <endpoint>/<bucket> instead of <bucket>.<endpoint>.",
    ),
    Property(
        name="hive.s3.connect-timeout",
        field="s3_connect_timeout",
        default="5s",
        kind="duration",
        minimum="1ms",
        file="hive",
        doc="Time allowed to open a connection to the S3 endpoint.",
    ),
    Property(
        name="hive.s3.socket-timeout",
        field="s3_socket_timeout",
        default="30s",
        kind="duration",
        minimum="1ms",
        file="hive",
        doc="Time allowed for an S3 response before the request fails.",
    ),
    Property(
        name="hive.s3.max-error-retries",
        field="s3_max_error_retries",
        default="2",
        kind="int",
        file="hive",
        doc="Retries of a failed S3 request before the query fails with the endpoint named.",
    ),
    # --- pruning -----------------------------------------------------------------------
    Property(
        name="hive.partition-statistics-based-optimization-enabled",
        field="stats_pruning_enabled",
        default="true",
        kind="bool",
        file="hive",
        doc="Skip partitions and row groups whose min/max/null statistics cannot match the filter.",
    ),
    Property(
        name="hive.aggregation-pushdown-enabled",
        field="aggregation_pushdown_enabled",
        default="true",
        kind="bool",
        file="hive",
        doc=(
            "Let Spark push a partial aggregation (group keys; SUM, COUNT, MIN, MAX, AVG) into "
            "the scan: each split returns its groups instead of its rows, computed in the "
            "executor's JVM over Spark's reader (by the Python reader under "
            "hive.parquet.reader=PYTHON). Needs the native jar. Unless hive.parquet.reader is "
            "PYTHON, only aggregations that fold a split into few groups are pushed: no key, or "
            "keys that are partition keys or of type string, boolean or date (a numeric key is "
            "left to Spark's own aggregation over Spark's own reader)."
        ),
    ),
    Property(
        name="hive.parquet.reader",
        field="parquet_reader",
        default="AUTO",
        kind="parquet_reader",
        file="hive",
        doc=(
            "Which reader reads a split the fragment result cache does not hold. SPARK: Spark's "
            "own vectorized Parquet reader in the executor's JVM, through the node's block cache "
            "(needs the native jar, and Hadoop's s3a for s3:// tables); PYTHON: the Python "
            "reader (pyarrow) in a Python worker; AUTO: SPARK, except a scan SPARK cannot read "
            "(Spark's vectorized reader off, more than spark.sql.codegen.maxFields columns, a "
            "column the files lack), which PYTHON reads. "
            "Either reader stores the fragment of a split planned before (with the fragment "
            "result cache on), so a repeat ends as fragment hits; Spark's reader stores none "
            "for a split with no row filter left, which the block cache serves as fast."
        ),
    ),
    # --- splits -------------------------------------------------------------------------
    Property(
        name="hive.max-split-size",
        field="max_split_size",
        default="64MB",
        kind="size",
        minimum="1B",
        file="hive",
        doc=(
            "Most bytes of files one Spark task reads; small files are packed together up to this "
            "size."
        ),
    ),
    Property(
        name="hive.min-split-count",
        field="min_split_count",
        default="0",
        kind="count",
        file="hive",
        doc=(
            "Tasks run this many at a time: a scan's tasks come in whole waves of this many, as "
            "even in bytes as whole files allow, so a small table still uses every core and a wave "
            "ends together. 0: the Spark application's default parallelism (its task slots, filled "
            "in by register()); Spark pays a fixed cost per task of a Python source, so tasks "
            "beyond the slots only add that cost."
        ),
    ),
    Property(
        name="hive.node-selection-strategy",
        field="node_selection_strategy",
        default="NO_PREFERENCE",
        kind="node_selection",
        file="hive",
        doc=(
            "Where splits run. NO_PREFERENCE: wherever Spark has a free slot. SOFT_AFFINITY: each "
            "file on the host, then the executor of that host, a rendezvous hash of its path picks "
            "among the application's live executors (Spark's spark.locality.wait decides when a "
            "task falls back to another); a split read on another executor of the same host uses "
            "the host's caches, one read on another host neither reads nor fills that host's "
            "caches. Needs the native jar and a cluster; local mode has no executors to choose."
        ),
    ),
    Property(
        name="hive.soft-affinity.max-split-imbalance",
        field="soft_affinity_max_split_imbalance",
        default="0",
        kind="count",
        file="hive",
        doc=(
            "With SOFT_AFFINITY: when a file's preferred executor already holds this many more of "
            "the scan's splits than the least loaded executor, the file goes to its second choice "
            "(a sibling executor on the same host, else the next host), which caches it as its "
            "own; RaptorX's busy worker handing a split to its secondary. Presto bounds running "
            "splits (node-scheduler.max-pending-splits-per-task), which a Spark plan cannot see: "
            "Spark queues a stage's tasks at once. 0: no bound, every file on its preferred "
            "executor."
        ),
    ),
    # --- file-listing cache ------------------------------------------------------------
    Property(
        name="hive.file-status-cache-tables",
        field="file_status_cache_tables",
        default="*",
        kind="str",
        file="hive",
        doc=(
            "Tables whose sealed and managed partitions' listings are cached: comma-separated "
            "patterns such as *, tpch.* or db.table; empty: none (the listing cache off). Unsealed "
            "external partitions are listed by every query."
        ),
    ),
    Property(
        name="hive.file-status-cache-size",
        field="file_status_cache_size",
        default="1000000",
        kind="count",
        file="hive",
        doc="Most file entries the listing cache holds.",
    ),
    Property(
        name="hive.file-status-cache-expire-time",
        field="file_status_cache_expire_time",
        default="24h",
        kind="duration",
        file="hive",
        doc="How long a cached listing of a sealed partition is served.",
    ),
    Property(
        name="hive.ignore-absent-partitions",
        field="ignore_absent_partitions",
        default="false",
        kind="bool",
        file="hive",
        doc=(
            "What a query does with a partition the metastore lists that lists no data file "
            "while its location does not exist or the metastore records files or rows for it "
            "(Presto's name). false: the query fails with PartitionMissingError naming it; "
            "true: the partition is read as empty, with a warning once per partition "
            "(Spark's spark.sql.hive.verifyPartitionPath)."
        ),
    ),
    # --- Parquet footer cache -------------------------------------------------------------
    Property(
        name="hive.parquet.metadata-cache-enabled",
        field="parquet_metadata_cache_enabled",
        default="true",
        kind="bool",
        file="hive",
        doc=(
            "Cache Parquet footers in memory and on the node's local disk (under "
            "cache.base-directory); false turns the tier off."
        ),
    ),
    Property(
        name="hive.parquet.metadata-cache-size",
        field="parquet_metadata_cache_size",
        default="100MB",
        kind="size",
        file="hive",
        doc=(
            "Bytes of footers kept per process in memory (LRU); the disk copy follows "
            "cache.alluxio.max-cache-size."
        ),
    ),
    Property(
        name="hive.parquet.metadata-cache-ttl-since-last-access",
        field="parquet_metadata_cache_ttl",
        default="2h",
        kind="duration",
        file="hive",
        doc="A footer not read for this long is dropped from memory.",
    ),
    Property(
        name="hive.storage-format",
        field="storage_format",
        default="PARQUET",
        kind="storage_format",
        file="hive",
        doc=(
            "The format of the data files of a table a write creates, PARQUET or ORC "
            "(Presto's name; Presto's default is ORC). Writes to an existing table keep its "
            "format."
        ),
    ),
    # --- ORC file tail cache (the executors' JVM) ---------------------------------------
    Property(
        name="hive.orc.file-tail-cache-enabled",
        field="orc_file_tail_cache_enabled",
        default="true",
        kind="bool",
        file="hive",
        doc=(
            "Cache ORC files' tails (postscript, footer, stripe statistics) in each "
            "executor's memory, per file version, for Spark's ORC reader; false turns the "
            "tier off."
        ),
    ),
    Property(
        name="hive.orc.file-tail-cache-size",
        field="orc_file_tail_cache_size",
        default="100MB",
        kind="size",
        file="hive",
        doc="Bytes of ORC tails kept per executor JVM (least recently read dropped first).",
    ),
    Property(
        name="hive.orc.file-tail-cache-ttl-since-last-access",
        field="orc_file_tail_cache_ttl",
        default="6h",
        kind="duration",
        file="hive",
        doc="An ORC tail not read for this long is dropped.",
    ),
    # --- ORC stripe metadata cache (the executors' JVM) --------------------------------
    Property(
        name="hive.orc.stripe-metadata-cache-enabled",
        field="orc_stripe_metadata_cache_enabled",
        default="true",
        kind="bool",
        file="hive",
        doc=(
            "Cache ORC stripes' footers and index streams (row indexes, bloom filters) in "
            "each executor's memory, per file version, for Spark's ORC reader; false turns "
            "the tier off."
        ),
    ),
    Property(
        name="hive.orc.stripe-footer-cache-size",
        field="orc_stripe_footer_cache_size",
        default="100MB",
        kind="size",
        file="hive",
        doc=(
            "Bytes of ORC stripe footers kept per executor JVM (least recently read dropped first)."
        ),
    ),
    Property(
        name="hive.orc.stripe-footer-cache-ttl-since-last-access",
        field="orc_stripe_footer_cache_ttl",
        default="6h",
        kind="duration",
        file="hive",
        doc="An ORC stripe footer not read for this long is dropped.",
    ),
    Property(
        name="hive.orc.stripe-stream-cache-size",
        field="orc_stripe_stream_cache_size",
        default="300MB",
        kind="size",
        file="hive",
        doc=(
            "Bytes of ORC index streams kept per executor JVM (least recently read dropped first)."
        ),
    ),
    Property(
        name="hive.orc.stripe-stream-cache-ttl-since-last-access",
        field="orc_stripe_stream_cache_ttl",
        default="6h",
        kind="duration",
        file="hive",
        doc="An ORC index stream not read for this long is dropped.",
    ),
    # --- file handle cache (the executors' JVM) -----------------------------------------
    Property(
        name="hive.file-handle-cache-enabled",
        field="file_handle_cache_enabled",
        default="true",
        kind="bool",
        file="hive",
        doc=(
            "Keep the store's files open in each executor between reads, so that the splits "
            "of a file, in one query or the next, open it once; false opens a file for each "
            "read."
        ),
    ),
    Property(
        name="hive.file-handle-cache-size",
        field="file_handle_cache_size",
        default="256",
        kind="count",
        file="hive",
        doc=(
            "Most open files each executor JVM keeps between reads (least recently used "
            "closed first)."
        ),
    ),
    Property(
        name="hive.file-handle-cache-ttl-since-last-access",
        field="file_handle_cache_ttl",
        default="10m",
        kind="duration",
        file="hive",
        doc="A kept file not read for this long is closed.",
    ),
    # --- block cache --------------------------------------------------------------------
    Property(
        name="cache.enabled",
        field="cache_enabled",
        default="true",
        kind="bool",
        file="hive",
        doc=(
            "Cache file contents in aligned blocks on the node's local disk (under "
            "cache.base-directory, at most cache.alluxio.max-cache-size); false turns the tier "
            "off."
        ),
    ),
    Property(
        name="cache.type",
        field="cache_type",
        default="LOCAL",
        kind="cache_type",
        file="hive",
        doc="Block cache kind: LOCAL (ALLUXIO is accepted as a name for it).",
    ),
    Property(
        name="cache.base-directory",
        field="cache_base_directory",
        default="~/.raptorx/cache",
        kind="str",
        file="hive",
        doc=(
            "Local directory of the block and footer caches (one per node, shared by its "
            "processes)."
        ),
    ),
    Property(
        name="cache.block-size",
        field="cache_block_size",
        default="1MB",
        kind="size",
        minimum="1B",
        file="hive",
        doc="Size and alignment of a cached block.",
    ),
    Property(
        name="cache.alluxio.max-cache-size",
        field="cache_max_size",
        default="2GB",
        kind="size",
        file="hive",
        doc="Bytes the block cache may hold on disk; least recently used blocks are evicted.",
    ),
    Property(
        name="cache.group-shared",
        field="cache_group_shared",
        default="false",
        kind="bool",
        file="hive",
        doc=(
            "false: cache directories 0700 and files 0600 (the block and footer caches hold copies "
            "of table files); true: directories 2770 and files 0660, shared by the users of the "
            "cache directory's group."
        ),
    ),
    # --- fragment result cache (RaptorX's names; node configuration) -------------------
    Property(
        name="fragment-result-cache.enabled",
        field="fragment_cache_enabled",
        default="true",
        kind="bool",
        file="config",
        doc=(
            "Keep each split's result (rows after filters, or its partial aggregation) on the "
            "node's local disk and answer the same split read the same way from it; false turns "
            "the tier off."
        ),
    ),
    Property(
        name="fragment-result-cache.base-directory",
        field="fragment_cache_base_directory",
        default="~/.raptorx/fragment-cache",
        kind="str",
        file="config",
        doc="Local directory of the fragment result cache (one per node, shared by its processes).",
    ),
    Property(
        name="fragment-result-cache.max-cached-entries",
        field="fragment_cache_max_entries",
        default="10000",
        kind="int",
        minimum="1",
        file="config",
        doc=(
            "Entries the fragment result cache holds; when full, new results are not stored until "
            "eviction or expiry makes room."
        ),
    ),
    Property(
        name="fragment-result-cache.cache-ttl",
        field="fragment_cache_ttl",
        default="2d",
        kind="duration",
        file="config",
        doc="How long a fragment result is kept after it is stored; 0s: until evicted.",
    ),
    Property(
        name="fragment-result-cache.max-cache-size",
        field="fragment_cache_max_size",
        default="2GB",
        kind="size",
        minimum="1MB",
        file="config",
        doc=(
            "Bytes the fragment result cache may hold on disk. Over it, entries are evicted in "
            "the order they were stored by a second-chance (CLOCK) pass: an entry read since it "
            "was stored, or since its last second chance, goes to the back once instead of "
            "being evicted."
        ),
    ),
    Property(
        name="fragment-result-cache.store-on-first-use",
        field="fragment_cache_store_on_first_use",
        default="false",
        kind="bool",
        file="config",
        doc=(
            "false: Spark's reader stores a split's fragment the second time this driver plans "
            "the split's key, so a query run once fills no disk and pays no store; true: the "
            "first time, so a query's second run is served from fragments. The Python reader "
            "stores every fragment it computes."
        ),
    ),
    Property(
        name="fragment-result-cache.max-single-cached-entry-size",
        field="fragment_cache_max_entry_size",
        default="64MB",
        kind="size",
        file="config",
        doc="The largest result stored; a bigger one is computed and not stored.",
    ),
    # --- engine-wide -------------------------------------------------------------------
    Property(
        name="metrics.directory",
        field="metrics_directory",
        default="",
        kind="str",
        file="config",
        doc="Directory where every process appends its counters (tests, benchmark); empty: off.",
    ),
    Property(
        name="metrics.spark-directory",
        field="metrics_spark_directory",
        default="",
        kind="str",
        file="config",
        doc=(
            "Directory where this application's processes publish their counter totals for Spark's "
            "metrics system (the native jar's metrics plugin); register() sets it to "
            "<spark.raptorx.metrics.dir>/<application id> when the plugin is on; empty: not "
            "published."
        ),
    ),
)

PROPERTIES_BY_NAME: dict[str, Property] = {p.name: p for p in PROPERTIES}

#: The property values that turn every cache tier off (each tier is on by default): the
#: metastore cache, the listing cache, the footer cache, the ORC tail and stripe caches, the
#: file handle cache, the block cache and the fragment result cache. For comparisons with and
#: without caching, and for tests that assume no cache.
TIERS_OFF: dict[str, str] = {
    "hive.metastore-cache-ttl": "0s",
    "hive.file-status-cache-tables": "",
    "hive.parquet.metadata-cache-enabled": "false",
    "hive.orc.file-tail-cache-enabled": "false",
    "hive.orc.stripe-metadata-cache-enabled": "false",
    "hive.file-handle-cache-enabled": "false",
    "cache.enabled": "false",
    "fragment-result-cache.enabled": "false",
}


@dataclass(frozen=True)
class Settings:
    """Typed, validated configuration. Build with ``raptorx_py.config.load_settings``."""

    connector_name: str
    metastore_url: str
    metastore_uri: str
    metastore_timeout: float  # seconds
    metastore_max_retries: int
    metastore_min_backoff: float  # seconds
    metastore_max_backoff: float  # seconds
    metastore_partition_batch_size: int
    warehouse_dir: str
    metastore_cache_ttl: float  # seconds
    metastore_refresh_interval: float  # seconds
    metastore_cache_maximum_size: int
    metastore_cache_prewarm: bool
    metastore_cache_scope: str  # "ALL" | "PARTITION"
    partition_versioning_enabled: bool
    support_concurrency: bool
    lock_numretries: int
    lock_sleep_between_retries: float  # seconds
    txn_timeout: float  # seconds
    s3_endpoint: str
    s3_access_key: str
    s3_secret_key: str
    s3_region: str
    s3_path_style_access: bool
    s3_connect_timeout: float  # seconds
    s3_socket_timeout: float  # seconds
    s3_max_error_retries: int
    stats_pruning_enabled: bool
    aggregation_pushdown_enabled: bool
    parquet_reader: str  # "AUTO" | "SPARK" | "PYTHON"
    max_split_size: int  # bytes
    min_split_count: int
    node_selection_strategy: str  # "NO_PREFERENCE" | "SOFT_AFFINITY"
    soft_affinity_max_split_imbalance: int
    file_status_cache_tables: str
    file_status_cache_size: int
    file_status_cache_expire_time: float  # seconds
    ignore_absent_partitions: bool
    parquet_metadata_cache_enabled: bool
    parquet_metadata_cache_size: int  # bytes
    parquet_metadata_cache_ttl: float  # seconds
    storage_format: str
    orc_file_tail_cache_enabled: bool
    orc_file_tail_cache_size: int  # bytes
    orc_file_tail_cache_ttl: float  # seconds
    orc_stripe_metadata_cache_enabled: bool
    orc_stripe_footer_cache_size: int  # bytes
    orc_stripe_footer_cache_ttl: float  # seconds
    orc_stripe_stream_cache_size: int  # bytes
    orc_stripe_stream_cache_ttl: float  # seconds
    file_handle_cache_enabled: bool
    file_handle_cache_size: int
    file_handle_cache_ttl: float  # seconds
    cache_enabled: bool
    cache_type: str  # "LOCAL"
    cache_base_directory: str
    cache_block_size: int  # bytes
    cache_max_size: int  # bytes
    cache_group_shared: bool
    fragment_cache_enabled: bool
    fragment_cache_base_directory: str
    fragment_cache_max_entries: int
    fragment_cache_ttl: float  # seconds
    fragment_cache_max_size: int  # bytes
    fragment_cache_max_entry_size: int  # bytes
    fragment_cache_store_on_first_use: bool
    metrics_directory: str
    metrics_spark_directory: str
    #: The property strings these settings were built from (name -> value), so that the
    #: exact configuration can be shipped to Spark's Python workers and rebuilt there.
    source: tuple[tuple[str, str], ...] = ()

    def properties(self) -> dict[str, str]:
        return dict(self.source)

    # Each cache tier's own slice (``config/tiers.py``): what its factory takes.
    @property
    def block_cache(self) -> BlockCacheSettings:
        return BlockCacheSettings(
            self.cache_enabled,
            self.cache_base_directory,
            self.cache_block_size,
            self.cache_max_size,
            self.cache_group_shared,
        )

    @property
    def footer_cache(self) -> FooterCacheSettings:
        return FooterCacheSettings(
            self.parquet_metadata_cache_enabled,
            self.cache_base_directory,
            self.parquet_metadata_cache_size,
            self.parquet_metadata_cache_ttl,
            self.cache_max_size,
            self.cache_group_shared,
        )

    @property
    def fragment_cache(self) -> FragmentCacheSettings:
        return FragmentCacheSettings(
            self.fragment_cache_enabled,
            self.fragment_cache_base_directory,
            self.fragment_cache_max_size,
            self.fragment_cache_max_entries,
            self.fragment_cache_max_entry_size,
            self.fragment_cache_ttl,
            self.cache_group_shared,
        )

    @property
    def listing_cache(self) -> ListingCacheSettings:
        return ListingCacheSettings(
            self.file_status_cache_tables,
            self.file_status_cache_size,
            self.file_status_cache_expire_time,
            self.cache_base_directory,
        )

    @property
    def metastore_connection(self) -> MetastoreConnectionSettings:
        return MetastoreConnectionSettings(
            self.metastore_url,
            self.metastore_uri,
            self.metastore_timeout,
            self.metastore_max_retries,
            self.metastore_min_backoff,
            self.metastore_max_backoff,
            self.metastore_partition_batch_size,
            self.txn_timeout,
        )

    @property
    def metastore_cache(self) -> MetastoreCacheSettings:
        return MetastoreCacheSettings(
            self.metastore_cache_ttl,
            self.metastore_cache_scope,
            self.metastore_cache_maximum_size,
            self.partition_versioning_enabled,
            self.metastore_refresh_interval,
            self.metastore_cache_prewarm,
            self.metastore_connection,
            self.cache_base_directory,
        )


SETTINGS_FIELDS = tuple(f.name for f in dataclasses.fields(Settings) if f.name != "source")
