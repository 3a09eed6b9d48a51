"""Hive's partition names: ``k1=v1/k2=v2``, each value escaped as Hive's
``FileUtils.escapePathName`` does, and a NULL or empty value spelled
``__HIVE_DEFAULT_PARTITION__``. The metastore names partitions this way and the Hive
directory layout (``storage.hive_layout``) names their directories the same way, so the rule
lives here, below both."""

from __future__ import annotations

from collections.abc import Sequence

from raptorx_py.hive.model import HIVE_DEFAULT_PARTITION, Column

_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(0x20)}


def escape_partition_value(value: str | None) -> str:
    if value is None or value == "":
        return HIVE_DEFAULT_PARTITION
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


def unescape_partition_value(text: str) -> str | None:
    if text == HIVE_DEFAULT_PARTITION or text == "":
        return None
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "%" and _is_hex(text[i + 1 : i + 3]):
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def partition_name(keys: Sequence[Column], values: Sequence[str | None]) -> str:
    """Hive's partition name, ``k1=v1/k2=v2`` with escaped values."""
    return "/".join(f"{k.name}={escape_partition_value(v)}" for k, v in zip(keys, values))
