"""A split's read spec: the one value a split's result is computed from and keyed by.

``ReadSpec`` holds what a split returns depends on: the table, the file piece
(``planner.Split``, with the file's identity), the columns read with their types, the data
predicates this split evaluates (after statistics dropped those always true in its
partition), the pushed partial aggregation, and the Arrow schema handed to Spark. The
reader computes the split from these fields alone (``TieredHiveReader._split_result``) and
the fragment result cache's key (``fragment_keys.fragment_key``) hashes the same fields, so
the two cannot drift: a field the computation reads and the key ignores would have to be
added here, where the key sees it.

Specs are made at planning, on the driver (``read_specs``), and travel to the executors in
the task's input partition with their key already computed, so the JVM can look a split's
entry up by the key's digest (``fragment_handoff``) before any Python runs.

Limits: the code that computes (raptorx_py, pyarrow) is named in the key by
``fragment_keys`` (``code_identity``), not by a field here; the key is made on the driver,
so it names the driver's code, which in one application is the executors' too.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from raptorx_py.datasource.planning.fragment_keys import fragment_key
from raptorx_py.datasource.planning.planner import Split
from raptorx_py.hive.model import Column, Table
from raptorx_py.jvm_contract.pushed_aggregation import PushedAggregation


@dataclass(frozen=True)
class ReadSpec:
    """How one split is read (see the module docstring). ``key``: its fragment key, or None
    when its file has no version (never cached)."""

    table: Table
    split: Split
    columns: tuple[Column, ...]
    predicates: tuple
    aggregation: PushedAggregation | None
    output_schema: pa.Schema
    key: bytes | None

    @classmethod
    def of(
        cls,
        table: Table,
        split: Split,
        columns: tuple[Column, ...],
        predicates,
        aggregation: PushedAggregation | None,
        output_schema: pa.Schema,
    ) -> ReadSpec:
        """The spec of ``split`` read this way, with its key computed from the same values."""
        predicates = tuple(predicates)
        key = fragment_key(table, split, columns, predicates, aggregation, output_schema)
        return cls(table, split, tuple(columns), predicates, aggregation, output_schema, key)


def read_specs(
    table: Table,
    tasks,
    columns: tuple[Column, ...],
    data_predicates: tuple,
    aggregation: PushedAggregation | None,
    output_schema: pa.Schema,
) -> tuple[tuple[ReadSpec, ...], ...]:
    """One spec per split of each task: a split evaluates its own residual predicates when
    its partition's statistics dropped some (``Split.predicates``), else the scan's data
    predicates."""
    return tuple(
        tuple(
            ReadSpec.of(
                table,
                split,
                columns,
                data_predicates if split.predicates is None else split.predicates,
                aggregation,
                output_schema,
            )
            for split in task
        )
        for task in tasks
    )
