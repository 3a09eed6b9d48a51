"""Pure functions of the TPC-H benchmark: statistics, the results summary, Markdown, chart.

Nothing here starts Spark or an object store, so every function can be unit-tested on a
synthetic results dict. The runner (``benchmarks.tpch_suite``) builds that dict; its shape
(``SCHEMA_VERSION`` 1) is:

.. code-block:: python

    {
      "schema_version": 1,
      "command": "python -m benchmarks.tpch_suite --scale 1 ...",
      "started_at": "2025-01-01T12:00:00+00:00", "finished_at": "...", "wall_seconds": 812.4,
      "machine": {"platform": ..., "cpu_count": 2, "memory_bytes": ..., "python": ...,
                  "pyspark": ..., "java": ...},
      "scale": 1.0, "latency_ms": 20.0,
      "endpoint": {"url": ..., "request_cost": <what the endpoint's probe returned>},
      "warmup": 1, "repetitions": 3,
      "configurations": [{"name": "spark-parquet-local", "description": "..."}, ...],
      "queries": {
        "1": {"configs": {
           "spark-parquet-local": {
              "runs": [{"seconds": 1.2, "rows": 4, "requests": {"GET": 3},
                        "bytes": 123, "metrics": {"reader.files_opened": 2}}, ...],
              "error": None},          # or the error message; then runs may be short
           ...}},
        ...},
      "disk": {"table_bytes": 37000000, "tables": ["lineitem", ...],   # cached configurations
               "configs": {"tiered-hive-s3-warm": {<disk_per_tier>}}},  # (optional)
    }

The first configuration is the baseline of every ratio. ``summarize_config`` reduces the
runs of one (query, configuration) to medians; ``render_markdown`` and ``render_chart``
present them; ``row_count_mismatches`` finds queries whose configurations disagree.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

SCHEMA_VERSION = 1


# --- statistics ----------------------------------------------------------------------------


def median(values: Iterable[float]) -> float:
    """Median of ``values``; ``ValueError`` naming the problem when there are none."""
    values = list(values)
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def geometric_mean(values: Iterable[float]) -> float:
    """Geometric mean of positive ``values`` (``ValueError`` on none or on a value <= 0)."""
    values = list(values)
    if not values:
        raise ValueError("geometric mean of no values")
    bad = [v for v in values if not v > 0]
    if bad:
        raise ValueError(f"geometric mean needs positive values, got {bad[0]!r}")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ratio(value: float | None, baseline: float | None) -> float | None:
    """``value / baseline``, or None when either is missing or the baseline is not positive."""
    if value is None or baseline is None or not baseline > 0:
        return None
    return value / baseline


def _median_of_counts(dicts: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per key, the median over ``dicts`` (a key missing from one dict counts as 0 there)."""
    keys = sorted({k for d in dicts for k in d})
    return {k: median(d.get(k, 0) for d in dicts) for k in keys}


# --- summaries -----------------------------------------------------------------------------


def summarize_config(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Reduce the timed runs of one (query, configuration) to what the reports show.

    Returns ``median_s``, ``min_s``, ``max_s`` (None without runs), ``rows`` (of the first
    run; ``rows_consistent`` tells whether every run agreed), ``requests`` (median per kind),
    ``requests_total`` (median of the per-run totals), ``bytes`` (median), ``metrics``
    (median per counter) and ``error``.
    """
    runs = list(entry.get("runs") or [])
    summary: dict[str, Any] = {"error": entry.get("error"), "runs": len(runs)}
    if not runs:
        summary.update(
            median_s=None,
            min_s=None,
            max_s=None,
            rows=None,
            rows_consistent=True,
            requests={},
            requests_total=None,
            bytes=None,
            metrics={},
        )
        return summary
    seconds = [float(r["seconds"]) for r in runs]
    rows = [r.get("rows") for r in runs]
    requests = [r.get("requests") or {} for r in runs]
    summary.update(
        median_s=median(seconds),
        min_s=min(seconds),
        max_s=max(seconds),
        rows=rows[0],
        rows_consistent=len(set(rows)) == 1,
        requests=_median_of_counts(requests),
        requests_total=median(sum(r.values()) for r in requests),
        bytes=median(int(r.get("bytes") or 0) for r in runs),
        metrics=_median_of_counts([r.get("metrics") or {} for r in runs]),
    )
    return summary


def config_names(results: Mapping[str, Any]) -> list[str]:
    """Configuration names in run order; the first is the baseline."""
    return [c["name"] for c in results.get("configurations", [])]


def query_ids(results: Mapping[str, Any]) -> list[str]:
    """Query ids of ``results`` in numeric order (keys are strings in JSON)."""

    def key(q: Any) -> tuple[int, str]:
        return (int(q) if str(q).isdigit() else 10**9, str(q))

    return sorted(results.get("queries", {}), key=key)


def summarize(results: Mapping[str, Any]) -> dict[str, Any]:
    """The whole results dict reduced to the numbers the Markdown and the chart show.

    Returns ``{"configs": [...], "baseline": name, "queries": {q: {config: summary}},
    "ratios": {q: {config: ratio to baseline}}, "geomean": {config: seconds},
    "geomean_ratio": {config: ratio}, "geomean_queries": [q, ...]}``. Geometric means are
    taken over the queries that every configuration completed (``geomean_queries``), so the
    configurations are compared on the same set.
    """
    configs = config_names(results)
    baseline = configs[0] if configs else None
    queries: dict[str, dict[str, Any]] = {}
    ratios: dict[str, dict[str, float | None]] = {}
    for q in query_ids(results):
        per = results["queries"][q].get("configs", {})
        queries[q] = {
            c: summarize_config(per.get(c, {"runs": [], "error": "not run"})) for c in configs
        }
        base = queries[q][baseline]["median_s"] if baseline else None
        ratios[q] = {c: ratio(queries[q][c]["median_s"], base) for c in configs}
    complete = [
        q
        for q in queries
        if all(
            queries[q][c]["median_s"] is not None
            and queries[q][c]["median_s"] > 0
            and not queries[q][c]["error"]
            for c in configs
        )
    ]
    geomean = {
        c: (geometric_mean(queries[q][c]["median_s"] for q in complete) if complete else None)
        for c in configs
    }
    geomean_ratio = {c: ratio(geomean[c], geomean.get(baseline)) for c in configs}
    return {
        "configs": configs,
        "baseline": baseline,
        "queries": queries,
        "ratios": ratios,
        "geomean": geomean,
        "geomean_ratio": geomean_ratio,
        "geomean_queries": complete,
    }


#: The two references a user measures a cache against: Spark's own Parquet reader over
#: ``s3a://`` on the same store (what users run today), and on local files (the floor).
SPARK_ON_S3 = "spark-parquet-s3"
SPARK_LOCAL = "spark-parquet-local"
REFERENCES = (SPARK_ON_S3, SPARK_LOCAL)
#: RaptorX's own figure: the cached engine against the same engine without caches, on the
#: same remote store.
UNCACHED = "tiered-hive-s3"
FULLY_CACHED = "tiered-hive-s3-warm-fragments"
#: RaptorX's published speedups of that figure, per TPC-H query (its paper's TPC-H chart):
#: at least 10x on these ...
RAPTORX_TENFOLD = frozenset({1, 6, 12, 13, 14, 15, 16, 19, 22})
#: ... and 3-5x on these.
RAPTORX_THREEFOLD = frozenset({2, 5, 10, 17})


def raptorx_target(query: str) -> str:
    """RaptorX's speedup for the query (``>=10x``, ``3-5x``), or ``""`` where it names none."""
    n = int(query) if str(query).isdigit() else None
    if n in RAPTORX_TENFOLD:
        return ">=10x"
    if n in RAPTORX_THREEFOLD:
        return "3-5x"
    return ""


def headline(s: Mapping[str, Any]) -> dict[str, Any]:
    """The ratios a user asks about, from a ``summarize`` result.

    Returns ``{"references": [...], "tiered": [...], "ratios": {reference: {query:
    {config: x}}}, "geomean": {reference: {config: x}}, "speedup": {query: x},
    "geomean_speedup": x}``: each ``tiered-hive*`` configuration's time as a multiple of
    each reference present (lower is faster), over the same queries as ``summarize``'s
    geomeans; and RaptorX's figure, ``tiered-hive-s3`` time over
    ``tiered-hive-s3-warm-fragments`` time (how many times faster the caches make it; None
    where either configuration was not run).
    """
    configs = s["configs"]
    references = [r for r in REFERENCES if r in configs]
    tiered = [c for c in configs if c.startswith("tiered-hive")]
    ratios: dict[str, dict[str, dict[str, float | None]]] = {}
    geomean: dict[str, dict[str, float | None]] = {}
    for ref in references:
        ratios[ref] = {
            q: {c: ratio(per[c]["median_s"], per[ref]["median_s"]) for c in tiered}
            for q, per in s["queries"].items()
        }
        geomean[ref] = {c: ratio(s["geomean"][c], s["geomean"][ref]) for c in tiered}
    speedup: dict[str, float | None] = {}
    geomean_speedup = None
    if UNCACHED in configs and FULLY_CACHED in configs:
        speedup = {
            q: ratio(per[UNCACHED]["median_s"], per[FULLY_CACHED]["median_s"])
            for q, per in s["queries"].items()
        }
        geomean_speedup = ratio(s["geomean"][UNCACHED], s["geomean"][FULLY_CACHED])
    return {
        "references": references,
        "tiered": tiered,
        "ratios": ratios,
        "geomean": geomean,
        "speedup": speedup,
        "geomean_speedup": geomean_speedup,
    }


#: The baseline once more in the same run (``benchmarks.configurations``): two identical
#: configurations, whose per-query ratios show how far a ratio moves when nothing differs.
SPARK_LOCAL_AGAIN = "spark-parquet-local-again"


def noise_floor(s: Mapping[str, Any]) -> dict[str, Any] | None:
    """How far the A/A pair's ratios spread, from a ``summarize`` result: ``{"geomean": x,
    "lowest": (query, x), "highest": (query, x), "band": (low, high), "above": {1.1: n,
    1.2: n}, "queries": n}`` for ``SPARK_LOCAL_AGAIN`` against ``SPARK_LOCAL``, over the
    queries both completed; None when either was not run. ``band`` is as far from 1.0x, both
    ways, as the farthest of those ratios: another configuration's per-query ratio inside it
    is not a measured difference at that number of runs."""
    configs = s["configs"]
    if SPARK_LOCAL not in configs or SPARK_LOCAL_AGAIN not in configs:
        return None
    pairs = [
        (q, ratio(per[SPARK_LOCAL_AGAIN]["median_s"], per[SPARK_LOCAL]["median_s"]))
        for q, per in s["queries"].items()
    ]
    pairs = [(q, x) for q, x in pairs if x is not None and x > 0]
    if not pairs:
        return None
    lowest, highest = min(pairs, key=lambda p: p[1]), max(pairs, key=lambda p: p[1])
    reach = max(highest[1], 1 / lowest[1], 1.0)
    return {
        "geomean": geometric_mean(x for _, x in pairs),
        "lowest": lowest,
        "highest": highest,
        "band": (1 / reach, reach),
        "above": {t: sum(1 for _, x in pairs if x > t) for t in (1.1, 1.2)},
        "queries": len(pairs),
    }


def _noise_floor_lines(results: Mapping[str, Any], s: Mapping[str, Any]) -> list[str]:
    floor = noise_floor(s)
    if floor is None:
        return []
    (lo_q, lo), (hi_q, hi) = floor["lowest"], floor["highest"]
    runs = results.get("repetitions")
    return [
        f"**The noise floor:** Spark's reader against itself ({SPARK_LOCAL_AGAIN}, the same "
        f"DataFrames, its runs interleaved with the others') is "
        f"{format_ratio(floor['geomean'])} over "
        f"{_plural(floor['queries'], 'query', 'queries')}, per query from {format_ratio(lo)} "
        f"(Q{lo_q}) to {format_ratio(hi)} (Q{hi_q}), {floor['above'][1.1]} above 1.10x and "
        f"{floor['above'][1.2]} above 1.20x. So another configuration's per-query ratio "
        f"between {format_ratio(floor['band'][0])} and {format_ratio(floor['band'][1])} (as "
        f"far from 1.00x, either way) is not a measured difference at {runs} timed runs.",
        "",
    ]


def row_count_mismatches(results: Mapping[str, Any]) -> list[str]:
    """Human-readable descriptions of every query whose row counts disagree.

    A disagreement is between configurations (each configuration's first run, or with a
    ``parameter_seed`` each run, since run ``k`` of every configuration runs the same text) or
    between the runs of one configuration (not with a ``parameter_seed``: its runs run other
    texts). Configurations without runs (errors) are left out.
    """
    problems = []
    seeded = results.get("parameter_seed") is not None
    for q in query_ids(results):
        per = results["queries"][q].get("configs", {})
        counts: dict[str, list[Any]] = {}
        for c in config_names(results):
            runs = (per.get(c) or {}).get("runs") or []
            if not runs:
                continue
            rows = [r.get("rows") for r in runs]
            if len(set(rows)) > 1 and not seeded:
                problems.append(
                    f"Q{q}: configuration {c} returned different row counts across runs: {rows}"
                )
            counts[c] = rows if seeded else rows[:1]
        for k in range(max((len(v) for v in counts.values()), default=0)):
            at_k = {c: v[k] for c, v in counts.items() if k < len(v)}
            if len(set(at_k.values())) > 1:
                listing = ", ".join(f"{c}={n}" for c, n in at_k.items())
                where = f" in timed run {k + 1}" if seeded else ""
                problems.append(f"Q{q}: row counts differ between configurations{where}: {listing}")
    return problems


def result_differences(results: Mapping[str, Any]) -> list[str]:
    """Queries whose rows (first timed run) differ from the baseline configuration's, as
    recorded by the runner under ``result_difference``."""
    problems = []
    for q in query_ids(results):
        for c, entry in (results["queries"][q].get("configs") or {}).items():
            if entry.get("result_difference"):
                problems.append(
                    f"Q{q}: {c} rows differ from the baseline's: {entry['result_difference']}"
                )
    return problems


def results_compared(results: Mapping[str, Any]) -> int:
    """How many queries had every configuration's rows compared with the baseline's."""
    return sum(1 for q in query_ids(results) if results["queries"][q].get("results_compared"))


# --- formatting ----------------------------------------------------------------------------


def format_seconds(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:.3f}"


def format_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def format_count(value: float | None) -> str:
    if value is None:
        return "—"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}"


def format_bytes(value: float | None) -> str:
    """Binary units, one decimal: ``0 B``, ``512 B``, ``1.5 KiB``, ``12.3 MiB``."""
    if value is None:
        return "—"
    value = float(value)
    if abs(value) < 1024:
        return f"{int(value)} B" if value.is_integer() else f"{value:.1f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def _num(value: Any) -> str:
    """``20.0`` -> ``20``, ``2.5`` -> ``2.5``; anything else as text."""
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def _throughput(mbps: Any) -> str:
    """``90`` -> ``90 MB/s``; 0 -> ``unlimited``; missing (results of older runs) -> ``—``."""
    if mbps is None:
        return "—"
    return "unlimited" if not mbps else f"{_num(mbps)} MB/s"


def _runs_phrase(repetitions: Any) -> str:
    if repetitions == 1:
        return "one run per bar"
    return f"median of {repetitions} runs (whiskers: fastest to slowest)"


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _seconds_cell(summary: Mapping[str, Any], ratio_: float | None, is_baseline: bool) -> str:
    if summary["median_s"] is None:
        return "error" if summary.get("error") else "—"
    text = format_seconds(summary["median_s"])
    return text if is_baseline or ratio_ is None else f"{text} ({format_ratio(ratio_)})"


def chart_caption(results: Mapping[str, Any], s: Mapping[str, Any]) -> str:
    """What the chart shows, under it (in the PNG and in results.md)."""
    return (
        f"Median seconds per query and configuration ({_runs_phrase(results.get('repetitions'))}"
        f"). In the legend, each configuration's geometric mean over the queries and, in "
        f"brackets, its time relative to the baseline {s['baseline']} (lower is faster)."
    )


def _chart_section(results: Mapping[str, Any], s: Mapping[str, Any]) -> list[str]:
    return [
        "![median seconds per query](tpch_queries.png)",
        "",
        f"*{chart_caption(results, s)}*",
        "",
    ]


def _remote_section(s: Mapping[str, Any]) -> list[str]:
    """The S3 requests and bytes per query, for the configurations that read the store."""
    configs = [
        c for c in s["configs"] if any(per[c]["requests_total"] for per in s["queries"].values())
    ]
    if not configs:
        return []
    lines = [
        "## S3 requests and bytes per query",
        "",
        "Per run (median of the timed runs): the requests the S3 endpoint served and the "
        "bytes it sent.",
    ]
    if any(
        any(
            k.startswith("block_cache.") for per in s["queries"].values() for k in per[c]["metrics"]
        )
        for c in configs
    ):
        lines[-1] += (
            " With the block cache on, a cold run reads more bytes than a run "
            "without caches: the cache fetches whole 1 MiB blocks "
            "(`cache.block-size`, aligned) where the reader alone asks for just the "
            "byte ranges it needs; the warm runs then read those blocks from local "
            "disk."
        )
    lines.append("")
    header = ["query"] + [f"{c} requests / bytes" for c in configs]
    rows = [[f"Q{q}"] + [_remote_cell(per[c]) for c in configs] for q, per in s["queries"].items()]
    lines += _table(header, rows)
    lines.append("")
    return lines


def _remote_cell(summary: Mapping[str, Any]) -> str:
    if summary["requests_total"] is None:
        return "—"
    return f"{format_count(summary['requests_total'])} / {format_bytes(summary['bytes'])}"


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], align_right_from: int = 1
) -> list[str]:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i < align_right_from else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def describe_machine(machine: Mapping[str, Any]) -> str:
    parts = [str(machine.get("platform", "unknown platform"))]
    if machine.get("cpu_count"):
        parts.append(f"{machine['cpu_count']} CPUs")
    if machine.get("memory_bytes"):
        parts.append(f"{format_bytes(machine['memory_bytes'])} RAM")
    for key, label in (("python", "Python"), ("pyspark", "PySpark"), ("java", "Java")):
        if machine.get(key):
            parts.append(f"{label} {machine[key]}")
    return ", ".join(parts)


def describe_request_cost(cost: Any) -> str:
    """The endpoint's own per-request cost (whatever shape the probe returned) as text."""
    if cost is None:
        return "not measured"
    if isinstance(cost, (int, float)):
        return f"{cost:.1f} ms"
    if isinstance(cost, Mapping) and "ranged_get_1b_s" in cost:
        # devservers.s3_endpoint.S3Endpoint.probe_request_cost
        text = (
            f"ranged GET of 1 B {cost['ranged_get_1b_s'] * 1000:.1f} ms, "
            f"of 1 MiB {cost['ranged_get_1mib_s'] * 1000:.1f} ms (median, boto3 client"
        )
        if "server_ranged_get_1b_s" in cost:
            text += (
                f"; inside the server {cost['server_ranged_get_1b_s'] * 1000:.1f} ms "
                f"and {cost['server_ranged_get_1mib_s'] * 1000:.1f} ms"
            )
        text += ")"
        if cost.get("object_size"):
            text += f" on a {format_bytes(cost['object_size'])} object"
        return text
    if isinstance(cost, Mapping):
        return ", ".join(
            f"{k} {v:.1f} ms" if isinstance(v, (int, float)) else f"{k} {v}"
            for k, v in cost.items()
        )
    return str(cost)


def render_markdown(results: Mapping[str, Any]) -> str:
    """The Markdown report: header (command, machine, date, store), one table with a row per
    query (median seconds and ratio to the baseline per configuration, remote requests and
    bytes per run) ending with the geometric means, then the columns read and bytes decoded,
    planning (scans, milliseconds per scan, worker calls, LISTs, metastore round trips),
    the storage tiers' counters per query (configurations with caches on), the disk each
    tier held, and totals per configuration."""
    s = summarize(results)
    configs, baseline = s["configs"], s["baseline"]
    others = configs[1:]
    endpoint = results.get("endpoint") or {}
    lines = [f"# TPC-H benchmark, scale factor {results.get('scale')}", ""]
    lines.append(f"- Command: `{results.get('command', '')}`")
    lines.append(
        f"- Date: {results.get('started_at', 'unknown')}"
        + (
            f" (wall time {results['wall_seconds']:.0f} s)"
            if results.get("wall_seconds") is not None
            else ""
        )
    )
    lines.append(f"- Machine: {describe_machine(results.get('machine') or {})}")
    lines.append(
        f"- Object store: {endpoint.get('kind', 'S3 endpoint')} at "
        f"{endpoint.get('url', '?')}, emulated latency "
        f"{_num(results.get('latency_ms'))} ms "
        f"per request and throughput {_throughput(results.get('throughput_mbps'))} per "
        f"connection; the endpoint's own cost per request (emulation off): "
        f"{describe_request_cost(endpoint.get('request_cost'))}"
    )
    lines.append(
        f"- Runs: {results.get('warmup', 0)} warm-up + {results.get('repetitions')} "
        f"timed per query and configuration, interleaved; medians shown. A run times "
        f"`spark.sql(query).collect()` (registering the views and a configuration's "
        f"preparation are not timed)."
    )
    if results.get("format", "parquet") != "parquet":
        lines.append(
            f"- Format: {results['format'].upper()}. Every table's files are "
            f"{results['format'].upper()}; Spark's own configurations read them with its "
            f"{results['format'].upper()} reader, whatever their names and descriptions say."
        )
    idle = results.get("idle_seconds")
    if idle:
        paused = results.get("idle_configs")
        who = ", ".join(f"`{n}`" for n in paused) if paused else "every configuration"
        lines.append(
            f"- Pauses: {idle} s of no query before each timed run of {who} (pyspark stops a "
            f"Python worker idle for 60 s); the other runs follow the query before them."
        )
    seed = results.get("parameter_seed")
    if seed is not None:
        lines.append(
            f"- Queries: the warm-ups run the validation parameters; timed run k runs TPC-H "
            f"substitution parameters drawn from seed {seed}+k (`raptorx_py.tpch.parameters`), "
            f"so every timed run is a query run for the first time over the caches the "
            f"validation texts warmed."
        )
    lines.append("")
    lines += _headline_section(results, s)
    lines += _time_breakdown_section(results, s)
    lines.append("## Configurations")
    lines.append("")
    lines += _table(
        ["configuration", "description"],
        [
            [
                f"`{c['name']}`" + (" (baseline)" if c["name"] == baseline else ""),
                c.get("description", ""),
            ]
            for c in results.get("configurations", [])
        ],
        align_right_from=2,
    )
    lines.append("")
    lines.append("## Median seconds per query")
    lines.append("")
    lines.append(
        f"Seconds per run (median); in brackets, the time relative to the baseline "
        f"{baseline}: 0.50x took half its time, 2.00x twice. Lower is faster."
    )
    lines.append("")
    header = ["query", "rows", f"{baseline} s"] + [f"{c} s (x of baseline)" for c in others]
    rows = []
    for q, per in s["queries"].items():
        row_counts = {per[c]["rows"] for c in configs if per[c]["rows"] is not None}
        rows_cell = (
            "—"
            if not row_counts
            else format_count(next(iter(row_counts)))
            if len(row_counts) == 1
            else "MISMATCH"
        )
        cells = [f"Q{q}", rows_cell]
        cells += [_seconds_cell(per[c], s["ratios"][q][c], c == baseline) for c in configs]
        rows.append(cells)
    n_geo = len(s["geomean_queries"])
    rows.append(
        [f"**geomean** ({_plural(n_geo, 'query', 'queries')})", ""]
        + [
            _seconds_cell(
                {"median_s": s["geomean"][c], "error": None}, s["geomean_ratio"][c], c == baseline
            )
            for c in configs
        ]
    )
    lines += _table(header, rows)
    lines.append("")
    lines += _chart_section(results, s)
    lines += _remote_section(s)
    lines += _decoding_section(s)
    lines += _planning_section(s)
    lines += _fragments_section(s)
    lines += _tiers_section(s)
    lines += _disk_section(results)
    lines += _totals_section(s)
    problems = row_count_mismatches(results) + result_differences(results)
    errors = [
        (q, c, per[c]["error"])
        for q, per in s["queries"].items()
        for c in configs
        if per[c]["error"]
    ]
    compared = results_compared(results)
    if compared and not problems:
        lines += [
            f"Results: on all {compared} queries every configuration returned the "
            f"baseline's rows (compared value by value, ties in ORDER BY allowed to "
            f"permute; `raptorx_py.tpch.oracle.compare_results`).",
            "",
        ]
    if problems or errors:
        lines += ["## Problems", ""]
        lines += [f"- {p}" for p in problems]
        lines += [f"- Q{q} {c}: {str(e).splitlines()[0] if str(e) else e}" for q, c, e in errors]
        lines.append("")
    return "\n".join(lines)


_REFERENCE_TITLES = {
    SPARK_ON_S3: "Against Spark's own reader over s3a:// on the same store",
    SPARK_LOCAL: "Against Spark's own reader on local files, the floor",
}


def _headline_section(results: Mapping[str, Any], s: Mapping[str, Any]) -> list[str]:
    """The ratios a user asks about (``headline``), one table per reference, first in the
    report; nothing when neither reference was run."""
    h = headline(s)
    if not h["references"] or not h["tiered"]:
        return []
    lines = [
        "## Where tiered_hive stands",
        "",
        "Each `tiered_hive` configuration's median time as a multiple of Spark's own reader's "
        "in the same run (lower is faster; 1.00x is as fast). The targets: no cache and cold "
        "no slower than Spark on the same store (1.00x at most), since a cache must never "
        "cost the first query.",
        "",
    ]
    lines += [f"![x of {h['references'][0]} per query]({RATIOS_CHART})", ""]
    n_geo = len(s["geomean_queries"])
    geo_label = f"**geomean** ({_plural(n_geo, 'query', 'queries')})"
    for ref in h["references"]:
        with_figure = ref == SPARK_ON_S3 and bool(h["speedup"])
        header = ["query"] + [f"{c} (x)" for c in h["tiered"]]
        if with_figure:
            header += ["RaptorX's figure", "its target"]
        rows = []
        for q in s["queries"]:
            cells = [f"Q{q}"] + [format_ratio(h["ratios"][ref][q][c]) for c in h["tiered"]]
            if with_figure:
                cells += [_speedup(h["speedup"].get(q)), raptorx_target(q)]
            rows.append(cells)
        geo = [geo_label] + [format_ratio(h["geomean"][ref][c]) for c in h["tiered"]]
        if with_figure:
            geo += [_speedup(h["geomean_speedup"]), ""]
        rows.append(geo)
        lines += [f"### {_REFERENCE_TITLES[ref]} ({ref})", ""]
        if with_figure:
            lines += [
                f"RaptorX's figure is how many times faster the caches make the engine on the "
                f"same store ({UNCACHED}'s time over {FULLY_CACHED}'s; higher is better), "
                f"beside RaptorX's published speedups.",
                "",
            ]
        lines += _table(header, rows)
        lines.append("")
        if ref == SPARK_LOCAL:
            lines += _noise_floor_lines(results, s)
    return lines


def run_breakdown(run: Mapping[str, Any]) -> dict[str, float]:
    """Where one run's time went, from what the runner recorded: remote requests and bytes,
    the store's emulated wait summed over requests (latency and throughput pacing; requests
    overlap, so it can exceed the run), the driver's time before the first stage started
    (analysis, optimization with the scans' planning), and the stages' task time and its
    JVM CPU part (the rest is waiting: on the store, on a Python worker, on the scheduler)."""
    stages = [st for st in run.get("stages") or [] if st.get("start_ms") is not None]
    return {
        "seconds": float(run["seconds"]),
        "requests": float(sum((run.get("requests") or {}).values())),
        "bytes": float(run.get("bytes") or 0),
        "store_wait_s": float((run.get("store_stats") or {}).get("injected_delay_seconds", 0)),
        "driver_ms": float(min((st["start_ms"] for st in stages), default=0)),
        "task_s": sum(st.get("run_ms") or 0 for st in stages) / 1000.0,
        "jvm_cpu_s": sum(st.get("cpu_ms") or 0 for st in stages) / 1000.0,
        "python_tasks": float((run.get("metrics") or {}).get("reader.python_tasks", 0)),
    }


def _time_breakdown_section(results: Mapping[str, Any], s: Mapping[str, Any]) -> list[str]:
    """Per query where no cache or cold is slower than Spark on S3: the median breakdown
    (``run_breakdown``) of each of them beside Spark on S3's."""
    h = headline(s)
    if SPARK_ON_S3 not in h["references"]:
        return []
    first_time = [c for c in (UNCACHED, "tiered-hive-s3-cold") if c in h["tiered"]]
    rows = []
    for q in s["queries"]:
        slower = [c for c in first_time if (h["ratios"][SPARK_ON_S3][q][c] or 0) > 1.0]
        for c in [SPARK_ON_S3, *slower] if slower else []:
            runs = (results["queries"][q]["configs"].get(c) or {}).get("runs") or []
            if not runs:
                continue
            parts = [run_breakdown(r) for r in runs]
            m = {k: median(p[k] for p in parts) for k in parts[0]}
            rows.append(
                [
                    f"Q{q}",
                    c,
                    format_seconds(m["seconds"]),
                    format_count(m["requests"]),
                    format_bytes(m["bytes"]),
                    f"{m['store_wait_s']:.2f}",
                    f"{m['driver_ms']:.0f}",
                    f"{m['task_s']:.2f}",
                    f"{m['jvm_cpu_s']:.2f}",
                    format_count(m["python_tasks"]),
                ]
            )
    if not rows:
        return []
    return [
        "### Where the time goes where no cache or cold is slower than Spark on S3",
        "",
        "Medians of the timed runs: requests and bytes the store served; the store's emulated "
        "wait summed over requests (latency plus throughput pacing; requests overlap, so it "
        "can exceed the run); the driver's milliseconds before the first stage (analysis, "
        "optimization with the scans' planning); the stages' task seconds and their JVM CPU "
        "part (the rest waited: on the store, a Python worker, the scheduler); tasks read by "
        "a Python worker.",
        "",
        *_table(
            [
                "query",
                "configuration",
                "s",
                "requests",
                "bytes",
                "store wait s",
                "driver ms",
                "task s",
                "JVM CPU s",
                "Python tasks",
            ],
            rows,
        ),
        "",
    ]


def _speedup(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}x faster"


#: Per-scan counters (``scan.planned.<table>``, ``scan.column.<table>.<column>``): shown as
#: columns per query, not listed one by one in the totals.
SCAN_PREFIX = "scan."


def columns_read(metrics: Mapping[str, float]) -> int:
    """Columns the scans of one run asked the reader for (summed over the scans)."""
    return int(sum(v for k, v in metrics.items() if k.startswith("scan.column.")))


def _per_query_section(
    s: Mapping[str, Any],
    title: str,
    legend: str,
    shown: Callable[[Mapping[str, float]], bool],
    columns: Sequence[tuple[str, Callable[[Mapping[str, Any]], str]]],
) -> list[str]:
    """A table with a row per query and, for every configuration some query's counters
    are ``shown`` for, one cell per ``columns`` entry (its name, and its text from the
    configuration's summary of that query)."""
    configs = [
        c for c in s["configs"] if any(shown(per[c]["metrics"]) for per in s["queries"].values())
    ]
    if not configs:
        return []
    header = ["query"] + [f"{c} {name}" for c in configs for name, _ in columns]
    rows = [
        [f"Q{q}"] + [cell(per[c]) for c in configs for _, cell in columns]
        for q, per in s["queries"].items()
    ]
    return [f"## {title}", "", legend, "", *_table(header, rows), ""]


def _counter(name: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda per: format_count(per["metrics"].get(name, 0))


def _decoding_section(s: Mapping[str, Any]) -> list[str]:
    """Per query and tiered configuration: the columns its scans read and the bytes the
    reader decoded (what column pruning saves), next to the seconds."""
    return _per_query_section(
        s,
        "Columns read and bytes decoded per query",
        "Columns: the columns the query's scans asked the reader for, summed over its "
        "scans (`scan.column.*`). Decoded: Arrow bytes the reader decoded "
        "(`reader.bytes_decoded`). Rows to Spark: rows the scans handed the JVM "
        "(`reader.rows_to_spark`; with aggregation pushdown, the partial groups).",
        lambda m: "reader.bytes_decoded" in m,
        [
            ("s", lambda per: format_seconds(per["median_s"])),
            ("columns", lambda per: format_count(columns_read(per["metrics"]))),
            ("decoded", lambda per: format_bytes(per["metrics"].get("reader.bytes_decoded", 0))),
            ("rows to Spark", _counter("reader.rows_to_spark")),
        ],
    )


def planning_ms_per_scan(metrics: Mapping[str, float]) -> float | None:
    """Milliseconds the driver's planner spent per scan it planned (None: no scan was planned
    there, e.g. without the native jar or on a Connect server, where workers plan)."""
    micros, scans = metrics.get("planning.driver_micros", 0), metrics.get("planning.scans", 0)
    if not micros or not scans:
        return None
    return micros / 1000.0 / scans


def _planning_section(s: Mapping[str, Any]) -> list[str]:
    """Per query and tiered configuration: the scans planned, the driver planner's
    milliseconds per scan, the Python worker calls planning made, and the LIST requests and
    metastore round trips of the run."""

    def ms(per: Mapping[str, Any]) -> str:
        value = planning_ms_per_scan(per["metrics"])
        return "—" if value is None else f"{value:.1f}"

    return _per_query_section(
        s,
        "Planning per query",
        "Scans: scans planned (`planning.scans`). ms/scan: the driver's planner's time per "
        "scan, Python side (`planning.driver_micros` / scans; — when Python workers planned). "
        "Workers: Python worker calls made to plan, sources created included "
        "(`planning.worker_calls`; 0 with the driver's planner). LIST: directory listings "
        "sent (`storage.listings`). Metastore: round trips (`metastore.round_trips`).",
        lambda m: "planning.scans" in m,
        [
            ("scans", _counter("planning.scans")),
            ("ms/scan", ms),
            ("workers", _counter("planning.worker_calls")),
            ("LIST", _counter("storage.listings")),
            ("metastore", _counter("metastore.round_trips")),
        ],
    )


def _fragments_section(s: Mapping[str, Any]) -> list[str]:
    """Per query and configuration with the fragment result cache on: the splits computed
    and served from the cache, and what the statistics did (partitions pruned, predicates
    dropped as always true)."""
    return _per_query_section(
        s,
        "Fragment result cache per query",
        "Computed: splits read and computed (`reader.fragments_computed`). Served: splits "
        "answered from the cache (`fragment_cache.hits`). Pruned: partitions never read, "
        "their statistics excluding every row (`planner.partitions_pruned_by_stats`). "
        "Simplified: predicates dropped from partitions whose statistics make them always "
        "true (`planner.predicates_dropped_by_stats`).",
        lambda m: any(k.startswith("fragment_cache.") for k in m),
        [
            ("computed", _counter("reader.fragments_computed")),
            ("served", _counter("fragment_cache.hits")),
            ("pruned", _counter("planner.partitions_pruned_by_stats")),
            ("simplified", _counter("planner.predicates_dropped_by_stats")),
        ],
    )


#: Counter prefixes of the storage tiers (``raptorx_py.cache``).
TIER_PREFIXES = ("listing_cache.", "footer_cache.", "block_cache.")


def tier_figures(metrics: Mapping[str, float]) -> dict[str, float]:
    """What the storage-tier table shows, from one run's (or one median's) counters:
    per tier hits and misses, the block cache's bytes from the cache and from the store,
    evictions per tier, put errors and corrupt entries found (footer and block caches)."""

    def m(*names: str) -> float:
        return sum(metrics.get(n, 0) for n in names)

    return {
        "listing_hits": m("listing_cache.hits"),
        "listing_misses": m("listing_cache.misses"),
        "footer_hits": m("footer_cache.hits_memory", "footer_cache.hits_disk"),
        "footer_misses": m("footer_cache.misses"),
        "block_hits": m("block_cache.hits"),
        "block_misses": m("block_cache.misses"),
        "bytes_from_cache": m("block_cache.bytes_from_cache"),
        "bytes_from_remote": m("block_cache.bytes_from_remote"),
        "listing_evictions": m("listing_cache.evictions"),
        "footer_evictions": m("footer_cache.evictions", "footer_cache.disk_evictions"),
        "block_evictions": m("block_cache.evictions"),
        "put_errors": m("footer_cache.put_errors", "block_cache.put_errors"),
        "corrupt": m("footer_cache.corrupt_entries", "block_cache.corrupt_blocks"),
    }


#: The disk tiers under a configuration's cache root (``configurations.cache_root``): the
#: block and footer caches' directories under ``cache.base-directory`` and the fragment
#: result cache's directory; a cold configuration's are under ``run-<k>/`` (its last run's).
DISK_TIERS = ("blocks", "footers", "fragments")


def disk_per_tier(root: str, table_bytes: int) -> dict[str, dict[str, Any]]:
    """What each disk tier (``DISK_TIERS``) holds under the cache ``root``: ``bytes`` (the
    sizes of its files: entries, indexes, secrets), ``files``, and ``per_table_byte``, bytes
    over ``table_bytes`` (the table data the run read; None when 0). A file counts for the
    first directory of its path under ``root`` that names a tier; files of no tier are not
    counted. A tier with nothing on disk (or a missing ``root``) has zeros."""
    held = {t: {"bytes": 0, "files": 0} for t in DISK_TIERS}
    for directory, _, files in os.walk(root):
        parts = os.path.relpath(directory, root).split(os.sep)
        tier = next((p for p in parts if p in held), None)
        if tier is None:
            continue
        for name in files:
            try:
                size = os.lstat(os.path.join(directory, name)).st_size
            except FileNotFoundError:
                continue
            held[tier]["bytes"] += size
            held[tier]["files"] += 1
    return {
        t: {**h, "per_table_byte": h["bytes"] / table_bytes if table_bytes > 0 else None}
        for t, h in held.items()
    }


def _disk_section(results: Mapping[str, Any]) -> list[str]:
    """Per cached configuration, the bytes each disk tier held at the end of the run and
    their ratio to the table data the queries read (``results["disk"]``, written by the
    runner with ``disk_per_tier``)."""
    disk = results.get("disk") or {}
    per_config = disk.get("configs") or {}
    if not per_config:
        return []
    table_bytes = disk.get("table_bytes") or 0
    tables = ", ".join(disk.get("tables") or [])
    lines = [
        "## Disk held per tier",
        "",
        f"Bytes each cache tier held on local disk after the last run (its files' sizes: "
        f"entries, indexes), and in brackets per byte of the tables the queries read "
        f"({format_bytes(table_bytes)} of Parquet: {tables}). A cold configuration's are "
        f"its last run's.",
        "",
    ]
    header = ["configuration"] + [f"{t}" for t in DISK_TIERS] + ["total"]
    rows = []
    for name, tiers in per_config.items():
        total = sum(tiers[t]["bytes"] for t in DISK_TIERS)
        cells = [
            f"{format_bytes(tiers[t]['bytes'])} ({format_ratio(tiers[t]['per_table_byte'])})"
            for t in DISK_TIERS
        ]
        total_ratio = total / table_bytes if table_bytes > 0 else None
        rows.append([f"`{name}`", *cells, f"{format_bytes(total)} ({format_ratio(total_ratio)})"])
    lines += _table(header, rows)
    lines.append("")
    return lines


def _pair(a: float, b: float) -> str:
    return f"{format_count(a)} / {format_count(b)}"


def _tiers_section(s: Mapping[str, Any]) -> list[str]:
    """Per configuration with storage tiers on, one row per query: the remote requests and
    bytes next to each tier's counters (a run's counts, summed over the query's scans;
    medians over the timed runs), and a total row."""
    configs = [
        c
        for c in s["configs"]
        if any(
            k.startswith(TIER_PREFIXES) for per in s["queries"].values() for k in per[c]["metrics"]
        )
    ]
    if not configs:
        return []
    lines = [
        "## Storage tiers per query",
        "",
        "Per run (median of the timed runs): S3 requests and bytes the endpoint served; "
        "hits / misses of the listing cache (partitions), the footer cache (files; memory "
        "and disk hits) and the block cache (blocks); the block cache's bytes served from "
        "local disk / fetched from the store; evictions per tier (listing / footer / "
        "block); put errors and corrupt entries found (footer and block caches).",
        "",
    ]
    header = [
        "query",
        "requests",
        "remote bytes",
        "listing hit / miss",
        "footer hit / miss",
        "block hit / miss",
        "block bytes cache / remote",
        "evictions L / F / B",
        "put errors",
        "corrupt",
    ]
    for c in configs:
        lines += [f"### {c}", ""]
        rows, total_requests, total_bytes = [], 0.0, 0.0
        totals: dict[str, float] = {}
        for q, per in s["queries"].items():
            summ = per[c]
            f = tier_figures(summ["metrics"])
            for k, v in f.items():
                totals[k] = totals.get(k, 0) + v
            total_requests += summ["requests_total"] or 0
            total_bytes += summ["bytes"] or 0
            rows.append(
                [f"Q{q}", format_count(summ["requests_total"]), format_bytes(summ["bytes"])]
                + _tier_cells(f)
            )
        rows.append(
            ["**total**", format_count(total_requests), format_bytes(total_bytes)]
            + _tier_cells(totals)
        )
        lines += _table(header, rows)
        lines.append("")
    return lines


def _tier_cells(f: Mapping[str, float]) -> list[str]:
    return [
        _pair(f["listing_hits"], f["listing_misses"]),
        _pair(f["footer_hits"], f["footer_misses"]),
        _pair(f["block_hits"], f["block_misses"]),
        f"{format_bytes(f['bytes_from_cache'])} / {format_bytes(f['bytes_from_remote'])}",
        " / ".join(
            format_count(f[k]) for k in ("listing_evictions", "footer_evictions", "block_evictions")
        ),
        format_count(f["put_errors"]),
        format_count(f["corrupt"]),
    ]


def _totals_section(s: Mapping[str, Any]) -> list[str]:
    """Per configuration, the per-run medians summed over all queries: requests by kind,
    bytes, and the data source's counters."""
    configs = s["configs"]
    kinds = sorted(
        {k for per in s["queries"].values() for c in configs for k in per[c]["requests"]}
    )
    metric_names = sorted(
        {
            k
            for per in s["queries"].values()
            for c in configs
            for k in per[c]["metrics"]
            if not k.startswith(SCAN_PREFIX)
        }
    )
    totals = {}
    for c in configs:
        per_c = [per[c] for per in s["queries"].values()]
        totals[c] = {
            "requests": {k: sum(p["requests"].get(k, 0) for p in per_c) for k in kinds},
            "bytes": sum(p["bytes"] or 0 for p in per_c),
            "metrics": {m: sum(p["metrics"].get(m, 0) for p in per_c) for m in metric_names},
        }
    lines = ["## Totals over all queries (one run each, medians summed)", ""]
    header = ["configuration"] + kinds + ["remote bytes"]
    lines += _table(
        header,
        [
            [c]
            + [format_count(totals[c]["requests"][k]) for k in kinds]
            + [format_bytes(totals[c]["bytes"])]
            for c in configs
        ],
    )
    lines.append("")
    if metric_names:
        lines += _table(
            ["counter"] + configs,
            [
                [f"`{m}`"] + [format_count(totals[c]["metrics"][m]) for c in configs]
                for m in metric_names
            ],
        )
        lines.append("")
    return lines


# --- chart ---------------------------------------------------------------------------------


def choose_log_scale(values: Iterable[float], spread: float = 30.0) -> bool:
    """Log scale when the largest positive value is more than ``spread`` times the smallest."""
    positive = [v for v in values if v and v > 0]
    return bool(positive) and max(positive) / min(positive) > spread


def render_chart(results: Mapping[str, Any], path: str) -> str:
    """Grouped bar chart (one group per query, one bar per configuration, median seconds,
    whiskers from the fastest to the slowest run) written as PNG with the Agg backend.

    Returns ``path``. The axis is logarithmic when bars differ by more than 30x.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    s = summarize(results)
    configs, queries = s["configs"], list(s["queries"])
    n_cfg = max(len(configs), 1)
    width = min(16.0, max(7.0, 1.5 + len(queries) * (0.22 * n_cfg + 0.2)))
    fig = Figure(figsize=(width, 6.0), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    bar_w = 0.8 / n_cfg
    all_values = []
    for i, c in enumerate(configs):
        xs, ys, lo, hi = [], [], [], []
        for j, q in enumerate(queries):
            summ = s["queries"][q][c]
            if summ["median_s"] is None:
                continue
            xs.append(j - 0.4 + bar_w * (i + 0.5))
            ys.append(summ["median_s"])
            lo.append(summ["median_s"] - summ["min_s"])
            hi.append(summ["max_s"] - summ["median_s"])
            all_values += [summ["min_s"], summ["max_s"]]
        label = c
        if s["geomean"].get(c) is not None:
            label += f": geomean {s['geomean'][c]:.2f} s"
            if c != s["baseline"] and s["geomean_ratio"].get(c) is not None:
                label += f" ({s['geomean_ratio'][c]:.2f}x of baseline)"
            elif c == s["baseline"]:
                label += " (baseline)"
        ax.bar(
            xs,
            ys,
            bar_w,
            label=label,
            color=f"C{i}",
            yerr=[lo, hi] if xs else None,
            error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "0.25"},
        )
    ax.set_xticks(range(len(queries)))
    ax.set_xticklabels([f"Q{q}" for q in queries])
    ax.set_xlim(-0.6, max(len(queries), 1) - 0.4)
    if choose_log_scale(all_values):
        from matplotlib.ticker import FuncFormatter, LogLocator

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.set_ylabel("median seconds (log scale)")
    else:
        ax.set_ylabel("median seconds")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    title = (
        f"TPC-H SF {results.get('scale')}, emulated S3 latency "
        f"{_num(results.get('latency_ms'))} ms and "
        f"{_throughput(results.get('throughput_mbps'))} per connection, "
        + _runs_phrase(results.get("repetitions"))
    )
    ax.set_title(title)
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.07),
        ncol=min(n_cfg, 3),
        fontsize="small",
        frameon=False,
    )
    fig.text(
        0.5, 0.01, chart_caption(results, s), ha="center", va="bottom", fontsize="small", wrap=True
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, format="png")
    return path


#: The chart of the headline ratios (``write_reports`` writes it when a reference ran).
RATIOS_CHART = "tpch_ratios.png"


def render_ratio_chart(results: Mapping[str, Any], path: str) -> str | None:
    """Grouped bars of each ``tiered_hive`` configuration's time as a multiple of the first
    reference's (``headline``: Spark on S3 when it ran, else Spark on local files), per
    query and geomean, on a log axis with a line at 1.0x. Returns ``path``, or None (nothing
    written) when no reference or no tiered configuration ran."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    s = summarize(results)
    h = headline(s)
    if not h["references"] or not h["tiered"]:
        return None
    ref, tiered = h["references"][0], h["tiered"]
    groups = [(f"Q{q}", h["ratios"][ref][q]) for q in s["queries"]]
    groups.append(("geomean", h["geomean"][ref]))
    width = min(16.0, max(7.0, 1.5 + len(groups) * (0.2 * len(tiered) + 0.2)))
    fig = Figure(figsize=(width, 5.5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    bar_w = 0.8 / len(tiered)
    for i, c in enumerate(tiered):
        xs = [j - 0.4 + bar_w * (i + 0.5) for j, (_, r) in enumerate(groups) if r[c]]
        ys = [r[c] for _, r in groups if r[c]]
        label = c + (f": geomean {h['geomean'][ref][c]:.2f}x" if h["geomean"][ref][c] else "")
        ax.bar(xs, ys, bar_w, label=label, color=f"C{i + 1}")
    ax.axhline(1.0, color="0.2", linewidth=1.0, linestyle="--")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel(f"median time / {ref}'s (log; below 1 is faster)")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g for g, _ in groups])
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title(
        f"TPC-H SF {results.get('scale')}: tiered_hive against {ref} in the same run\n"
        f"(S3 latency {_num(results.get('latency_ms'))} ms, throughput "
        f"{_throughput(results.get('throughput_mbps'))} per connection)"
    )
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.07), ncol=2, fontsize="small", frameon=False
    )
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, format="png")
    return path


# --- files ---------------------------------------------------------------------------------


def write_reports(results: Mapping[str, Any], out_dir: str) -> dict[str, str | None]:
    """Write ``results.json``, ``results.md``, ``tpch_queries.png`` and (when a reference
    ran, ``render_ratio_chart``) ``tpch_ratios.png`` into ``out_dir``.

    Returns the paths by kind (``json``, ``markdown``, ``chart``, ``ratios_chart``: None when
    not written). The JSON is written first and atomically, so a failure in presentation
    never loses the measurements.
    """
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "json": os.path.join(out_dir, "results.json"),
        "markdown": os.path.join(out_dir, "results.md"),
        "chart": os.path.join(out_dir, "tpch_queries.png"),
    }
    _write_atomic(paths["json"], json.dumps(results, indent=2, sort_keys=False, default=str) + "\n")
    _write_atomic(paths["markdown"], render_markdown(results))
    render_chart(results, paths["chart"])
    ratios = render_ratio_chart(results, os.path.join(out_dir, RATIOS_CHART))
    return {**paths, "ratios_chart": ratios}


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
