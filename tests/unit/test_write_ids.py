"""ValidWriteIdList: visibility, both string forms, and freshness as the Hive cache document
defines it (its own examples first)."""

import random

import pytest

from raptorx_py.hive.write_ids import NO_OPEN_WRITE_ID, ValidWriteIdList

S = ValidWriteIdList.from_short_form


# -- the document's examples ------------------------------------------------------------------
def test_document_example_requested_is_fresh_against_an_older_hwm_with_no_new_commit():
    requested, cached = S("[12:7,8,12]", "db.t"), S("[11:7,8]", "db.t")
    assert cached.is_fresh_for(requested)
    assert requested.compare(cached) == 0 and cached.compare(requested) == 0


def test_document_example_not_fresh_when_write_id_8_committed_in_between():
    requested, cached = S("[12:7,8,12]", "db.t"), S("[12:7,12]", "db.t")
    assert not cached.is_fresh_for(requested)
    assert cached.compare(requested) == 1  # the cache holds commit 8 the query must not see
    assert requested.compare(cached) == -1


def test_document_example_committed_write_ids():
    snap = S("[12:7,8,12]")
    assert [w for w in range(1, 14) if snap.is_visible(w)] == [1, 2, 3, 4, 5, 6, 9, 10, 11]


# -- more freshness cases --------------------------------------------------------------------
@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("[5:]", "[5:]", 0),
        ("[5:]", "[6:]", -1),  # 6 committed in b
        ("[6:]", "[5:]", 1),
        ("[5:]", "[8:6,7,8]", 0),  # 6..8 allocated in b, none committed
        ("[5:]", "[8:6,8]", -1),  # 7 committed in b
        ("[0:]", "[3:1,2,3]", 0),  # nothing ever committed
        ("[0:]", "[3:1,2]", -1),
        ("[5:1,2,3,4,5]", "[8:1,2,3,4,5,6,7,8]", 0),
        ("[5:1,2,3,4,5]", "[8:2,3,4,5,6,7,8]", -1),  # 1 committed in b
        ("[5:1,2,3,4,5]", "[8:1,2,3,4,6,7,8]", -1),  # 5 committed in b
        ("[5:1,2,3,4,5]", "[8:1,2,3,4,6,7]", -1),  # 5 and 8 committed in b
        ("[5:]", "[105:100,101,105]", -1),
        ("[12:7,8]", "[12:8,7]", 0),  # order of exceptions is irrelevant
    ],
)
def test_compare(a, b, expected):
    x, y = S(a, "db.t"), S(b, "db.t")
    assert x.compare(y) == expected
    assert y.compare(x) == -expected
    assert x.is_fresh_for(y) == (expected == 0)


def test_aborted_and_open_exceptions_are_equally_invisible_for_freshness():
    a = ValidWriteIdList("db.t", 8, open_write_ids={7}, aborted_write_ids={6, 8})
    b = ValidWriteIdList("db.t", 5)
    assert a.compare(b) == 0


def test_cannot_compare_two_tables_but_names_ignore_case():
    with pytest.raises(ValueError, match="db.a with those of db.b"):
        S("[1:]", "db.a").compare(S("[1:]", "db.b"))
    assert S("[1:]", "DB.A").compare(S("[1:]", "db.a")) == 0
    assert S("[1:]").compare(S("[1:]", "db.a")) == 0  # an unnamed list compares with any


def test_compare_agrees_with_committed_sets_on_random_snapshots():
    rng = random.Random(7)
    for _ in range(500):
        lists = []
        for _ in range(2):
            hwm = rng.randint(0, 12)
            exc = {w for w in range(1, hwm + 1) if rng.random() < 0.4}
            lists.append(ValidWriteIdList("db.t", hwm, exc))
        a, b = lists
        ca = {w for w in range(1, 13) if a.is_visible(w)}
        cb = {w for w in range(1, 13) if b.is_visible(w)}
        if ca == cb:
            assert a.compare(b) == 0
        else:
            first = min(ca ^ cb)
            assert a.compare(b) == (1 if first in ca else -1)


# -- visibility -----------------------------------------------------------------------------
def test_visibility_open_aborted_and_above_the_hwm():
    v = ValidWriteIdList("db.t", 10, open_write_ids={4, 9}, aborted_write_ids={6})
    assert [w for w in range(1, 12) if v.is_visible(w)] == [1, 2, 3, 5, 7, 8, 10]
    assert v.is_aborted(6) and not v.is_aborted(4)
    assert v.min_open_write_id == 4 and v.exceptions == (4, 6, 9)
    assert v.committed_count() == 7


def test_valid_base_must_be_below_the_lowest_open_write_id():
    v = ValidWriteIdList("db.t", 10, open_write_ids={4}, aborted_write_ids={6})
    assert v.is_valid_base(3) and not v.is_valid_base(4) and not v.is_valid_base(5)
    nothing_open = ValidWriteIdList("db.t", 10, aborted_write_ids={6})
    assert nothing_open.min_open_write_id is None
    assert nothing_open.is_valid_base(10) and not nothing_open.is_valid_base(11)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"high_watermark": -1}, "negative"),
        ({"high_watermark": 3, "open_write_ids": {4}}, r"exceptions \[4\] outside 1..3"),
        ({"high_watermark": 3, "aborted_write_ids": {0}}, "outside"),
        (
            {"high_watermark": 3, "open_write_ids": {2}, "aborted_write_ids": {2}},
            "both open and aborted",
        ),
    ],
)
def test_ill_formed_lists_are_refused_naming_the_table(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        ValidWriteIdList("db.t", **kwargs)
    assert "db.t" in str(info.value)


# -- string forms ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "sales.events:12:8:8:7,12",
        "sales.events:12:9223372036854775807::7,8",
        "sales.events:5:9223372036854775807::",
        "null:0:9223372036854775807::",
        "db.t:20:3:3,11,19:1,2",
    ],
)
def test_hive_form_round_trips_exactly(text):
    v = ValidWriteIdList.from_string(text)
    assert v.to_string() == text == str(v)
    assert ValidWriteIdList.from_string(str(v)) == v


def test_hive_form_fields():
    v = ValidWriteIdList.from_string("sales.events:12:8:8:7,12")
    assert (v.table_name, v.high_watermark, v.min_open_write_id) == ("sales.events", 12, 8)
    assert v.open_write_ids == {8} and v.aborted_write_ids == {7, 12}
    assert ValidWriteIdList.from_string(f"null:3:{NO_OPEN_WRITE_ID}::").table_name is None


def test_hive_form_accepts_missing_trailing_fields_like_java_split():
    v = ValidWriteIdList.from_string("db.t:5:9223372036854775807")
    assert v == ValidWriteIdList("db.t", 5)
    assert ValidWriteIdList.from_string("db.t:5:2:2") == ValidWriteIdList("db.t", 5, {2})


@pytest.mark.parametrize("text", ["[12:7,8,12]", "[11:7,8]", "[0:]", "[5:]", "[3:1,2,3]"])
def test_short_form_round_trips_exactly(text):
    assert S(text).short_form() == text


def test_short_form_takes_exceptions_as_open_and_drops_the_distinction():
    v = S("[12:7,8,12]", "db.t")
    assert v.open_write_ids == {7, 8, 12} and v.min_open_write_id == 7
    hive = ValidWriteIdList("db.t", 12, {8}, {7, 12})
    assert hive.short_form() == "[12:7,8,12]"


@pytest.mark.parametrize("text", ["", "db.t", "db.t:x:1::", "db.t:1:2:3:4:5", "db.t:3:1:1,1:"])
def test_bad_hive_strings_are_refused_quoting_them(text):
    with pytest.raises(ValueError, match="not a ValidWriteIdList"):
        ValidWriteIdList.from_string(text)


@pytest.mark.parametrize("text", ["12:7", "[12:7:8]", "[x:1]", "[3:4]"])
def test_bad_short_forms_are_refused(text):
    with pytest.raises(ValueError, match=r"hwm:exceptions"):
        S(text)


def test_values_are_hashable_and_equal_by_content():
    assert {S("[3:1]", "db.t"), S("[3:1]", "db.t")} == {S("[3:1]", "db.t")}
    assert repr(S("[3:1]", "db.t")) == "ValidWriteIdList('db.t:3:1:1:')"
