"""Every documented way of changing a table, each followed by queries whose
answer depends on statistics, against Spark's own reader on the same files (a managed table:
against the rows written).

Mutations (seeded order, after registration): ``partition unseal`` / new file / ``partition
seal``; files added to, rewritten in and deleted from partitions, sealed or not, without
telling the metastore (out of band); ``partition add``; ``table repair``; ``table analyze``;
``table register --replace``; and for a managed table appends and an overwrite through
Spark. Queries: a filter that statistics taken before a change would prune (``id > HI``),
one they would make always true and drop (``id <= LO``, ``s < 'm'``), ``IS NOT NULL``, each
with a pushed aggregation (``count(*)``, ``sum``) or returning rows. The answer must equal
Spark's reader's, with every cache off and, for the documented commands, with the listing
cache on (a sealed partition's cached listing is by contract not refreshed by an out-of-band
change, see docs/design/files-changing.md); over the run statistics must have pruned, dropped
predicates and (after out-of-band changes) been distrusted, or the test proved nothing.

``RAPTORX_MUTATION_SEED`` changes the seed.
"""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raptorx_py.cli import main
from raptorx_py.tables.table_registration import register_external_table

pytestmark = pytest.mark.spark

SEED = int(os.environ.get("RAPTORX_MUTATION_SEED", "27"))
LO, HI = 50, 60  # registered ids are below LO; changes add ids up to 1000 and nulls

QUERIES = (
    "SELECT count(*) AS n, sum(id) AS total FROM {t} WHERE id <= {lo}",
    "SELECT count(*) AS n, sum(id) AS total FROM {t} WHERE id > {hi}",
    "SELECT k, count(*) AS n FROM {t} WHERE id IS NOT NULL AND s < 'm' GROUP BY k",
    "SELECT id, s, k FROM {t} WHERE id > {hi}",
)


class External:
    """An external table ``name`` at ``root``: directories ``k=<p>`` of Parquet files."""

    def __init__(self, env, root: str, name: str, rng: random.Random):
        self.env, self.root, self.name, self.rng = env, root, name, rng
        self.mtime = 1_700_000_000.0
        self.files = 0

    def write(self, part: str, *, low=True, name=None) -> str:
        """A new file in ``k=part``: small ids and early strings (``low``), else ids up to
        1000, nulls and late strings."""
        n = self.rng.randint(1, 6)
        if low:
            ids = [self.rng.randrange(LO) for _ in range(n)]
            strings = [self.rng.choice("abcdefgh") for _ in range(n)]
        else:
            ids = [None if self.rng.random() < 0.3 else self.rng.randrange(1000) for _ in range(n)]
            strings = [self.rng.choice("agmxz") for _ in range(n)]
        self.files += 1
        path = os.path.join(self.root, f"k={part}", name or f"part-{self.files}.parquet")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = os.path.join(os.path.dirname(path), f".tmp-{self.files}")
        pq.write_table(
            pa.table({"id": pa.array(ids, pa.int64()), "s": pa.array(strings, pa.string())}), tmp
        )
        os.replace(tmp, path)
        self.mtime += 1.5  # a new version is a new mtime, whatever the clock's resolution
        os.utime(path, (self.mtime, self.mtime))
        return path

    def files_of(self, part: str) -> list[str]:
        d = os.path.join(self.root, f"k={part}")
        return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".parquet"))

    def cli(self, *argv: str) -> None:
        url = self.env.properties["hive.metastore.url"]
        assert main([*argv, "-p", f"hive.metastore.url={url}"]) == 0, argv


def _rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _compare(
    spark, counted, tiered_name: str, reference, step: str, totals: dict, options=None
) -> None:
    reader = spark.read.format("tiered_hive").options(**(options or {}))
    reader.load(tiered_name).createOrReplaceTempView("tiered")
    reference.createOrReplaceTempView("reference")
    for q in QUERIES:
        with counted() as c:
            got = _rows(spark.sql(q.format(t="tiered", lo=LO, hi=HI)))
        want = _rows(spark.sql(q.format(t="reference", lo=LO, hi=HI)))
        assert got == want, f"after {step}: {q.format(t='t', lo=LO, hi=HI)}"
        for k in totals:
            totals[k] += c[k]


def _new_totals() -> dict:
    return dict.fromkeys(
        (
            "planner.partitions_pruned_by_stats",
            "planner.predicates_dropped_by_stats",
            "planner.partitions_stats_untrusted",
            "listing_cache.hits",
        ),
        0,
    )


#: The listing cache on: the documented commands change a partition's metastore entry, so its
#: cached listing is not served after them; an out-of-band change to a sealed partition is by
#: contract not seen until the listing expires, so those steps run with the cache off only.
LISTING_CACHE = {"hive.file-status-cache-tables": "*", "hive.file-status-cache-expire-time": "1h"}
OUT_OF_BAND = ("add_to_sealed_out_of_band", "rewrite_out_of_band", "delete_out_of_band")


@pytest.mark.parametrize("listing_cache", [False, True], ids=["every cache off", "listing cache"])
def test_every_documented_change_of_an_external_table(spark, env, tmp_path, counted, listing_cache):
    _mutate_external(spark, env, tmp_path, counted, listing_cache, SEED)


@pytest.mark.stress
@pytest.mark.parametrize("seed", range(1, 6))
def test_every_documented_change_of_an_external_table_more_seeds(
    spark, env, tmp_path, counted, seed
):
    """``make stress``: five more orders and data sets, every cache off."""
    _mutate_external(spark, env, tmp_path, counted, False, seed)


def _mutate_external(spark, env, tmp_path, counted, listing_cache: bool, seed: int) -> None:
    rng = random.Random(seed)
    options = LISTING_CACHE if listing_cache else {}
    name = f"{env.unique_db('mut')}.t"
    t = External(env, str(tmp_path / "t"), name, rng)
    for part in ("a", "b", "c"):
        t.write(part)
    with env.metastore() as ms:
        register_external_table(ms, env.settings(), name, t.root, sealed=True)
    totals = _new_totals()

    def check(step: str) -> None:
        _compare(spark, counted, name, spark.read.parquet(t.root), step, totals, options)

    check("register")
    new_parts = iter(("d", "e", "f", "g"))

    def unseal_change_seal():
        p = rng.choice("abc")
        t.cli("partition", "unseal", name, f"k={p}")
        t.write(p, low=False)
        t.cli("partition", "seal", name, f"k={p}")
        return f"unseal / new file / seal of k={p}"

    def add_to_sealed_out_of_band():
        p = rng.choice("abc")
        t.write(p, low=False)
        return f"a file added to k={p} out of band"

    def rewrite_out_of_band():
        p = rng.choice("abc")
        path = rng.choice(t.files_of(p))
        t.write(p, low=False, name=os.path.basename(path))
        return f"{os.path.basename(path)} of k={p} rewritten out of band"

    def delete_out_of_band():
        p = rng.choice([p for p in "abc" if len(t.files_of(p)) > 1] or ["a"])
        t.write(p)  # so a file remains
        os.remove(rng.choice(t.files_of(p)))
        return f"a file of k={p} deleted out of band"

    def add_partition():
        p = next(new_parts)
        t.write(p, low=rng.random() < 0.5)
        t.cli("partition", "add", name, f"k={p}", *(["--seal"] if rng.random() < 0.5 else []))
        return f"partition add k={p}"

    def repair():
        p = next(new_parts)
        t.write(p, low=rng.random() < 0.5)
        t.cli("table", "repair", name)
        return f"table repair (k={p})"

    def analyze():
        args = ["--partition", f"k={rng.choice('abc')}"] if rng.random() < 0.5 else []
        t.cli("table", "analyze", name, *args)
        return "table analyze " + " ".join(args)

    def replace():
        t.cli("table", "register", name, f"file://{t.root}", "--replace")
        return "table register --replace"

    steps = [
        unseal_change_seal,
        unseal_change_seal,
        add_to_sealed_out_of_band,
        rewrite_out_of_band,
        delete_out_of_band,
        add_partition,
        repair,
        analyze,
        add_to_sealed_out_of_band,
        replace,
    ]
    rng.shuffle(steps)
    if listing_cache:
        steps = [s for s in steps if s.__name__ not in OUT_OF_BAND]
    for step in steps:
        check(step())
    # The run exercised both sides of the trust rule (statistics are distrusted only after
    # an out-of-band change: the commands record statistics of the files they list).
    assert totals["planner.partitions_pruned_by_stats"] > 0, totals
    assert totals["planner.predicates_dropped_by_stats"] > 0, totals
    assert (totals["planner.partitions_stats_untrusted"] > 0) is not listing_cache, totals
    assert (totals["listing_cache.hits"] > 0) is listing_cache, totals


def test_managed_appends_and_overwrites(spark, env, counted):
    """Managed tables: statistics follow write ids (appends merge them, an overwrite replaces
    them); the reference is the rows written."""
    rng = random.Random(SEED)
    name = f"{env.unique_db('mut')}.m"
    schema = "id bigint, s string, k string"
    model: list[tuple] = []
    totals = _new_totals()

    def rows(low: bool) -> list[tuple]:
        out = []
        for _ in range(rng.randint(2, 8)):
            if low:
                out.append((rng.randrange(LO), rng.choice("abcdefgh"), rng.choice("ab")))
            else:
                i = None if rng.random() < 0.3 else rng.randrange(1000)
                out.append((i, rng.choice("agmxz"), rng.choice("abc")))
        return out

    for step, low, mode in (
        ("append", True, "append"),
        ("append of ids above the statistics", False, "append"),
        ("overwrite", True, "overwrite"),
        ("append after the overwrite", False, "append"),
    ):
        batch = rows(low)
        model = batch if mode == "overwrite" else model + batch
        df = spark.createDataFrame(batch, schema)
        df.write.format("tiered_hive").option("partition_by", "k").mode(mode).save(name)
        _compare(spark, counted, name, spark.createDataFrame(model, schema), step, totals)
    assert totals["planner.partitions_pruned_by_stats"] > 0, totals


@pytest.fixture(autouse=True)
def _no_leftover_views(spark):
    yield
    for view in ("tiered", "reference"):
        spark.catalog.dropTempView(view)
