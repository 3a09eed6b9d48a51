"""What a task's input partition tells the JVM so that Spark's own Parquet or ORC reader reads
its splits (through this node's block cache), and what the JVM tells the Python reader back.

RaptorX's data cache sits under the engine's own reader. Here the planner (Python) keeps
the decisions: which files, which byte ranges, which version of each file, which splits the
fragment result cache should get; the JVM (``native/.../JvmFileRead.scala``) reads the
chosen splits with Spark's vectorized Parquet or ORC reader over a Hadoop file system that serves
the node's block cache and fills it on a miss (``BlockCachingFileSystem.scala``), and
applies the scan's pushed filters with Spark's own expressions.

The mark, one ASCII string on the partition (found in the pickled bytes without unpickling,
as ``fragment_handoff``'s is)::

    raptorx-parquet|<the plan, JSON in UTF-8, in hex>|<one flag per split>|

The plan: ``format`` (the table's files' format, ``PARQUET`` or ``ORC``: Spark's Parquet or
ORC reader reads them), ``formats`` (every format the scan's splits are in: a table whose
partitions mix formats needs both readers; each split in another format than the table's
says its own, ``format``), ``data_schema`` (the table's data columns as Spark's DDL:
Spark's ORC reader reads a file of old Hive by position in them), ``partition_keys`` (the
table's keys, in order), ``cache`` (the block cache's directory as the settings spell it,
its block size, whether it is group-shared and its bound in bytes, which the JVM keeps to
itself on a node where no Python store runs; null when the tier is off), ``fragments``
(what the JVM needs to store a split's fragment result cache entry,
``FragmentStores.scala``: the largest entry, the time to live in milliseconds (0: none),
the cache's size bound and whether it is group-shared; null when the tier is off),
``orc_tail_cache`` (the bound in bytes and the time to live since last access, in
milliseconds, of the executor JVM's cache of ORC file tails, ``OrcTailCache.scala``; null
when the tier is off; Parquet files ignore it), ``orc_stripe_cache`` (the bounds in bytes
and times to live since last access, in milliseconds, of the executor JVM's ORC stripe
footers and index streams, ``OrcStripeCache.scala``; null when the tier is off),
``file_handles`` (the most open files the executor JVM keeps idle and the time one stays
idle, in milliseconds, ``FileHandles.scala``; null when the tier is off), ``metrics`` (the
metrics directory), ``hadoop`` (settings the JVM's file system for the table's store needs:
``fs.s3a.*`` from ``hive.s3.*``) and ``splits``: per split either null (the Python reader
reads it) or its Hadoop path, size, version, ETag, block key (``block_cache.block_key``;
null: never cached), byte range, partition values (canonical text, below) and whether any
data predicate is left for it (``filter``: statistics may have made them all true there)
and whether the JVM stores its rows as the split's fragment entry (``store``; the entry's
key is the fragment mark's, ``fragment_handoff``) and its partition's name (``partition``,
``k=v/...``; null for an unpartitioned table). ``changed_advice`` is what to do about a
file that changed after planning (``storage.changed_files``), with ``{partition}`` where a
split's partition name goes: the JVM appends it to the ``FileChangedException`` it raises,
so that Spark's reader fails with the Python reader's words.

Flags: ``-`` not served; the JVM stamps ``J`` on each split it read, and the Python reader
skips those (``served_by_jvm``, with the fragment mark's flags).

Partition values travel as text the JVM parses by the key's type: integers and decimals as
their digits, dates as ``YYYY-MM-DD``, booleans ``true``/``false``, strings in hex of their
UTF-8, null as null; the JVM parses them by the key's type in the scan's schema. A split
with a value of another kind (``canonical_value`` raises ``TypeError``) is read by Python,
and so is a key of a type the JVM does not parse.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Sequence
from typing import Any

from raptorx_py.cache.block_cache import block_key
from raptorx_py.config.settings import Settings
from raptorx_py.jvm_contract.fragment_handoff import served_flags
from raptorx_py.storage.changed_files import PARTITION, changed_file_advice, partition_spec
from raptorx_py.storage.fs import split_url

MARKER = "raptorx-parquet|"
UNSERVED, SERVED = "-", "J"
ATTRIBUTE = "jvm_read"


def canonical_value(value: Any) -> str | None:
    """A partition value as the JVM parses it (see the module docstring)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, datetime.datetime):  # a subclass of date: never a key type here
        raise TypeError(f"partition value {value!r} has no canonical form")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str):
        return value.encode().hex()
    raise TypeError(f"partition value {value!r} has no canonical form")


def hadoop_path(url: str) -> str:
    """The URL as Hadoop names it: ``s3://b/k`` -> ``s3a://b/k``; a local path -> ``file:``."""
    scheme, path = split_url(url)
    return f"file://{path}" if scheme == "file" else f"s3a://{path}"


def hadoop_settings(settings: Settings) -> dict[str, str]:
    """The ``fs.s3a.*`` settings that point Hadoop's s3a at the store ``hive.s3.*`` names
    (only those set: an unset one is the session's own ``spark.hadoop.fs.s3a.*``)."""
    out: dict[str, str] = {}
    if settings.s3_endpoint:
        out["fs.s3a.endpoint"] = settings.s3_endpoint
        out["fs.s3a.connection.ssl.enabled"] = str(
            not settings.s3_endpoint.startswith("http://")
        ).lower()
    if settings.s3_region:
        out["fs.s3a.endpoint.region"] = settings.s3_region
    out["fs.s3a.path.style.access"] = str(bool(settings.s3_path_style_access)).lower()
    if settings.s3_access_key and settings.s3_secret_key:
        out["fs.s3a.access.key"] = settings.s3_access_key
        out["fs.s3a.secret.key"] = settings.s3_secret_key
        out["fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        )
    return out


def split_plan(split, settings: Settings, filtered: bool = True) -> dict[str, Any]:
    """What the JVM needs to read ``split`` (a ``planner.Split``); ``filtered`` False when
    no data predicate is left for it (none, or statistics made them all true in its
    partition): its rows need no filtering beyond the partition pruning done."""
    scheme, path = split_url(split.url)
    key = None
    if settings.cache_enabled and split.version:
        key = block_key(scheme, path, split.size, str(split.version), settings.cache_block_size)
    return {
        "path": hadoop_path(split.url),
        "size": split.size,
        "version": split.version,
        "etag": split.etag,
        "key": key,
        "start": split.offset,
        "length": split.size - split.offset if split.length is None else split.length,
        "pv": [canonical_value(v) for v in split.partition_values],
        "filter": bool(filtered),
        **({"format": split.storage_format} if split.storage_format else {}),
    }


def data_schema_ddl(table) -> str:
    """The table's data columns as Spark's DDL (Hive's type names are Spark's): ORC files
    of old Hive, whose columns are ``_col0``, ``_col1``..., are read by position in it."""
    return ", ".join(f"`{c.name.replace('`', '``')}` {c.type}" for c in table.columns)


def handoff_mark(
    settings: Settings,
    table,
    specs: Sequence[Any],
    store: Sequence[bool] | None = None,
    formats: Sequence[str] | None = None,
) -> str:
    """The mark of a task reading ``table`` (a ``hive.model.Table``; its format says which of
    Spark's readers reads its files): ``specs`` holds, per split, the ``read_spec.ReadSpec``
    of a split the JVM reads, or None for one the Python reader reads; ``store``, per split,
    whether the JVM keeps its rows as its fragment entry (none by default); ``formats``, every
    format the scan's splits are in (default: the table's)."""
    stores = list(store) if store is not None else [False] * len(specs)
    partitioned = bool(table.partition_keys)
    plan = {
        "v": 1,
        "format": table.storage_format,
        "formats": sorted(formats or [table.storage_format]),
        "data_schema": data_schema_ddl(table),
        "partition_keys": [k.name for k in table.partition_keys],
        "changed_advice": changed_file_advice(
            table.qualified_name,
            PARTITION if partitioned else None,
            settings.file_status_cache_expire_time,
        ),
        "cache": (
            {
                "dir": settings.cache_base_directory,
                "block_size": settings.cache_block_size,
                "group_shared": bool(settings.cache_group_shared),
                "max_bytes": settings.cache_max_size,
            }
            if settings.cache_enabled
            else None
        ),
        "fragments": (
            {
                "max_entry_bytes": settings.fragment_cache_max_entry_size,
                "ttl_ms": int((settings.fragment_cache_ttl or 0) * 1000),
                "max_bytes": settings.fragment_cache_max_size,
                "group_shared": bool(settings.cache_group_shared),
            }
            if settings.fragment_cache_enabled
            else None
        ),
        "orc_tail_cache": (
            {
                "max_bytes": settings.orc_file_tail_cache_size,
                "ttl_ms": int(settings.orc_file_tail_cache_ttl * 1000),
            }
            if settings.orc_file_tail_cache_enabled
            else None
        ),
        "orc_stripe_cache": (
            {
                "footer_max_bytes": settings.orc_stripe_footer_cache_size,
                "footer_ttl_ms": int(settings.orc_stripe_footer_cache_ttl * 1000),
                "stream_max_bytes": settings.orc_stripe_stream_cache_size,
                "stream_ttl_ms": int(settings.orc_stripe_stream_cache_ttl * 1000),
            }
            if settings.orc_stripe_metadata_cache_enabled
            else None
        ),
        "file_handles": (
            {
                "max_idle": settings.file_handle_cache_size,
                "ttl_ms": int(settings.file_handle_cache_ttl * 1000),
            }
            if settings.file_handle_cache_enabled
            else None
        ),
        "metrics": settings.metrics_directory or "",
        "hadoop": hadoop_settings(settings),
        "splits": [
            None
            if s is None
            else {
                **split_plan(s.split, settings, bool(s.predicates)),
                "store": bool(keep and s.key is not None),
                "partition": (
                    partition_spec(table, s.split.partition_values) if partitioned else None
                ),
            }
            for s, keep in zip(specs, stores)
        ],
    }
    text = json.dumps(plan, separators=(",", ":")).encode().hex()
    return f"{MARKER}{text}|{UNSERVED * len(specs)}|"


def mark_partition(partition, mark: str):
    setattr(partition, ATTRIBUTE, mark)
    return partition


def served_by_jvm(partition, splits: int) -> tuple[bool, ...]:
    """Per split, whether the JVM read it (all False without a matching mark)."""
    return served_flags(getattr(partition, ATTRIBUTE, None), MARKER, splits)
