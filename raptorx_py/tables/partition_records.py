"""What a managed write's commit records in the metastore: the partitions it adds or alters
(an unpartitioned table: its parameters), each with its statistics, row count and the
``writeId`` that wrote it.

A partition's statistics are its last write's: an append's are the old ones merged with the
new files' (``file_statistics.appended``), an overwrite's replace them. An overwrite
replaces the whole table, so a partition it writes no row to is recorded as empty (its new
``base_<wid>/`` holds one file of no rows); partitions are never dropped, so a reader of an
older snapshot keeps reading them whole. Unpartitioned managed tables record no column
statistics (HMS's table statistics cannot be altered under a write id here), so they are
never pruned by them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raptorx_py.errors import SchemaError
from raptorx_py.hive.model import HIVE_DEFAULT_PARTITION, Partition, Table
from raptorx_py.hive.partition_names import partition_name
from raptorx_py.hive.table_parameters import WRITE_ID_PARAM
from raptorx_py.metastore.store import Metastore
from raptorx_py.tables.file_statistics import NO_ROWS_PARAMS, appended, summarize
from raptorx_py.tables.task_files import WrittenFile


def group_by_partition(files: Sequence[WrittenFile]) -> dict[tuple, list[WrittenFile]]:
    """The files of each partition the write writes rows to (``()``: the table's one)."""
    by_values: dict[tuple, list[WrittenFile]] = {}
    for f in files:
        by_values.setdefault(tuple(f.values), []).append(f)
    return by_values


def sort_key(values: tuple) -> tuple:
    """Orders partition values (None, a null value, last), e.g. to take locks in one order."""
    return tuple((v is None, v or "") for v in values)


@dataclass(frozen=True)
class WrittenPartitions:
    """The partitions a commit writes (``by_values``) against those ``table`` has
    (``existing``, listed under the write's locks)."""

    table: Table
    by_values: dict[tuple, list[WrittenFile]]
    existing: dict[tuple, Partition]

    @classmethod
    def of(cls, metastore: Metastore, table: Table, by_values: dict[tuple, list[WrittenFile]]):
        """List ``table``'s partitions and check the written ones against them."""
        if not table.is_partitioned:
            return cls(table, by_values, {})
        existing = {p.values: p for p in metastore.list_partitions(table)}
        check_partition_names(
            table.qualified_name, table.partition_keys, set(by_values), set(existing)
        )
        return cls(table, by_values, existing)

    def location_of(self, values: tuple) -> str:
        """Where the partition ``values`` is, or will be when the commit adds it."""
        table = self.table
        if not table.is_partitioned:
            return table.location.rstrip("/")
        p = self.existing.get(values)
        return (
            p.location
            if p is not None
            else f"{table.location.rstrip('/')}/{partition_name(table.partition_keys, values)}"
        ).rstrip("/")

    @property
    def untouched(self) -> list[tuple]:
        """The partitions (an unpartitioned table: its one) the write has no row for."""
        if self.table.is_partitioned:
            return [v for v in self.existing if v not in self.by_values]
        return [()] if not self.by_values else []


def check_partition_names(
    qualified: str, keys, values: set, existing: set | frozenset = frozenset()
) -> None:
    """Refuse partition values that are different values but one Hive partition: NULL and
    the string ``__HIVE_DEFAULT_PARTITION__`` (Hive's name for NULL) are both
    ``k=__HIVE_DEFAULT_PARTITION__``, and the metastore holds one partition per name."""
    by_name: dict[str, tuple] = {partition_name(keys, v): v for v in existing}
    for v in sorted(values, key=sort_key):
        name = partition_name(keys, v)
        other = by_name.setdefault(name, v)
        if other != v:
            shown = " and ".join(repr(list(x)).replace("None", "NULL") for x in (other, v))
            raise SchemaError(
                f"the write to {qualified} has partition values {shown}, which are different "
                f"values but the same Hive partition {name} (Hive writes NULL as the string "
                f"'{HIVE_DEFAULT_PARTITION}'); nothing was written: replace that string, or "
                f"the NULLs, in the data"
            )


def record_partitions(
    metastore: Metastore, partitions: WrittenPartitions, write_id: int, *, overwrite: bool
) -> tuple[int, int]:
    """Add and alter the written partitions (see the module docstring); returns how many
    were added and how many altered. Run inside the commit's database transaction."""
    table = partitions.table
    if not table.is_partitioned:
        _, params = summarize(partitions.by_values.get((), []))
        if not overwrite:
            old = Partition((), table.location, table.parameters, {})
            _, params = appended(old, {}, params)
        metastore.alter_table_parameters(
            table.database, table.name, {**params, WRITE_ID_PARAM: str(write_id)}, write_id=write_id
        )
        return 0, 0
    new: list[Partition] = []
    altered: list[Partition] = []
    for values, group in partitions.by_values.items():
        stats, params = summarize(group)
        written = partitions.existing.get(values)
        if written is None:
            new.append(Partition(values, partitions.location_of(values), params, stats))
            continue
        if not overwrite:
            stats, params = appended(written, stats, params)
        altered.append(Partition(values, written.location, {**written.parameters, **params}, stats))
    if overwrite:
        for values in partitions.untouched:
            emptied = partitions.existing[values]
            altered.append(
                Partition(values, emptied.location, {**emptied.parameters, **NO_ROWS_PARAMS}, {})
            )
    if new:
        metastore.add_partitions(table, new, write_id=write_id)
    for p in altered:
        metastore.alter_partition(table, p, write_id=write_id)
    return len(new), len(altered)
