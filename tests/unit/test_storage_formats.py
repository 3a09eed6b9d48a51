"""A table's file format from its Hive storage descriptor, from Spark's provider, and from a
file's magic bytes."""

from __future__ import annotations

import pytest

from raptorx_py.hive import storage_formats as sf


def test_a_storage_descriptor_names_its_format_by_input_format_then_serde():
    for fmt in sf.FORMATS:
        classes = sf.hive_classes(fmt)
        assert sf.format_of(classes.input_format, classes.serde, None) == fmt
        assert sf.format_of(None, classes.serde, None) == fmt  # no input format recorded
        assert sf.format_of(classes.input_format, None, "") == fmt
    # Spark's provider wins over a placeholder storage descriptor
    seq = "org.apache.hadoop.mapred.SequenceFileInputFormat"
    assert sf.format_of(seq, None, "orc") == sf.ORC
    assert sf.format_of(seq, None, "PARQUET") == sf.PARQUET
    # formats raptorx_py does not read
    assert sf.format_of("org.apache.hadoop.mapred.TextInputFormat", None, None) is None
    assert sf.format_of(None, None, "csv") is None
    assert sf.format_of(seq, sf.hive_classes(sf.ORC).serde, None) is None


def test_a_file_format_by_its_magic_bytes():
    assert sf.format_of_file(b"ORC\x0a", b"....") == sf.ORC
    assert sf.format_of_file(b"PAR1", b"....PAR1") == sf.PARQUET
    assert sf.format_of_file(b"abc", b"xyz") is None


def test_a_format_is_parsed_in_any_case_or_refused_naming_the_choices():
    assert sf.parse_format(" orc ") == sf.ORC
    with pytest.raises(ValueError, match="storage format 'avro': expected one of PARQUET, ORC"):
        sf.parse_format("avro")
