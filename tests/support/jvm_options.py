"""JVM options for the JVMs the tests start for themselves (the session's Spark driver, the
Hive Metastore, the Spark applications a test runs beside it), never for a process that
stands for a user's (``test_first_hour.py``'s scripts run as a user runs them).

``-XX:TieredStopAtLevel=1``: the client compiler (C1) only. At SF 0.01 a query's code runs
a few times and is compiled more than it runs: C2's compiler threads took 101 of the 283 CPU
seconds of the session's JVM over ``test_tpch_tiered.py`` and ``test_tpch_fragment_hits.py``,
37 of 88 over ``test_aggregate_pushdown.py`` (2026-11-28, BENCHMARKS.md). ``-XX:+UseSerialGC``:
one collector thread for heaps of a few hundred MB, no concurrent marking. Neither changes
what a test checks: rows, plans and counters are the same whichever compiler made the code.
"""

from __future__ import annotations

TEST_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def spark_java_options() -> str:
    """``TEST_JVM_OPTIONS`` as the value of ``spark.driver.extraJavaOptions`` (or executor)."""
    return " ".join(TEST_JVM_OPTIONS)


def spark_jvm_conf() -> dict[str, str]:
    """The Spark confs that give an application's driver and executors ``TEST_JVM_OPTIONS``."""
    return {
        "spark.driver.extraJavaOptions": spark_java_options(),
        "spark.executor.extraJavaOptions": spark_java_options(),
    }
