"""What to do about a file that changed after a plan listed it: the one text both readers
give.

A plan reads the versions it listed, or fails (``FileChangedError``): re-reading another
version would mix it with the listing's other files and with statistics (pruning, dropped
predicates) taken for the listed one. The listing is taken again by the next plan, unless
the file-listing cache keeps a sealed partition's, which it does until the partition's
metastore entry changes or the listing expires. The Python reader appends this advice to
its error (``datasource.reading.scan``); the JVM appends the same text, handed to it in
the read's plan with ``PARTITION`` where the partition's name goes
(``jvm_contract.jvm_read_handoff``), to the ``FileChangedException`` Spark's reader raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raptorx_py.hive.column_types import encode_value
from raptorx_py.hive.partition_names import partition_name

#: Where the JVM puts a split's partition name (``k=v/...``) in a partitioned table's advice.
PARTITION = "{partition}"


def partition_spec(table, values: Sequence[Any]) -> str:
    """The name (``k=v/...``) of ``table``'s partition with key values ``values``."""
    encoded = [
        None if v is None else encode_value(v, k.type) for k, v in zip(table.partition_keys, values)
    ]
    return partition_name(table.partition_keys, encoded)


def changed_file_advice(qualified: str, spec: str | None, expire_seconds: float) -> str:
    """The advice for a changed file of table ``qualified``'s partition ``spec`` (None: the
    table is unpartitioned), whose sealed listing lives ``expire_seconds``
    (``hive.file-status-cache-expire-time``)."""
    if spec is not None:
        where = f"partition {spec} of {qualified}"
        commands = (
            f"`raptorx partition unseal {qualified} {spec}`, change its files, then "
            f"`raptorx partition seal {qualified} {spec}` (which also recomputes its statistics)"
        )
    else:
        where = qualified
        commands = (
            f"register it again (`raptorx table register {qualified} <url> --replace`) "
            f"after changing them"
        )
    return (
        f"Run the query again: an unsealed {where} is listed again by the next query. If "
        f"it is sealed and hive.file-status-cache-tables names {qualified}, its cached "
        f"listing names the old version until it expires (hive.file-status-cache-expire-time,"
        f" {expire_seconds:g}s) or its metastore entry changes: a sealed partition's files "
        f"must not change; to change them: {commands}"
    )
