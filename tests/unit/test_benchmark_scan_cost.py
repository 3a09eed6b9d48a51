"""benchmarks.scan_column_cost: its queries and its argument checks (the measuring itself
needs Spark and SF 1 data, and runs from the benchmark command only)."""

import re

import pytest

from benchmarks.scan_column_cost import QUERIES, main


def test_each_query_reads_one_view_and_only_lineitem_columns():
    for kind, text in QUERIES.items():
        assert text.count("{view}") == 1, kind
        assert re.findall(r"\bl_\w+", text), kind


def test_zero_repetitions_is_refused_before_anything_starts(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--repetitions", "0"])
    assert exit_.value.code == 2
    assert "--repetitions must be at least 1" in capsys.readouterr().err
