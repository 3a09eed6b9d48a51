"""What the Spark catalog plugin (``native/.../TieredHiveCatalog.scala``) asks of the metastore:
its namespaces, the tables of one, and whether a namespace or table exists.

How a request travels: as the creation of the Python source with the option
``raptorx.catalog_request`` (``protocol.CATALOG_REQUEST_OPTION``, a JSON object), whose
``schema()`` answers with a one-field schema carrying the answer (JSON) in its metadata
(``CATALOG_ANSWER_KEY``). So a request goes exactly where a ``load()`` goes: one callback into
the application's planner when one is registered (``driver_planner.py``), else a planning
Python worker (a Spark Connect server), with the same configuration, through the same
versioned metastore cache's backend, and needs no protocol of its own. The JVM never opens a
metastore itself.

Requests (``op``) and answers:

- ``namespaces``: ``{"namespaces": [...]}``, every database;
- ``namespace`` (``namespace``): ``{"exists": true, "location": ...}`` or the missing answer;
- ``tables`` (``namespace``): ``{"tables": [...]}`` or the missing answer;
- ``table`` (``namespace``, ``table``): ``{"exists": true}`` or the missing answer;
- ``flush_metadata_cache`` (``namespace`` and ``table`` optional; Trino's procedure,
  ``CALL raptorx.system.flush_metadata_cache(schema_name => ..., table_name => ...)``):
  forgets the cached versions of that table, of every table of that namespace, or of all,
  in the versioned metastore cache of the process that answers (``cached_store``):
  ``{"flushed": "<what>"}`` or the missing answer. With the driver's planner that process
  plans every scan, so the next query reloads; without it (a Spark Connect server) it is
  one planning worker's cache, and the others keep theirs until their entries expire.

A missing answer is ``{"missing": "namespace" | "table", "listing": <text>}``, the text
naming what exists (``NoSuchObjectError.listing``: all names up to ten, else the closest and
how many more), which the catalog puts in Spark's ``NoSuchNamespaceException`` /
``NoSuchTableException``. Names are the metastore's (Hive's: lower case). Listings are read
from the backend, not the cache: they are rare (``SHOW``), and a cached list would need its
own invalidation.
"""

from __future__ import annotations

import json

from pyspark.sql.types import StringType, StructField, StructType

from raptorx_py.config.settings import Settings
from raptorx_py.errors import NoSuchObjectError, SchemaError
from raptorx_py.jvm_contract.protocol import CATALOG_ANSWER_KEY
from raptorx_py.metastore.cached_store import with_cached_metastore
from raptorx_py.metrics import counters

#: The operations a request may name, and the arguments each requires.
OPERATIONS: dict[str, tuple[str, ...]] = {
    "namespaces": (),
    "namespace": ("namespace",),
    "tables": ("namespace",),
    "table": ("namespace", "table"),
    "flush_metadata_cache": (),
}


def parse_request(text: str) -> dict[str, str]:
    """The request in the option's JSON text; a ``SchemaError`` names what is wrong."""
    try:
        request = json.loads(text)
    except ValueError as e:
        raise SchemaError(f"a catalog request is not JSON: {text!r}") from e
    op = request.get("op") if isinstance(request, dict) else None
    if op not in OPERATIONS:
        raise SchemaError(
            f"unknown catalog request {op!r} in {text!r}; known: {', '.join(OPERATIONS)}"
        )
    missing = [a for a in OPERATIONS[op] if not isinstance(request.get(a), str)]
    if missing:
        raise SchemaError(f"the catalog request {op!r} lacks {', '.join(missing)}: {text!r}")
    return request


def answer(settings: Settings, request: dict[str, str]) -> dict:
    """The answer to ``request`` (see the module docstring), from ``settings``' metastore."""
    counters.add("catalog.requests")
    op = request["op"]

    def ask(cache) -> dict:
        ms = cache.metastore
        if op == "namespaces":
            return {"namespaces": sorted(ms.list_databases())}
        if op == "flush_metadata_cache" and not request.get("namespace"):
            if request.get("table"):
                raise SchemaError("flush_metadata_cache: a table_name needs its schema_name")
            cache.invalidate_all()
            return {"flushed": "all"}
        database = request["namespace"].lower()  # Hive's names are case-insensitive
        try:
            db = ms.get_database(database)
        except NoSuchObjectError as e:
            return _missing("namespace", database, e.existing)
        if op == "namespace":
            return {"exists": True, "location": db.location or ""}
        tables = ms.list_tables(database)
        if op == "tables":
            return {"tables": sorted(tables)}
        if op == "flush_metadata_cache" and not request.get("table"):
            for name in tables:
                cache.invalidate_table(f"{database}.{name}")
            return {"flushed": database}
        table = request["table"].lower()
        if table not in tables:
            return _missing("table", f"{database}.{table}", tables)
        if op == "flush_metadata_cache":
            cache.invalidate_table(f"{database}.{table}")
            return {"flushed": f"{database}.{table}"}
        return {"exists": True}

    return with_cached_metastore(settings.metastore_cache, ask)


def _missing(kind: str, name: str, existing) -> dict:
    names = sorted(existing)
    return {
        "missing": kind,
        "listing": NoSuchObjectError.listing(kind, name, names, None),
    }


def answer_schema(result: dict) -> StructType:
    """The schema that carries ``result`` back to the JVM (see the module docstring)."""
    return StructType(
        [StructField("answer", StringType(), True, {CATALOG_ANSWER_KEY: json.dumps(result)})]
    )
