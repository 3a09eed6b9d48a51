"""The Hive directory layout of a table: ``<table>/<k1>=<v1>/<k2>=<v2>/<file>``.

- Partition values are escaped as Hive's ``FileUtils.escapePathName`` does (``%XX`` for
  characters that cannot stand in a path); ``__HIVE_DEFAULT_PARTITION__`` stands for null,
  and so does an empty value (``k=``), as in Spark.
- A file or directory whose name starts with ``.``, or with ``_`` and has no ``=`` in it,
  is hidden (``_SUCCESS``, ``.part-0.crc``, ``_tmp``) and never data; so is a file being
  copied (``._COPYING_``). That is Spark's rule (``InMemoryFileIndex.shouldFilterOutPathName``):
  ``_k=1`` is the partition directory of key ``_k``.
- Every other file under a partition directory is a data file.
"""

from __future__ import annotations

from dataclasses import dataclass

from raptorx_py.errors import EmptyTableLocationError, LayoutError, translate_storage_error
from raptorx_py.hive.partition_names import unescape_partition_value
from raptorx_py.metrics import counters
from raptorx_py.storage.file_versions import current_identity, etag_of


# Hive's FileUtils.charToEscape: control characters and these.
def is_hidden(name: str) -> bool:
    return (
        (name.startswith("_") and "=" not in name)
        or name.startswith(".")
        or name.endswith("._COPYING_")
    )


def parse_partition_dir(name: str, path: str) -> tuple[str, str | None]:
    """``"k=v"`` -> ``("k", "v")``; raises LayoutError naming ``path`` otherwise."""
    key, sep, value = name.partition("=")
    if not sep or not key:
        raise LayoutError(
            f"directory {path} is not a Hive partition directory ('<key>=<value>'): '{name}'"
        )
    column = unescape_partition_value(key)
    if column is None:
        # The default-partition marker stands for a null value; a column cannot be named so.
        raise LayoutError(f"directory {path} names no partition column: '{name}'")
    return column, unescape_partition_value(value)


@dataclass(frozen=True)
class DataFile:
    """A listed data file: its path, size and version (``storage.file_versions``: the
    strongest identity its filesystem gives, None when it gives none), and its ETag when the
    store has one (what the store checks ranged reads against)."""

    path: str  # filesystem path (no scheme)
    size: int
    version: str | None = None
    etag: str | None = None


@dataclass(frozen=True)
class PartitionDir:
    values: tuple[str | None, ...]
    path: str
    files: tuple[DataFile, ...]


def _data_file(fs, info: dict) -> DataFile | None:
    """The listed file of ``info`` (a listing's entry), its size and version taken together
    (``file_versions.current_identity``: one ``stat`` of a local file); None when the file
    was removed while the directory was listed."""
    try:
        size, version = current_identity(fs, info["name"], info)
    except FileNotFoundError:
        return None
    return DataFile(info["name"], int(size or 0), version, etag_of(version))


def find_files(fs, path: str, url: str | None = None) -> dict[str, dict]:
    """Every object anywhere below ``path``, by name (``fs.find``'s entries): one listing,
    counted in ``storage.listings``; empty when ``path`` does not exist. A store's error is
    translated (``errors.translate_storage_error``), naming ``url``."""
    counters.add("storage.listings")
    try:
        return fs.find(path, detail=True, withdirs=False)
    except FileNotFoundError:
        return {}
    except Exception as e:  # translated: the cause is kept
        raise translate_storage_error(e, url or path) from e


def data_files(fs, path: str, found) -> list[DataFile]:
    """The data files among ``found`` (``(name, entry)`` pairs of a listing, all below
    ``path``), sorted by path: names hidden below ``path`` are skipped."""
    root = path.rstrip("/") + "/"
    files = []
    for name, info in sorted(found):
        rel = name[len(root) :] if name.startswith(root) else name.rsplit("/", 1)[-1]
        if any(is_hidden(part) for part in rel.split("/")):
            continue
        if info.get("type", "file") != "file":
            continue
        try:
            listed = _data_file(fs, info)
        except Exception as e:  # translated: the cause is kept
            raise translate_storage_error(e, name) from e
        if listed is not None:
            files.append(listed)
    return files


def list_data_files(fs, path: str, url: str | None = None) -> list[DataFile]:
    """The data files anywhere below ``path`` (hidden names skipped), sorted by path."""
    return data_files(fs, path, find_files(fs, path, url).items())


def data_files_below(fs, root: str, dirs, found: dict[str, dict]) -> list[list[DataFile]]:
    """The data files of each of ``dirs`` (directories below ``root``) taken from ``found``,
    one listing of ``root`` (``find_files``): for each, what ``list_data_files`` of it
    would have listed at that moment (a file belongs to every one of ``dirs`` it lies
    below; names hidden below that directory are skipped), without a listing of each."""
    top = root.rstrip("/")
    wanted: dict[str, list] = {d.rstrip("/"): [] for d in dirs}
    for name, info in found.items():
        parent = name.rpartition("/")[0]
        while len(parent) > len(top):
            below = wanted.get(parent)
            if below is not None:
                below.append((name, info))
            parent = parent.rpartition("/")[0]
    return [data_files(fs, d, wanted[d.rstrip("/")]) for d in dirs]


def walk_table(fs, root: str, url: str | None = None) -> tuple[list[str], list[PartitionDir]]:
    """Discover a table directory: its partition keys (in directory order) and partitions.

    One recursive listing. An unpartitioned table is returned as one ``PartitionDir`` with no
    values. Raises LayoutError for directories that do not parse or disagree on the keys, and
    EmptyTableLocationError when there is no data file at all.
    """
    url = url or root
    try:
        exists = fs.exists(root)
    except Exception as e:
        raise translate_storage_error(e, url) from e
    if not exists:
        raise EmptyTableLocationError(f"table location {url} does not exist")
    files = list_data_files(fs, root, url)
    if not files:
        raise EmptyTableLocationError(f"table location {url} holds no data files")
    prefix = root.rstrip("/") + "/"
    by_dir: dict[tuple[str, ...], list[DataFile]] = {}
    for f in files:
        rel_dirs = tuple(f.path[len(prefix) :].split("/")[:-1])
        by_dir.setdefault(rel_dirs, []).append(f)

    keys: list[str] | None = None
    partitions = []
    for rel_dirs, dir_files in sorted(by_dir.items()):
        pairs = [
            parse_partition_dir(d, prefix + "/".join(rel_dirs[: i + 1]))
            for i, d in enumerate(rel_dirs)
        ]
        these_keys = [k for k, _ in pairs]
        if keys is None:
            keys = these_keys
        elif these_keys != keys:
            where = prefix + "/".join(rel_dirs)
            raise LayoutError(
                f"partition directory {where} has keys {these_keys}, but other partitions of "
                f"{url} have {keys}"
            )
        partitions.append(
            PartitionDir(
                tuple(v for _, v in pairs),
                prefix + "/".join(rel_dirs) if rel_dirs else root.rstrip("/"),
                tuple(dir_files),
            )
        )
    return keys or [], partitions
