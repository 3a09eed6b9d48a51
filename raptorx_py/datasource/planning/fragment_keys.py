"""The fragment result cache's key (``cache.fragment_cache``) for one split read one way.

A key names everything a split's result depends on, so that the same key always means the
same rows: the table (its metastore id and name), the file's identity (URL, size, and its
version: ``storage.file_versions``, a local file's inode, change and modification
times, an object's ETag) and the piece of it read, the partition's values, the columns read
with their types, the data predicates the split evaluates, the pushed partial aggregation,
the Arrow schema handed to Spark, and the identity of the code that computes the result
(``datasource.planning.code_identity``: a digest of the package's sources, pyarrow's and Python's
versions), so a fix to how results are computed or encoded never meets results computed
before it. A managed table's write id is in the file's URL (its ``base_``/``delta_``
directory), so a new write is a new key for the partitions it touched and for no other.
Partition predicates are not in the key: they only decide which splits exist, never what a
split returns.

The predicates are those the split evaluates: the scan's data predicates less those its
partition's trusted statistics make always true there (``planner``: ``Split.predicates``,
in canonical order), sorted by their text, so neither their order in the query nor a
predicate the statistics dropped changes the key.

The key starts with a digest of the file's URL (``cache.fragment_cache.file_prefix``), so
``raptorx cache invalidate`` finds every entry of a file by name.

Limits: a file the store gives no version for has no key and is never cached. What the key
trusts of a file is what its version can tell apart (``storage.file_versions``).
"""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa

from raptorx_py.cache.fragment_cache import file_prefix
from raptorx_py.datasource.planning.code_identity import code_identity
from raptorx_py.hive.model import Column, Table


def fragment_key(
    table: Table,
    split,
    columns: tuple[Column, ...],
    predicates,
    aggregation,
    output_schema: pa.Schema,
) -> bytes | None:
    """The key of ``split`` read as described, or None when its file has no version."""
    if split.version is None:
        return None
    parts = [
        code_identity(),
        table.id,
        table.qualified_name,
        split.url,
        split.size,
        split.version,
        split.offset,
        split.length,
        [repr(v) for v in split.partition_values],
        [(c.name, c.type) for c in columns],
        sorted(repr(p) for p in predicates),
        # Its filters are not the split's: the data ones are ``predicates`` above, the
        # partition ones only chose the splits.
        None if aggregation is None else repr((aggregation.group_by, aggregation.aggregates)),
        output_schema.to_string(show_field_metadata=False, show_schema_metadata=False),
    ]
    # The file's prefix first: ``FragmentCache.invalidate`` finds a file's entries by it.
    return file_prefix(split.url) + hashlib.sha256(json.dumps(parts).encode()).digest()[:20]
