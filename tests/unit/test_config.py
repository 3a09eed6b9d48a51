"""Configuration loading: defaults, the property -> field mapping, precedence and errors.

The literal tables below are deliberate: changing a default, renaming a property or adding
one must be done here too, so that no such change slips in unnoticed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from raptorx_py.config import PROPERTIES, PROPERTIES_BY_NAME, build_settings, load_settings
from raptorx_py.config.loader import (
    DOCS_BEGIN,
    DOCS_END,
    describe_settings,
    render_conf_file,
    render_property_docs,
    with_overrides,
)
from raptorx_py.config.settings import SETTINGS_FIELDS, Settings
from raptorx_py.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]

EXPECTED_DEFAULTS = {
    "connector_name": "hive-hadoop2",
    "metastore_url": "sqlite:///~/.raptorx/metastore.db",
    "metastore_uri": "",
    "metastore_timeout": 10.0,
    "metastore_max_retries": 3,
    "metastore_min_backoff": 1.0,
    "metastore_max_backoff": 1.0,
    "metastore_partition_batch_size": 100,
    "warehouse_dir": "~/.raptorx/warehouse",
    "metastore_cache_ttl": 3600.0,
    "metastore_refresh_interval": 1.0,
    "metastore_cache_maximum_size": 10000,
    "metastore_cache_prewarm": False,
    "metastore_cache_scope": "ALL",
    "partition_versioning_enabled": True,
    "support_concurrency": True,
    "lock_numretries": 100,
    "lock_sleep_between_retries": 60.0,
    "txn_timeout": 300.0,
    "s3_endpoint": "",
    "s3_access_key": "",
    "s3_secret_key": "",
    "s3_region": "",
    "s3_path_style_access": False,
    "s3_connect_timeout": 5.0,
    "s3_socket_timeout": 30.0,
    "s3_max_error_retries": 2,
    "stats_pruning_enabled": True,
    "aggregation_pushdown_enabled": True,
    "parquet_reader": "AUTO",
    "max_split_size": 64 * 2**20,
    "min_split_count": 0,
    "node_selection_strategy": "NO_PREFERENCE",
    "soft_affinity_max_split_imbalance": 0,
    "file_status_cache_tables": "*",
    "file_status_cache_size": 1_000_000,
    "file_status_cache_expire_time": 86400.0,
    "ignore_absent_partitions": False,
    "parquet_metadata_cache_enabled": True,
    "parquet_metadata_cache_size": 100 * 2**20,
    "parquet_metadata_cache_ttl": 7200.0,
    "storage_format": "PARQUET",
    "orc_file_tail_cache_enabled": True,
    "orc_file_tail_cache_size": 100 * 2**20,
    "orc_file_tail_cache_ttl": 6 * 3600.0,
    "orc_stripe_metadata_cache_enabled": True,
    "orc_stripe_footer_cache_size": 100 * 2**20,
    "orc_stripe_footer_cache_ttl": 6 * 3600.0,
    "orc_stripe_stream_cache_size": 300 * 2**20,
    "orc_stripe_stream_cache_ttl": 6 * 3600.0,
    "file_handle_cache_enabled": True,
    "file_handle_cache_size": 256,
    "file_handle_cache_ttl": 600.0,
    "cache_enabled": True,
    "cache_type": "LOCAL",
    "cache_base_directory": "~/.raptorx/cache",
    "cache_block_size": 2**20,
    "cache_max_size": 2 * 2**30,
    "cache_group_shared": False,
    "fragment_cache_enabled": True,
    "fragment_cache_base_directory": "~/.raptorx/fragment-cache",
    "fragment_cache_max_entries": 10000,
    "fragment_cache_ttl": 2 * 86400.0,
    "fragment_cache_max_size": 2 * 2**30,
    "fragment_cache_max_entry_size": 64 * 2**20,
    "fragment_cache_store_on_first_use": False,
    "metrics_directory": "",
    "metrics_spark_directory": "",
}

# property name -> (file, non-default string, field, typed value)
NON_DEFAULTS = {
    # The one connector, by its other name.
    "connector.name": ("hive", "hive", "connector_name", "hive-hadoop2"),
    "hive.metastore.url": (
        "hive",
        "sqlite:////srv/meta.db",
        "metastore_url",
        "sqlite:////srv/meta.db",
    ),
    "hive.metastore.uri": (
        "hive",
        "thrift://hms1:9083,thrift://hms2:9083",
        "metastore_uri",
        "thrift://hms1:9083,thrift://hms2:9083",
    ),
    "hive.metastore-timeout": ("hive", "30s", "metastore_timeout", 30.0),
    "hive.metastore.thrift.client.max-retries": ("hive", "9", "metastore_max_retries", 9),
    "hive.metastore.thrift.client.min-backoff-delay": (
        "hive",
        "200ms",
        "metastore_min_backoff",
        0.2,
    ),
    "hive.metastore.thrift.client.max-backoff-delay": (
        "hive",
        "5s",
        "metastore_max_backoff",
        5.0,
    ),
    "hive.metastore.partition-batch-size.max": (
        "hive",
        "500",
        "metastore_partition_batch_size",
        500,
    ),
    "hive.metastore.warehouse.dir": (
        "hive",
        "s3://bucket/warehouse",
        "warehouse_dir",
        "s3://bucket/warehouse",
    ),
    "hive.metastore-cache-ttl": ("hive", "10m", "metastore_cache_ttl", 600.0),
    "hive.metastore-refresh-interval": ("hive", "250ms", "metastore_refresh_interval", 0.25),
    "hive.metastore-cache-maximum-size": ("hive", "500", "metastore_cache_maximum_size", 500),
    "hive.metastore-cache-prewarm": ("hive", "true", "metastore_cache_prewarm", True),
    "hive.metastore-cache-scope": ("hive", "partition", "metastore_cache_scope", "PARTITION"),
    "hive.partition-versioning-enabled": ("hive", "false", "partition_versioning_enabled", False),
    "hive.support.concurrency": ("hive", "false", "support_concurrency", False),
    "hive.lock.numretries": ("hive", "3", "lock_numretries", 3),
    "hive.lock.sleep.between.retries": ("hive", "100ms", "lock_sleep_between_retries", 0.1),
    "hive.txn.timeout": ("hive", "30s", "txn_timeout", 30.0),
    "hive.max-split-size": ("hive", "256MB", "max_split_size", 256 * 2**20),
    "hive.min-split-count": ("hive", "2", "min_split_count", 2),
    "hive.node-selection-strategy": (
        "hive",
        "soft_affinity",
        "node_selection_strategy",
        "SOFT_AFFINITY",
    ),
    "hive.soft-affinity.max-split-imbalance": (
        "hive",
        "2",
        "soft_affinity_max_split_imbalance",
        2,
    ),
    "hive.file-status-cache-tables": ("hive", "tpch.*", "file_status_cache_tables", "tpch.*"),
    "hive.file-status-cache-size": ("hive", "5000", "file_status_cache_size", 5000),
    "hive.file-status-cache-expire-time": ("hive", "1h", "file_status_cache_expire_time", 3600.0),
    "hive.ignore-absent-partitions": ("hive", "true", "ignore_absent_partitions", True),
    "hive.parquet.metadata-cache-enabled": (
        "hive",
        "false",
        "parquet_metadata_cache_enabled",
        False,
    ),
    "hive.parquet.metadata-cache-size": ("hive", "8MB", "parquet_metadata_cache_size", 8 * 2**20),
    "hive.parquet.metadata-cache-ttl-since-last-access": (
        "hive",
        "30m",
        "parquet_metadata_cache_ttl",
        1800.0,
    ),
    "hive.storage-format": ("hive", "ORC", "storage_format", "ORC"),
    "hive.orc.file-tail-cache-enabled": (
        "hive",
        "false",
        "orc_file_tail_cache_enabled",
        False,
    ),
    "hive.orc.file-tail-cache-size": ("hive", "16MB", "orc_file_tail_cache_size", 16 * 2**20),
    "hive.orc.file-tail-cache-ttl-since-last-access": (
        "hive",
        "1h",
        "orc_file_tail_cache_ttl",
        3600.0,
    ),
    "hive.orc.stripe-metadata-cache-enabled": (
        "hive",
        "false",
        "orc_stripe_metadata_cache_enabled",
        False,
    ),
    "hive.orc.stripe-footer-cache-size": (
        "hive",
        "8MB",
        "orc_stripe_footer_cache_size",
        8 * 2**20,
    ),
    "hive.orc.stripe-footer-cache-ttl-since-last-access": (
        "hive",
        "2h",
        "orc_stripe_footer_cache_ttl",
        7200.0,
    ),
    "hive.orc.stripe-stream-cache-size": (
        "hive",
        "32MB",
        "orc_stripe_stream_cache_size",
        32 * 2**20,
    ),
    "hive.orc.stripe-stream-cache-ttl-since-last-access": (
        "hive",
        "3h",
        "orc_stripe_stream_cache_ttl",
        3 * 3600.0,
    ),
    "hive.file-handle-cache-enabled": ("hive", "false", "file_handle_cache_enabled", False),
    "hive.file-handle-cache-size": ("hive", "16", "file_handle_cache_size", 16),
    "hive.file-handle-cache-ttl-since-last-access": (
        "hive",
        "1m",
        "file_handle_cache_ttl",
        60.0,
    ),
    "cache.enabled": ("hive", "false", "cache_enabled", False),
    "cache.type": ("hive", "ALLUXIO", "cache_type", "LOCAL"),
    "cache.base-directory": (
        "hive",
        "/mnt/flash/cache",
        "cache_base_directory",
        "/mnt/flash/cache",
    ),
    "cache.block-size": ("hive", "256kB", "cache_block_size", 256 * 1024),
    "cache.group-shared": ("hive", "true", "cache_group_shared", True),
    "cache.alluxio.max-cache-size": ("hive", "10GB", "cache_max_size", 10 * 2**30),
    "hive.s3.endpoint": ("hive", "http://127.0.0.1:9000", "s3_endpoint", "http://127.0.0.1:9000"),
    "hive.s3.aws-access-key": ("hive", "AKIATEST", "s3_access_key", "AKIATEST"),
    "hive.s3.aws-secret-key": ("hive", "s3cr3t", "s3_secret_key", "s3cr3t"),
    "hive.s3.region": ("hive", "eu-west-1", "s3_region", "eu-west-1"),
    "hive.s3.path-style-access": ("hive", "TRUE", "s3_path_style_access", True),
    "hive.s3.connect-timeout": ("hive", "1500ms", "s3_connect_timeout", 1.5),
    "hive.s3.socket-timeout": ("hive", "2m", "s3_socket_timeout", 120.0),
    "hive.s3.max-error-retries": ("hive", "7", "s3_max_error_retries", 7),
    "hive.partition-statistics-based-optimization-enabled": (
        "hive",
        "false",
        "stats_pruning_enabled",
        False,
    ),
    "hive.aggregation-pushdown-enabled": ("hive", "false", "aggregation_pushdown_enabled", False),
    "hive.parquet.reader": ("hive", "python", "parquet_reader", "PYTHON"),
    "fragment-result-cache.enabled": ("config", "false", "fragment_cache_enabled", False),
    "fragment-result-cache.base-directory": (
        "config",
        "/srv/fragments",
        "fragment_cache_base_directory",
        "/srv/fragments",
    ),
    "fragment-result-cache.max-cached-entries": (
        "config",
        "500",
        "fragment_cache_max_entries",
        500,
    ),
    "fragment-result-cache.cache-ttl": ("config", "1h", "fragment_cache_ttl", 3600.0),
    "fragment-result-cache.max-cache-size": (
        "config",
        "10GB",
        "fragment_cache_max_size",
        10 * 2**30,
    ),
    "fragment-result-cache.max-single-cached-entry-size": (
        "config",
        "1MB",
        "fragment_cache_max_entry_size",
        2**20,
    ),
    "fragment-result-cache.store-on-first-use": (
        "config",
        "true",
        "fragment_cache_store_on_first_use",
        True,
    ),
    "metrics.directory": (
        "config",
        "/tmp/raptorx-metrics",
        "metrics_directory",
        "/tmp/raptorx-metrics",
    ),
    "metrics.spark-directory": (
        "config",
        "/tmp/raptorx-spark-metrics/app-1",
        "metrics_spark_directory",
        "/tmp/raptorx-spark-metrics/app-1",
    ),
}

# Properties with a single canonical value (their test value is an alias of the default).
ONE_CANONICAL_VALUE = {"cache.type", "connector.name"}

EXPECTED_NAMES = {
    "connector.name",
    "fragment-result-cache.enabled",
    "fragment-result-cache.base-directory",
    "fragment-result-cache.max-cached-entries",
    "fragment-result-cache.cache-ttl",
    "fragment-result-cache.max-cache-size",
    "fragment-result-cache.max-single-cached-entry-size",
    "fragment-result-cache.store-on-first-use",
    "cache.group-shared",
    "hive.metastore.url",
    "hive.metastore.uri",
    "hive.metastore-timeout",
    "hive.metastore.thrift.client.max-retries",
    "hive.metastore.thrift.client.min-backoff-delay",
    "hive.metastore.thrift.client.max-backoff-delay",
    "hive.metastore.partition-batch-size.max",
    "hive.metastore.warehouse.dir",
    "hive.metastore-cache-ttl",
    "hive.metastore-refresh-interval",
    "hive.metastore-cache-maximum-size",
    "hive.metastore-cache-prewarm",
    "hive.metastore-cache-scope",
    "hive.partition-versioning-enabled",
    "hive.support.concurrency",
    "hive.lock.numretries",
    "hive.lock.sleep.between.retries",
    "hive.txn.timeout",
    "hive.max-split-size",
    "hive.min-split-count",
    "hive.node-selection-strategy",
    "hive.soft-affinity.max-split-imbalance",
    "hive.file-status-cache-tables",
    "hive.file-status-cache-size",
    "hive.file-status-cache-expire-time",
    "hive.ignore-absent-partitions",
    "hive.parquet.metadata-cache-enabled",
    "hive.parquet.metadata-cache-size",
    "hive.parquet.metadata-cache-ttl-since-last-access",
    "hive.storage-format",
    "hive.orc.file-tail-cache-enabled",
    "hive.orc.file-tail-cache-size",
    "hive.orc.file-tail-cache-ttl-since-last-access",
    "hive.orc.stripe-metadata-cache-enabled",
    "hive.orc.stripe-footer-cache-size",
    "hive.orc.stripe-footer-cache-ttl-since-last-access",
    "hive.orc.stripe-stream-cache-size",
    "hive.orc.stripe-stream-cache-ttl-since-last-access",
    "hive.file-handle-cache-enabled",
    "hive.file-handle-cache-size",
    "hive.file-handle-cache-ttl-since-last-access",
    "cache.enabled",
    "cache.type",
    "cache.base-directory",
    "cache.block-size",
    "cache.alluxio.max-cache-size",
    "hive.s3.endpoint",
    "hive.s3.aws-access-key",
    "hive.s3.aws-secret-key",
    "hive.s3.region",
    "hive.s3.path-style-access",
    "hive.s3.connect-timeout",
    "hive.s3.socket-timeout",
    "hive.s3.max-error-retries",
    "hive.partition-statistics-based-optimization-enabled",
    "hive.aggregation-pushdown-enabled",
    "hive.parquet.reader",
    "metrics.directory",
    "metrics.spark-directory",
}


def typed(settings: Settings) -> dict:
    values = dataclasses.asdict(settings)
    values.pop("source")
    return values


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def empty_cwd(tmp_path):
    """A working directory without conf/, so only what a test writes is read."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return cwd


def test_defaults(empty_cwd):
    settings = load_settings(env={}, cwd=empty_cwd)
    assert typed(settings) == EXPECTED_DEFAULTS
    assert typed(build_settings({})) == EXPECTED_DEFAULTS
    assert settings.properties() == {p.name: p.default for p in PROPERTIES}
    assert settings.source == tuple(sorted(settings.properties().items()))


def test_every_property_maps_to_its_field(tmp_path, empty_cwd):
    assert set(PROPERTIES_BY_NAME) == EXPECTED_NAMES
    assert set(NON_DEFAULTS) == EXPECTED_NAMES
    assert {field for _, _, field, _ in NON_DEFAULTS.values()} == set(SETTINGS_FIELDS)
    conf = tmp_path / "conf"
    for file in ("hive", "config"):
        lines = [f"{name}={text}" for name, (f, text, _, _) in NON_DEFAULTS.items() if f == file]
        write(conf, f"{file}.properties", "\n".join(lines) + "\n")
    settings = load_settings(conf_dir=conf, env={}, cwd=empty_cwd)
    for name, (file, _text, field, value) in NON_DEFAULTS.items():
        assert PROPERTIES_BY_NAME[name].file == file, name
        assert PROPERTIES_BY_NAME[name].field == field, name
        assert getattr(settings, field) == value, name
        if name not in ONE_CANONICAL_VALUE:
            assert value != EXPECTED_DEFAULTS[field], f"{name}: test value must not be the default"
    assert settings.properties() == {name: text for name, (_, text, _, _) in NON_DEFAULTS.items()}


def test_precedence_defaults_cwd_conf_env_dir_overrides(tmp_path, empty_cwd):
    write(
        empty_cwd / "conf",
        "config.properties",
        "hive.s3.region=from-cwd-config\nhive.s3.endpoint=http://cwd-config\n"
        "hive.s3.max-error-retries=5\nmetrics.directory=/cwd/metrics\n",
    )
    write(
        empty_cwd / "conf",
        "hive.properties",
        "hive.s3.region=from-cwd-hive\nhive.s3.connect-timeout=11s\n",
    )
    env_dir = tmp_path / "env-conf"
    write(
        env_dir,
        "config.properties",
        "hive.s3.region=from-env-config\nhive.s3.connect-timeout=22s\n",
    )
    write(env_dir, "hive.properties", "hive.s3.region=from-env-hive\nhive.s3.socket-timeout=1m\n")

    only_cwd = load_settings(env={}, cwd=empty_cwd)
    assert only_cwd.s3_region == "from-cwd-hive"  # cwd hive.properties > config.properties
    assert only_cwd.s3_endpoint == "http://cwd-config"
    assert only_cwd.s3_connect_timeout == 11.0
    assert only_cwd.s3_socket_timeout == 30.0  # default

    with_env = load_settings(env={"RAPTORX_CONF_DIR": str(env_dir)}, cwd=empty_cwd)
    assert with_env.s3_region == "from-env-hive"  # env dir hive > env dir config > cwd
    assert with_env.s3_connect_timeout == 22.0  # env dir config.properties > cwd hive
    assert with_env.s3_socket_timeout == 60.0
    assert with_env.s3_endpoint == "http://cwd-config"  # untouched by the env dir
    assert with_env.s3_max_error_retries == 5
    assert with_env.metrics_directory == "/cwd/metrics"
    assert with_env.s3_path_style_access is False  # default

    overridden = load_settings(
        env={"RAPTORX_CONF_DIR": str(env_dir)},
        cwd=empty_cwd,
        overrides={"hive.s3.region": "from-option", "hive.s3.path-style-access": "true"},
    )
    assert overridden.s3_region == "from-option"
    assert overridden.s3_path_style_access is True
    assert overridden.s3_socket_timeout == 60.0


def test_conf_dir_argument_wins_over_env(tmp_path, empty_cwd, monkeypatch):
    arg_dir, env_dir = tmp_path / "arg", tmp_path / "env"
    write(arg_dir, "hive.properties", "hive.s3.region=from-arg\n")
    write(env_dir, "hive.properties", "hive.s3.region=from-env\nhive.s3.endpoint=http://env\n")
    monkeypatch.setenv("RAPTORX_CONF_DIR", str(env_dir))
    monkeypatch.chdir(empty_cwd)
    assert load_settings().s3_region == "from-env"  # os.environ and Path.cwd()
    from_arg = load_settings(conf_dir=arg_dir)
    assert from_arg.s3_region == "from-arg"
    assert from_arg.s3_endpoint == ""  # env dir not read at all


def test_relative_conf_dir_is_relative_to_cwd(empty_cwd):
    write(empty_cwd / "site", "config.properties", "metrics.directory=/m\n")
    assert load_settings(conf_dir="site", env={}, cwd=empty_cwd).metrics_directory == "/m"
    assert load_settings(env={"RAPTORX_CONF_DIR": "site"}, cwd=empty_cwd).metrics_directory == "/m"


def test_empty_env_var_is_unset(empty_cwd):
    assert typed(load_settings(env={"RAPTORX_CONF_DIR": ""}, cwd=empty_cwd)) == EXPECTED_DEFAULTS


def test_overrides_accept_python_bools_and_ints(empty_cwd):
    settings = load_settings(
        env={},
        cwd=empty_cwd,
        overrides={
            "hive.s3.path-style-access": True,
            "hive.s3.max-error-retries": 0,
            "hive.s3.region": "  padded  ",
        },
    )
    assert settings.s3_path_style_access is True
    assert settings.s3_max_error_retries == 0
    assert settings.s3_region == "padded"
    assert settings.properties()["hive.s3.path-style-access"] == "true"


def test_with_overrides_rebuilds_from_source(empty_cwd):
    base = load_settings(env={}, cwd=empty_cwd, overrides={"hive.s3.region": "r1"})
    changed = with_overrides(base, {"hive.s3.connect-timeout": "250ms"})
    assert changed.s3_region == "r1"
    assert changed.s3_connect_timeout == 0.25
    assert base.s3_connect_timeout == 5.0
    assert build_settings({k: (v, "worker", None) for k, v in changed.source}) == changed
    with pytest.raises(ConfigError, match=r"^option, property 'hive.s3.connect-timeout': "):
        with_overrides(base, {"hive.s3.connect-timeout": "soon"})


def test_unknown_property_names_file_line_key_and_suggestion(tmp_path, empty_cwd):
    conf = tmp_path / "conf"
    path = write(conf, "hive.properties", "# c\nhive.s3.region=x\n\nhive.s3.conect-timeout=5s\n")
    with pytest.raises(ConfigError) as info:
        load_settings(conf_dir=conf, env={}, cwd=empty_cwd)
    assert str(info.value) == (
        f"{path}:4, property 'hive.s3.conect-timeout': unknown property; "
        "did you mean 'hive.s3.connect-timeout'?"
    )
    assert (info.value.source, info.value.line, info.value.key) == (
        str(path),
        4,
        "hive.s3.conect-timeout",
    )


def test_unknown_property_without_close_match(empty_cwd):
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, cwd=empty_cwd, overrides={"zzz": "1"})
    assert str(info.value) == (
        "option, property 'zzz': unknown property; "
        "see docs/configuration.md for the list of properties"
    )


@pytest.mark.parametrize(
    "line, form",
    [
        ("hive.s3.connect-timeout=5", "expected a duration such as 500ms, 30s or 6h"),
        ("hive.s3.path-style-access=yes", "expected a boolean, true or false"),
        ("hive.s3.max-error-retries=two", "expected an integer"),
        ("hive.lock.numretries=-1", "expected a non-negative integer"),
        ("cache.type=FILE_MERGE", "expected one of LOCAL, ALLUXIO, got 'FILE_MERGE'"),
        ("hive.metastore-cache-scope=TABLE", "expected one of ALL, PARTITION"),
    ],
)
def test_bad_value_names_file_line_key_and_form(tmp_path, empty_cwd, line, form):
    conf = tmp_path / "conf"
    path = write(conf, "hive.properties", "hive.s3.region=x\n" + line + "\n")
    with pytest.raises(ConfigError) as info:
        load_settings(conf_dir=conf, env={}, cwd=empty_cwd)
    key, value = line.split("=")
    message = str(info.value)
    assert message.startswith(f"{path}:2, property '{key}': invalid value '{value}': ")
    assert form in message
    assert (info.value.source, info.value.line, info.value.key) == (str(path), 2, key)


def test_bad_value_in_cwd_conf_is_reported_there(empty_cwd):
    path = write(empty_cwd / "conf", "config.properties", "metrics.directory=/m\n")
    write(empty_cwd / "conf", "hive.properties", "\n\nhive.s3.socket-timeout=10 minutes\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, cwd=empty_cwd)
    assert info.value.source == str(path.with_name("hive.properties"))
    assert info.value.line == 3
    assert info.value.key == "hive.s3.socket-timeout"


def test_missing_conf_dir(tmp_path, empty_cwd):
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError) as info:
        load_settings(conf_dir=missing, env={}, cwd=empty_cwd)
    assert str(info.value) == f"{missing}: configuration directory does not exist"
    with pytest.raises(ConfigError, match="configuration directory does not exist"):
        load_settings(env={"RAPTORX_CONF_DIR": str(missing)}, cwd=empty_cwd)


def test_conf_dir_without_files_or_not_a_directory(tmp_path, empty_cwd):
    empty = tmp_path / "empty"
    write(empty, "catalog.properties", "hive.s3.region=x\n")
    with pytest.raises(ConfigError) as info:
        load_settings(conf_dir=empty, env={}, cwd=empty_cwd)
    assert str(info.value) == (
        f"{empty}: configuration directory holds neither config.properties nor hive.properties"
    )
    a_file = empty / "catalog.properties"
    with pytest.raises(ConfigError, match="configuration directory is not a directory"):
        load_settings(conf_dir=a_file, env={}, cwd=empty_cwd)


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("hive.s3.region=x\n=true\n", 2, "line has no property name"),
        ("hive.s3.region=x\nhive.s3.endpoint=\\u12zz\n", 2, "malformed \\uXXXX escape"),
        ("hive.s3.region=x\n\nhive.s3.region=y\n", 3, "set on line 1 and again on line 3"),
    ],
)
def test_malformed_file(tmp_path, empty_cwd, text, line, fragment):
    conf = tmp_path / "conf"
    path = write(conf, "config.properties", text)
    with pytest.raises(ConfigError) as info:
        load_settings(conf_dir=conf, env={}, cwd=empty_cwd)
    assert str(info.value).startswith(f"{path}:{line}")
    assert fragment in str(info.value)


def test_only_one_conf_file_is_enough(tmp_path, empty_cwd):
    conf = tmp_path / "conf"
    write(conf, "config.properties", "hive.s3.region=set-in-config\n")  # any file, any property
    assert load_settings(conf_dir=conf, env={}, cwd=empty_cwd).s3_region == "set-in-config"


@pytest.mark.parametrize("file", ["hive", "config"])
def test_committed_conf_files_are_generated(file):
    committed = (REPO / "conf" / f"{file}.properties").read_text(encoding="utf-8")
    assert committed == render_conf_file(file), (
        "conf files are stale; regenerate with "
        "python -c \"from raptorx_py.config.loader import main; main(['--write'])\""
    )


def test_conf_files_hold_every_property_at_its_default(empty_cwd):
    settings = load_settings(conf_dir=REPO / "conf", env={}, cwd=empty_cwd)
    assert typed(settings) == EXPECTED_DEFAULTS
    listed = {}
    for file in ("hive", "config"):
        for line in render_conf_file(file).splitlines():
            if line and not line.startswith("#"):
                name = line.split("=", 1)[0]
                listed[name] = file
    assert listed == {name: f for name, (f, _, _, _) in NON_DEFAULTS.items()}
    with pytest.raises(ValueError, match="expected file 'hive' or 'config'"):
        render_conf_file("catalog")


def test_docs_list_every_property():
    docs = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    for name in EXPECTED_NAMES:
        assert f"`{name}`" in docs, name
    block = docs[docs.index(DOCS_BEGIN) : docs.index(DOCS_END) + len(DOCS_END)]
    assert block == render_property_docs(), "docs/configuration.md property list is stale"


def test_describe_settings(empty_cwd):
    settings = load_settings(
        env={},
        cwd=empty_cwd,
        overrides={"hive.s3.aws-secret-key": "s3cr3t", "hive.s3.region": "eu-west-1"},
    )
    text = describe_settings(settings)
    lines = text.splitlines()
    assert lines[0].split() == ["name", "value", "default"]
    assert "s3cr3t" not in text
    # A row per property, its description wrapped on the indented lines below it.
    rows, docs, name = {}, {}, None
    for line in lines[2:-1]:
        if line.startswith("    "):
            docs[name] += " " + line.strip()
        else:
            name = line[2:].split()[0]
            rows[name], docs[name] = line, ""
    assert set(rows) == EXPECTED_NAMES
    assert max(len(line) for line in lines) <= 130  # the description on the row: 500
    # A value that differs is marked before its name, in a column of its own.
    assert rows["hive.s3.aws-secret-key"].split()[0::2] == ["*", "<hidden>"]
    assert rows["hive.s3.region"].split()[:3] == ["*", "hive.s3.region", "eu-west-1"]
    assert rows["hive.s3.connect-timeout"].split()[1:3] == ["5s", "5s"]
    assert rows["hive.s3.connect-timeout"].startswith("  hive.s3.connect-timeout")
    for p in PROPERTIES:
        assert docs[p.name].strip() == " ".join(p.doc.split())


def test_describe_settings_shows_a_star_value_as_it_is(empty_cwd):
    """``hive.file-status-cache-tables=*`` was once shown as ``**`` (value and mark)."""
    text = describe_settings(
        load_settings(env={}, cwd=empty_cwd, overrides={"hive.file-status-cache-tables": "*"})
    )
    (row,) = [
        line for line in text.splitlines() if line[2:].startswith("hive.file-status-cache-tables ")
    ]
    assert row.split() == ["hive.file-status-cache-tables", "*", "*"]  # the default, unmarked
    text = describe_settings(
        load_settings(env={}, cwd=empty_cwd, overrides={"hive.file-status-cache-tables": ""})
    )
    (row,) = [
        line for line in text.splitlines() if line[2:].startswith("hive.file-status-cache-tables ")
    ]
    assert row.split() == ["*", "hive.file-status-cache-tables", '""', "*"]
    (row,) = [line for line in text.splitlines() if line[2:].startswith("cache.enabled ")]
    assert row.split() == ["cache.enabled", "true", "true"]


def test_describe_settings_marks_only_values_that_differ(empty_cwd):
    """``cache.type=local`` is the default ``LOCAL`` written otherwise: not marked."""
    text = describe_settings(
        load_settings(
            env={},
            cwd=empty_cwd,
            overrides={"cache.type": "local", "connector.name": "hive", "cache.block-size": "2MB"},
        )
    )
    rows = {
        line[2:].split()[0]: line.split()
        for line in text.splitlines()[2:-1]
        if not line.startswith("    ")
    }
    assert rows["cache.type"][1] == "local" and rows["connector.name"][1] == "hive"
    assert rows["cache.block-size"][:3] == ["*", "cache.block-size", "2MB"]


def test_a_presto_catalog_file_is_accepted_as_it_is(tmp_path):
    """What a RaptorX catalog names: the Hive connector is accepted, another is refused,
    and a Thrift metastore URI selects the Thrift backend."""
    conf = tmp_path / "conf"

    def load_catalog(text: str):
        write(conf, "hive.properties", text)
        return load_settings(conf_dir=conf, env={}, cwd=tmp_path)

    assert load_catalog("connector.name=hive-hadoop2\ncache.type=ALLUXIO\n").connector_name == (
        "hive-hadoop2"
    )
    with pytest.raises(
        ConfigError,
        match=r"hive.properties:1, property 'connector.name': "
        r"invalid value 'iceberg': raptorx_py implements only "
        r"the Hive connector",
    ):
        load_catalog("connector.name=iceberg\n")
    thrift = load_catalog(
        "connector.name=hive-hadoop2\nhive.metastore.uri=thrift://metastore:9083\n"
    )
    assert thrift.metastore_uri == "thrift://metastore:9083"


#: RaptorX's documented Hive catalog (the Presto RaptorX user guide's hive.properties),
#: line for line.
RAPTORX_CATALOG = """\
connector.name=hive-hadoop2
hive.metastore.uri=thrift://127.0.0.1:9083
hive.metastore-cache-scope=PARTITION
hive.metastore-cache-ttl=2d
hive.metastore-refresh-interval=3d
hive.metastore-cache-maximum-size=10000000
hive.partition-versioning-enabled=true
hive.file-status-cache-expire-time=24h
hive.file-status-cache-size=100000000
hive.file-status-cache-tables=*
cache.enabled=true
cache.base-directory=file:///mnt/flash/data
cache.type=ALLUXIO
cache.alluxio.max-cache-size=1600GB
hive.node-selection-strategy=SOFT_AFFINITY
fragment-result-cache.enabled=true
fragment-result-cache.max-cached-entries=1000000
fragment-result-cache.base-directory=file:///mnt/flash/fragment
fragment-result-cache.cache-ttl=24h
hive.partition-statistics-based-optimization-enabled=true
hive.parquet.metadata-cache-enabled=true
hive.parquet.metadata-cache-size=100MB
hive.parquet.metadata-cache-ttl-since-last-access=6h
hive.orc.file-tail-cache-enabled=true
hive.orc.file-tail-cache-size=100MB
hive.orc.file-tail-cache-ttl-since-last-access=6h
hive.orc.stripe-metadata-cache-enabled=true
hive.orc.stripe-footer-cache-size=100MB
hive.orc.stripe-footer-cache-ttl-since-last-access=6h
hive.orc.stripe-stream-cache-size=300MB
hive.orc.stripe-stream-cache-ttl-since-last-access=6h
"""


def test_raptorx_documented_catalog_loads_verbatim(tmp_path):
    """Every line of RaptorX's own catalog file loads, the Thrift URI included."""
    conf = tmp_path / "conf"
    write(conf, "hive.properties", RAPTORX_CATALOG)
    settings = load_settings(conf_dir=conf, env={}, cwd=tmp_path)
    assert settings.metastore_uri == "thrift://127.0.0.1:9083"
    assert settings.metastore_cache_scope == "PARTITION"
    assert settings.metastore_cache_ttl == 2 * 86400.0
    assert settings.node_selection_strategy == "SOFT_AFFINITY"
    assert settings.cache_max_size == 1600 * 2**30
    loaded = settings.properties()
    for line in RAPTORX_CATALOG.splitlines():
        name, value = line.split("=", 1)
        assert loaded[name] == value, name


def test_every_bad_line_of_every_file_is_reported_at_once(empty_cwd):
    """A conf file with two bad lines once reported only the first. Each is named with
    its file, line and key, in file and line order, bad names and bad values alike."""
    from raptorx_py.errors import ConfigErrors

    conf = empty_cwd / "conf"
    first = write(
        conf,
        "config.properties",
        "cache.enabled=maybe\nmetrics.directory=/m\ncache.block-size=lots\nx=\\u12\n",
    )
    second = write(conf, "hive.properties", "hive.s3.endpiont=http://x\nhive.s3.endpiont=y\n")
    with pytest.raises(ConfigErrors) as info:
        load_settings(env={}, cwd=empty_cwd, overrides={"hive.s3.region": ""})
    found = [(e.source, e.line, e.key) for e in info.value.errors]
    assert found == [
        (str(first), 1, "cache.enabled"),
        (str(first), 3, "cache.block-size"),
        (str(first), 4, "x"),
        (str(second), 1, "hive.s3.endpiont"),
        (str(second), 2, "hive.s3.endpiont"),
    ]
    message = str(info.value)
    assert message.startswith("5 problems in the configuration:\n")
    assert f"  {first}:1, property 'cache.enabled': invalid value 'maybe'" in message
    assert f"  {first}:4, property 'x': malformed \\uXXXX escape" in message
    assert f"  {second}:1, property 'hive.s3.endpiont': unknown property; did you mean" in message
    assert f"  {second}:2, property 'hive.s3.endpiont': duplicate property" in message
    # One bad line is still one plain error, as before.
    write(conf, "hive.properties", "")
    write(conf, "config.properties", "cache.enabled=maybe\n")
    with pytest.raises(ConfigError) as one:
        load_settings(env={}, cwd=empty_cwd)
    assert not isinstance(one.value, ConfigErrors) and one.value.line == 1


def test_a_misspelled_read_option_gets_a_suggestion():
    """A misspelled property in a file got "did you mean"; a read option once did not."""
    from raptorx_py.datasource.planning.options import resolve_options
    from raptorx_py.errors import ConfigErrors

    with pytest.raises(ConfigError, match=r"option, property 'colums': .*did you mean 'columns'\?"):
        resolve_options({}, {"colums": "a,b"})
    with pytest.raises(ConfigError, match=r"did you mean 'hive.s3.endpoint'\?"):
        resolve_options({}, {"hive.s3.endpiont": "http://x"})
    with pytest.raises(ConfigError, match=r"'zzz': unknown option for tiered_hive; read options"):
        resolve_options({}, {"zzz": "1"})
    # Every bad option at once, unknown names and bad values alike.
    with pytest.raises(ConfigErrors) as info:
        resolve_options({}, {"colums": "a", "cache.enabled": "maybe", "zzz": "1"})
    assert [e.key for e in info.value.errors] == ["colums", "zzz", "cache.enabled"]


@pytest.mark.parametrize(
    "uri",
    [
        "thrift//localhost:9083",
        "localhost:9083",
        "http://localhost:9083",
        "thrift://localhost",
        "thrift://localhost:0",
        "thrift://localhost:99999",
        "thrift://:9083",
        "thrift://localhost:9083,localhost:9084",
    ],
)
def test_a_malformed_metastore_uri_is_refused_at_load_with_its_file_and_line(
    tmp_path, empty_cwd, uri
):
    """It once passed the configuration and failed only at the first table access."""
    conf = tmp_path / "conf"
    path = write(conf, "hive.properties", f"hive.s3.region=x\nhive.metastore.uri={uri}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(conf_dir=conf, env={}, cwd=empty_cwd)
    assert str(info.value).startswith(
        f"{path}:2, property 'hive.metastore.uri': invalid value '{uri}': "
    )
    assert "thrift://host:port" in str(info.value)
    assert (info.value.source, info.value.line) == (str(path), 2)


@pytest.mark.parametrize("uri", ["", "thrift://localhost:9083", "thrift://a:1, thrift://b:2"])
def test_a_well_formed_metastore_uri_loads(empty_cwd, uri):
    settings = load_settings(env={}, cwd=empty_cwd, overrides={"hive.metastore.uri": uri})
    assert settings.metastore_uri == uri


def test_each_bad_option_names_where_it_came_from():
    """register()'s properties and a catalog's Spark conf were once all "option"."""
    from raptorx_py.datasource.planning.options import resolve_options
    from raptorx_py.errors import ConfigErrors
    from raptorx_py.jvm_contract.protocol import CATALOG_OPTIONS_OPTION

    with pytest.raises(ConfigErrors) as info:
        resolve_options(
            {"cache.block-size": "huge"},  # carried from register(properties=...)
            {
                CATALOG_OPTIONS_OPTION: "rx:cache.enabled,cache.max-size",
                "cache.enabled": "maybe",  # the catalog's Spark conf
                "cache.max-size": "1GB",  # the catalog's too: an unknown name
                "hive.s3.region": "r",
                "hive.s3.connect-timeout": "soon",  # the read's own option
            },
        )
    where = {e.key: str(e) for e in info.value.errors}
    assert where["cache.enabled"].startswith(
        "Spark conf spark.sql.catalog.rx, property 'cache.enabled': invalid value 'maybe'"
    )
    assert where["cache.max-size"].startswith("Spark conf spark.sql.catalog.rx, property")
    assert where["cache.block-size"].startswith(
        "register(properties=...), property 'cache.block-size': invalid value 'huge'"
    )
    assert where["hive.s3.connect-timeout"].startswith("option, property 'hive.s3.connect-timeout'")


def test_register_properties_are_named_as_such(empty_cwd):
    from raptorx_py.config import PROPERTIES_SOURCE

    with pytest.raises(ConfigError) as info:
        load_settings(
            env={},
            cwd=empty_cwd,
            overrides={"cache.enabled": "maybe"},
            overrides_source=PROPERTIES_SOURCE,
        )
    assert str(info.value).startswith("register(properties=...), property 'cache.enabled'")


@pytest.mark.parametrize(
    "name, meant",
    [
        # What it is about (a size, a TTL, a directory) before the nearest spelling.
        ("cache.max-size", "cache.alluxio.max-cache-size"),
        ("cache.directory", "cache.base-directory"),
        ("fragment-result-cache.size", "fragment-result-cache.max-cache-size"),
        ("fragment-result-cache.ttl", "fragment-result-cache.cache-ttl"),
        ("hive.footer-cache-size", "hive.parquet.metadata-cache-size"),
        ("metrics.dir", "metrics.directory"),
        # Misspellings stay misspellings.
        ("hive.s3.conect-timeout", "hive.s3.connect-timeout"),
        ("cache.block-sise", "cache.block-size"),
        ("cache.blok-size", "cache.block-size"),
    ],
)
def test_an_unknown_property_is_answered_by_meaning_not_spelling_alone(empty_cwd, name, meant):
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, cwd=empty_cwd, overrides={name: "1"})
    assert str(info.value).endswith(f"unknown property; did you mean '{meant}'?")


@pytest.mark.parametrize(
    "uri", ["thrift//localhost:9083", "localhost:9083", "http://h:9083", "thrift://localhost"]
)
def test_tiered_session_refuses_a_malformed_metastore_uri_before_spark_starts(uri):
    """tiered_session() once started Spark and failed only at the first table
    access; now before any JVM starts (none is started in this process)."""
    from pyspark import SparkContext

    from raptorx_py.session import tiered_session

    before = SparkContext._active_spark_context
    with pytest.raises(ConfigError, match=r"^register\(properties=\.\.\.\), property 'hive.me"):
        tiered_session(properties={"hive.metastore.uri": uri})
    assert SparkContext._active_spark_context is before
