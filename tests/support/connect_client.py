"""The Spark Connect side of tests/integration/test_connect.py, run in its own process:
creating a Connect session sets process-wide state in pyspark (``SPARK_CONNECT_MODE_ENABLED``,
which routes every later ``pyspark.sql.functions`` call to Connect), so it cannot share the
test process with the classic session fixture.

    python -m tests.support.connect_client SPEC.json OUT.json

SPEC: ``url``, ``properties``, ``tables`` (names for ``QUERIES``), ``write_table``,
``tilde_home`` and ``tilde_table`` (the ``~`` scenario), ``missing_provider_class``, and
``start_on_stdin`` (optional: import pyspark's Connect client, then wait for a line on stdin
before connecting, so the imports overlap the server's start). OUT: per
step its rows (sorted, JSON values) and the counters it added (``scan.*`` from the server's
Python workers, via the metrics directory), or the error it raised.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def facts(spark, t):
    return spark.read.format("tiered_hive").load(t["facts"])


def dims(spark, t):
    return spark.read.format("tiered_hive").load(t["dims"])


#: name -> DataFrame over the test tables; run alike on the classic and the Connect session.
QUERIES = {
    "filter": lambda spark, t: facts(spark, t).where("price > 10 AND m = 2").select("id", "name"),
    "prune": lambda spark, t: facts(spark, t).where("qty = 3").select("name"),
    "join": lambda spark, t: (
        facts(spark, t)
        .join(dims(spark, t), "qty")
        .groupBy("label")
        .agg({"price": "sum", "id": "count"})
    ),
}


def rows(df) -> list:
    return sorted(
        [
            [v if isinstance(v, (int, float, str, type(None))) else str(v) for v in r]
            for r in df.collect()
        ],
        key=repr,
    )


def write_and_read(spark, t, target: str) -> list:
    """Append two partitions of facts to a new managed table, then read it back."""
    facts(spark, t).where("m = 1 OR id < 25").select("id", "qty", "m").write.format(
        "tiered_hive"
    ).option("partition_by", "m").mode("append").save(target)
    return rows(spark.read.format("tiered_hive").load(target))


class Counting:
    def __init__(self, metrics_dir: str | None):
        self.metrics_dir = metrics_dir

    def step(self, fn) -> dict:
        from tests.support.counter_deltas import CounterDeltas, sink_totals

        started = time.monotonic()
        deltas = CounterDeltas(read=sink_totals(self.metrics_dir))
        try:
            out = {"rows": fn()}
        except Exception as e:  # reported to the test, which asserts on it
            out = {
                "error": f"{type(e).__module__}.{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(),
            }
        out["counts"] = {k: v for k, v in deltas.items() if k.startswith(("scan.", "planning."))}
        out["seconds"] = round(time.monotonic() - started, 2)  # diagnostics only
        return out


def main(spec_path: str, out_path: str) -> int:
    with open(spec_path) as f:
        spec = json.load(f)
    from raptorx_py import native
    from raptorx_py.session import register, tiered_session

    if spec.get("start_on_stdin"):
        import pyspark.sql.connect.session  # noqa: F401 (imported before the server listens)

        sys.stdin.readline()
    out: dict = {}
    started = time.monotonic()
    counting = Counting(spec["properties"].get("metrics.directory"))
    spark = tiered_session(
        remote=spec["url"],
        properties=spec["properties"],
        spark_conf={"spark.sql.session.timeZone": "UTC"},
    )
    out["session_seconds"] = round(time.monotonic() - started, 2)
    out["session_type"] = f"{type(spark).__module__}.{type(spark).__name__}"
    t = spec["tables"]
    for name, query in QUERIES.items():
        out[name] = counting.step(lambda query=query: rows(query(spark, t)))
    out["write"] = counting.step(lambda: write_and_read(spark, t, spec["write_table"]))
    # Tables by name: the catalog register() set on the server's session.
    out["catalog_filter"] = counting.step(
        lambda: rows(
            spark.sql(f"select id, name from raptorx.{t['facts']} where price > 10 AND m = 2")
        )
    )
    out["catalog_tables"] = counting.step(
        lambda: rows(spark.sql(f"show tables in raptorx.{t['db']}").select("tableName"))
    )

    # The default metastore, sqlite:///~/.raptorx/metastore.db, under this client's home.
    os.environ["HOME"] = spec["tilde_home"]
    tilde = {
        k: v
        for k, v in spec["properties"].items()
        if k not in ("hive.metastore.url", "hive.metastore.warehouse.dir")
    }
    settings = register(spark, properties=tilde)
    out["tilde_metastore_url"] = settings.metastore_url

    def tilde_write():
        spark.range(0, 5).write.format("tiered_hive").mode("append").save(spec["tilde_table"])
        return rows(spark.read.format("tiered_hive").load(spec["tilde_table"]))

    out["tilde"] = counting.step(tilde_write)

    # A server that cannot load the provider: the check runs on the server all the same.
    native.PROVIDER_CLASS = spec["missing_provider_class"]
    out["missing_provider"] = counting.step(lambda: register(spark, properties=tilde))
    spark.stop()
    with open(out_path, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
