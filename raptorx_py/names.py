"""Database and table names: one rule, one home, used by every entry point.

Hive's rule: a database or table name is letters, digits and underscores, and names are
case-insensitive (Hive stores them in lower case). Anything else could escape the table's
directory (``d.a/delta_0000002_0000002`` would create a table *inside* table ``d.a``'s
directory, each then reading the other's rows) or break the SQL-free places a name is used
(directory names, log lines: a newline). The reader, the writer, registration, the CLI and
the metastore itself (``Metastore.create_database`` / ``create_table``) all go through
``check_name`` / ``parse_table_name``, so no path creates a table this rule refuses.

Limit: tables created by an older version with other names are still read by their exact
(lower-cased) name; none can be created.
"""

from __future__ import annotations

import re

from raptorx_py.errors import InvalidNameError

#: What a valid name is, as error messages say it.
NAME_RULE = (
    "letters (a-z, A-Z), digits and underscores only, at least one character; "
    "case-insensitive (stored in lower case), as in Hive"
)
_VALID = re.compile(r"[A-Za-z0-9_]+")
DEFAULT_DATABASE = "default"


def check_name(kind: str, name: str) -> str:
    """``name`` in its stored form (lower case), or ``InvalidNameError`` naming the
    ``kind`` ("database", "table") and the rule."""
    if not isinstance(name, str) or not _VALID.fullmatch(name):
        raise InvalidNameError(f"invalid {kind} name {name!r}: a {kind} name must be {NAME_RULE}")
    return name.lower()


def parse_table_name(name: str, default_database: str | None = DEFAULT_DATABASE) -> tuple[str, str]:
    """``"db.table"`` -> ``("db", "table")``, both checked and lower-cased; a bare name means
    ``default_database`` (None: a bare name is an error)."""
    if not isinstance(name, str):
        raise InvalidNameError(f"invalid table name {name!r}: expected '<database>.<table>'")
    parts = name.split(".")
    if len(parts) == 1 and parts[0] and default_database is not None:
        return check_name("database", default_database), check_name("table", parts[0])
    if len(parts) != 2 or not all(parts):
        raise InvalidNameError(
            f"table name {name!r} is not of the form <database>.<table> (each part {NAME_RULE})"
        )
    return check_name("database", parts[0]), check_name("table", parts[1])
